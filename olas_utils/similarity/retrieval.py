"""Cross-model retrieval scores: Pearson matrix, true-match ranks, Hit@k, the per-pair ranks and
the retrieval table.

The paper's retrieval test (Liang et al., NeurIPS 2025; ``docs/method.md#retrieval``): for
each of the 1,000 OLA images of a *target* model, rank the 1,000 images of a *source*
model by SSIM (:func:`olas_utils.similarity.ssim.ssim_matrix`) and report Hit@1 /
Hit@5, the fraction of target images whose own sentence is ranked first / in the top 5.
Every Hit@k is a reduction of the per-item ranks (:func:`hit_rate` of
:func:`true_match_ranks`), so the saved ranks (:func:`retrieval_ranks`) reproduce the tables.

Importing this module does no work.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from olas_utils.infra.progress import tqdm
from olas_utils.similarity.ssim import ArrayLike, ssim_matrix

__all__ = [
    "METRICS",
    "check_metric",
    "pearson_matrix",
    "true_match_ranks",
    "hit_rate",
    "hit_at_k",
    "retrieval_ranks",
    "retrieval_table",
]


#: Image similarities of :func:`retrieval_table`: ``"ssim"`` (the paper's) and ``"pearson"``.
METRICS = ("ssim", "pearson")


def check_metric(metric: str) -> None:
    """Refuse a similarity :func:`retrieval_table` does not know (before any work is done).

    Raises:
        ValueError: ``metric`` is not one of :data:`METRICS`.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be 'ssim' or 'pearson', got {metric!r}")


