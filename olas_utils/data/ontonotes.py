"""CoNLL-2012 OntoNotes 5.0 NER from a user's copy in the Hugging Face ``conll2012_ontonotesv5`` layout.

OntoNotes is LDC-licensed and not in the offline data. Holds the english_v4 label lists and
flattens documents (JSON, parquet, arrow or ``save_to_disk`` folders) to one row per sentence.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import datasets

from olas_utils.data.files import STR_SEQ, canonical_split, to_columns, to_dataset, verify_enabled, verify_file

__all__ = ["ONTONOTES_NER_LABELS", "ONTONOTES_POS_LABELS", "load_conll2012_ontonotes"]


#: The 37 IOB2 named-entity labels of HF ``conll2012_ontonotesv5`` (index = stored int).
ONTONOTES_NER_LABELS: tuple[str, ...] = ("O",) + tuple(
    f"{p}-{t}"
    for t in (
        "PERSON",
        "NORP",
        "FAC",
        "ORG",
        "GPE",
        "LOC",
        "PRODUCT",
        "DATE",
        "TIME",
        "PERCENT",
        "MONEY",
        "QUANTITY",
        "ORDINAL",
        "CARDINAL",
        "EVENT",
        "WORK_OF_ART",
        "LAW",
        "LANGUAGE",
    )
    for p in ("B", "I")
)

#: The 49 Penn Treebank POS labels of HF ``conll2012_ontonotesv5`` english_v4
#: (index = stored int). english_v12 uses a different list; data carrying its own
#: ClassLabel names (arrow / parquet / ``save_to_disk`` folders) is decoded with those.
ONTONOTES_POS_LABELS: tuple[str, ...] = (
    "XX",
    "``",
    "$",
    "''",
    ",",
    "-LRB-",
    "-RRB-",
    ".",
    ":",
    "ADD",
    "AFX",
    "CC",
    "CD",
    "DT",
    "EX",
    "FW",
    "HYPH",
    "IN",
    "JJ",
    "JJR",
    "JJS",
    "LS",
    "MD",
    "NFP",
    "NN",
    "NNP",
    "NNPS",
    "NNS",
    "PDT",
    "POS",
    "PRP",
    "PRP$",
    "RB",
    "RBR",
    "RBS",
    "RP",
    "SYM",
    "TO",
    "UH",
    "VB",
    "VBD",
    "VBG",
    "VBN",
    "VBP",
    "VBZ",
    "WDT",
    "WP",
    "WP$",
    "WRB",
)


_ONTONOTES_FEATURES = datasets.Features(
    {
        "document_id": datasets.Value("string"),
        "part_id": datasets.Value("int64"),
        "words": STR_SEQ,
        "pos_tags": STR_SEQ,
        "ner_tags": STR_SEQ,
    }
)
_ONTONOTES_SPLIT_NAMES = {
    "train": ("train",),
    "validation": ("validation", "dev", "valid"),
    "test": ("test",),
}
_ONTONOTES_SPLITS = {
    "train": "train",
    "validation": "validation",
    "dev": "validation",
    "valid": "validation",
    "val": "validation",
    "test": "test",
}
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
            raise ValueError(
                f"document {doc_id!r}: {field} value {v!r} is not an index into "
                f"the {len(names)}-label list (english_v4 expected)"
            )
    return tuple(out)


def _ontonotes_rows(documents: Iterable[Mapping], pos_names: Sequence[str], ner_names: Sequence[str]) -> Iterator[dict]:
    """Flatten HF conll2012 documents to one row per sentence."""
    for doc in documents:
        doc_id = str(doc["document_id"])
        for sent in doc["sentences"]:
            words = tuple(sent["words"])
            pos = _decode_labels(sent["pos_tags"], pos_names, "pos_tags", doc_id)
            ner = _decode_labels(sent["named_entities"], ner_names, "named_entities", doc_id)
            if not len(words) == len(pos) == len(ner):
                raise ValueError(
                    f"document {doc_id!r}: words, pos_tags and named_entities "
                    f"differ in length ({len(words)}, {len(pos)}, {len(ner)})"
                )
            yield {
                "document_id": doc_id,
                "part_id": int(sent.get("part_id") or 0),
                "words": words,
                "pos_tags": pos,
                "ner_tags": ner,
            }


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
        split
        for split, names in _ONTONOTES_SPLIT_NAMES.items()
        if any(re.search(rf"(^|[^a-z]){n}([^a-z]|$)", stem) for n in names)
    }


def _ontonotes_data_files(folder: Path, split: str | None) -> list[Path]:
    """The data files of one split in ``folder`` (all of them when ``split`` is None).

    Raises:
        FileNotFoundError: no JSON / parquet / arrow file (of that split) in the folder.
        ValueError: files of several splits and no ``split`` given, or mixed formats.
    """
    files = sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix in _DATA_SUFFIXES
        and p.name not in ("dataset_info.json", "state.json", "dataset_dict.json")
    )
    if split is not None:
        files = [p for p in files if split in _split_of_file(p)]
    if not files:
        what = f"{split} " if split else ""
        raise FileNotFoundError(
            f"no {what}data files (*.jsonl, *.json, *.parquet, *.arrow) in "
            f"{folder}; point at a conll2012_ontonotesv5 split file or folder"
        )
    seen = set().union(*(_split_of_file(p) for p in files))
    if split is None and len(seen) > 1:
        raise ValueError(
            f"{folder} holds files of several splits ({sorted(seen)}); pass split=... or point at one split's file"
        )
    if len({_DATA_SUFFIXES[p.suffix] for p in files}) > 1:
        raise ValueError(f"{folder} mixes data formats ({[p.name for p in files]}); keep one")
    return files


def _load_hf_saved(folder: Path, split: str | None) -> datasets.Dataset:
    """A ``save_to_disk`` folder (Dataset, or DatasetDict with ``split`` chosen)."""
    loaded = datasets.load_from_disk(str(folder))
    if isinstance(loaded, datasets.DatasetDict):
        if split is None or split not in loaded:
            raise ValueError(f"{folder} is a DatasetDict with splits {sorted(loaded)}; pass split= one of them")
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


def _verify_tree(path: Path, verify: bool | None) -> None:
    """Check ``path`` (a file, or every file under a folder) against the nearest ``SHA256SUMS``
    that lists it (:func:`olas_utils.data.files.verify_file`); warns once when verification is off."""
    if not verify_enabled(verify) or path.is_file():
        verify_file(path, "CoNLL-2012 OntoNotes", verify=verify)
        return
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        verify_file(f, "CoNLL-2012 OntoNotes", verify=True)


def load_conll2012_ontonotes(
    path_or_split_dir: str | os.PathLike, split: str | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
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
        verify: check the files against the nearest ``SHA256SUMS`` (in their folder or one above)
            that lists them (default: True unless ``OLAS_DATA_VERIFY=0``); False skips it (warns once).

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
        DataChecksumError: a file is not the one a ``SHA256SUMS`` beside it lists.
    """
    path = Path(path_or_split_dir).expanduser().resolve()
    if not path.exists():
        raise FileNotFoundError(
            f"CoNLL-2012 OntoNotes data {path} not found. OntoNotes is not in the offline "
            f"data; pass the folder or file of an HF conll2012_ontonotesv5 (english_v4) copy "
            f"(see data/README.md)"
        )
    canon = None if split is None else canonical_split(split, _ONTONOTES_SPLITS, "CoNLL-2012")
    _verify_tree(path, verify)
    documents, features = _ontonotes_documents(path, canon)
    pos_names = _label_names(features, "pos_tags") or ONTONOTES_POS_LABELS
    ner_names = _label_names(features, "named_entities") or ONTONOTES_NER_LABELS
    rows = _ontonotes_rows(documents, pos_names, ner_names)
    return to_dataset(to_columns(rows, list(_ONTONOTES_FEATURES)), _ONTONOTES_FEATURES)
