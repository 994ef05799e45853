"""Training-free syntactic probes: hand cases, brute-force spanning trees, real UD sentences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from olas_utils.toa.probes import (
    adjacent_baseline,
    gold_edges,
    mst_uuas,
    probe_corpus,
    strongest_word_probe,
)

# ---------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------


def _prufer_to_edges(seq, w):
    """Decode a Prüfer sequence (length w-2) into the w-1 edges of a labelled tree."""
    degree = [1] * w
    for x in seq:
        degree[x] += 1
    edges = []
    for x in seq:
        leaf = min(i for i in range(w) if degree[i] == 1)
        edges.append(frozenset((leaf, x)))
        degree[leaf] -= 1
        degree[x] -= 1
    u, v = [i for i in range(w) if degree[i] == 1]
    edges.append(frozenset((u, v)))
    return edges


def _all_spanning_trees(w):
    if w == 2:
        return [[frozenset((0, 1))]]
    return [_prufer_to_edges(seq, w) for seq in itertools.product(range(w), repeat=w - 2)]


def _random_heads(rng, w):
    """A random single-rooted tree: words in random order attach to an earlier word."""
    order = rng.permutation(w)
    heads = [0] * w
    for k in range(1, w):
        heads[order[k]] = int(order[rng.integers(k)]) + 1
    return heads


# ---------------------------------------------------------------------------------------
# strongest-word probe
# ---------------------------------------------------------------------------------------

# words 1..4: 1 -> 2, 2 = root, 3 -> 2, 4 -> 3
HEADS = [2, 0, 2, 3]


def test_gold_edges():
    assert gold_edges(HEADS) == {frozenset((0, 1)), frozenset((2, 1)), frozenset((3, 2))}


def test_strongest_word_hand_case():
    m = torch.zeros(4, 4)
    m += torch.eye(4) * 100  # self-attention is excluded
    m[0, 1] = 0.9  # word 1 -> word 2: its head
    m[1, 3] = 0.8  # word 2 (root) -> word 4: neither (4's head is 3)
    m[2, 3] = 0.7  # word 3 -> word 4: its dependent
    m[3, 0] = 0.6  # word 4 -> word 1: neither
    assert strongest_word_probe(m, HEADS) == {"n": 4, "n_head": 3, "head": 1, "dependent": 1, "either": 2}


def test_strongest_word_ties_take_first_and_short_sentences():
    m = np.ones((3, 3))  # all tied: each word picks the lowest other index
    # word1 -> word2 (2 is its dependent), word2 -> word1 (its head), word3 -> word1 (neither)
    assert strongest_word_probe(m, [0, 1, 2]) == {"n": 3, "n_head": 2, "head": 1, "dependent": 1, "either": 2}
    assert strongest_word_probe(np.ones((1, 1)), [0]) == {"n": 0, "n_head": 0, "head": 0, "dependent": 0, "either": 0}
    assert mst_uuas(np.ones((1, 1)), [0]) == {"correct": 0, "total": 0}


def test_probe_errors():
    with pytest.raises(ValueError, match="covers 3 words but heads has 4"):
        strongest_word_probe(np.zeros((3, 3)), HEADS)
    with pytest.raises(ValueError, match="square"):
        mst_uuas(np.zeros((4, 3)), HEADS)
    with pytest.raises(ValueError, match="outside"):
        mst_uuas(np.zeros((2, 2)), [0, 3])
    with pytest.raises(ValueError, match="its own head"):
        strongest_word_probe(np.zeros((2, 2)), [1, 0])
    bad = np.zeros((4, 4))
    bad[0, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        strongest_word_probe(bad, HEADS)
    with pytest.raises(ValueError, match="2 maps but 1 head lists"):
        probe_corpus([np.zeros((1, 1))] * 2, [[0]])
    with pytest.raises(ValueError, match="at least 2 words"):
        probe_corpus([np.zeros((1, 1))], [[0]])


# ---------------------------------------------------------------------------------------
# MST / UUAS
# ---------------------------------------------------------------------------------------


def test_mst_hand_case():
    # symmetrised weights: {1,2}=5, {2,3}=4, {1,4}=3, {3,4}=1, {1,3}=0.5, {2,4}=0.2
    # (1-based words). Maximum spanning tree: {1,2}, {2,3}, {1,4} (5+4+3 = 12).
    # Gold edges {1,2}, {2,3}, {3,4}: 2 of 3 found.
    m = np.zeros((4, 4))
    m[0, 1], m[1, 2], m[0, 3], m[2, 3], m[0, 2], m[1, 3] = 5, 4, 3, 1, 0.5, 0.2
    assert mst_uuas(m, HEADS) == {"correct": 2, "total": 3}
    assert mst_uuas(m.T.copy(), HEADS) == {"correct": 2, "total": 3}  # direction-free


def test_mst_with_zero_and_negative_weights():
    # Only the chain has positive weight; other pairs are exactly 0 (scipy's "no edge"
    # value before our cost transform) or negative -> the chain is the unique best tree.
    w = 5
    m = np.zeros((w, w))
    for i in range(w - 1):
        m[i, i + 1] = 1.0
    m[0, 4] = -2.0
    chain_heads = [0, 1, 2, 3, 4]  # word k+1 headed by word k: gold = chain
    assert mst_uuas(m, chain_heads) == {"correct": 4, "total": 4}
    star_heads = [0, 1, 1, 1, 1]  # gold = star on word 1: only {1,2} in the chain
    assert mst_uuas(m, star_heads) == {"correct": 1, "total": 4}


@pytest.mark.parametrize("w", [2, 3, 4, 5, 6])
def test_mst_against_brute_force(w):
    rng = np.random.default_rng(w)
    trees = _all_spanning_trees(w)
    assert len(trees) == w ** (w - 2) and all(len(set(t)) == w - 1 for t in trees)  # Cayley
    for _ in range(15):
        m = rng.random((w, w)) * rng.choice([1e-3, 1.0, 50.0])
        s = m + m.T
        weights = [sum(s[tuple(e)] for e in t) for t in trees]
        best = set(trees[int(np.argmax(weights))])
        heads = _random_heads(rng, w)
        gold = {frozenset((i, h - 1)) for i, h in enumerate(heads) if h}
        assert mst_uuas(m, heads) == {"correct": len(gold & best), "total": w - 1}
        # a map that is exactly the gold tree's adjacency: UUAS = 1
        a = np.zeros((w, w))
        for i, h in enumerate(heads):
            if h:
                a[i, h - 1] = 1.0
        assert mst_uuas(a + 0.01 * m, heads) == {"correct": w - 1, "total": w - 1}


# ---------------------------------------------------------------------------------------
# corpus aggregation and the adjacent baseline
# ---------------------------------------------------------------------------------------


def test_probe_corpus_pools_counts():
    m1 = np.zeros((4, 4))
    m1[0, 1], m1[1, 3], m1[2, 3], m1[3, 0] = 0.9, 0.8, 0.7, 0.6  # as the hand case: 1 head, 1 dep, 2 either
    # symmetrised m1: {1,2}=.9 {2,4}=.8 {3,4}=.7 {1,4}=.6 -> MST {1,2},{2,4},{3,4}; gold {1,2},{2,3},{3,4} -> 2/3
    m2 = np.array([[0.0, 1.0], [1.0, 0.0]])  # 2 words, heads [2, 0]: word1 -> head, word2 -> dependent
    r = probe_corpus([m1, m2, np.ones((1, 1))], [HEADS, [2, 0], [0]])
    assert r["n"] == 6 and r["n_head"] == 4 and r["sentences"] == 3
    assert r["head_acc"] == pytest.approx(2 / 4)
    assert r["dependent_acc"] == pytest.approx(2 / 6)
    assert r["either_acc"] == pytest.approx(4 / 6)
    assert r["uuas"] == pytest.approx(3 / 4)


def test_adjacent_baseline_hand_case():
    # words 1..4: 1 = root, 2 -> 1, 3 -> 1, 4 -> 3.  Gold edges {1,2}, {1,3}, {3,4}.
    # chain {1,2}, {2,3}, {3,4}: 2 of 3.
    # next pointers 1->2 (dep), 2->3 (none), 3->4 (dep), 4->3 (head): head 1/3, dep 2/4, either 3/4
    # prev pointers 1->2 (dep), 2->1 (head), 3->2 (none), 4->3 (head): head 2/3, dep 1/4, either 3/4
    r = adjacent_baseline([[0, 1, 1, 3], [0]])
    assert r["uuas"] == pytest.approx(2 / 3)
    assert (r["next_head_acc"], r["next_dependent_acc"], r["next_either_acc"]) == pytest.approx((1 / 3, 2 / 4, 3 / 4))
    assert (r["prev_head_acc"], r["prev_dependent_acc"], r["prev_either_acc"]) == pytest.approx((2 / 3, 1 / 4, 3 / 4))
    assert (r["n"], r["n_head"], r["total"]) == (4, 3, 3)


# ---------------------------------------------------------------------------------------
# Real UD English-EWT sentences
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ewt_heads():
    from olas_utils.data import load_ud_ewt

    try:
        ds = load_ud_ewt("dev")
    except FileNotFoundError as e:  # data folder not shipped with this checkout
        pytest.skip(str(e))
    return [list(h) for h in ds.select(range(20))["heads"]]


def test_gold_head_maps_score_perfectly_on_ewt(ewt_heads):
    rng = np.random.default_rng(0)
    maps, roots = [], 0
    for heads in ewt_heads:
        w = len(heads)
        m = 0.05 * rng.random((w, w))  # noise below the signal
        for i, h in enumerate(heads):
            if h:
                m[i, h - 1] += 1.0
            else:  # the root word attends to its first dependent
                roots += w >= 2
                deps = [j for j, hj in enumerate(heads) if hj == i + 1]
                if deps:
                    m[i, deps[0]] += 1.0
        maps.append(torch.from_numpy(m).float())
    r = probe_corpus(maps, ewt_heads)
    n_words = sum(len(h) for h in ewt_heads if len(h) >= 2)
    assert r["n"] == n_words and r["head_acc"] == 1.0 and r["either_acc"] == 1.0 and r["uuas"] == 1.0
    assert r["dependent_acc"] == pytest.approx(roots / n_words)  # only root words point down


def test_adjacent_baseline_on_ewt_matches_direct_count(ewt_heads):
    long = [h for h in ewt_heads if len(h) >= 2]
    # direct count: edge {i, i+1} is gold iff word i+1 heads word i+2 or vice versa (1-based)
    hits = sum(h[i] == i + 2 or h[i + 1] == i + 1 for h in long for i in range(len(h) - 1))
    total = sum(sum(x != 0 for x in h) for h in long)
    r = adjacent_baseline(ewt_heads)
    assert r["uuas"] == pytest.approx(hits / total)
    assert 0.3 < r["uuas"] < 0.8  # English: many but far from all dependencies are adjacent
    # the same baseline through the probes: a "next word" map (last word -> previous word)
    maps = []
    for h in ewt_heads:
        w = len(h)
        m = np.zeros((w, w))
        for i in range(w):
            if w >= 2:
                m[i, i + 1 if i + 1 < w else i - 1] = 1.0
        maps.append(m)
    p = probe_corpus(maps, ewt_heads)
    assert p["uuas"] == pytest.approx(r["uuas"])
    assert (p["head_acc"], p["dependent_acc"], p["either_acc"]) == pytest.approx(
        (r["next_head_acc"], r["next_dependent_acc"], r["next_either_acc"])
    )
