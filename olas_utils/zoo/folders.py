"""Where prepared zoo models live in the OLAS cache (``<cache>/models/<name>/``) and when
such a folder counts as prepared: only with a valid ``olas_prepared.json`` marker, whose
per-file SHA-256s its files must still match (:func:`verify_folder`).

The marker (format 2) records, under ``"files"``, every file of the folder but itself
(relative ``/``-separated path → ``{"sha256", "size", "mtime_ns"}``). :func:`verify_folder`
checks them two ways. The *fast* check (:func:`olas_utils.zoo.load_model`, once per
process per folder) stats each file: one whose size and modification time (ns) are those
recorded is taken as it is, without reading it; one whose time changed is hashed (once per
process per path, size and time) and must match. It catches anything written through the
file system (edits, truncation, a partial copy, ``cp`` without ``-p``); it cannot see bytes
changed with the time restored, or by the disk itself. The *full* check (``olas models``,
``python -m olas_utils.zoo list``, :func:`olas_utils.zoo.sanity_check`) hashes every file.
A format-1 marker (no per-file hashes) does not count: ``python -m olas_utils.zoo prepare``
prepares such a folder again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from olas_utils.infra import settings
from olas_utils.infra.fingerprint import sha256_file, sha256_file_once
from olas_utils.zoo.errors import DamagedFolderError, UnverifiedFolderError
from olas_utils.zoo.registry import ZooEntry, get_entry

__all__ = [
    "MARKER_NAME",
    "MARKER_FORMAT",
    "prepared_dir",
    "read_marker",
    "is_prepared",
    "file_records",
    "verify_folder",
]


#: Name of the marker file that makes a cache folder count as prepared.
MARKER_NAME = "olas_prepared.json"


#: Version of the marker format; a marker of another format is ignored (re-prepared).
#: 2: ``"files"`` records every file's SHA-256, size and modification time.
MARKER_FORMAT = 2


def models_root(cache_dir: str | os.PathLike | None) -> Path:
    root = settings.cache_dir(cache_dir) / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def work_dir(cache: Path, name: str) -> Path:
    return cache / "models" / ".work" / name


def prepared_dir(name: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder where a zoo model is (or would be) prepared: ``<cache>/models/<name>``.

    Args:
        name: zoo short name (not checked against the registry).
        cache_dir: cache folder; else ``$OLAS_CACHE_DIR``; else ``~/.cache/olas``.

    Returns:
        The path (it may not exist).
    """
    return settings.cache_dir(cache_dir) / "models" / name


def read_marker(folder: str | os.PathLike) -> dict | None:
    """The parsed ``olas_prepared.json`` marker of a folder.

    Args:
        folder: a prepared model folder.

    Returns:
        The marker as a dict, or None if it is absent or unreadable.
    """
    p = Path(folder) / MARKER_NAME
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def marker_valid(entry: ZooEntry, marker: dict | None) -> bool:
    return (
        marker is not None
        and marker.get("format") == MARKER_FORMAT
        and marker.get("entry") == entry.name
        and marker.get("source_sha256") == entry.sha256
        and isinstance(marker.get("files"), dict)
        and bool(marker["files"])
    )


def file_records(folder: str | os.PathLike) -> dict[str, dict]:
    """What a format-2 marker records of ``folder``: every file but the marker, by relative
    ``/``-separated path (sorted), with its ``sha256``, ``size`` and ``mtime_ns``.

    Raises:
        OSError: a file cannot be read.
    """
    folder = Path(folder)
    out = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER_NAME):
        st = f.stat()
        out[f.relative_to(folder).as_posix()] = {
            "sha256": sha256_file(f),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
        }
    return out


def verify_folder(folder: str | os.PathLike, *, full: bool = True, name: str | None = None) -> None:
    """Check a prepared folder's files against the SHA-256s its marker records (module doc).

    Args:
        folder: a folder with an ``olas_prepared.json`` marker.
        full: hash every file (default); False: the fast check (size and modification time
            unchanged → not read; changed → hashed once per process).
        name: the zoo name, for the fix in messages (default: the marker's entry).

    Raises:
        FileNotFoundError: the folder has no readable marker.
        UnverifiedFolderError: the marker records no per-file hashes (format 1).
        DamagedFolderError: a recorded file is missing, of another size or hashes otherwise;
            names the file, both hashes and the fix.
    """
    folder = Path(folder)
    marker = read_marker(folder)
    if marker is None:
        raise FileNotFoundError(f"{folder} has no readable {MARKER_NAME}: it is not a prepared zoo folder")
    name = name or str(marker.get("entry") or folder.name)
    redo = f"python -m olas_utils.zoo prepare {name} --force"
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        raise UnverifiedFolderError(
            f"the prepared model folder {folder} has a marker of format {marker.get('format')!r} that records no "
            f"per-file SHA-256 (written by an older OLAS), so its weights cannot be checked; prepare it again "
            f"with `{redo}` (`python -m olas_utils.zoo prepare` does it for the zoo cache's folders)",
            path=str(folder),
        )
    for rel, rec in files.items():
        f = folder / rel
        expected = str(rec.get("sha256", ""))
        try:
            st = f.stat()
        except OSError:
            raise DamagedFolderError(
                f"the prepared model file {f} is missing (its marker records it); prepare the folder again "
                f"with `{redo}`",
                path=str(f),
                expected=expected,
                actual="missing",
            ) from None
        if not full and st.st_size == rec.get("size") and st.st_mtime_ns == rec.get("mtime_ns"):
            continue
        actual = sha256_file(f) if full else sha256_file_once(f)
        if actual != expected:
            raise DamagedFolderError(
                f"the prepared model file {f} is damaged: SHA-256 {actual} ({st.st_size} bytes), its marker "
                f"records {expected} ({rec.get('size')} bytes); prepare the folder again with `{redo}`",
                path=str(f),
                expected=expected,
                actual=actual,
            )


def is_prepared(name: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether a zoo model has a usable prepared folder (one with a valid marker).

    Args:
        name: zoo short name.
        cache_dir: cache folder (see :func:`prepared_dir`).

    Returns:
        True if ``<cache>/models/<name>/olas_prepared.json`` exists, is of
        :data:`MARKER_FORMAT`, names this entry, records its pinned SHA-256 and its files'
        hashes (whether the files still match them is :func:`verify_folder`'s job).

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
    """
    entry = get_entry(name)
    return marker_valid(entry, read_marker(prepared_dir(name, cache_dir)))
