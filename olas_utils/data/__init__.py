"""The data layer: readers for the datasets OLAS uses, each returning a :class:`datasets.Dataset`.

Files under the data folder go in (resolved by :func:`olas_utils.infra.settings.data_dir`: argument,
then ``$OLAS_DATA_DIR``, then ``../shared/data`` beside the project; ``data/README.md``
documents each dataset's provenance, licence, file layout and download recipe); fresh
``Dataset`` objects of words and labels come out, one row per sentence (or example).

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

Nothing damaged is read as good: each file is checked against the data folder's
``SHA256SUMS`` (hashed once per process per path, size and modification time; a mismatch is a
:class:`DataChecksumError` naming the file, both hashes and what to do; ``verify=False`` or
``OLAS_DATA_VERIFY=0`` reads an edited copy, with a warning), and read strictly (a
:class:`DataFormatError` names the file and the 1-based line of anything out of format: a
SemEval block that is not id, label and comment lines, a CoNLL-U or CoNLL line with the wrong
columns or cut mid-way, a file that ends inside a sentence, a byte-order mark inside a file).

Modules: :mod:`~olas_utils.data.files` (shared lookup, opening, caching),
:mod:`~olas_utils.data.ud`, :mod:`~olas_utils.data.conll`, :mod:`~olas_utils.data.semeval`,
:mod:`~olas_utils.data.uner`, :mod:`~olas_utils.data.ontonotes` (one dataset family each,
re-exported here), and on top of the readers :mod:`olas_utils.data.corpus` (the 50-word
chunks of the similarity study) and :mod:`olas_utils.data.tasks` (the four TOA tasks).
"""

from __future__ import annotations

from olas_utils.data.conll import iob1_to_iob2, load_conll2000, load_conll2003
from olas_utils.data.files import DataChecksumError, DataFormatError
from olas_utils.data.ontonotes import (
    ONTONOTES_NER_LABELS,
    ONTONOTES_POS_LABELS,
    load_conll2012_ontonotes,
)
from olas_utils.data.semeval import (
    SEMEVAL_LABELS,
    load_semeval2010_task8,
    tokenize_semeval,
)
from olas_utils.data.ud import load_ud_ewt, read_conllu
from olas_utils.data.uner import load_uner_ewt

__all__ = [
    "DataChecksumError",
    "DataFormatError",
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
