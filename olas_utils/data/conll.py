"""The whitespace-column datasets: CoNLL-2000 chunking and CoNLL-2003 English NER.

Both are blank-line separated ``word POS chunk [NER]`` files under the data folder
(:func:`load_conll2000`, :func:`load_conll2003`, the latter with ``doc_id`` from its
``-DOCSTART-`` lines); :func:`iob1_to_iob2` converts CoNLL-2003's IOB1 tags to IOB2.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterator, Sequence

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

__all__ = ["load_conll2000", "iob1_to_iob2", "load_conll2003", "PTB_POS_TAGS"]

#: Penn Treebank part-of-speech tags (the 45 of the WSJ tagging guidelines, with the ``"`` and
#: ``-LRB-`` / ``-RRB-`` spellings some releases use): the POS column of CoNLL-2000 and CoNLL-2003
#: is checked against them (CoNLL-2003 also has the ambiguous ``NN|SYM``), checksum or not.
PTB_POS_TAGS = frozenset(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH "
    "VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB # $ . , : ( ) `` '' \" -LRB- -RRB-".split()
)
_CONLL2003_POS = PTB_POS_TAGS | {"NN|SYM"}


_CHUNK_TAG = re.compile(r"O|[BI]-(NP|VP|PP|ADVP|ADJP|SBAR|PRT|CONJP|INTJ|LST|UCP)")
_NER_TAG = re.compile(r"O|[BI]-(PER|ORG|LOC|MISC)")


def _column_sentences(
    path: Path, n_fields: int, pos_tags: frozenset[str] = PTB_POS_TAGS
) -> Iterator[tuple[int, list[list[str]]]]:
    """Yield ``(doc_index, token_fields)`` per sentence of a blank-line separated column file.

    ``-DOCSTART-`` lines start a new document (0-based index; sentences before any
    ``-DOCSTART-`` belong to document 0) and are not sentences themselves. Checked strictly:
    each token line has ``n_fields`` fields and its chunk tag (field 3) and, with 4 fields, its
    NER tag are whole CoNLL tags (no tag type is the start of another, so a line cut inside
    its last field is refused), and its POS tag (field 2) one of ``pos_tags``. The last sentence
    may end the file without a blank line. A file cut between two lines still reads as a smaller
    file: only the data folder's ``SHA256SUMS`` (checked by the loaders) tells it from the
    original; a file without a single sentence is refused.

    Raises:
        DataFormatError: a line breaking these rules, or no sentence at all, naming the file and
            the 1-based line.
    """
    doc, tokens, lineno, n = -1, [], 0, 0
    for lineno, line in text_lines(path):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if tokens:
                yield doc, tokens
                tokens, n = [], n + 1
            if fields:
                doc += 1
            continue
        if len(fields) != n_fields:
            raise DataFormatError(
                f"{path}:{lineno}: expected {n_fields} fields, got {len(fields)}: {line.rstrip()!r}; {RESTORE_HINT}"
            )
        bad = [t for t, rx in zip(fields[2:], (_CHUNK_TAG, _NER_TAG)) if not rx.fullmatch(t)]
        if bad:
            raise DataFormatError(
                f"{path}:{lineno}: {bad[0]!r} is not a CoNLL chunk / NER tag (O, B-X or I-X): "
                f"{line.rstrip()!r}; {RESTORE_HINT}"
            )
        if fields[1] not in pos_tags:
            raise DataFormatError(
                f"{path}:{lineno}: {fields[1]!r} is not a Penn Treebank part-of-speech tag "
                f"(olas_utils.data.conll.PTB_POS_TAGS): {line.rstrip()!r}; {RESTORE_HINT}"
            )
        doc = max(doc, 0)
        tokens.append(fields)
    if tokens:
        yield doc, tokens
    elif not n:
        raise DataFormatError(
            f"{path}:{max(lineno, 1)}: the file holds no sentence ("
            + ("it is empty" if not lineno else f"its {lineno} lines are blank or -DOCSTART- lines")
            + f"); {RESTORE_HINT}"
        )


_CONLL2000_FEATURES = datasets.Features({"words": STR_SEQ, "pos": STR_SEQ, "chunks": STR_SEQ})


@functools.lru_cache(maxsize=16)
def _parse_conll2000(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    rows = (
        {"words": tuple(t[0] for t in toks), "pos": tuple(t[1] for t in toks), "chunks": tuple(t[2] for t in toks)}
        for _, toks in _column_sentences(Path(path), 3)
    )
    return to_columns(rows, list(_CONLL2000_FEATURES))


def load_conll2000(
    split: str, data_dir: str | os.PathLike | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
    """CoNLL-2000 chunking data (WSJ): ``conll2000/{train,test}.txt``.

    Format: one ``word POS chunk`` line per token, a blank line between sentences
    (https://www.clips.uantwerpen.be/conll2000/chunking/).

    Args:
        split: ``"train"`` (8,936 sentences, 211,727 tokens) or ``"test"`` (2,012, 47,377).
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.
        verify: check the file against the data folder's ``SHA256SUMS`` (default: True unless
            ``OLAS_DATA_VERIFY=0``); False for a copy you edited on purpose (warns once).

    Returns:
        Columns ``words``, ``pos`` (Penn Treebank tags), ``chunks`` (IOB2 chunk tags such
        as ``B-NP``), each list[str].

    Raises:
        ValueError: unknown split.
        DataFormatError: a malformed line, e.g. one cut mid-way (with file and line).
        DataChecksumError: the file is not the one the data folder's ``SHA256SUMS`` lists.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = canonical_split(split, {"train": "train", "test": "test"}, "CoNLL-2000")
    path = data_file(data_dir, f"conll2000/{canon}.txt", "CoNLL-2000", verify)
    return to_dataset(_parse_conll2000(*file_key(path)), _CONLL2000_FEATURES)


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Convert one sentence's IOB1 tags to IOB2.

    In IOB1 an entity normally starts with ``I-X``; ``B-X`` is used only for an entity
    that directly follows another entity of the same type. In IOB2 every entity starts
    with ``B-X``. Rule: ``I-X`` becomes ``B-X`` when it starts an entity, i.e. at the
    start of the sentence, after ``O``, or after a tag of another type (``B-Y``/``I-Y``,
    Y != X); every other tag (``O``, ``B-X``, a continuing ``I-X``) is kept. The
    conversion is idempotent (IOB2 input is returned unchanged).

    Example: ``I-PER I-PER O I-LOC I-ORG B-ORG I-ORG`` →
    ``B-PER I-PER O B-LOC B-ORG B-ORG I-ORG``.

    Raises:
        ValueError: if a tag is neither ``O`` nor ``B-<type>`` / ``I-<type>``.
    """
    out: list[str] = []
    prev_type = None
    for i, tag in enumerate(tags):
        if tag == "O":
            out.append(tag)
            prev_type = None
            continue
        prefix, sep, etype = tag.partition("-")
        if prefix not in ("B", "I") or not sep or not etype:
            raise ValueError(f"tag {i} {tag!r} is not O, B-<type> or I-<type>")
        out.append(f"B-{etype}" if prefix == "I" and etype != prev_type else tag)
        prev_type = etype
    return out


_CONLL2003_FEATURES = datasets.Features(
    {
        "words": STR_SEQ,
        "pos": STR_SEQ,
        "chunks": STR_SEQ,
        "ner_tags": STR_SEQ,
        "doc_id": datasets.Value("int64"),
    }
)


@functools.lru_cache(maxsize=16)
def _parse_conll2003(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    rows = (
        {
            "words": tuple(t[0] for t in toks),
            "pos": tuple(t[1] for t in toks),
            "chunks": tuple(t[2] for t in toks),
            "ner_tags": tuple(iob1_to_iob2([t[3] for t in toks])),
            "doc_id": doc,
        }
        for doc, toks in _column_sentences(Path(path), 4, _CONLL2003_POS)
    )
    return to_columns(rows, list(_CONLL2003_FEATURES))


_CONLL2003_SPLITS = {
    "train": "train",
    "testa": "testa",
    "dev": "testa",
    "validation": "testa",
    "val": "testa",
    "testb": "testb",
    "test": "testb",
}


def load_conll2003(
    split: str, data_dir: str | os.PathLike | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
    """CoNLL-2003 English NER: ``conll2003/eng.{train,testa,testb}``.

    Format: ``word POS chunk NER`` per token line (chunk and NER tags in IOB1), a blank
    line between sentences, ``-DOCSTART- -X- O O`` lines between documents
    (https://www.clips.uantwerpen.be/conll2003/ner/).

    Args:
        split: ``"train"`` (14,041 sentences), ``"testa"`` (aliases ``"dev"``,
            ``"validation"``, ``"val"``; 3,250) or ``"testb"`` (alias ``"test"``; 3,453).
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.
        verify: check the file against the data folder's ``SHA256SUMS`` (default: True unless
            ``OLAS_DATA_VERIFY=0``); False for a copy you edited on purpose (warns once).

    Returns:
        Columns ``words``, ``pos`` (Penn tags), ``chunks`` (as in the file, IOB1),
        ``ner_tags`` (converted to IOB2 with :func:`iob1_to_iob2`; types PER, ORG, LOC,
        MISC), each list[str]; ``doc_id`` (int): 0-based index of the sentence's document
        within the split file, so consecutive rows with equal ``doc_id`` form one document.
        ``-DOCSTART-`` lines are not rows.

    Raises:
        ValueError: unknown split.
        DataFormatError: a malformed line, e.g. one cut mid-way (with file and line).
        DataChecksumError: the file is not the one the data folder's ``SHA256SUMS`` lists.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = canonical_split(split, _CONLL2003_SPLITS, "CoNLL-2003")
    path = data_file(data_dir, f"conll2003/eng.{canon}", "CoNLL-2003", verify)
    return to_dataset(_parse_conll2003(*file_key(path)), _CONLL2003_FEATURES)
