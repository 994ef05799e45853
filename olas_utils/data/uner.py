"""Universal NER v1 English-EWT: the ``.iob2`` files, one row of words and IOB2 tags per sentence.

:func:`load_uner_ewt` reads ``uner_english_ewt/`` under the data folder (dev and test ship
offline; train only after downloading it), with the same sentence ids as UD English-EWT.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterator

import datasets

from olas_utils.data.files import (
    _STR_SEQ,
    _canonical_split,
    _columns,
    _data_file,
    _file_key,
    _open_text,
    _to_dataset,
)

__all__ = ["load_uner_ewt"]


_UNER_FEATURES = datasets.Features(
    {"sent_id": datasets.Value("string"), "words": _STR_SEQ, "ner_tags": _STR_SEQ}
)
_UNER_TOKEN_LINE = re.compile(r"^\d+\t")


def _uner_sentences(path: Path) -> Iterator[dict]:
    """Rows of a UNER ``.iob2`` file.

    Layout (tab-separated): ``index  token  IOB2-tag  -  annotator`` per token line,
    ``# sent_id = …`` / ``# text = …`` / ``# newdoc id = …`` comments, a blank line after
    each sentence.

    Raises:
        ValueError: for a token line with fewer than 3 fields.
    """
    sent_id, words, tags, n = None, [], [], 0
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                if words:
                    yield {"sent_id": sent_id or str(n), "words": tuple(words), "ner_tags": tuple(tags)}
                    sent_id, words, tags, n = None, [], [], n + 1
            elif line.startswith("#") and not _UNER_TOKEN_LINE.match(line):
                key, _, value = line[1:].partition("=")
                if key.strip() == "sent_id":
                    sent_id = value.strip()
            else:
                fields = line.split("\t")
                if len(fields) < 3:
                    raise ValueError(f"{path}:{lineno}: expected 'index<TAB>token<TAB>tag…', "
                                     f"got {line!r}")
                words.append(fields[1])
                tags.append(fields[2])
    if words:
        yield {"sent_id": sent_id or str(n), "words": tuple(words), "ner_tags": tuple(tags)}


@functools.lru_cache(maxsize=8)
def _parse_uner(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    return _columns(_uner_sentences(Path(path)), list(_UNER_FEATURES))


_UNER_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
_UNER_URL = "https://github.com/UniversalNER/UNER_English-EWT"


def load_uner_ewt(split: str, data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """Universal NER v1 English-EWT: ``uner_english_ewt/en_ewt-ud-{split}.iob2``.

    Format: tab-separated ``index token tag - annotator`` token lines (IOB2 tags over
    PER, ORG, LOC), ``# sent_id`` / ``# text`` comments, a blank line between sentences.

    Args:
        split: ``"dev"`` (aliases ``"validation"``, ``"val"``; 2,001 sentences) or
            ``"test"`` (2,077). ``"train"`` is read if ``en_ewt-ud-train.iob2`` has been
            downloaded into the folder; the offline copy does not have it.
        data_dir: data folder; see :func:`olas_utils.settings.data_dir`.

    Returns:
        Columns ``sent_id`` (str, same ids as UD English-EWT), ``words`` (list[str]),
        ``ner_tags`` (list[str], IOB2).

    Raises:
        ValueError: unknown split, or a malformed line.
        FileNotFoundError: the data folder or the split's file is missing; for the train
            split the message says it is not available offline and how to download it.
    """
    canon = _canonical_split(split, _UNER_SPLITS, "UNER English-EWT")
    name = f"uner_english_ewt/en_ewt-ud-{canon}.iob2"
    try:
        path = _data_file(data_dir, name, "UNER English-EWT")
    except FileNotFoundError as e:
        if canon != "train":
            raise
        raise FileNotFoundError(
            f"{e} The UNER English-EWT train split is not available offline: only dev and "
            f"test ship with the data (en_ewt-ud-train.stats describes the train file). "
            f"With internet access, download en_ewt-ud-train.iob2 from {_UNER_URL} into "
            f"the uner_english_ewt/ folder (recipe in data/README.md)."
        ) from None
    return _to_dataset(_parse_uner(*_file_key(path)), _UNER_FEATURES)
