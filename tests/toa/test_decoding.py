"""Tree decoders against brute-force enumeration of all trees (and networkx for larger n)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch

from olas_utils.toa.decoding import chu_liu_edmonds, decode_tree, eisner, tree_score

# ---------------------------------------------------------------------------------------
# Independent reference: enumerate every head assignment and keep the trees
# ---------------------------------------------------------------------------------------


def _is_tree(heads):
    """heads[i-1] = head of word i; tree iff every word reaches 0 without a cycle."""
    n = len(heads)
    for i in range(1, n + 1):
        seen, v = set(), i
        while v != 0:
            if v in seen:
                return False
            seen.add(v)
            v = heads[v - 1]
    return True


def _is_projective(heads):
    """No two arcs cross (ROOT at position 0), checked pairwise on the arc spans."""
    arcs = [(min(h, d), max(h, d)) for d, h in enumerate(heads, 1)]
    for (a, b), (c, d) in itertools.combinations(arcs, 2):
        if a < c < b < d or c < a < d < b:
            return False
    return True


@functools.cache
def _all_trees(n):
    """Every tree over words 1..n rooted at 0, with flags (projective, single root)."""
    trees, proj, single = [], [], []
    choices = [[h for h in range(n + 1) if h != d] for d in range(1, n + 1)]
    for heads in itertools.product(*choices):
        if _is_tree(heads):
            trees.append(heads)
            proj.append(_is_projective(heads))
            single.append(heads.count(0) == 1)
    return np.array(trees), np.array(proj), np.array(single)


def _brute_best(s, projective, single_root):
    trees, proj, single = _all_trees(s.shape[0] - 1)
    keep = np.ones(len(trees), dtype=bool)
    if projective:
        keep &= proj
    if single_root:
        keep &= single
    t = trees[keep]
    n = s.shape[0] - 1
    totals = s[np.arange(1, n + 1)[None, :], t].sum(axis=1)
    return totals.max()


def _assert_valid(heads, n, single_root, projective):
    assert isinstance(heads, list) and len(heads) == n
    assert all(isinstance(h, int) and 0 <= h <= n and h != i for i, h in enumerate(heads, 1))
    assert _is_tree(tuple(heads))
    if single_root:
        assert heads.count(0) == 1
    else:
        assert heads.count(0) >= 1
    if projective:
        assert _is_projective(heads)


def test_reference_counts():
    # Cayley: (n+1)^(n-1) trees on n+1 labelled nodes rooted at 0; single-root: n^(n-1).
    # Projective single-root trees over n words: 1, 2, 7, 30, 143, 728 (OEIS A006013).
    for n in range(1, 7):
        trees, proj, single = _all_trees(n)
        assert len(trees) == (n + 1) ** (n - 1)
        assert single.sum() == n ** (n - 1)
        assert (proj & single).sum() == [1, 2, 7, 30, 143, 728][n - 1]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("single_root", [True, False])
def test_against_brute_force(n, single_root):
    rng = np.random.default_rng(100 * n + single_root)
    reps = {1: 5, 2: 30, 3: 40, 4: 40, 5: 25, 6: 8}[n]
    for _ in range(reps):
        s = rng.normal(size=(n + 1, n + 1)) * rng.choice([0.1, 1.0, 10.0])
        for alg, proj in ((eisner, True), (chu_liu_edmonds, False)):
            heads = alg(s, single_root=single_root)
            _assert_valid(heads, n, single_root, proj)
            best = _brute_best(s, projective=proj, single_root=single_root)
            assert tree_score(s, heads) == pytest.approx(best, abs=1e-9), (alg.__name__, n, single_root)


def test_root_bias_needs_single_root_constraint():
    # Root arcs dominate: unconstrained decoders attach every word to ROOT, constrained
    # ones attach exactly one, and still reach the brute-force optimum.
    rng = np.random.default_rng(7)
    n = 5
    s = rng.normal(size=(n + 1, n + 1))
    s[:, 0] += 20.0
    for alg, proj in ((eisner, True), (chu_liu_edmonds, False)):
        assert alg(s, single_root=False) == [0] * n
        heads = alg(s, single_root=True)
        assert heads.count(0) == 1
        assert tree_score(s, heads) == pytest.approx(_brute_best(s, proj, True), abs=1e-9)


def test_hand_case_nonprojective():
    # Words 1..4. Arc scores (dep <- head), everything else -10:
    #   ROOT->2: 10, 2->1: 10, 2->4: 10, 4->3: 10, 1->3: 12 (crosses 2->4? span (1,3) vs (2,4): yes)
    # Best non-projective tree: 0->2, 2->1, 2->4, 1->3  = 10+10+10+12 = 42 (arc 1->3 crosses 2->4).
    # Best projective tree: 0->2, 2->1, 2->4, 4->3      = 40.
    s = np.full((5, 5), -10.0)
    s[2, 0] = s[1, 2] = s[4, 2] = s[3, 4] = 10.0
    s[3, 1] = 12.0
    assert chu_liu_edmonds(s) == [2, 0, 1, 2]
    assert eisner(s) == [2, 0, 4, 2]
    assert decode_tree(s, "mst") == [2, 0, 1, 2]
    assert decode_tree(s, "eisner") == [2, 0, 4, 2]
    assert tree_score(s, [2, 0, 1, 2]) == 42.0


def test_hand_case_cycle_contraction():
    # 1 and 2 prefer each other (a 2-cycle, 10 each); ROOT->1 = 5, ROOT->2 = 1, 1->3 = 3.
    # Breaking the cycle: enter at 1 (0->1 + 1->2 = 5 + 10) beats entering at 2 (1 + 10).
    s = np.full((4, 4), -5.0)
    s[1, 2] = s[2, 1] = 10.0
    s[1, 0], s[2, 0] = 5.0, 1.0
    s[3, 1] = 3.0
    assert chu_liu_edmonds(s) == [0, 1, 1]
    assert eisner(s) == [0, 1, 1]


def test_n1_and_input_types():
    s = [[0.0, 0.0], [3.0, -np.inf]]  # diagonal ignored even if -inf
    for alg in ("mst", "eisner"):
        for sr in (True, False):
            assert decode_tree(s, alg, single_root=sr) == [0]
    t = torch.randn(5, 5, dtype=torch.float32)
    a = np.asarray(t, dtype=np.float64)
    assert chu_liu_edmonds(t) == chu_liu_edmonds(a)
    assert eisner(t) == eisner(a)


def test_row0_and_diagonal_ignored():
    rng = np.random.default_rng(3)
    s = rng.normal(size=(5, 5))
    s2 = s.copy()
    s2[0, :] = 1e6
    np.fill_diagonal(s2, 1e6)
    for alg in (eisner, chu_liu_edmonds):
        assert alg(s) == alg(s2)


def test_errors():
    with pytest.raises(ValueError, match="square"):
        eisner(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="at least one word"):
        chu_liu_edmonds(np.zeros((1, 1)))
    bad = np.zeros((3, 3))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        chu_liu_edmonds(bad)
    with pytest.raises(ValueError, match="unknown algorithm"):
        decode_tree(np.zeros((3, 3)), "cky")
    with pytest.raises(ValueError, match="entries"):
        tree_score(np.zeros((3, 3)), [0])


def test_mst_matches_networkx_on_larger_sentences():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(11)
    for n in (10, 20, 40):
        s = rng.normal(size=(n + 1, n + 1))
        g = nx.DiGraph()
        for d in range(1, n + 1):
            for h in range(n + 1):
                if h != d:
                    g.add_edge(h, d, weight=float(s[d, h]))
        arb = nx.maximum_spanning_arborescence(g, attr="weight")  # 0 has no in-arcs: rooted at 0
        ref = sum(s[d, h] for h, d in arb.edges())
        heads = chu_liu_edmonds(s, single_root=False)
        _assert_valid(heads, n, False, False)
        assert tree_score(s, heads) == pytest.approx(ref, abs=1e-9)
        if n > 20:
            continue
        # single root: best over forcing each root child r (networkx on the restricted graph)
        best = -np.inf
        for r in range(1, n + 1):
            g2 = g.copy()
            g2.remove_edges_from([(0, d) for d in range(1, n + 1) if d != r])
            best = max(best, sum(s[d, h] for h, d in nx.maximum_spanning_arborescence(g2).edges()))
        heads = chu_liu_edmonds(s, single_root=True)
        _assert_valid(heads, n, True, False)
        assert tree_score(s, heads) == pytest.approx(best, abs=1e-9)
        # Eisner's optimum is a projective tree, so it can only be at most the MST's
        assert tree_score(s, eisner(s)) <= best + 1e-9
        _assert_valid(eisner(s), n, True, True)


def test_long_sentence_runs():
    rng = np.random.default_rng(5)
    s = rng.normal(size=(151, 151))
    for alg, proj in ((eisner, True), (chu_liu_edmonds, False)):
        _assert_valid(alg(s), 150, True, proj)
