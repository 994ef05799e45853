"""Shared plumbing of the dataset readers: files under the data folder in, ``Dataset`` out.

Files are looked up under the folder :func:`olas_utils.infra.settings.data_dir` resolves (argument,
then ``$OLAS_DATA_DIR``, then ``../shared/data`` beside the project), with errors that say how
to point OLAS elsewhere; ``data/README.md`` documents each dataset's provenance, licence,
layout and download. Also: split aliases, strict text reading, rows -> Dataset, the parse-cache key.

Integrity: every file a reader opens is checked against the ``SHA256SUMS`` of its data folder
when that folder has one and lists the file (:func:`verify_file`; each file hashed once per
process per path, size and modification time), so a cut or edited copy is never read as the
shipped one. ``verify=False`` or ``OLAS_DATA_VERIFY=0`` skips the check for users' own edited
copies, with one warning per file. Format errors are :class:`DataFormatError`, checksum errors
:class:`DataChecksumError` (both ``ValueError``), each naming the file (and the 1-based line)
and what to do; :func:`text_lines` reads lines strictly (a leading BOM stripped, one inside the
file refused, invalid UTF-8 refused).
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import datasets

from olas_utils.infra.fingerprint import sha256_file_once
from olas_utils.infra.settings import data_dir as _resolve_data_dir

__all__ = [
    "DataFormatError",
    "DataChecksumError",
    "RESTORE_HINT",
    "STR_SEQ",
    "INT_SEQ",
    "verify_enabled",
    "verify_file",
    "text_lines",
    "canonical_split",
    "data_file",
    "file_key",
    "to_dataset",
    "to_columns",
]

STR_SEQ = datasets.List(datasets.Value("string"))
INT_SEQ = datasets.List(datasets.Value("int64"))

#: what a damaged or cut data file's format error tells the user to do (verify=False skips only
#: the checksum, never the format checks)
RESTORE_HINT = (
    "restore the original file (data/README.md says where each dataset comes from), or repair "
    "your own copy at that line"
)


class DataFormatError(ValueError):
    """A data file that breaks its format: the message names the file, the 1-based line and what to do."""


class DataChecksumError(ValueError):
    """A data file whose SHA-256 is not the one its data folder's ``SHA256SUMS`` lists."""


