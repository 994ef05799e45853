"""The data layer: readers for the datasets OLAS uses, each returning a :class:`datasets.Dataset`.

Files under the data folder (:func:`olas_utils.infra.settings.data_dir`; provenance in
``data/README.md``) go in; a fresh ``Dataset`` of words and labels comes out, one row per
sentence (or example), parsed files cached per process. Each file is checked against the
folder's ``SHA256SUMS`` (:class:`DataChecksumError`) and read strictly (:class:`DataFormatError`
names the file and the 1-based line). The readers, their splits and columns:
``docs/guide.md#data``.
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
