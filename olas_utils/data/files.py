"""Shared plumbing of the dataset readers: files under the data folder in, ``Dataset`` out.

Files are looked up under the folder :func:`olas_utils.settings.data_dir` resolves (argument,
then ``$OLAS_DATA_DIR``, then ``../shared/data`` beside the project), with errors that say how
to point OLAS elsewhere; ``data/README.md`` documents each dataset's provenance, licence,
layout and download. Also: split aliases, text opening, rows -> Dataset, the parse-cache key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import datasets

from olas_utils.settings import data_dir as _resolve_data_dir

_STR_SEQ = datasets.List(datasets.Value("string"))
_INT_SEQ = datasets.List(datasets.Value("int64"))


def _canonical_split(split: str, aliases: Mapping[str, str], dataset: str) -> str:
    """Map a split name or alias (case-insensitive) to the dataset's own split name.

    Raises:
        ValueError: for an unknown split, listing the valid names and aliases.
    """
    key = str(split).strip().lower()
    if key not in aliases:
        valid = ", ".join(f"{a!r}" + (f" (= {c!r})" if a != c else "") for a, c in aliases.items())
        raise ValueError(f"unknown {dataset} split {split!r}; valid splits: {valid}")
    return aliases[key]


def _missing_file_message(path: Path, root: Path, dataset: str) -> str:
    return (
        f"{dataset}: file {path} not found (searched the data folder {root}). Put the "
        f"dataset there as described in data/README.md, or point OLAS at the folder that "
        f"has it: set OLAS_DATA_DIR=/path/to/data or pass data_dir=..."
    )


def _data_file(data_dir: str | os.PathLike | None, relpath: str, dataset: str) -> Path:
    """``<data folder>/<relpath>``, checked to exist.

    Raises:
        FileNotFoundError: if the data folder or the file is missing (naming both and how
            to point OLAS at the right folder).
    """
    root = _resolve_data_dir(data_dir)
    path = root / relpath
    if not path.is_file():
        raise FileNotFoundError(_missing_file_message(path, root, dataset))
    return path


def _file_key(path: Path) -> tuple[str, int, int]:
    """Cache key for a file: its path, modification time and size."""
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size


def _to_dataset(columns: Mapping[str, Sequence], features: datasets.Features) -> datasets.Dataset:
    """A fresh in-memory Dataset (Arrow copies the data, so cached columns stay private)."""
    return datasets.Dataset.from_dict({k: list(columns[k]) for k in features}, features=features)


def _columns(rows: Iterable[Mapping], names: Sequence[str]) -> dict[str, tuple]:
    """Turn row dicts into immutable column tuples."""
    cols: dict[str, list] = {n: [] for n in names}
    for row in rows:
        for n in names:
            cols[n].append(row[n])
    return {n: tuple(v) for n, v in cols.items()}


def _open_text(path: Path):
    """Open a text file as UTF-8 (BOM tolerated), with CRLF/CR line ends read as ``\\n``."""
    return open(path, encoding="utf-8-sig", newline=None)
