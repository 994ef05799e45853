"""Cross-LM similarity of OLA images: the paper's retrieval test and visual classifier (``docs/method.md#cross-lm-similarity``).

In: OLA maps from the core (:func:`olas_utils.extract.extract_ola`), models from
:mod:`olas_utils.zoo`, text chunks from :mod:`olas_utils.data.corpus`. Out: fixed-size
pre-processed images (a resumable, memory-mapped cache per model), Hit@k retrieval tables
between models, and the accuracies of a classifier trained on source models' images and
tested on an unseen target model.

Modules:

- ``ssim``, ``ssim_kernels``: batched SSIM of all pairs (torchmetrics' definition);
- ``retrieval``: Pearson matrix, true-match ranks, Hit@k, per-pair ranks, the retrieval table;
- ``images``: one OLA map → a pre-processed ``S × S`` image (the protocols);
- ``imagecache``: the image cache, one subpackage with a small interface — write or resume
  a cache (``extract_protocols``, ``extract_to_cache``, ``cache_complete``), open, read and
  verify it (``open_cache``, ``CachedImages``), merge the shards of a multi-process run
  (``merge_shards``), its manifest helpers and errors;
- ``distributed``: multi-process extraction with ``accelerate`` (shards, then their merge);
- ``inputs``, ``resnet``, ``result``, ``classifier``, ``evaluation``: the visual classifier
  (input images, network, trained result, training, evaluation); its training
  augmentations are the core's :mod:`olas_utils.maths.augment`.

The retrieval functions below are re-exported here; everything else is imported from its
module. Importing this package does no work.
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
