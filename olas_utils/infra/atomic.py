"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never
half of one; a failed write leaves nothing behind and names the path.

One helper, :func:`write_atomic`, does the work for every kind of file (bytes, text, JSON,
``torch.save``, a figure): it writes to a temporary file beside the target whose name is
unique to the process *and* the call (two processes writing one file never share it),
flushes and fsyncs it, then :func:`os.replace`\\ s it onto the target (and fsyncs the folder,
where the platform allows, so the rename survives a crash too). Every cache,
checkpoint, shard and ``OLAMaps.save`` goes through it.

A full disk is an error, not a crash: :func:`check_free_space` refuses a write that cannot fit
before it starts, :func:`reserve_file` allocates a memory-mapped file's blocks up front (a page
written into a sparse file on a full disk kills the process with SIGBUS), and every write that
runs out of space raises ``OSError(ENOSPC)`` worded by :func:`no_space_error`: "no space left on
device: <path>, needs about N MB".
"""

from __future__ import annotations

import errno as _errno
import json
import math
import os
import shutil
import uuid
from pathlib import Path
from typing import IO, Any, Callable

__all__ = [
    "write_atomic",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "save_atomic",
    "check_writable",
    "no_space_error",
    "check_free_space",
    "reserve_file",
    "tensor_bytes",
]


def no_space_error(path: str | os.PathLike, needed: int | None, what: str = "file") -> OSError:
    """The ``OSError(ENOSPC)`` for a ``what`` at ``path`` that did not fit: "no space left on
    device: <path>, needs about N MB" and what to do."""
    size = f", needs about {max(1, math.ceil(needed / 1e6)):,} MB" if needed else ""
    e = OSError(
        _errno.ENOSPC,
        f"no space left on device: {path}{size} (writing the {what}); free space there or write somewhere else "
        "(another folder, or $OLAS_CACHE_DIR for the caches)",
        str(path),
    )
    e._olas_wrapped = True  # type: ignore[attr-defined]
    return e


