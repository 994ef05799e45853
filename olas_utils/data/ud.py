"""CoNLL-U files and the UD English-EWT treebank, read into one row per sentence.

:func:`read_conllu` reads any CoNLL-U file with ``conllu`` (syntactic words only: no
multiword tokens, no empty nodes); :func:`load_ud_ewt` reads a split of
``ud_english_ewt/`` under the data folder. Columns: sent_id, text, words, upos, xpos,
heads (1-based, 0 = root), deprels.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import datasets

from olas_utils.data.files import (
    _INT_SEQ,
    _STR_SEQ,
    _canonical_split,
    _columns,
    _data_file,
    _file_key,
    _to_dataset,
)

__all__ = ["read_conllu", "load_ud_ewt"]


_UD_FEATURES = datasets.Features({
    "sent_id": datasets.Value("string"), "text": datasets.Value("string"), "words": _STR_SEQ,
    "upos": _STR_SEQ, "xpos": _STR_SEQ, "heads": _INT_SEQ, "deprels": _STR_SEQ,
})


def _conllu_row(sentence, index: int, source: str) -> dict:
    """One CoNLL-U sentence as a row of syntactic words (no multiword tokens, no empty nodes).

    Raises:
        ValueError: if a head does not index into the sentence's words.
    """
    words = [tok for tok in sentence if isinstance(tok["id"], int)]
    forms = [tok["form"] for tok in words]
    sent_id = sentence.metadata.get("sent_id", str(index))
    heads = [tok["head"] for tok in words]
    for tok, head in zip(words, heads):
        if not isinstance(head, int) or not 0 <= head <= len(words):
            raise ValueError(f"{source}: sentence {sent_id!r} word {tok['id']} has head "
                             f"{head!r}, not in 0..{len(words)}")
    return {
        "sent_id": sent_id,
        "text": sentence.metadata.get("text", " ".join(forms)),
        "words": tuple(forms),
        "upos": tuple(tok["upos"] or "_" for tok in words),
        "xpos": tuple(tok["xpos"] or "_" for tok in words),
        "heads": tuple(heads),
        "deprels": tuple(tok["deprel"] or "_" for tok in words),
    }


@functools.lru_cache(maxsize=16)
def _parse_conllu(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    import conllu  # imported on first use

    with open(path, encoding="utf-8-sig") as f:
        rows = (_conllu_row(s, i, path) for i, s in enumerate(conllu.parse_incr(f)))
        return _columns(rows, list(_UD_FEATURES))


def read_conllu(path: str | os.PathLike) -> datasets.Dataset:
    """Read any CoNLL-U file (https://universaldependencies.org/format.html) with ``conllu``.

    One row per sentence, holding only the syntactic words: multiword-token lines
    (ids like ``3-4``) and empty nodes (ids like ``8.1``) are skipped.

    Columns:
        sent_id (str): the ``# sent_id`` comment, else the sentence's 0-based index.
        text (str): the ``# text`` comment, else the words joined by spaces.
        words (list[str]): FORM of each word.
        upos, xpos (list[str]): UPOS / XPOS (``"_"`` where unspecified).
        heads (list[int]): HEAD of each word, 1-based word index, 0 = root.
        deprels (list[str]): DEPREL of each word.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if a head does not index into the sentence's words.
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise FileNotFoundError(f"CoNLL-U file {p} not found")
    return _to_dataset(_parse_conllu(*_file_key(p)), _UD_FEATURES)


_EWT_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def load_ud_ewt(split: str, data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """UD English-EWT dependency treebank: ``ud_english_ewt/en_ewt-ud-{split}.conllu``.

    Args:
        split: ``"train"``, ``"dev"`` (aliases ``"validation"``, ``"val"``) or ``"test"``
            (12,544 / 2,001 / 2,077 sentences in the shipped copy).
        data_dir: data folder; see :func:`olas_utils.settings.data_dir`.

    Returns:
        Columns as in :func:`read_conllu`: ``sent_id``, ``text``, ``words``, ``upos``,
        ``xpos``, ``heads`` (1-based, 0 = root), ``deprels``. Multiword tokens and empty
        nodes are skipped.

    Raises:
        ValueError: unknown split.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = _canonical_split(split, _EWT_SPLITS, "UD English-EWT")
    path = _data_file(data_dir, f"ud_english_ewt/en_ewt-ud-{canon}.conllu", "UD English-EWT")
    return _to_dataset(_parse_conllu(*_file_key(path)), _UD_FEATURES)