def verify_enabled(verify: bool | None) -> bool:
    """``verify`` if given, else ``$OLAS_DATA_VERIFY`` (``0``/``false``/``no``/``off`` turn it off), else True.

    Raises:
        ValueError: if ``$OLAS_DATA_VERIFY`` holds something else than a yes/no value.
    """
    if verify is not None:
        return bool(verify)
    raw = os.environ.get("OLAS_DATA_VERIFY", "").strip().lower()
    if raw in ("", "1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"OLAS_DATA_VERIFY={raw!r}: use 1 (check data files against SHA256SUMS, the default) or 0")


_WARNED: set[str] = set()


def _warn_unverified(path: Path, dataset: str) -> None:
    if str(path) in _WARNED:
        return
    _WARNED.add(str(path))
    warnings.warn(
        f"{dataset}: {path} is read without checking it against SHA256SUMS (verify=False or "
        f"OLAS_DATA_VERIFY=0): results from an edited or damaged copy are not verified",
        UserWarning,
        stacklevel=4,
    )


def _sha256_cache_clear() -> None:
    """Forget the hashes computed so far (tests)."""
    sha256_file_once.cache_clear()


_SUMS_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


@functools.lru_cache(maxsize=64)
def _read_sums(path: str, _mtime_ns: int, _size: int) -> dict[str, str]:
    """``{relative name: sha256}`` of a ``sha256sum`` listing (names without a leading ``./``).

    Raises:
        DataFormatError: for a line that is not ``<64 hex digits>  <name>``.
    """
    out = {}
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        m = _SUMS_LINE.match(line)
        if m is None:
            raise DataFormatError(
                f"{path}:{lineno}: not a '<sha256>  <file>' line: {line!r}; restore the data "
                f"folder's SHA256SUMS (or remove it to skip the checks)"
            )
        name = m.group(2).strip()
        out[name[2:] if name.startswith("./") else name] = m.group(1).lower()
    return out


def verify_file(path: Path, dataset: str, *, root: Path | None = None, verify: bool | None = None) -> None:
    """Check ``path`` against ``root/SHA256SUMS`` (``root`` None: the nearest ``SHA256SUMS`` in the
    file's folder or one above it) when that listing names the file; nothing to check otherwise.

    Raises:
        DataChecksumError: the file's SHA-256 is not the listed one (names the file, both hashes
            and what to do).
        DataFormatError: the ``SHA256SUMS`` file is malformed.
        ValueError: a bad ``$OLAS_DATA_VERIFY``.
    """
    if not verify_enabled(verify):
        _warn_unverified(path, dataset)
        return
    path = path.resolve()
    folders = [root.resolve()] if root is not None else list(path.parents)
    for folder in folders:
        sums = folder / "SHA256SUMS"
        if sums.is_file():
            break
    else:
        return
    try:
        rel = path.relative_to(folder).as_posix()
    except ValueError:
        return
    expected = _read_sums(*file_key(sums)).get(rel)
    if expected is None:
        return
    actual = sha256_file_once(path)
    if actual != expected:
        raise DataChecksumError(
            f"{dataset}: {path} is not the file {sums} lists: its SHA-256 is {actual}, expected {expected}. "
            f"The copy is damaged, cut or edited; restore the original (data/README.md says where each dataset "
            f"comes from). To read your own edited copy anyway pass verify=False or set OLAS_DATA_VERIFY=0."
        )


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line without its line end)`` of a UTF-8 text file, read strictly.

    A byte-order mark opening the file is dropped; CRLF / CR line ends are read as ``\\n``.

    Raises:
        DataFormatError: a byte-order mark (U+FEFF) anywhere else (files joined with their BOMs),
            or bytes that are not UTF-8.
    """
    lineno = 0
    try:
        with open(path, encoding="utf-8", newline=None) as f:
            for lineno, line in enumerate(f, 1):
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                if "\ufeff" in line:
                    raise DataFormatError(
                        f"{path}:{lineno}: a byte-order mark (U+FEFF, BOM) inside the file, which would become "
                        f"part of a word; files joined with their BOMs? Remove it, or {RESTORE_HINT}"
                    )
                yield lineno, line.rstrip("\n")
    except UnicodeDecodeError as e:
        raise DataFormatError(
            f"{path}:{lineno + 1}: not UTF-8 ({e.reason} at byte {e.start} of the read block); {RESTORE_HINT}"
        ) from None


def canonical_split(split: str, aliases: Mapping[str, str], dataset: str) -> str:
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


def data_file(data_dir: str | os.PathLike | None, relpath: str, dataset: str, verify: bool | None = None) -> Path:
    """``<data folder>/<relpath>``, checked to exist and (unless ``verify`` is off) against the
    data folder's ``SHA256SUMS`` when present (:func:`verify_file`).

    Raises:
        FileNotFoundError: if the data folder or the file is missing (naming both and how
            to point OLAS at the right folder).
        IsADirectoryError: a folder stands where the file should be.
        DataChecksumError: the file is not the one ``SHA256SUMS`` lists.
    """
    root = _resolve_data_dir(data_dir)
    path = root / relpath
    if path.is_dir():
        raise IsADirectoryError(
            f"{dataset}: {path} is a folder, not the data file; put the file itself there "
            "(data/README.md says where each dataset comes from)"
        )
    if not path.is_file():
        raise FileNotFoundError(_missing_file_message(path, root, dataset))
    verify_file(path, dataset, root=root, verify=verify)
    return path


def file_key(path: Path) -> tuple[str, int, int]:
    """Cache key for a file: its path, modification time and size.

    Raises:
        OSError: if the file cannot be stat'ed (e.g. FileNotFoundError).
    """
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size


def to_dataset(columns: Mapping[str, Sequence], features: datasets.Features) -> datasets.Dataset:
    """A fresh in-memory Dataset (Arrow copies the data, so cached columns stay private).

    Raises:
        KeyError: if ``columns`` lacks one of the features.
    """
    return datasets.Dataset.from_dict({k: list(columns[k]) for k in features}, features=features)


def to_columns(rows: Iterable[Mapping], names: Sequence[str]) -> dict[str, tuple]:
    """Turn row dicts into immutable column tuples (rows are consumed as they come, so a reader's
    errors surface here).

    Raises:
        KeyError: if a row lacks one of ``names``.
    """
    cols: dict[str, list] = {n: [] for n in names}
    for row in rows:
        for n in names:
            cols[n].append(row[n])
    return {n: tuple(v) for n, v in cols.items()}
