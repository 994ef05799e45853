"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never
half of one; a failed write leaves nothing behind and names the path.

One helper, :func:`write_atomic`, does the work for every kind of file (bytes, text, JSON,
``torch.save``, a figure): it writes to a temporary file beside the target whose name is
unique to the process *and* the call (two processes writing one file never share it),
flushes and fsyncs it, then :func:`os.replace`\\ s it onto the target (and fsyncs the folder,
where the platform allows, so the rename survives a crash too). Every cache,
checkpoint, shard and ``OLAMaps.save`` goes through it.
"""

from __future__ import annotations

import json
import os
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
]


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
    path: str | os.PathLike, write: Callable[[IO[bytes]], Any], *, what: str = "file", mkdir: bool = True
) -> Path:
    """Call ``write(fh)`` on a binary file handle of a temporary file beside ``path``, fsync
    it, then rename it onto ``path``.

    Args:
        path: the final file.
        write: writes the content to the open binary handle it is given.
        what: how an error message calls the file (e.g. ``"training checkpoint"``).
        mkdir: create the parent folder if it is missing.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the folder or file cannot be written; same type and errno, with a message
            that names ``what`` and ``path``. No temporary file is left behind, whatever
            the error (``KeyboardInterrupt`` included).
    """
    path = Path(path)
    tmp = _tmp_path(path)
    try:
        if mkdir:
            path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
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
    """``torch.save(obj)`` to ``path`` atomically (:func:`write_atomic`).

    Raises:
        OSError: the folder or file cannot be written; the message names ``path``.
    """
    import torch

    return write_atomic(path, lambda fh: torch.save(obj, fh), what=what)


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