def _existing_folder(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.is_dir():
            return p
    return Path.cwd()


def check_free_space(path: str | os.PathLike, needed: int, *, what: str = "file") -> None:
    """Refuse, before writing, ``needed`` bytes at ``path`` that the file system there cannot hold
    (:func:`shutil.disk_usage` of the nearest existing folder).

    Raises:
        OSError: errno ENOSPC, worded by :func:`no_space_error`.
    """
    try:
        free = shutil.disk_usage(_existing_folder(Path(path))).free
    except OSError:
        return  # no figure to check against: the write itself will say
    if needed > free:
        raise no_space_error(path, needed, what)


def reserve_file(path: str | os.PathLike, *, what: str = "file") -> None:
    """Allocate every block of the file at ``path`` (:func:`os.posix_fallocate`), so that pages
    written later through a memory map cannot meet a full disk (which would kill the process
    with SIGBUS). A no-op where the platform or file system cannot allocate ahead.

    Raises:
        OSError: errno ENOSPC, worded by :func:`no_space_error` (with the blocks still missing).
    """
    if not hasattr(os, "posix_fallocate"):
        return
    path = Path(path)
    st = path.stat()
    missing = max(0, st.st_size - getattr(st, "st_blocks", 0) * 512)
    if not missing:
        return
    check_free_space(path, missing, what=what)
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, st.st_size)
    except OSError as e:
        if e.errno == _errno.ENOSPC:
            raise no_space_error(path, missing, what) from e
        if e.errno not in (_errno.EOPNOTSUPP, _errno.EINVAL, getattr(_errno, "ENOSYS", -1)):
            raise
    finally:
        os.close(fd)


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors and arrays in a nest of dicts, lists and tuples (the size of what
    ``torch.save`` will write, less its small overhead)."""
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return int(obj.element_size()) * int(obj.numel())
    return int(getattr(obj, "nbytes", 0) or 0)


def _tmp_path(path: Path) -> Path:
    # the target's name is cut to 200 characters so the temporary name stays under the usual 255-byte limit
    return path.with_name(f".{path.name[:200]}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX); best effort, a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(
    path: str | os.PathLike,
    write: Callable[[IO[bytes]], Any],
    *,
    what: str = "file",
    mkdir: bool = True,
    size: int | None = None,
) -> Path:
    """Call ``write(fh)`` on a binary file handle of a temporary file beside ``path``, fsync
    it, then rename it onto ``path``.

    Args:
        path: the final file.
        write: writes the content to the open binary handle it is given.
        what: how an error message calls the file (e.g. ``"training checkpoint"``).
        mkdir: create the parent folder if it is missing.
        size: about how many bytes will be written, if known: checked against the free space
            first (:func:`check_free_space`), and quoted if the disk fills up anyway.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the folder or file cannot be written; same type and errno, with a message
            that names ``what`` and ``path`` (a full disk: "no space left on device: <path>,
            needs about N MB", :func:`no_space_error`; a parent that is a file: says so). No
            temporary file is left behind, whatever the error (``KeyboardInterrupt`` included).
    """
    path = Path(path)
    tmp = _tmp_path(path)
    above = next((p for p in path.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise NotADirectoryError(
            _errno.ENOTDIR,
            f"cannot write the {what} {path}: {above} is a file, not a folder; choose another path",
            str(path),
        )
    if size:
        check_free_space(path, size, what=what)
    recorder = None
    try:
        if mkdir:
            path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            recorder = _WriteRecorder(fh)
            write(recorder)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            written = tmp.stat().st_size
        except OSError:
            written = 0
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if _is_no_space(e) or (recorder is not None and _is_no_space(recorder.error)):
            raise no_space_error(path, max(size or 0, written), what) from e
        if isinstance(e, OSError) and not getattr(e, "_olas_wrapped", False):
            msg = f"could not write the {what} {path}: {e.strerror or e}"
            try:
                new = type(e)(e.errno, msg) if e.errno is not None else type(e)(msg)
            except Exception:  # exotic OSError subclasses
                new = OSError(e.errno, msg)
            new._olas_wrapped = True  # type: ignore[attr-defined]
            raise new from e
        raise
    _fsync_folder(path.parent)
    return path


class _WriteRecorder:
    """A file handle that remembers the ``OSError`` its ``write`` raised: torch's zip writer turns
    a full disk into its own ``RuntimeError`` ("unexpected pos") without the cause."""

    def __init__(self, fh: IO[bytes]):
        self._fh, self.error = fh, None

    def write(self, data) -> int:
        try:
            return self._fh.write(data)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name: str):
        return getattr(self._fh, name)


def _is_no_space(e: BaseException | None) -> bool:
    """A full disk, as an ``OSError`` or as the ``RuntimeError`` torch's zip writer makes of it
    ("unexpected pos", "file write failed"), with ENOSPC somewhere in its cause chain."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno == _errno.ENOSPC and not getattr(e, "_olas_wrapped", False):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, what: str = "file") -> Path:
    """Write ``data`` to ``path`` atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda fh: fh.write(data), what=what)


def write_text_atomic(path: str | os.PathLike, text: str, *, what: str = "file") -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")), what=what)


def write_json_atomic(
    path: str | os.PathLike, obj: Any, *, what: str = "JSON file", indent: int | None = 1, sort_keys: bool = True
) -> Path:
    """Write ``obj`` as JSON (UTF-8 kept, a final newline; keys sorted unless ``sort_keys`` is
    False, e.g. to keep a marker's reading order) to ``path`` atomically.

    Raises:
        TypeError: ``obj`` is not JSON-serialisable (nothing is written).
        OSError: as :func:`write_atomic`.
    """
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n"
    return write_text_atomic(path, text, what=what)


def save_atomic(obj, path: str | os.PathLike, *, what: str = "training checkpoint") -> Path:
    """``torch.save(obj)`` to ``path`` atomically (:func:`write_atomic`), the free space checked
    first against the size of its tensors.

    Raises:
        OSError: the folder or file cannot be written; the message names ``path`` (a full disk:
            "no space left on device: <path>, needs about N MB").
    """
    import torch

    return write_atomic(path, lambda fh: torch.save(obj, fh), what=what, size=tensor_bytes(obj) or None)


def check_writable(folder: str | os.PathLike, *, what: str = "folder") -> Path:
    """Create ``folder`` (and its parents) if needed, then write and remove a probe file in
    it: a folder that cannot be written fails here, before hours of work, not when its
    first result is saved.

    Args:
        folder: the folder.
        what: how the error message calls it (e.g. ``"checkpoint folder"``).

    Returns:
        ``folder`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: it cannot be created or written; same type and errno, with a message that
            names ``what`` and ``folder`` and what to do.
    """
    folder = Path(folder)
    probe = folder / f".olas-write-probe.{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"probe")
        probe.unlink()
    except OSError as e:
        msg = f"the {what} {folder} cannot be written: {e.strerror or e}; pass another folder or fix its permissions"
        try:
            new = type(e)(e.errno, msg) if e.errno is not None else type(e)(msg)
        except Exception:  # noqa: BLE001 - exotic OSError subclasses
            new = OSError(e.errno, msg)
        raise new from e
    return folder
