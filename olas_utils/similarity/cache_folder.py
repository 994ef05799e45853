"""A cache folder on disk: its file names, I/O errors that name the path, atomic JSON
writes, the writer's lock, and creating or clearing the files.

Cache folder layout (default ``<cache>/ola/<model>/<protocol>-<settings hash>``, with
``<cache>`` from :func:`olas_utils.settings.cache_dir`)::

    manifest.json       settings that identify the cache (see .manifest); written last at creation
    plan.json           the batches (lists of chunk indices) in processing order
    progress.json       {"batches_done", "n_batches", "chunks_done", "complete", "files", ...}:
                        once complete, "files" holds each array's size and SHA-256, written in
                        the same atomic replace as "complete": true (checked on open)
    <key>.npy           one per key, ":" → "_" (ola_1.npy, rollout.npy, layer_-1.npy):
                        (n_chunks, S, S) float32, NumPy .npy (np.load(..., mmap_mode="r"))
    lengths.npy         (n_chunks,) int32: side of each map before resizing (tokens or words)
    .lock               advisory lock held by the writing process (fcntl.flock)

Importing this module does no work.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

__all__ = ["FORMAT_VERSION", "CacheBusyError", "CacheCorruptError", "key_filename", "file_checksums",
           "verify_files"]


#: Version of the folder layout; part of the manifest.
FORMAT_VERSION = 1


_MANIFEST, _PROGRESS, _PLAN, _LENGTHS, _LOCK = "manifest.json", "progress.json", "plan.json", "lengths.npy", ".lock"


class CacheBusyError(RuntimeError):
    """Another process is writing the same cache folder (its lock is held)."""


class CacheCorruptError(ValueError):
    """A cache file is damaged: JSON that does not parse, an array missing, truncated or
    changed since the cache was completed. The message names the file; ``overwrite=True``
    rebuilds the cache."""


def _corrupt(path: Path, what: str) -> CacheCorruptError:
    return CacheCorruptError(f"OLAS cache file {path} is damaged ({what}); rebuild the cache with "
                             f"extract_to_cache(..., overwrite=True) or delete the folder {path.parent}")


@contextlib.contextmanager
def _io(path: Path | str, what: str):
    """Re-raise an ``OSError`` (same type and errno) with the path and what was being done."""
    try:
        yield
    except OSError as e:
        if getattr(e, "_olas_wrapped", False):
            raise
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
        raise new from e


def _write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to ``path`` atomically: temporary file, fsync, :func:`os.replace`."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with _io(path, "write"):
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=1, sort_keys=True, ensure_ascii=False)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a failed write leaves no .tmp behind
            raise


def _read_json(path: Path) -> Any:
    """Parse a cache's JSON file; a damaged one is a :class:`CacheCorruptError` naming it."""
    with _io(path, "read"):
        with open(path, "rb") as f:
            raw = f.read()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(Path(path), f"not valid JSON: {e}") from None


def file_checksums(root: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size": bytes, "sha256": hex}}`` of the given files in ``root``."""
    import hashlib

    out = {}
    for name in names:
        h = hashlib.sha256()
        with _io(root / name, "read"):
            with open(root / name, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
            out[name] = {"size": (root / name).stat().st_size, "sha256": h.hexdigest()}
    return out


def verify_files(root: Path, recorded: dict[str, dict[str, Any]] | None, shapes: dict[str, tuple] | None = None) -> None:
    """Check the arrays of a cache folder: each file exists, has the size recorded at
    completion and the same SHA-256 (``recorded``); with ``shapes`` (an incomplete cache,
    nothing recorded yet), each ``.npy`` opens with the expected shape.

    Raises:
        CacheCorruptError: naming the first damaged file and what is wrong with it.
    """
    for name, want in (recorded or {}).items():
        path = root / name
        if not path.is_file():
            raise _corrupt(path, "missing")
        size = path.stat().st_size
        if size != want["size"]:
            raise _corrupt(path, f"{size} bytes, {want['size']} when the cache was completed: truncated or replaced")
        if file_checksums(root, [name])[name]["sha256"] != want["sha256"]:
            raise _corrupt(path, "its SHA-256 differs from the one recorded when the cache was completed: changed")
    for name, shape in (shapes or {}).items():
        path = root / name
        if not path.is_file():
            raise _corrupt(path, "missing")
        try:
            arr = np.load(path, mmap_mode="r")
        except (ValueError, OSError, EOFError) as e:
            raise _corrupt(path, f"not a readable .npy array: {e}") from None
        if tuple(arr.shape) != tuple(shape):
            raise _corrupt(path, f"shape {tuple(arr.shape)}, expected {tuple(shape)}")
        del arr


def key_filename(key: str) -> str:
    """File name of a key's images: ``"ola:1"`` → ``"ola_1.npy"``, ``"layer:-1"`` → ``"layer_-1.npy"``."""
    return key.replace(":", "_") + ".npy"


@contextlib.contextmanager
def _locked(root: Path):
    """Hold an exclusive advisory lock on ``root/.lock`` (released when the process dies)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    path = root / _LOCK
    with _io(path, "open the lock file"):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CacheBusyError(f"another process is writing the OLAS cache {root} (lock {path} is held); "
                                 f"wait for it, or use another cache_root") from None
        yield
    finally:
        os.close(fd)


def _known_files(root: Path, keys: Iterable[str] | None) -> set[str]:
    names = {_MANIFEST, _PROGRESS, _PLAN, _LENGTHS, _LOCK}
    if keys is not None:
        names |= {key_filename(k) for k in keys}
    return names


def _is_ours(name: str, keys: Iterable[str] | None) -> bool:
    if name in _known_files(Path("."), keys):
        return True
    if name.endswith(".tmp"):
        return True
    return bool(re.fullmatch(r"(ola_\d+|rollout|layer_-?\d+)\.npy", name))


def _clear(root: Path, keys: Iterable[str] | None) -> None:
    """Delete our files (manifest first, so an interruption leaves a re-initialisable folder)."""
    names = [p.name for p in root.iterdir()]
    foreign = [n for n in names if not _is_ours(n, keys)]
    if foreign:
        raise FileExistsError(
            f"{root} holds files that are not part of an OLAS image cache ({', '.join(sorted(foreign)[:5])}); "
            f"refusing to delete them. Choose another cache_root.")
    order = sorted(names, key=lambda n: (n != _MANIFEST, n == _LOCK))
    for n in order:
        if n == _LOCK:
            continue  # we hold it
        with _io(root / n, "delete"):
            (root / n).unlink()


def _init(root: Path, manifest: dict, plan: list[list[int]], keys: list[str], image_size: int) -> None:
    """Create a fresh cache in ``root`` (leftovers of an interrupted creation are removed)."""
    _clear(root, keys)
    n = manifest["n_chunks"]
    for key in keys:
        path = root / key_filename(key)
        with _io(path, "create"):
            mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, image_size, image_size))
            mm.flush()
            del mm
    with _io(root / _LENGTHS, "create"):
        mm = np.lib.format.open_memmap(root / _LENGTHS, mode="w+", dtype=np.int32, shape=(n,))
        mm.flush()
        del mm
    _write_json_atomic(root / _PLAN, plan)
    _write_json_atomic(root / _PROGRESS, {"batches_done": 0, "n_batches": len(plan), "chunks_done": 0,
                                          "complete": False, "devices": [], "updated": time.time()})
    _write_json_atomic(root / _MANIFEST, manifest)  # last: the folder now counts as a cache
