"""CoNLL-U files and the UD English-EWT treebank, read into one row per sentence.

:func:`read_conllu` reads any CoNLL-U file with ``conllu`` (syntactic words only: no
multiword tokens, no empty nodes); :func:`load_ud_ewt` reads a split of
``ud_english_ewt/`` under the data folder. Columns: sent_id, text, words, upos, xpos,
heads (1-based, 0 = root), deprels.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterator

import datasets

from olas_utils.data.files import (
    INT_SEQ,
    RESTORE_HINT,
    STR_SEQ,
    DataFormatError,
    canonical_split,
    data_file,
    file_key,
    text_lines,
    to_columns,
    to_dataset,
    verify_file,
)

__all__ = ["read_conllu", "load_ud_ewt"]


_UD_FEATURES = datasets.Features(
    {
        "sent_id": datasets.Value("string"),
        "text": datasets.Value("string"),
        "words": STR_SEQ,
        "upos": STR_SEQ,
        "xpos": STR_SEQ,
        "heads": INT_SEQ,
        "deprels": STR_SEQ,
    }
)


_CONLLU_ID = re.compile(r"\d+|\d+-\d+|\d+\.\d+")
_CONLLU_COLUMNS = "ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC"


def _conllu_blocks(path: Path) -> Iterator[tuple[list[int], list[str], bool]]:
    """``(line numbers, lines, closed)`` of each sentence: its comment and word lines, and
    whether a blank line closed it (only the file's last sentence may lack one).

    Word lines are checked here, before ``conllu`` reads them: 10 tab-separated columns, an ID
    of the form ``3``, ``3-4`` or ``8.1``, syntactic words numbered 1, 2, … and an integer HEAD.

    Raises:
        DataFormatError: naming the file, the 1-based line and what is wrong.
    """
    nums: list[int] = []
    lines: list[str] = []
    expect = 1
    for lineno, line in text_lines(path):
        if not line.strip():
            if lines:
                yield nums, lines, True
            nums, lines, expect = [], [], 1
            continue
        nums.append(lineno)
        lines.append(line)
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise DataFormatError(
                f"{path}:{lineno}: expected the 10 tab-separated CoNLL-U columns "
                f"({_CONLLU_COLUMNS}), got {len(fields)}: {line[:80]!r}; {RESTORE_HINT}"
            )
        if not _CONLLU_ID.fullmatch(fields[0]):
            raise DataFormatError(f"{path}:{lineno}: ID {fields[0]!r} is not N, N-M or N.K; {RESTORE_HINT}")
        if fields[0].isdigit():
            if int(fields[0]) != expect:
                raise DataFormatError(
                    f"{path}:{lineno}: word ID {fields[0]}, expected {expect} (a line is missing "
                    f"or out of place); {RESTORE_HINT}"
                )
            if not fields[6].isdigit():
                raise DataFormatError(
                    f"{path}:{lineno}: HEAD {fields[6]!r} of word {fields[0]} is not a word index; {RESTORE_HINT}"
                )
            expect += 1
    if lines:
        yield nums, lines, False


def _surface_text(lines: list[str]) -> str:
    """The sentence's surface tokens joined without spaces (multiword tokens in place of their words)."""
    covered: set[int] = set()
    out = []
    for line in lines:
        if line.startswith("#"):
            continue
        tid, form = line.split("\t")[:2]
        if "-" in tid:
            a, b = (int(x) for x in tid.split("-"))
            covered.update(range(a, b + 1))
            out.append(form)
        elif tid.isdigit() and int(tid) not in covered:
            out.append(form)
    return "".join(out)


def _conllu_row(sentence, index: int, source: str, nums: list[int]) -> dict:
    """One CoNLL-U sentence as a row of syntactic words (no multiword tokens, no empty nodes).

    Raises:
        DataFormatError: if a head does not index into the sentence's words, or the sentence has none.
    """
    words = [tok for tok in sentence if isinstance(tok["id"], int)]
    if not words:
        raise DataFormatError(f"{source}:{nums[0]}: a sentence without word lines; {RESTORE_HINT}")
    forms = [tok["form"] for tok in words]
    sent_id = sentence.metadata.get("sent_id", str(index))
    heads = [tok["head"] for tok in words]
    for tok, head in zip(words, heads):
        if not isinstance(head, int) or not 0 <= head <= len(words):
            raise DataFormatError(
                f"{source}: sentence {sent_id!r} (line {nums[0]}) word {tok['id']} has head "
                f"{head!r}, not in 0..{len(words)}; {RESTORE_HINT}"
            )
    return {
        "sent_id": sent_id,
        "text": sentence.metadata.get("text", " ".join(forms)),
        "words": tuple(forms),
        "upos": tuple(tok["upos"] or "_" for tok in words),
        "xpos": tuple(tok["xpos"] or "_" for tok in words),
        "heads": tuple(heads),
        "deprels": tuple(tok["deprel"] or "_" for tok in words),
    }


def _conllu_rows(path: Path) -> Iterator[dict]:
    """Rows of a CoNLL-U file, read strictly (see :func:`_conllu_blocks`), each sentence parsed by ``conllu``.

    Raises:
        DataFormatError: a malformed line, a sentence ``conllu`` rejects, or a file that ends
            inside a sentence (its last sentence has no closing blank line, and its words do not
            spell its ``# text`` or it has no root).
    """
    import conllu  # imported on first use

    for index, (nums, lines, closed) in enumerate(_conllu_blocks(path)):
        try:
            sentence = conllu.parse_token_and_metadata("\n".join(lines))
        except (conllu.exceptions.ParseException, KeyError, ValueError, IndexError, TypeError) as e:
            raise DataFormatError(
                f"{path}:{nums[0]}: conllu cannot read the sentence starting here "
                f"({type(e).__name__}: {e}); {RESTORE_HINT}"
            ) from e
        if not closed:
            text = sentence.metadata.get("text")
            spelled = text is None or _surface_text(lines) == "".join(text.split())
            rooted = any(line.split("\t")[6] == "0" for line in lines if not line.startswith("#"))
            if not (spelled and rooted):
                raise DataFormatError(
                    f"{path}:{nums[-1]}: the file ends inside a sentence (no closing blank line, and its words "
                    f"{'do not spell its # text' if not spelled else 'have no root'}): it looks cut; {RESTORE_HINT}"
                )
        yield _conllu_row(sentence, index, str(path), nums)


@functools.lru_cache(maxsize=16)
def _parse_conllu(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    return to_columns(_conllu_rows(Path(path)), list(_UD_FEATURES))


def read_conllu(path: str | os.PathLike, *, verify: bool | None = None) -> datasets.Dataset:
    """Read any CoNLL-U file (https://universaldependencies.org/format.html) with ``conllu``.

    One row per sentence, holding only the syntactic words: multiword-token lines
    (ids like ``3-4``) and empty nodes (ids like ``8.1``) are skipped. Read strictly: every
    word line has the 10 columns, word IDs run 1, 2, …, and a last sentence without its
    closing blank line must be complete (its words spell its ``# text``, it has a root). A
    BOM opening the file is dropped. The file is checked against the nearest ``SHA256SUMS``
    in its folder or one above it, when that listing names it.

    Args:
        path: the ``.conllu`` file.
        verify: False skips the ``SHA256SUMS`` check (warns once); default: True unless
            ``OLAS_DATA_VERIFY=0``.

    Columns:
        sent_id (str): the ``# sent_id`` comment, else the sentence's 0-based index.
        text (str): the ``# text`` comment, else the words joined by spaces.
        words (list[str]): FORM of each word.
        upos, xpos (list[str]): UPOS / XPOS (``"_"`` where unspecified).
        heads (list[int]): HEAD of each word, 1-based word index, 0 = root.
        deprels (list[str]): DEPREL of each word.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        DataFormatError: a malformed line, a head that does not index into the sentence's
            words, or a file cut inside a sentence (file and 1-based line named).
        DataChecksumError: the file is not the one a ``SHA256SUMS`` beside it lists.
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise FileNotFoundError(f"CoNLL-U file {p} not found")
    verify_file(p, "CoNLL-U", verify=verify)
    return to_dataset(_parse_conllu(*file_key(p)), _UD_FEATURES)


_EWT_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def load_ud_ewt(
    split: str, data_dir: str | os.PathLike | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
    """UD English-EWT dependency treebank: ``ud_english_ewt/en_ewt-ud-{split}.conllu``.

    Args:
        split: ``"train"``, ``"dev"`` (aliases ``"validation"``, ``"val"``) or ``"test"``
            (12,544 / 2,001 / 2,077 sentences in the shipped copy).
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.
        verify: check the file against the data folder's ``SHA256SUMS`` (default: True unless
            ``OLAS_DATA_VERIFY=0``); False for a copy you edited on purpose (warns once).

    Returns:
        Columns as in :func:`read_conllu`: ``sent_id``, ``text``, ``words``, ``upos``,
        ``xpos``, ``heads`` (1-based, 0 = root), ``deprels``. Multiword tokens and empty
        nodes are skipped.

    Raises:
        ValueError: unknown split.
        DataFormatError: a malformed line or a file cut inside a sentence (with file and line).
        DataChecksumError: the file is not the one the data folder's ``SHA256SUMS`` lists.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = canonical_split(split, _EWT_SPLITS, "UD English-EWT")
    path = data_file(data_dir, f"ud_english_ewt/en_ewt-ud-{canon}.conllu", "UD English-EWT", verify)
    return to_dataset(_parse_conllu(*file_key(path)), _UD_FEATURES)
