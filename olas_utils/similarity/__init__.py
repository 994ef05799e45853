"""Cross-LM similarity of OLA images: the paper's retrieval test and visual classifier (``docs/method.md#cross-lm-similarity``).

In: OLA maps (:func:`olas_utils.extract.extract_ola`), models (:mod:`olas_utils.zoo`), chunks
(:mod:`olas_utils.data.corpus`). Out: pre-processed images (a resumable cache per model), Hit@k
retrieval tables and the accuracies of a classifier tested on an unseen model. Its modules, one
job each: ``docs/architecture.md``. The retrieval functions below are re-exported here;
everything else is imported from its module. Importing this package does no work.
"""

from __future__ import annotations

from olas_utils.similarity.retrieval import (
    hit_at_k,
    hit_rate,
    pearson_matrix,
    retrieval_ranks,
    retrieval_table,
    true_match_ranks,
)
from olas_utils.similarity.ssim import gaussian_window, ssim_matrix

__all__ = [
    "gaussian_window",
    "ssim_matrix",
    "pearson_matrix",
    "true_match_ranks",
    "hit_rate",
    "hit_at_k",
    "retrieval_ranks",
    "retrieval_table",
]
