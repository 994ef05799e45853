"""Readers for the datasets OLAS uses, each returning a :class:`datasets.Dataset`.

Every reader of the offline datasets takes ``data_dir=None`` and resolves it with
:func:`olas_utils.settings.data_dir` (argument, then ``$OLAS_DATA_DIR``, then
``../shared/data`` beside the project). ``data/README.md`` documents each dataset's
provenance, licence, file layout and download recipe.

| reader | dataset | splits (aliases) | columns |
|---|---|---|---|
| :func:`load_ud_ewt` | UD English-EWT (CoNLL-U) | train, dev (validation, val), test | sent_id, text, words, upos, xpos, heads, deprels |
| :func:`load_conll2000` | CoNLL-2000 chunking | train, test | words, pos, chunks |
| :func:`load_semeval2010_task8` | SemEval-2010 Task 8 | train, test | id, words, e1_span, e2_span, label, relation, direction |
| :func:`load_uner_ewt` | Universal NER English-EWT (IOB2) | train (not offline), dev (validation, val), test | sent_id, words, ner_tags |
| :func:`load_conll2003` | CoNLL-2003 English NER | train, testa (dev, validation, val), testb (test) | words, pos, chunks, ner_tags, doc_id |
| :func:`load_conll2012_ontonotes` | HF ``conll2012_ontonotesv5`` english_v4 | whatever the given folder holds | document_id, part_id, words, pos_tags, ner_tags |

Parsed files are cached per process (keyed by path, modification time and size); each
call builds a fresh ``Dataset``, so callers never share a mutable object.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import datasets

from olas_utils.settings import data_dir as _resolve_data_dir

__all__ = [
    "SEMEVAL_LABELS",
    "ONTONOTES_NER_LABELS",
    "ONTONOTES_POS_LABELS",
    "iob1_to_iob2",
    "read_conllu",
    "tokenize_semeval",
    "load_ud_ewt",
    "load_conll2000",
    "load_semeval2010_task8",
    "load_uner_ewt",
    "load_conll2003",
    "load_conll2012_ontonotes",
]

# ----------------------------------------------------------------------------------------
# Label inventories
# ----------------------------------------------------------------------------------------

_SEMEVAL_RELATIONS = (
    "Cause-Effect", "Component-Whole", "Content-Container", "Entity-Destination",
    "Entity-Origin", "Instrument-Agency", "Member-Collection", "Message-Topic",
    "Product-Producer",
)

#: The 19 SemEval-2010 Task 8 labels: the 9 relations in alphabetical order, each as
#: ``(e1,e2)`` then ``(e2,e1)``, then ``Other`` last (index 18). This is the order of the
#: Hugging Face ``sem_eval_2010_task_8`` ClassLabel, so integer ids agree with it.
SEMEVAL_LABELS: tuple[str, ...] = tuple(
    f"{rel}{d}" for rel in _SEMEVAL_RELATIONS for d in ("(e1,e2)", "(e2,e1)")
) + ("Other",)

#: The 37 IOB2 named-entity labels of HF ``conll2012_ontonotesv5`` (index = stored int).
ONTONOTES_NER_LABELS: tuple[str, ...] = ("O",) + tuple(
    f"{p}-{t}"
    for t in ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "DATE", "TIME",
              "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL", "EVENT",
              "WORK_OF_ART", "LAW", "LANGUAGE")
    for p in ("B", "I")
)

#: The 49 Penn Treebank POS labels of HF ``conll2012_ontonotesv5`` english_v4
#: (index = stored int). english_v12 uses a different list; data carrying its own
#: ClassLabel names (arrow / parquet / ``save_to_disk`` folders) is decoded with those.
ONTONOTES_POS_LABELS: tuple[str, ...] = (
    "XX", "``", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "ADD", "AFX", "CC", "CD", "DT",
    "EX", "FW", "HYPH", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NFP", "NN", "NNP", "NNPS",
    "NNS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB",
    "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
)

_STR_SEQ = datasets.List(datasets.Value("string"))
_INT_SEQ = datasets.List(datasets.Value("int64"))

# ----------------------------------------------------------------------------------------
# Shared helpers: splits, files, caching
# ----------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------
# CoNLL-U (UD English-EWT)
# ----------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------
# Whitespace-column files (CoNLL-2000, CoNLL-2003)
# ----------------------------------------------------------------------------------------


def _column_sentences(path: Path, n_fields: int) -> Iterator[tuple[int, list[list[str]]]]:
    """Yield ``(doc_index, token_fields)`` per sentence of a blank-line separated column file.

    ``-DOCSTART-`` lines start a new document (0-based index; sentences before any
    ``-DOCSTART-`` belong to document 0) and are not sentences themselves.

    Raises:
        ValueError: if a token line does not have ``n_fields`` whitespace-separated fields.
    """
    doc, tokens = -1, []
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if tokens:
                    yield doc, tokens
                    tokens = []
                if fields:
                    doc += 1
                continue
            if len(fields) != n_fields:
                raise ValueError(f"{path}:{lineno}: expected {n_fields} fields, got "
                                 f"{len(fields)}: {line.rstrip()!r}")
            doc = max(doc, 0)
            tokens.append(fields)
    if tokens:
        yield doc, tokens


_CONLL2000_FEATURES = datasets.Features({"words": _STR_SEQ, "pos": _STR_SEQ, "chunks": _STR_SEQ})


@functools.lru_cache(maxsize=16)
def _parse_conll2000(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    rows = (
        {"words": tuple(t[0] for t in toks), "pos": tuple(t[1] for t in toks),
         "chunks": tuple(t[2] for t in toks)}
        for _, toks in _column_sentences(Path(path), 3)
    )
    return _columns(rows, list(_CONLL2000_FEATURES))


def load_conll2000(split: str, data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """CoNLL-2000 chunking data (WSJ): ``conll2000/{train,test}.txt``.

    Format: one ``word POS chunk`` line per token, a blank line between sentences
    (https://www.clips.uantwerpen.be/conll2000/chunking/).

    Args:
        split: ``"train"`` (8,936 sentences, 211,727 tokens) or ``"test"`` (2,012, 47,377).
        data_dir: data folder; see :func:`olas_utils.settings.data_dir`.

    Returns:
        Columns ``words``, ``pos`` (Penn Treebank tags), ``chunks`` (IOB2 chunk tags such
        as ``B-NP``), each list[str].

    Raises:
        ValueError: unknown split, or a malformed line.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = _canonical_split(split, {"train": "train", "test": "test"}, "CoNLL-2000")
    path = _data_file(data_dir, f"conll2000/{canon}.txt", "CoNLL-2000")
    return _to_dataset(_parse_conll2000(*_file_key(path)), _CONLL2000_FEATURES)


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


_CONLL2003_FEATURES = datasets.Features({
    "words": _STR_SEQ, "pos": _STR_SEQ, "chunks": _STR_SEQ, "ner_tags": _STR_SEQ,
    "doc_id": datasets.Value("int64"),
})


@functools.lru_cache(maxsize=16)
def _parse_conll2003(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    rows = (
        {"words": tuple(t[0] for t in toks), "pos": tuple(t[1] for t in toks),
         "chunks": tuple(t[2] for t in toks),
         "ner_tags": tuple(iob1_to_iob2([t[3] for t in toks])), "doc_id": doc}
        for doc, toks in _column_sentences(Path(path), 4)
    )
    return _columns(rows, list(_CONLL2003_FEATURES))


_CONLL2003_SPLITS = {
    "train": "train", "testa": "testa", "dev": "testa", "validation": "testa", "val": "testa",
    "testb": "testb", "test": "testb",
}


def load_conll2003(split: str, data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """CoNLL-2003 English NER: ``conll2003/eng.{train,testa,testb}``.

    Format: ``word POS chunk NER`` per token line (chunk and NER tags in IOB1), a blank
    line between sentences, ``-DOCSTART- -X- O O`` lines between documents
    (https://www.clips.uantwerpen.be/conll2003/ner/).

    Args:
        split: ``"train"`` (14,041 sentences), ``"testa"`` (aliases ``"dev"``,
            ``"validation"``, ``"val"``; 3,250) or ``"testb"`` (alias ``"test"``; 3,453).
        data_dir: data folder; see :func:`olas_utils.settings.data_dir`.

    Returns:
        Columns ``words``, ``pos`` (Penn tags), ``chunks`` (as in the file, IOB1),
        ``ner_tags`` (converted to IOB2 with :func:`iob1_to_iob2`; types PER, ORG, LOC,
        MISC), each list[str]; ``doc_id`` (int): 0-based index of the sentence's document
        within the split file, so consecutive rows with equal ``doc_id`` form one document.
        ``-DOCSTART-`` lines are not rows.

    Raises:
        ValueError: unknown split, or a malformed line.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = _canonical_split(split, _CONLL2003_SPLITS, "CoNLL-2003")
    path = _data_file(data_dir, f"conll2003/eng.{canon}", "CoNLL-2003")
    return _to_dataset(_parse_conll2003(*_file_key(path)), _CONLL2003_FEATURES)


# ----------------------------------------------------------------------------------------
# SemEval-2010 Task 8
# ----------------------------------------------------------------------------------------

_SEMEVAL_TAG = re.compile(r"(</?e[12]>)")
_SEMEVAL_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|'s\b|[^\w\s]")
_SEMEVAL_HEADER = re.compile(r'^(\d+)\t"(.*)"\s*$')
_SEMEVAL_LABEL = re.compile(r"^(.+)(\(e1,e2\)|\(e2,e1\))$")


def tokenize_semeval(sentence: str) -> tuple[list[str], tuple[int, int], tuple[int, int]]:
    """Split a SemEval-2010 Task 8 sentence into words and locate its two entities.

    Tokenisation rule: the entity tags ``<e1> </e1> <e2> </e2>`` are removed and always
    act as word boundaries; each stretch of text between them is split into

    * words: runs of letters/digits/underscore, which may be joined by single inner
      hyphens, apostrophes or periods (``e-mail``, ``Hideyoshi's``, ``don't``, ``3.5``);
    * the clitic ``'s`` when it directly follows an entity (``<e1>factory</e1>'s`` gives
      ``factory``, ``'s``);
    * every other non-space character as its own token (``,`` ``.`` ``"`` ``(`` ``$``...).

    Args:
        sentence: the sentence without its surrounding double quotes.

    Returns:
        ``(words, e1_span, e2_span)``; spans are ``[start, end)`` word indices.

    Raises:
        ValueError: unless each of ``<e1>…</e1>`` and ``<e2>…</e2>`` occurs exactly once,
            properly opened and closed, around at least one word.
    """
    words: list[str] = []
    starts: dict[str, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    for piece in _SEMEVAL_TAG.split(sentence):
        if _SEMEVAL_TAG.fullmatch(piece):
            name = piece.strip("</>")
            if not piece.startswith("</"):
                if name in starts or name in spans:
                    raise ValueError(f"entity <{name}> opened twice in {sentence!r}")
                starts[name] = len(words)
            else:
                if name not in starts:
                    raise ValueError(f"</{name}> without <{name}> in {sentence!r}")
                spans[name] = (starts.pop(name), len(words))
        else:
            words.extend(_SEMEVAL_TOKEN.findall(piece))
    if starts or set(spans) != {"e1", "e2"} or any(s >= e for s, e in spans.values()):
        raise ValueError(f"expected one non-empty <e1> and <e2> entity in {sentence!r}")
    return words, spans["e1"], spans["e2"]


def _semeval_label_parts(label: str) -> tuple[str, str | None]:
    """``"Cause-Effect(e2,e1)"`` → ``("Cause-Effect", "(e2,e1)")``; ``"Other"`` → ``("Other", None)``."""
    if label not in SEMEVAL_LABELS:
        raise ValueError(f"unknown SemEval-2010 Task 8 label {label!r}")
    m = _SEMEVAL_LABEL.match(label)
    return (m.group(1), m.group(2)) if m else (label, None)


def _semeval_blocks(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first_line_number, lines)`` for each blank-line separated block."""
    block, start = [], 0
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if line.strip():
                if not block:
                    start = lineno
                block.append(line)
            elif block:
                yield start, block
                block = []
    if block:
        yield start, block


def _semeval_row(path: Path, lineno: int, block: list[str]) -> dict:
    """Parse one example block (header line, label line, optional comment line)."""
    header = _SEMEVAL_HEADER.match(block[0])
    if header is None or len(block) < 2:
        raise ValueError(f"{path}:{lineno}: expected 'ID<TAB>\"sentence\"' then a label "
                         f"line, got {block[:2]!r}")
    label = block[1].strip()
    try:
        words, e1, e2 = tokenize_semeval(header.group(2))
        relation, direction = _semeval_label_parts(label)
    except ValueError as e:
        raise ValueError(f"{path}:{lineno}: {e}") from e
    return {"id": header.group(1), "words": tuple(words), "e1_span": e1, "e2_span": e2,
            "label": label, "relation": relation, "direction": direction}


_SEMEVAL_FEATURES = datasets.Features({
    "id": datasets.Value("string"), "words": _STR_SEQ, "e1_span": _INT_SEQ, "e2_span": _INT_SEQ,
    "label": datasets.Value("string"), "relation": datasets.Value("string"),
    "direction": datasets.Value("string"),
})


@functools.lru_cache(maxsize=8)
def _parse_semeval(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    p = Path(path)
    rows = (_semeval_row(p, n, b) for n, b in _semeval_blocks(p))
    return _columns(rows, list(_SEMEVAL_FEATURES))


_SEMEVAL_FILES = {
    "train": "semeval2010_task8/SemEval2010_task8_training/TRAIN_FILE.TXT",
    "test": "semeval2010_task8/SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT",
}


def load_semeval2010_task8(split: str, data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """SemEval-2010 Task 8 relation classification (full release).

    Files: train ``SemEval2010_task8_training/TRAIN_FILE.TXT`` (8,000 examples), test
    ``SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT`` (2,717; directed gold labels),
    under ``semeval2010_task8/``. Each example is ``ID<TAB>"sentence with <e1>…</e1> and
    <e2>…</e2>"``, a label line, a ``Comment:`` line and a blank line (CRLF line ends).

    Args:
        split: ``"train"`` or ``"test"``.
        data_dir: data folder; see :func:`olas_utils.settings.data_dir`.

    Returns:
        Columns ``id`` (str, the example number), ``words`` (list[str], tokenised by
        :func:`tokenize_semeval`, entity tags removed), ``e1_span`` / ``e2_span`` (``[start,
        end)`` word indices of the entities), ``label`` (one of :data:`SEMEVAL_LABELS`,
        e.g. ``"Cause-Effect(e2,e1)"``), ``relation`` (undirected, e.g. ``"Cause-Effect"``
        or ``"Other"``), ``direction`` (``"(e1,e2)"``, ``"(e2,e1)"``, or None for Other).

    Raises:
        ValueError: unknown split, or a malformed example (with file and line).
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = _canonical_split(split, {"train": "train", "test": "test"}, "SemEval-2010 Task 8")
    path = _data_file(data_dir, _SEMEVAL_FILES[canon], "SemEval-2010 Task 8")
    return _to_dataset(_parse_semeval(*_file_key(path)), _SEMEVAL_FEATURES)


# ----------------------------------------------------------------------------------------
# Universal NER English-EWT
# ----------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------
# CoNLL-2012 OntoNotes 5.0 (Hugging Face conll2012_ontonotesv5 layout)
# ----------------------------------------------------------------------------------------

_ONTONOTES_FEATURES = datasets.Features({
    "document_id": datasets.Value("string"), "part_id": datasets.Value("int64"),
    "words": _STR_SEQ, "pos_tags": _STR_SEQ, "ner_tags": _STR_SEQ,
})
_ONTONOTES_SPLIT_NAMES = {
    "train": ("train",), "validation": ("validation", "dev", "valid"), "test": ("test",),
}
_ONTONOTES_SPLITS = {"train": "train", "validation": "validation", "dev": "validation",
                     "valid": "validation", "val": "validation", "test": "test"}
_DATA_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".arrow": "arrow"}


def _inner_feature(feature):
    """Strip list / sequence wrappers off a ``datasets`` feature."""
    while True:
        if isinstance(feature, (list, tuple)) and feature:
            feature = feature[0]
        elif hasattr(feature, "feature"):
            feature = feature.feature
        else:
            return feature


def _label_names(features: datasets.Features | None, field: str) -> tuple[str, ...] | None:
    """ClassLabel names of ``sentences[].<field>[]`` in ``features``, if it has them."""
    if not features or "sentences" not in features:
        return None
    sentence = _inner_feature(features["sentences"])
    try:
        label = _inner_feature(sentence[field])
    except (KeyError, TypeError):
        return None
    return tuple(label.names) if isinstance(label, datasets.ClassLabel) else None


def _decode_labels(values: Sequence, names: Sequence[str], field: str, doc_id: str) -> tuple[str, ...]:
    """Integer ClassLabel ids → names (strings are kept as they are).

    Raises:
        ValueError: for an id outside the label list.
    """
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, int) and 0 <= v < len(names):
            out.append(names[v])
        else:
            raise ValueError(f"document {doc_id!r}: {field} value {v!r} is not an index into "
                             f"the {len(names)}-label list (english_v4 expected)")
    return tuple(out)


def _ontonotes_rows(documents: Iterable[Mapping], pos_names: Sequence[str],
                    ner_names: Sequence[str]) -> Iterator[dict]:
    """Flatten HF conll2012 documents to one row per sentence."""
    for doc in documents:
        doc_id = str(doc["document_id"])
        for sent in doc["sentences"]:
            words = tuple(sent["words"])
            pos = _decode_labels(sent["pos_tags"], pos_names, "pos_tags", doc_id)
            ner = _decode_labels(sent["named_entities"], ner_names, "named_entities", doc_id)
            if not len(words) == len(pos) == len(ner):
                raise ValueError(f"document {doc_id!r}: words, pos_tags and named_entities "
                                 f"differ in length ({len(words)}, {len(pos)}, {len(ner)})")
            yield {"document_id": doc_id, "part_id": int(sent.get("part_id") or 0),
                   "words": words, "pos_tags": pos, "ner_tags": ner}


def _read_json_documents(path: Path) -> list[dict]:
    """Documents from a JSON-lines file (one document per line) or a JSON array file."""
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _split_of_file(path: Path) -> set[str]:
    """Which split names (train / validation / test) a data file's name mentions."""
    stem = path.name.lower()
    return {
        split for split, names in _ONTONOTES_SPLIT_NAMES.items()
        if any(re.search(rf"(^|[^a-z]){n}([^a-z]|$)", stem) for n in names)
    }


def _ontonotes_data_files(folder: Path, split: str | None) -> list[Path]:
    """The data files of one split in ``folder`` (all of them when ``split`` is None).

    Raises:
        FileNotFoundError: no JSON / parquet / arrow file (of that split) in the folder.
        ValueError: files of several splits and no ``split`` given, or mixed formats.
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in _DATA_SUFFIXES
                   and p.name not in ("dataset_info.json", "state.json", "dataset_dict.json"))
    if split is not None:
        files = [p for p in files if split in _split_of_file(p)]
    if not files:
        what = f"{split} " if split else ""
        raise FileNotFoundError(f"no {what}data files (*.jsonl, *.json, *.parquet, *.arrow) in "
                                f"{folder}; point at a conll2012_ontonotesv5 split file or folder")
    seen = set().union(*(_split_of_file(p) for p in files))
    if split is None and len(seen) > 1:
        raise ValueError(f"{folder} holds files of several splits ({sorted(seen)}); "
                         f"pass split=... or point at one split's file")
    if len({_DATA_SUFFIXES[p.suffix] for p in files}) > 1:
        raise ValueError(f"{folder} mixes data formats ({[p.name for p in files]}); keep one")
    return files


def _load_hf_saved(folder: Path, split: str | None) -> datasets.Dataset:
    """A ``save_to_disk`` folder (Dataset, or DatasetDict with ``split`` chosen)."""
    loaded = datasets.load_from_disk(str(folder))
    if isinstance(loaded, datasets.DatasetDict):
        if split is None or split not in loaded:
            raise ValueError(f"{folder} is a DatasetDict with splits {sorted(loaded)}; "
                             f"pass split= one of them")
        return loaded[split]
    return loaded


def _ontonotes_documents(path: Path, split: str | None) -> tuple[Iterable[Mapping], datasets.Features | None]:
    """Documents and (if recorded) their features from a file or folder."""
    if path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        ds = _load_hf_saved(path, split)
        return ds, ds.features
    files = [path] if path.is_file() else _ontonotes_data_files(path, split)
    kind = _DATA_SUFFIXES.get(files[0].suffix)
    if kind == "json":
        return [d for f in files for d in _read_json_documents(f)], None
    if kind == "arrow":
        parts = [datasets.Dataset.from_file(str(f)) for f in files]
        return [d for ds in parts for d in ds], parts[0].features
    if kind == "parquet":
        import pyarrow.parquet as pq

        tables = [pq.read_table(f) for f in files]
        features = datasets.Features.from_arrow_schema(tables[0].schema)
        return [d for t in tables for d in t.to_pylist()], features
    raise ValueError(f"{path}: unsupported file type (expected .jsonl, .json, .parquet or .arrow)")


def load_conll2012_ontonotes(path_or_split_dir: str | os.PathLike,
                             split: str | None = None) -> datasets.Dataset:
    """CoNLL-2012 OntoNotes 5.0 NER in the Hugging Face ``conll2012_ontonotesv5`` layout.

    OntoNotes is LDC-licensed and not part of the offline data; this reads a copy users
    made with ``datasets`` (english_v4 config, see data/README.md). Each stored example is
    a document ``{"document_id": str, "sentences": [{"part_id", "words", "pos_tags",
    "parse_tree", "predicate_lemmas", "predicate_framenet_ids", "word_senses", "speaker",
    "named_entities", "srl_frames", "coref_spans"}, ...]}`` with ``pos_tags`` and
    ``named_entities`` stored as ClassLabel ints.

    Args:
        path_or_split_dir: one of
            * a ``Dataset.save_to_disk`` folder (``state.json`` + arrow files), or a
              ``DatasetDict.save_to_disk`` folder (``dataset_dict.json``; needs ``split``);
            * a folder of ``*.jsonl`` / ``*.json`` (JSON lines, one document per line, or a
              JSON array), ``*.parquet`` or ``*.arrow`` files, e.g. as written by
              ``Dataset.to_json`` / ``to_parquet`` or the ``datasets`` cache;
            * a single such file.
        split: for folders holding several splits: ``"train"``, ``"validation"`` (aliases
            ``"dev"``, ``"valid"``, ``"val"``) or ``"test"``; files are chosen by that name
            appearing in their file name (``train.jsonl``, ``validation-00000-of-00001.parquet``).

    Returns:
        One row per sentence, in document order: ``document_id`` (str), ``part_id`` (int),
        ``words``, ``pos_tags`` (Penn tags), ``ner_tags`` (IOB2 strings over the 18
        OntoNotes types), each list[str]. Integer labels are decoded with the ClassLabel
        names stored with the data when present, else :data:`ONTONOTES_POS_LABELS` /
        :data:`ONTONOTES_NER_LABELS` (english_v4).

    Raises:
        FileNotFoundError: the path does not exist or holds no data files.
        ValueError: unknown split; several splits and no ``split``; an integer label
            outside the label list; unequal words / tags lengths.
    """
    path = Path(path_or_split_dir).expanduser().resolve()
    if not path.exists():
        raise FileNotFoundError(
            f"CoNLL-2012 OntoNotes data {path} not found. OntoNotes is not in the offline "
            f"data; pass the folder or file of an HF conll2012_ontonotesv5 (english_v4) copy "
            f"(see data/README.md)")
    canon = None if split is None else _canonical_split(split, _ONTONOTES_SPLITS, "CoNLL-2012")
    documents, features = _ontonotes_documents(path, canon)
    pos_names = _label_names(features, "pos_tags") or ONTONOTES_POS_LABELS
    ner_names = _label_names(features, "named_entities") or ONTONOTES_NER_LABELS
    rows = _ontonotes_rows(documents, pos_names, ner_names)
    return _to_dataset(_columns(rows, list(_ONTONOTES_FEATURES)), _ONTONOTES_FEATURES)
