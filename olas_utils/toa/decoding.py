"""Decoding dependency trees from arc scores (maximum spanning trees).

``scores`` is a real ``(dependent, head)`` array of ``n + 1`` rows and columns (numpy, torch or
lists; index 0 = ROOT, words 1..n; ``scores[dep, head]`` scores the arc head → dep, a biaffine
parser's layout, Dozat & Manning 2017), handled in float64; row 0 and the diagonal are ignored,
every other entry must be finite. Heads come back as a length-n ``list[int]``, 1-based, 0 =
ROOT (CoNLL-U HEAD). :func:`eisner`: projective, Eisner (1996), O(n³); :func:`chu_liu_edmonds`:
non-projective, Chu & Liu (1965), Edmonds (1967). ``single_root=True`` (the UD rule, default)
allows exactly one root child. Single-root reductions and ties: ``docs/method.md#ola-and-syntax``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["eisner", "chu_liu_edmonds", "decode_tree", "tree_score"]

_NEG = -np.inf


def _as_scores(scores: Any) -> np.ndarray:
    """Validate and convert ``scores`` to a float64 ``(dependent, head)`` numpy array (a copy)."""
    if hasattr(scores, "detach"):  # torch.Tensor
        scores = scores.detach().to("cpu").double().numpy()
    s = np.array(scores, dtype=np.float64, copy=True)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"scores must be a square (n+1, n+1) matrix, got shape {s.shape}")
    if s.shape[0] < 2:
        raise ValueError(f"scores must cover ROOT and at least one word, got shape {s.shape}")
    used = s[1:].copy()
    np.fill_diagonal(used[:, 1:], 0.0)  # diagonal of rows 1..n is ignored
    if not np.isfinite(used).all():
        raise ValueError("scores rows 1..n must be finite off the diagonal (NaN or ±inf found)")
    return s


def tree_score(scores: Any, heads: list[int]) -> float:
    """Total score of a head assignment: ``sum_i scores[i, heads[i-1]]`` for words i = 1..n.

    Args:
        scores: ``(dependent, head)`` arc scores, ROOT at index 0 (module convention).
        heads: length-n list of 1-based heads (0 = ROOT).

    Returns:
        The sum as a Python float.

    Raises:
        ValueError: bad ``scores`` shape/values, ``len(heads) != n``, or a head outside
            ``0..n``.
    """
    s = _as_scores(scores)
    n = s.shape[0] - 1
    if len(heads) != n:
        raise ValueError(f"heads has {len(heads)} entries but scores cover {n} words")
    h = np.asarray(heads, dtype=np.int64)
    if ((h < 0) | (h > n)).any():
        raise ValueError(f"heads must lie in 0..{n}, got {list(heads)}")
    return float(s[np.arange(1, n + 1), h].sum())


# ----------------------------------------------------------------------------------------
# Eisner (projective)
# ----------------------------------------------------------------------------------------


def _eisner_tables(s: np.ndarray):
    """Fill Eisner's span tables over nodes 0..n (s[dep, head], arcs into 0 forbidden).

    ``C[a, b, d]`` / ``I[a, b, d]``: best complete / incomplete span over a..b whose head
    is b (d = 0, "left": arcs point leftwards) or a (d = 1, "right"). Backpointers hold the
    split point r.
    """
    N = s.shape[0]
    C = np.full((N, N, 2), _NEG)
    I = np.full((N, N, 2), _NEG)
    bC = np.zeros((N, N, 2), dtype=np.int64)
    bI = np.zeros((N, N, 2), dtype=np.int64)
    for a in range(N):
        C[a, a, 0] = C[a, a, 1] = 0.0
    for k in range(1, N):
        for a in range(N - k):
            b = a + k
            # incomplete spans: C[a, r, right] + C[r+1, b, left], r in a..b-1
            vals = C[a, a:b, 1] + C[a + 1 : b + 1, b, 0]
            r = int(np.argmax(vals))
            best = vals[r]
            bI[a, b, 0] = bI[a, b, 1] = a + r
            I[a, b, 0] = best + s[a, b] if a != 0 else _NEG  # arc b -> a (never into ROOT)
            I[a, b, 1] = best + s[b, a]  # arc a -> b
            # complete, head b: C[a, r, left] + I[r, b, left], r in a..b-1
            vals = C[a, a:b, 0] + I[a:b, b, 0]
            r = int(np.argmax(vals))
            C[a, b, 0], bC[a, b, 0] = vals[r], a + r
            # complete, head a: I[a, r, right] + C[r, b, right], r in a+1..b
            vals = I[a, a + 1 : b + 1, 1] + C[a + 1 : b + 1, b, 1]
            r = int(np.argmax(vals))
            C[a, b, 1], bC[a, b, 1] = vals[r], a + 1 + r
    return C, I, bC, bI


def _eisner_backtrack(bC, bI, heads, a, b, d, complete):
    """Write the arcs of span (a, b, d) into ``heads`` (iterative; 0-based node ids)."""
    stack = [(a, b, d, complete)]
    while stack:
        a, b, d, complete = stack.pop()
        if a == b:
            continue
        if complete:
            r = bC[a, b, d]
            if d == 0:
                stack += [(a, r, 0, True), (r, b, 0, False)]
            else:
                stack += [(a, r, 1, False), (r, b, 1, True)]
        else:
            if d == 0:
                heads[a] = b
            else:
                heads[b] = a
            r = bI[a, b, d]
            stack += [(a, r, 1, True), (r + 1, b, 0, True)]


def eisner(scores: Any, single_root: bool = True) -> list[int]:
    """Highest-scoring **projective** dependency tree (Eisner 1996, O(n^3)).

    Args:
        scores: ``(dependent, head)`` float array/tensor, ROOT at index 0 (module convention).
        single_root: exactly one word attaches to ROOT (True) or any number (False).

    Returns:
        ``list[int]`` of length n: the 1-based head of words 1..n, 0 = ROOT.

    Raises:
        ValueError: ``scores`` not square, smaller than 2×2, or with non-finite used entries.

    Source: Eisner (1996), COLING; the span formulation of Kübler, McDonald & Nivre (2009)
    ch. 4. Single-root variant: ``docs/method.md#ola-and-syntax``.
    """
    s = _as_scores(scores)
    n = s.shape[0] - 1
    C, _, bC, bI = _eisner_tables(s)
    heads = [-1] * (n + 1)
    if not single_root:
        _eisner_backtrack(bC, bI, heads, 0, n, 1, True)
    else:
        # root child r: ROOT -> r, then r's left complete span over 1..r and right over r..n
        totals = s[1:, 0] + C[1, 1:, 0] + C[1:, n, 1]
        r = 1 + int(np.argmax(totals))
        heads[r] = 0
        _eisner_backtrack(bC, bI, heads, 1, r, 0, True)
        _eisner_backtrack(bC, bI, heads, r, n, 1, True)
    return [int(h) for h in heads[1:]]


# ----------------------------------------------------------------------------------------
# Chu-Liu/Edmonds (non-projective)
# ----------------------------------------------------------------------------------------


def _find_cycle(heads: np.ndarray) -> list[int] | None:
    """A cycle of the functional graph ``i -> heads[i]`` (node 0 has no head), or None."""
    m = len(heads)
    state = np.zeros(m, dtype=np.int8)  # 0 new, 1 on current path, 2 done
    state[0] = 2
    for start in range(1, m):
        if state[start]:
            continue
        path = []
        v = start
        while state[v] == 0:
            state[v] = 1
            path.append(v)
            v = int(heads[v])
        if state[v] == 1:  # closed a cycle on the current path
            cycle = path[path.index(v) :]
            for u in path:
                state[u] = 2
            return cycle
        for u in path:
            state[u] = 2
    return None


def _cle(s: np.ndarray) -> np.ndarray:
    """Maximum arborescence rooted at 0 of dense ``s[dep, head]`` (row 0, diagonal = -inf).

    Returns an int array of heads (``heads[0] = -1``). Recursive contraction: pick each
    node's best head; if that has a cycle C, contract C to one node whose incoming arcs
    are scored ``s[v, u] - s[v, head(v)]`` (best v in C) and outgoing arcs ``max_v s[w, v]``,
    solve recursively and expand.
    """
    m = s.shape[0]
    heads = np.argmax(s, axis=1)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    cyc = np.array(cycle, dtype=np.int64)
    in_cycle = np.zeros(m, dtype=bool)
    in_cycle[cyc] = True
    others = np.flatnonzero(~in_cycle)  # contains 0, which is never on a cycle
    o = len(others)
    c = o  # index of the contracted node
    s2 = np.full((o + 1, o + 1), _NEG)
    s2[:o, :o] = s[np.ix_(others, others)]
    out_sub = s[np.ix_(others, cyc)]  # arcs cycle -> outside dep
    s2[:o, c] = out_sub.max(axis=1)
    out_arg = cyc[np.argmax(out_sub, axis=1)]
    in_sub = s[np.ix_(cyc, others)] - s[cyc, heads[cyc]][:, None]  # arcs outside -> cycle
    s2[c, :o] = in_sub.max(axis=0)
    in_arg = cyc[np.argmax(in_sub, axis=0)]
    s2[0, :] = _NEG
    h2 = _cle(s2)
    result = np.full(m, -1, dtype=np.int64)
    for idx in range(1, o):
        w = others[idx]
        result[w] = out_arg[idx] if h2[idx] == c else others[h2[idx]]
    result[cyc] = heads[cyc]
    u = int(h2[c])
    result[in_arg[u]] = others[u]
    return result


def chu_liu_edmonds(scores: Any, single_root: bool = True) -> list[int]:
    """Highest-scoring (possibly **non-projective**) dependency tree: the maximum spanning
    arborescence rooted at ROOT (Chu–Liu/Edmonds).

    Args:
        scores: ``(dependent, head)`` float array/tensor, ROOT at index 0 (module convention).
        single_root: exactly one word attaches to ROOT (True) or any number (False).

    Returns:
        ``list[int]`` of length n: the 1-based head of words 1..n, 0 = ROOT.

    Raises:
        ValueError: ``scores`` not square, smaller than 2×2, or with non-finite used entries.

    Source: Chu & Liu (1965); Edmonds (1967); McDonald et al. (2005). Single root: a uniform
    root-arc penalty larger than any tree score difference (exact; ``docs/method.md#ola-and-syntax``).
    """
    s = _as_scores(scores)
    n = s.shape[0] - 1
    np.fill_diagonal(s, _NEG)
    s[0, :] = _NEG
    if single_root and n > 1:
        used = s[1:][np.isfinite(s[1:])]
        spread = float(used.max() - used.min())
        s[1:, 0] -= 2.0 * n * spread + 1.0
    heads = _cle(s)
    return [int(h) for h in heads[1:]]


def decode_tree(scores: Any, algorithm: str = "mst", single_root: bool = True) -> list[int]:
    """Decode a dependency tree from arc scores with the chosen algorithm.

    Args:
        scores: ``(dependent, head)`` float array/tensor, ROOT at index 0 (module convention).
        algorithm: ``"mst"`` (Chu–Liu/Edmonds, non-projective; aliases ``"cle"``,
            ``"chu_liu_edmonds"``), ``"eisner"`` (projective) or ``"greedy"`` (each word's
            highest-scoring head other than itself, ROOT included: no tree constraint, what
            the released code evaluates, ``docs/method.md#released-code``; may give cycles or several roots).
        single_root: exactly one word attaches to ROOT (ignored by ``"greedy"``).

    Returns:
        ``list[int]`` of length n: 1-based heads of words 1..n, 0 = ROOT.

    Raises:
        ValueError: unknown ``algorithm``, or invalid ``scores`` (see :func:`eisner`).
    """
    alg = algorithm.lower()
    if alg in ("mst", "cle", "chu_liu_edmonds"):
        return chu_liu_edmonds(scores, single_root=single_root)
    if alg == "eisner":
        return eisner(scores, single_root=single_root)
    if alg == "greedy":
        s = _as_scores(scores)
        np.fill_diagonal(s, -np.inf)
        return [int(j) for j in s[1:].argmax(axis=1)]
    raise ValueError(f"unknown algorithm {algorithm!r}; expected 'mst', 'eisner' or 'greedy'")
