"""A cache folder on disk: its file names, I/O errors that name the path, atomic JSON
writes, the writer's lock, checking the arrays, and creating or clearing the files.

Cache folder layout (default ``<cache>/ola/<model>/<protocol>-<settings hash>``, with
``<cache>`` from :func:`olas_utils.infra.settings.cache_dir`)::

    manifest.json       settings that identify the cache (see .manifest); written last at creation
    plan.json           the batches (lists of chunk indices) in processing order
    progress.json       {"batches_done", "n_batches", "chunks_done", "complete", "files", ...}:
                        once complete, "files" holds each array's size and SHA-256, written in
                        the same atomic replace as "complete": true (checked on open)
    <key>.npy           one per key, ":" → "_" (ola_1.npy, rollout.npy, layer_-1.npy):
                        (n_chunks, S, S) float32, NumPy .npy (np.load(..., mmap_mode="r"))
    lengths.npy         (n_chunks,) int32: side of each map before resizing (tokens or words)
    .lock               advisory lock held by the writing process (fcntl.flock)

JSON files are written with :func:`olas_utils.infra.atomic.write_json_atomic` and arrays hashed
with :func:`olas_utils.infra.fingerprint.sha256_file`; every failed read or write is an
``OSError`` of the same type and errno whose message names the path and what to do
(:func:`io_errors`).

Importing this module does no work.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from olas_utils.infra.atomic import check_free_space, reserve_file, write_json_atomic
from olas_utils.infra.fingerprint import sha256_file
from olas_utils.vocabulary import MapKey

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST",
    "PROGRESS",
    "PLAN",
    "LENGTHS",
    "LOCK",
    "CacheBusyError",
    "CacheCorruptError",
    "corrupt_error",
    "io_errors",
    "write_json",
    "read_json",
    "file_checksums",
    "verify_files",
    "key_filename",
    "locked",
    "clear_folder",
    "init_folder",
]


#: Version of the folder layout; part of the manifest.
FORMAT_VERSION = 1

#: File names of a cache folder (the arrays of the keys aside: :func:`key_filename`).
MANIFEST, PROGRESS, PLAN, LENGTHS, LOCK = "manifest.json", "progress.json", "plan.json", "lengths.npy", ".lock"


class CacheBusyError(RuntimeError):
    """Another process is writing the same cache folder (its lock is held)."""


class CacheCorruptError(ValueError):
    """A cache file is damaged: JSON that does not parse, an array missing, truncated or
    changed since the cache was completed. The message names the file; ``overwrite=True``
    rebuilds the cache."""


def corrupt_error(path: Path, what: str) -> CacheCorruptError:
    """The :class:`CacheCorruptError` for the damaged file ``path``: names it, says what is
    wrong (``what``) and how to recover (``overwrite=True`` or delete the folder)."""
    return CacheCorruptError(
        f"OLAS cache file {path} is damaged ({what}); rebuild the cache with "
        f"extract_to_cache(..., overwrite=True) or delete the folder {path.parent}"
    )


def _with_path(e: OSError, path: Path | str, what: str) -> OSError:
    """``e`` again (same type and errno) with a message naming ``path``, what was being done
    and, for a full disk or a folder that cannot be written, what to do."""
    msg = f"OLAS cache: cannot {what} {path}: {e.strerror or e}"
    if e.errno == _errno.ENOSPC:
        msg += " (disk full: free space or choose another cache_root / $OLAS_CACHE_DIR)"
    elif isinstance(e, PermissionError):
        msg += " (not writable: choose another cache_root or set $OLAS_CACHE_DIR)"
    try:
        new = type(e)(e.errno, msg, str(path)) if e.errno is not None else type(e)(msg)
    except Exception:  # exotic OSError subclasses
        new = OSError(e.errno, msg, str(path))
    new._olas_wrapped = True  # type: ignore[attr-defined]
    return new


@contextlib.contextmanager
def io_errors(path: Path | str, what: str):
    """Re-raise an ``OSError`` raised inside the block (same type and errno) with a message
    that names ``path`` and ``what`` was being done (e.g. ``"write"``, ``"open the lock
    file"``), plus advice for a full disk or a folder that cannot be written. An error
    already re-raised this way passes through unchanged.

    Raises:
        OSError: as described (chained to the original).
    """
    try:
        yield
    except OSError as e:
        if getattr(e, "_olas_wrapped", False):
            raise
        raise _with_path(e, path, what) from e


def write_json(path: Path, obj: Any) -> None:
    """Write JSON to ``path`` atomically (:func:`olas_utils.infra.atomic.write_json_atomic`:
    indent 1, sorted keys, UTF-8 kept, a final newline; temporary file, fsync,
    :func:`os.replace`; a failed write leaves no temporary file).

    Raises:
        OSError: the file cannot be written, as :func:`io_errors` words it for ``"write"``.
    """
    try:
        write_json_atomic(path, obj, what="OLAS cache file")
    except OSError as e:
        # write_atomic words its own message; the cache's names the path and says what to do
        cause = e.__cause__ if getattr(e, "_olas_wrapped", False) and isinstance(e.__cause__, OSError) else e
        if getattr(cause, "_olas_wrapped", False):
            raise
        raise _with_path(cause, path, "write") from cause


def read_json(path: Path) -> Any:
    """Parse a cache's JSON file.

    Raises:
        CacheCorruptError: the file is not valid UTF-8 JSON (naming it).
        OSError: it cannot be read (:func:`io_errors`).
    """
    with io_errors(path, "read"):
        with open(path, "rb") as f:
            raw = f.read()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise corrupt_error(Path(path), f"not valid JSON: {e}") from None


def file_checksums(root: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size": bytes, "sha256": hex}}`` of the given files in ``root``.

    Raises:
        OSError: a file cannot be read (:func:`io_errors`).
    """
    out = {}
    for name in names:
        with io_errors(root / name, "read"):
            out[name] = {"size": (root / name).stat().st_size, "sha256": sha256_file(root / name)}
    return out


def verify_files(
    root: Path, recorded: dict[str, dict[str, Any]] | None, shapes: dict[str, tuple] | None = None
) -> None:
    """Check the arrays of a cache folder: each file exists, has the size recorded at
    completion and the same SHA-256 (``recorded``); with ``shapes`` (an incomplete cache,
    nothing recorded yet), each ``.npy`` opens with the expected shape.

    Raises:
        CacheCorruptError: naming the first damaged file and what is wrong with it.
    """
    for name, want in (recorded or {}).items():
        path = root / name
        if not path.is_file():
            raise corrupt_error(path, "missing")
        size = path.stat().st_size
        if size != want["size"]:
            raise corrupt_error(
                path, f"{size} bytes, {want['size']} when the cache was completed: truncated or replaced"
            )
        if file_checksums(root, [name])[name]["sha256"] != want["sha256"]:
            raise corrupt_error(path, "its SHA-256 differs from the one recorded when the cache was completed: changed")
    for name, shape in (shapes or {}).items():
        path = root / name
        if not path.is_file():
            raise corrupt_error(path, "missing")
        try:
            arr = np.load(path, mmap_mode="r")
        except (ValueError, OSError, EOFError) as e:
            raise corrupt_error(path, f"not a readable .npy array: {e}") from None
        if tuple(arr.shape) != tuple(shape):
            raise corrupt_error(path, f"shape {tuple(arr.shape)}, expected {tuple(shape)}")
        del arr


def key_filename(key: str) -> str:
    """File name of a key's images: ``"ola:1"`` → ``"ola_1.npy"``, ``"layer:-1"`` → ``"layer_-1.npy"``."""
    return key.replace(":", "_") + ".npy"


def key_of_filename(name: str) -> str | None:
    """The key whose images ``name`` holds (the inverse of :func:`key_filename`:
    ``"layer_-1.npy"`` → ``"layer:-1"``), or None if ``name`` is no key's file."""
    if not name.endswith(".npy"):
        return None
    stem = name[: -len(".npy")]
    key = ":".join(stem.rsplit("_", 1)) if "_" in stem else stem
    try:
        return str(MapKey.parse(key))
    except ValueError:
        return None


@contextlib.contextmanager
def locked(root: Path):
    """Hold an exclusive advisory lock on ``root/.lock`` (released when the process dies;
    no locking where ``fcntl`` is missing).

    Raises:
        CacheBusyError: another process holds it.
        OSError: the lock file cannot be opened (:func:`io_errors`).
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    path = root / LOCK
    with io_errors(path, "open the lock file"):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CacheBusyError(
                f"another process is writing the OLAS cache {root} (lock {path} is held); "
                f"wait for it, or use another cache_root"
            ) from None
        yield
    finally:
        os.close(fd)


def _known_files(keys: Iterable[str] | None) -> set[str]:
    names = {MANIFEST, PROGRESS, PLAN, LENGTHS, LOCK}
    if keys is not None:
        names |= {key_filename(k) for k in keys}
    return names


def _is_ours(name: str, keys: Iterable[str] | None) -> bool:
    if name in _known_files(keys):
        return True
    if name.endswith(".tmp"):
        return True
    return key_of_filename(name) is not None  # the file name of any key


def clear_folder(root: Path, keys: Iterable[str] | None) -> None:
    """Delete the cache's files in ``root`` (manifest first, so an interruption leaves a
    re-initialisable folder; the lock, held by the caller, stays). ``keys``: the stored
    keys, if known (any key's file name counts as the cache's anyway).

    Raises:
        FileExistsError: ``root`` holds files that are not part of an OLAS image cache
            (nothing is deleted).
        OSError: a file cannot be deleted (:func:`io_errors`).
    """
    names = [p.name for p in root.iterdir()]
    foreign = [n for n in names if not _is_ours(n, keys)]
    if foreign:
        raise FileExistsError(
            f"{root} holds files that are not part of an OLAS image cache ({', '.join(sorted(foreign)[:5])}); "
            f"refusing to delete them. Choose another cache_root."
        )
    order = sorted(names, key=lambda n: (n != MANIFEST, n == LOCK))
    for n in order:
        if n == LOCK:
            continue  # we hold it
        with io_errors(root / n, "delete"):
            (root / n).unlink()


def init_folder(root: Path, manifest: dict, plan: list[list[int]], keys: list[str], image_size: int) -> None:
    """Create a fresh, empty cache in ``root`` (leftovers of an interrupted creation are
    removed): zeroed ``(n_chunks, S, S)`` float32 arrays per key and ``(n_chunks,)`` int32
    lengths, the plan, progress at 0 batches, and the manifest last (the folder then counts
    as a cache).

    Raises:
        FileExistsError: as :func:`clear_folder`.
        OSError: a file cannot be created (:func:`io_errors`); errno ENOSPC, "no space left on
            device: <folder>, needs about N MB", before any file is made when the arrays cannot
            fit (:func:`olas_utils.infra.atomic.check_free_space`).
    """
    clear_folder(root, keys)
    n = manifest["n_chunks"]
    # the arrays are memory-mapped: a page written into a sparse file on a full disk kills the
    # process (SIGBUS), so the space is checked first and every block allocated at creation
    check_free_space(
        root, len(keys) * n * image_size * image_size * 4 + n * 4 + (len(keys) + 1) * 128, what="image cache"
    )
    for key in keys:
        path = root / key_filename(key)
        with io_errors(path, "create"):
            mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, image_size, image_size))
            mm.flush()
            del mm
            reserve_file(path, what="image cache")
    with io_errors(root / LENGTHS, "create"):
        mm = np.lib.format.open_memmap(root / LENGTHS, mode="w+", dtype=np.int32, shape=(n,))
        mm.flush()
        del mm
        reserve_file(root / LENGTHS, what="image cache")
    write_json(root / PLAN, plan)
    write_json(
        root / PROGRESS,
        {
            "batches_done": 0,
            "n_batches": len(plan),
            "chunks_done": 0,
            "complete": False,
            "devices": [],
            "updated": time.time(),
        },
    )
    write_json(root / MANIFEST, manifest)  # last: the folder now counts as a cache
