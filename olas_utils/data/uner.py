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
    RESTORE_HINT,
    STR_SEQ,
    DataFormatError,
    canonical_split,
    data_file,
    file_key,
    text_lines,
    to_columns,
    to_dataset,
)

__all__ = ["load_uner_ewt", "UNER_TYPES"]


_UNER_FEATURES = datasets.Features({"sent_id": datasets.Value("string"), "words": STR_SEQ, "ner_tags": STR_SEQ})
_UNER_TOKEN_LINE = re.compile(r"^\d+\t")


#: UNER v1's entity types: a tag is ``O``, ``B-X`` or ``I-X`` with X one of them.
UNER_TYPES = ("PER", "ORG", "LOC")
_UNER_TAG = re.compile(r"O|[BI]-(" + "|".join(UNER_TYPES) + ")")


def _uner_sentences(path: Path) -> Iterator[dict]:
    """Rows of a UNER ``.iob2`` file.

    Layout (tab-separated): ``index  token  IOB2-tag  -  annotator`` per token line (indices
    1, 2, … within a sentence), ``# sent_id = …`` / ``# text = …`` / ``# newdoc id = …``
    comments, a blank line after each sentence. The last sentence may end the file without
    its blank line only if it is complete: its tokens spell its ``# text`` (spaces aside).

    Raises:
        DataFormatError: a token line without exactly 5 fields, an index out of sequence, a
            tag that is not O, B-X or I-X over :data:`UNER_TYPES`, a file cut inside a sentence,
            or a file without a single sentence (file and 1-based line named).
    """
    sent_id, text, words, tags, n, lineno = None, None, [], [], 0, 0
    for lineno, line in text_lines(path):
        if not line.strip():
            if words:
                yield {"sent_id": sent_id or str(n), "words": tuple(words), "ner_tags": tuple(tags)}
                n += 1
            sent_id, text, words, tags = None, None, [], []
        elif line.startswith("#") and not _UNER_TOKEN_LINE.match(line):
            key, _, value = line[1:].partition("=")
            if key.strip() == "sent_id":
                sent_id = value.strip()
            elif key.strip() == "text":
                text = value.strip()
        else:
            fields = line.split("\t")
            if len(fields) != 5:
                raise DataFormatError(
                    f"{path}:{lineno}: expected 5 tab-separated fields 'index token tag - "
                    f"annotator', got {len(fields)}: {line!r}; {RESTORE_HINT}"
                )
            if fields[0] != str(len(words) + 1):
                raise DataFormatError(
                    f"{path}:{lineno}: token index {fields[0]!r}, expected {len(words) + 1} "
                    f"(a line is missing or out of place); {RESTORE_HINT}"
                )
            if not _UNER_TAG.fullmatch(fields[2]):
                raise DataFormatError(
                    f"{path}:{lineno}: {fields[2]!r} is not a UNER IOB2 tag (O, B-X or I-X with X one of "
                    f"{', '.join(UNER_TYPES)}); {RESTORE_HINT}"
                )
            words.append(fields[1])
            tags.append(fields[2])
    if words or sent_id is not None:
        if text is None or "".join(words) != "".join(text.split()):
            raise DataFormatError(
                f"{path}:{lineno}: the file ends inside a sentence (no closing blank line, and its tokens do not "
                f"spell its '# text'): it looks cut; {RESTORE_HINT}"
            )
        yield {"sent_id": sent_id or str(n), "words": tuple(words), "ner_tags": tuple(tags)}
    elif not n:
        raise DataFormatError(
            f"{path}:{max(lineno, 1)}: the file holds no sentence ("
            + ("it is empty" if not lineno else f"its {lineno} lines hold no token line")
            + f"); {RESTORE_HINT}"
        )


@functools.lru_cache(maxsize=8)
def _parse_uner(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    return to_columns(_uner_sentences(Path(path)), list(_UNER_FEATURES))


_UNER_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}
_UNER_URL = "https://github.com/UniversalNER/UNER_English-EWT"


def load_uner_ewt(
    split: str, data_dir: str | os.PathLike | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
    """Universal NER v1 English-EWT: ``uner_english_ewt/en_ewt-ud-{split}.iob2``.

    Format: tab-separated ``index token tag - annotator`` token lines (IOB2 tags over
    PER, ORG, LOC), ``# sent_id`` / ``# text`` comments, a blank line between sentences.

    Args:
        split: ``"dev"`` (aliases ``"validation"``, ``"val"``; 2,001 sentences) or
            ``"test"`` (2,077). ``"train"`` is read if ``en_ewt-ud-train.iob2`` has been
            downloaded into the folder; the offline copy does not have it.
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.
        verify: check the file against the data folder's ``SHA256SUMS`` (default: True unless
            ``OLAS_DATA_VERIFY=0``); False for a copy you edited on purpose (warns once).

    Returns:
        Columns ``sent_id`` (str, same ids as UD English-EWT), ``words`` (list[str]),
        ``ner_tags`` (list[str], IOB2).

    Raises:
        ValueError: unknown split.
        DataFormatError: a malformed line or a file cut inside a sentence (with file and line).
        DataChecksumError: the file is not the one the data folder's ``SHA256SUMS`` lists.
        FileNotFoundError: the data folder or the split's file is missing; for the train
            split the message says it is not available offline and how to download it.
    """
    canon = canonical_split(split, _UNER_SPLITS, "UNER English-EWT")
    name = f"uner_english_ewt/en_ewt-ud-{canon}.iob2"
    try:
        path = data_file(data_dir, name, "UNER English-EWT", verify)
    except FileNotFoundError as e:
        if canon != "train":
            raise
        raise FileNotFoundError(
            f"{e} The UNER English-EWT train split is not available offline: only dev and "
            f"test ship with the data (en_ewt-ud-train.stats describes the train file). "
            f"With internet access, download en_ewt-ud-train.iob2 from {_UNER_URL} into "
            f"the uner_english_ewt/ folder (recipe in data/README.md)."
        ) from None
    return to_dataset(_parse_uner(*file_key(path)), _UNER_FEATURES)