@torch.no_grad()
def pearson_matrix(queries: ArrayLike, keys: ArrayLike, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Pearson correlation of every (query, key) pair of flattened images.

    ``out[i, j] == numpy.corrcoef(queries[i].ravel(), keys[j].ravel())[0, 1]``. A constant
    image has no correlation: its row/column is NaN (numpy gives NaN too, with a warning).

    Args:
        queries: ``(Nq, ...)`` images (any trailing shape).
        keys: ``(Nk, ...)`` images with the same number of elements per image.
        dtype: computation and output dtype (default float64).

    Returns:
        ``(Nq, Nk)`` tensor.

    Raises:
        ValueError: if the images differ in size.
    """
    a = torch.as_tensor(np.array(queries, copy=True) if isinstance(queries, np.ndarray) else queries).to(dtype)
    b = torch.as_tensor(np.array(keys, copy=True) if isinstance(keys, np.ndarray) else keys).to(
        dtype=dtype, device=a.device
    )
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"queries have {a.shape[1]} values per image, keys {b.shape[1]}")
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    na, nb = a.norm(dim=1), b.norm(dim=1)
    a = a / torch.where(na > 0, na, torch.full_like(na, float("nan")))[:, None]
    b = b / torch.where(nb > 0, nb, torch.full_like(nb, float("nan")))[:, None]
    return (a @ b.t()).clamp_(-1.0, 1.0)


#: tie rules of :func:`true_match_ranks`.
TIES = ("pessimistic", "optimistic", "first")


def true_match_ranks(sim: ArrayLike, *, ties: str = "pessimistic") -> np.ndarray:
    """0-based rank of each query's own key (key ``i`` for query ``i``) in its row.

    Tie rule: with ``ties="pessimistic"`` (default) every other key scoring *at least* as
    high as the true key ranks above it (``rank_i = #{j ≠ i : s_ij ≥ s_ii}``), so a tie
    always counts against the model — a constant row scores no hit. With
    ``"optimistic"``, only strictly higher keys count (``#{j : s_ij > s_ii}``). With
    ``"first"``, the first index wins a tie, like ``argmax`` (what the authors' released
    script does, ``docs/method.md#released-code``): ``#{j : s_ij > s_ii} + #{j < i : s_ij = s_ii}``.
    NaN similarities count as −∞ (a NaN true score is beaten or tied by every key).

    Args:
        sim: ``(Nq, Nk)`` similarities, ``Nq ≤ Nk``; higher = more similar.
        ties: ``"pessimistic"``, ``"optimistic"`` or ``"first"``.

    Returns:
        ``(Nq,)`` int64 array of ranks in ``0..Nk-1``.

    Raises:
        ValueError: if ``sim`` is not 2-D, has more rows than columns, or ``ties`` is unknown.
    """
    s = sim.detach().cpu().double().numpy() if isinstance(sim, torch.Tensor) else np.asarray(sim, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] > s.shape[1]:
        raise ValueError(f"sim must be (Nq, Nk) with Nq <= Nk (query i matches key i), got {s.shape}")
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    s = np.where(np.isnan(s), -np.inf, s)
    n = s.shape[0]
    true = s[np.arange(n), np.arange(n)][:, None]
    if ties == "optimistic":
        return (s > true).sum(1).astype(np.int64)
    if ties == "first":
        earlier = np.arange(s.shape[1])[None, :] < np.arange(n)[:, None]
        return ((s > true).sum(1) + ((s == true) & earlier).sum(1)).astype(np.int64)
    return ((s >= true).sum(1) - 1).astype(np.int64)  # minus the true key itself


def hit_rate(ranks, k: int) -> float:
    """Hit@k of 0-based true-match ranks: the fraction with ``rank < k`` (NaN for no ranks).

    Raises:
        ValueError: on ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    r = np.asarray(ranks)
    return float((r < k).mean()) if r.size else float("nan")


def hit_at_k(sim: ArrayLike, k: int, *, ties: str = "pessimistic") -> float:
    """Hit@k: the fraction of queries whose own key (index i) is among the top k of row i.

    Args:
        sim: ``(Nq, Nk)`` similarities, query i's match is key i.
        k: cut-off (>= 1).
        ties: tie rule of :func:`true_match_ranks` (default pessimistic: ties count against).

    Returns:
        A fraction in [0, 1] (:func:`hit_rate` of :func:`true_match_ranks`).

    Raises:
        ValueError: on ``k < 1`` or an invalid ``sim`` (see :func:`true_match_ranks`).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return hit_rate(true_match_ranks(sim, ties=ties), k)


def retrieval_ranks(
    images_by_model: Mapping[str, ArrayLike],
    metric: str = "ssim",
    *,
    ties: str = "pessimistic",
    progress: bool = True,
    **ssim_kwargs,
) -> list[dict]:
    """The rank of every target image's true match, for every ordered pair of models.

    For target T and source S, each image i of T queries all images of S; its outcome is the
    0-based rank of S's image i (:func:`true_match_ranks` with ``ties``), from the matrix
    ``metric(T's images, S's images)`` of that ordered pair: both metrics are symmetric in exact
    arithmetic but not in float32 for near-constant images, so each direction is computed in
    its own orientation. :func:`retrieval_table` is the reduction of these ranks to Hit@k.

    Args:
        images_by_model: ``{model: (n, H, W) or (n, C, H, W) images}``, the same chunks in
            the same order for every model (e.g. ``CachedImages.images("ola:1")``).
        metric: ``"ssim"`` (:func:`ssim_matrix`, paper) or ``"pearson"``
            (:func:`pearson_matrix`).
        ties: tie rule (see :func:`true_match_ranks`).
        progress: progress bar over model pairs.
        **ssim_kwargs: passed to :func:`ssim_matrix`.

    Returns:
        One dict per ordered pair (target ≠ source), in the order of the mapping:
        ``{"target", "source", "metric", "n", "ranks"}``, ``ranks`` an ``(n,)`` int64 array
        (entry i: chunk i's true match).

    Raises:
        ValueError: fewer than two models, different numbers of images or image shapes,
            or an unknown metric.
    """
    check_metric(metric)
    names = list(images_by_model)
    if len(names) < 2:
        raise ValueError(f"need at least two models, got {names}")
    shapes = {n: tuple(np.shape(images_by_model[n])) for n in names}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"all models need the same number and shape of images, got {shapes}")
    # every ordered pair in its own orientation, (target, source): SSIM in float32 is not symmetric to
    # the last digits for near-constant images (the tokenizer-only control's), so a transposed (source,
    # target) matrix can order near-equal scores differently from the documented ssim_matrix(target, source)
    pairs = [(t, s) for t in names for s in names if s != t]
    rows = []
    for t, s in tqdm(pairs, desc=f"retrieval ({metric})", disable=not progress, unit="pair"):
        if metric == "ssim":
            sim = ssim_matrix(images_by_model[t], images_by_model[s], **ssim_kwargs).cpu()
        else:
            sim = pearson_matrix(images_by_model[t], images_by_model[s]).cpu()
        ranks = true_match_ranks(sim, ties=ties)
        rows.append({"target": t, "source": s, "metric": metric, "n": int(sim.shape[0]), "ranks": ranks})
    return rows


def retrieval_table(
    images_by_model: Mapping[str, ArrayLike],
    metric: str = "ssim",
    ks: Sequence[int] = (1, 5),
    *,
    ties: str = "pessimistic",
    progress: bool = True,
    **ssim_kwargs,
) -> list[dict]:
    """Hit@k retrieval between every ordered pair of models: :func:`retrieval_ranks` reduced
    by :func:`hit_rate`.

    For target T and source S, each image i of T queries all images of S; a hit is image
    i of S (the same chunk) in the top k.

    Args:
        images_by_model: ``{model: (n, H, W) or (n, C, H, W) images}``, the same chunks in
            the same order for every model (e.g. ``CachedImages.images("ola:1")``).
        metric: ``"ssim"`` (:func:`ssim_matrix`, paper) or ``"pearson"``
            (:func:`pearson_matrix`).
        ks: cut-offs.
        ties: tie rule (see :func:`true_match_ranks`).
        progress: progress bar over model pairs.
        **ssim_kwargs: passed to :func:`ssim_matrix`.

    Returns:
        One dict per ordered pair (target ≠ source), in the order of the mapping:
        ``{"target", "source", "metric", "n", "hit@1", "hit@5", ...}`` (fractions). A Hit@k
        with ``k >= n`` cannot miss (every key is in the top k: it would read 1.0 whatever the
        maps), so it is NaN, with one warning.

    Warns:
        UserWarning: once per call when some ``k >= n``, naming k and n (use more than k items).

    Raises:
        ValueError: fewer than two models, different numbers of images or image shapes,
            or an unknown metric.
    """
    ranked = retrieval_ranks(images_by_model, metric, ties=ties, progress=progress, **ssim_kwargs)
    n_items = ranked[0]["n"]
    trivial = [k for k in ks if k >= n_items]
    if trivial:
        warnings.warn(
            f"{', '.join(f'hit@{k}' for k in trivial)} with {n_items} items cannot miss (every true match is in "
            f"the top {min(trivial)} of {n_items}): reported as NaN, not 1.0; retrieve among more than "
            f"{max(trivial)} items for a meaningful score",
            UserWarning,
            stacklevel=2,
        )
    rows = []
    for r in ranked:
        row = {k: r[k] for k in ("target", "source", "metric", "n")}
        for k in ks:
            row[f"hit@{k}"] = float("nan") if k >= n_items else hit_rate(r["ranks"], k)
        rows.append(row)
    return rows
