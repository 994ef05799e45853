"""Cross-LM similarity of OLA images: the paper's retrieval test and visual classifier (§2).

In: OLA maps from the core (:func:`olas_utils.extract.extract_ola`), models from
:mod:`olas_utils.zoo`, text chunks from :mod:`olas_utils.data.corpus`. Out: fixed-size
pre-processed images (a resumable, memory-mapped cache per model), Hit@k retrieval tables
between models, and the accuracies of a classifier trained on source models' images and
tested on an unseen target model.

Modules:

- ``ssim``, ``ssim_kernels``: batched SSIM of all pairs (torchmetrics' definition);
- ``retrieval``: Pearson matrix, true-match ranks, Hit@k, the retrieval table;
- ``images``: one OLA map → a pre-processed ``S × S`` image (the protocols);
- ``manifest``: what identifies a cache (settings, hashes, tokenizer, versions, differences);
- ``cache_folder``: a cache folder on disk (file names, atomic writes, lock, creation);
- ``cache``: resumable extraction into the cache (``extract_to_cache``);
- ``cache_reader``: reading a cache (``CachedImages``, ``open_cache``);
- ``shards``, ``distributed``: multi-process extraction (shards and their merge, ``accelerate``);
- ``inputs``, ``augment``, ``resnet``, ``result``, ``classifier``, ``evaluation``: the visual
  classifier (input images, augmentations, network, trained result, training, evaluation).

The retrieval functions below are re-exported here; everything else is imported from its
module. Importing this package does no work.
"""

from __future__ import annotations

from olas_utils.similarity.retrieval import (
    hit_at_k,
    pearson_matrix,
    retrieval_table,
    true_match_ranks,
)
from olas_utils.similarity.ssim import gaussian_window, ssim_matrix

__all__ = ["gaussian_window", "ssim_matrix", "pearson_matrix", "true_match_ranks", "hit_at_k",
           "retrieval_table"]
