"""Where prepared zoo models live in the OLAS cache (``<cache>/models/<name>/``) and when
such a folder counts as prepared: only with a valid ``olas_prepared.json`` marker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from olas_utils import settings
from olas_utils.zoo.registry import ZooEntry, get_entry

__all__ = ["MARKER_NAME", "MARKER_FORMAT", "prepared_dir", "read_marker", "is_prepared"]


#: Name of the marker file that makes a cache folder count as prepared.
MARKER_NAME = "olas_prepared.json"


#: Version of the marker format; a marker of another format is ignored (re-prepared).
MARKER_FORMAT = 1


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
    )


def is_prepared(name: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether a zoo model has a usable prepared folder (one with a valid marker).

    Args:
        name: zoo short name.
        cache_dir: cache folder (see :func:`prepared_dir`).

    Returns:
        True if ``<cache>/models/<name>/olas_prepared.json`` exists, names this entry and
        records its pinned SHA-256.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
    """
    entry = get_entry(name)
    return marker_valid(entry, read_marker(prepared_dir(name, cache_dir)))
