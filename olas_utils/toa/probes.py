"""Training-free syntactic probes of word-level OLA maps (our extension of ``docs/method.md#ola-and-syntax``).

A word map ``M`` is ``(query, key)`` over words (from :func:`olas_utils.align.pool_to_words`);
``heads`` is a sentence's CoNLL-U HEAD column (1-based, 0 = root). :func:`strongest_word_probe`
(argmax per row, Clark et al. 2019), :func:`mst_uuas` (maximum spanning tree of ``M + Mᵀ``,
Hewitt & Manning 2019), :func:`adjacent_baseline` (the neighbouring-word floor); sentences of
fewer than 2 words count nothing. ``docs/method.md#ola-and-syntax``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "strongest_word_probe",
    "mst_uuas",
    "probe_sentence",
    "probe_corpus",
    "adjacent_counts",
    "adjacent_baseline",
    "gold_edges",
]


def _as_map(word_map: Any, w: int) -> np.ndarray:
    """Convert a ``(query, key)`` word map (torch/numpy/lists) to float64 numpy and validate it."""
    if hasattr(word_map, "detach"):
        word_map = word_map.detach().to("cpu").double().numpy()
    m = np.asarray(word_map, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"word_map must be a square (W, W) matrix, got shape {m.shape}")
    if m.shape[0] != w:
        raise ValueError(f"word_map covers {m.shape[0]} words but heads has {w}")
    if not np.isfinite(m).all():
        raise ValueError("word_map contains NaN or infinite values")
    return m


def _check_heads(heads: Sequence[int]) -> list[int]:
    """Validate a 1-based head list (values in 0..W, no self-attachment)."""
    h = [int(x) for x in heads]
    w = len(h)
    for i, x in enumerate(h):
        if not 0 <= x <= w:
            raise ValueError(f"heads[{i}] = {x} outside 0..{w}")
        if x == i + 1:
            raise ValueError(f"heads[{i}] = {x}: word {i + 1} is its own head")
    return h


def gold_edges(heads: Sequence[int]) -> set[frozenset[int]]:
    """Undirected gold word–word edges of one sentence (root attachments excluded).

    Args:
        heads: length-W list of 1-based heads (0 = root).

    Returns:
        Set of ``frozenset({i, j})`` with 0-based word indices; W-1 edges for a
        single-rooted tree.

    Raises:
        ValueError: a head outside ``0..W`` or a word headed by itself.
    """
    h = _check_heads(heads)
    return {frozenset((i, x - 1)) for i, x in enumerate(h) if x != 0}


def strongest_word_probe(word_map: Any, heads: Sequence[int]) -> dict[str, int]:
    """Count how often each word's most-attended other word is its gold head / a dependent.

    ``j* = argmax_{j != i} word_map[i, j]`` (first maximum on ties), compared with word i's gold
    head (``head``, of ``n_head`` words), its gold dependents (``dependent``) or either.

    Args:
        word_map: ``(query, key)`` word map, tensor or array.
        heads: length-W list of 1-based gold heads (0 = root).

    Returns:
        ``{"n", "n_head", "head", "dependent", "either"}`` integer counts: ``n`` = words
        probed (W, or 0 when W < 2), ``n_head`` = those with a word head (not the root).
        Counts add up over a corpus; rates are ``head / n_head``, ``dependent / n``,
        ``either / n``.

    Raises:
        ValueError: ``word_map`` not ``(W, W)`` with W = ``len(heads)``, non-finite values in
            the map, or invalid heads.
    """
    h = _check_heads(heads)
    w = len(h)
    m = _as_map(word_map, w)
    out = {"n": 0, "n_head": 0, "head": 0, "dependent": 0, "either": 0}
    if w < 2:
        return out
    m = m.copy()
    np.fill_diagonal(m, -np.inf)
    best = np.argmax(m, axis=1)
    for i in range(w):
        j = int(best[i])
        is_head = h[i] != 0 and j == h[i] - 1
        is_dep = h[j] == i + 1
        out["n"] += 1
        out["n_head"] += h[i] != 0
        out["head"] += is_head
        out["dependent"] += is_dep
        out["either"] += is_head or is_dep
    return out


def mst_uuas(word_map: Any, heads: Sequence[int]) -> dict[str, int]:
    """Undirected maximum spanning tree of ``M + Mᵀ`` scored against the gold tree (UUAS counts).

    ``S = M + Mᵀ``; scipy's ``minimum_spanning_tree`` on costs ``max(S) − S + 1``
    (``docs/method.md#ola-and-syntax``); ties resolved by scipy.

    Args:
        word_map: ``(query, key)`` word map, tensor or array.
        heads: length-W list of 1-based gold heads (0 = root).

    Returns:
        ``{"correct", "total"}``: gold undirected word–word edges (root attachment
        excluded; W-1 for a single-rooted sentence) that are in the tree, and their number.
        Both 0 when W < 2.

    Raises:
        ValueError: shape mismatch, non-finite values in the map, or invalid heads.
    """
    from scipy.sparse.csgraph import minimum_spanning_tree

    h = _check_heads(heads)
    w = len(h)
    m = _as_map(word_map, w)
    gold = gold_edges(h)
    if w < 2:
        return {"correct": 0, "total": 0}
    s = m + m.T
    off = ~np.eye(w, dtype=bool)
    cost = np.where(off, s[off].max() - s + 1.0, 0.0)
    tree = minimum_spanning_tree(np.triu(cost, 1)).tocoo()
    pred = {frozenset((int(i), int(j))) for i, j in zip(tree.row, tree.col)}
    if len(pred) != w - 1:  # cannot happen for a complete graph with positive costs
        raise RuntimeError(f"spanning tree has {len(pred)} edges, expected {w - 1}")
    return {"correct": len(gold & pred), "total": len(gold)}


def probe_sentence(word_map: Any, heads: Sequence[int]) -> dict[str, int]:
    """Both probes on one sentence: the counts of :func:`strongest_word_probe` and
    :func:`mst_uuas` together (``n, n_head, head, dependent, either, correct, total``);
    :func:`probe_corpus` is their sum over sentences.

    Raises:
        ValueError: as the two probes.
    """
    return {**strongest_word_probe(word_map, heads), **mst_uuas(word_map, heads)}


def probe_corpus(maps_list: Sequence[Any], heads_list: Sequence[Sequence[int]]) -> dict:
    """Run both probes over a corpus and pool the counts into rates.

    Args:
        maps_list: one ``(query, key)`` word map per sentence.
        heads_list: the matching 1-based gold heads per sentence.

    Returns:
        ``{"head_acc", "dependent_acc", "either_acc", "uuas"}`` (fractions, pooled over
        words / edges: ``head / n_head``, ``dependent / n``, ``either / n``,
        ``correct / total``) plus the summed counts ``n``, ``n_head``, ``head``,
        ``dependent``, ``either``, ``correct``, ``total`` and ``sentences``.

    Raises:
        ValueError: different numbers of maps and head lists, or no sentence with at least
            2 words (nothing to score); errors of the per-sentence probes.
    """
    if len(maps_list) != len(heads_list):
        raise ValueError(f"probe_corpus: {len(maps_list)} maps but {len(heads_list)} head lists")
    tot = {"n": 0, "n_head": 0, "head": 0, "dependent": 0, "either": 0, "correct": 0, "total": 0}
    for m, h in zip(maps_list, heads_list):
        for k, v in probe_sentence(m, h).items():
            tot[k] += v
    if tot["n"] == 0:
        raise ValueError("probe_corpus: no sentence with at least 2 words")
    return {
        "head_acc": tot["head"] / tot["n_head"] if tot["n_head"] else 0.0,
        "dependent_acc": tot["dependent"] / tot["n"],
        "either_acc": tot["either"] / tot["n"],
        "uuas": tot["correct"] / tot["total"] if tot["total"] else 0.0,
        **tot,
        "sentences": len(heads_list),
    }


def adjacent_counts(heads: Sequence[int]) -> dict[str, int]:
    """The neighbouring-word predictors' counts on one sentence (all 0 below 2 words):
    ``chain`` (gold edges ``{i, i+1}``) of ``total`` gold edges; ``next_head``,
    ``next_dependent``, ``next_either`` and the ``prev_`` ones (see :func:`adjacent_baseline`)
    of ``n`` words (``n_head`` with a word head). :func:`adjacent_baseline` is their sum.

    Raises:
        ValueError: invalid heads.
    """
    h = _check_heads(heads)
    w = len(h)
    out = {"n": 0, "n_head": 0, "total": 0, "chain": 0}
    out.update({f"{d}_{k}": 0 for d in ("next", "prev") for k in ("head", "dependent", "either")})
    if w < 2:
        return out
    gold = gold_edges(h)
    out["total"] = len(gold)
    out["chain"] = sum(frozenset((i, i + 1)) in gold for i in range(w - 1))
    out["n"] = w
    out["n_head"] = sum(x != 0 for x in h)
    for i in range(w):
        for d, j in (("next", i + 1 if i + 1 < w else i - 1), ("prev", i - 1 if i > 0 else i + 1)):
            is_head = h[i] == j + 1
            is_dep = h[j] == i + 1
            out[f"{d}_head"] += is_head
            out[f"{d}_dependent"] += is_dep
            out[f"{d}_either"] += is_head or is_dep
    return out


def adjacent_baseline(heads_list: Sequence[Sequence[int]]) -> dict:
    """Scores of the trivial neighbouring-word predictor (no model), to judge the probes by: UUAS
    of the chain tree ``{i, i+1}`` and the strongest-word rates of the ``next`` and ``prev``
    pointers (``docs/method.md#ola-and-syntax``).

    Args:
        heads_list: per sentence, the length-W list of 1-based gold heads (0 = root).

    Returns:
        ``{"uuas", "next_head_acc", "next_dependent_acc", "next_either_acc",
        "prev_head_acc", "prev_dependent_acc", "prev_either_acc", "n", "n_head",
        "total"}`` — rates with the same denominators as :func:`probe_corpus`
        (``n`` words, ``n_head`` non-root words, ``total`` gold edges).

    Raises:
        ValueError: invalid heads, or no sentence with at least 2 words.
    """
    tot: dict[str, int] = {}
    for heads in heads_list:
        for k, v in adjacent_counts(heads).items():
            tot[k] = tot.get(k, 0) + v
    n, n_head, total, chain_ok = (tot.get(k, 0) for k in ("n", "n_head", "total", "chain"))
    cnt = {k: v for k, v in tot.items() if k.startswith(("next_", "prev_"))}
    if n == 0:
        raise ValueError("adjacent_baseline: no sentence with at least 2 words")
    out = {"uuas": chain_ok / total if total else 0.0}
    for d in ("next", "prev"):
        out[f"{d}_head_acc"] = cnt[f"{d}_head"] / n_head if n_head else 0.0
        out[f"{d}_dependent_acc"] = cnt[f"{d}_dependent"] / n
        out[f"{d}_either_acc"] = cnt[f"{d}_either"] / n
    out.update(n=n, n_head=n_head, total=total)
    return out
