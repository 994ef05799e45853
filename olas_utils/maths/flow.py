"""Attention flow (Abnar & Zuidema 2020): the maximum flow from every output token to every input token through the layered graph of one sentence's attention, solved with scipy's integer max-flow.

Pure tensor / scipy code. ``flow[i, j]`` is the max-flow from output node ``i`` (layer N) to
input node ``j`` (layer 0) with capacities ``Â_l = (A_l + I) / rowsum(A_l + I)`` (Abnar &
Zuidema, *Quantifying Attention Flow in Transformers*, ACL 2020, Sec. 3), rows not divided by
their sum; capacities ``round(Â · scale)`` (``DEFAULT_SCALE = 2**30``), error at most
:func:`flow_error_bound`. The graph, how pairs are solved, the cost:
``docs/method.md#attention-flow``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from olas_utils.infra.progress import tqdm

__all__ = [
    "attention_flow",
    "attention_flow_many",
    "flow_cost",
    "flow_error_bound",
    "FlowCost",
    "DEFAULT_SCALE",
    "DEFAULT_MAX_TOKENS",
    "METHODS",
]

#: capacities are ``round(Â · scale)``; 2**30 keeps every capacity and per-edge flow in int32.
DEFAULT_SCALE = 2**30
#: the scipy max-flow algorithms; Dinic measured ~200× faster than Edmonds–Karp on minilm-l6 (6 layers).
METHODS = ("dinic", "edmonds_karp")
#: longest sentence :func:`attention_flow_many` takes unless told otherwise (16,384 max-flows).
DEFAULT_MAX_TOKENS = 128
#: pairs per scipy call (automatic): about this many edges' worth, 4 to 64 pairs. Measured at
#: one thread on random attention: 64 pairs a call are 25-40x faster than one for N = 2 (the
#: ~0.7 ms validation of each call dominates), 4-8 pairs 10-30 % faster for N = 6..24.
TARGET_EDGES_PER_CALL = 40_000
PAIRS_PER_CALL_RANGE = (4, 64)
#: the cost model of :func:`flow_cost` (Dinic, one thread, the machine OLAS was built on):
#: seconds per max-flow (its share of a call's overhead) and per edge of its graph. Within
#: about ±50 %: deep models take longer per edge (24 layers ~0.14 µs, 6-12 layers ~0.07-0.13 µs).
SECONDS_PER_FLOW = 2e-5
SECONDS_PER_EDGE = 1e-7


def _as_stack(layers: torch.Tensor | Sequence[torch.Tensor]) -> np.ndarray:
    if isinstance(layers, (torch.Tensor, np.ndarray)):
        a = torch.as_tensor(layers)
    else:
        items = list(layers)
        if not items:
            raise ValueError("layers is empty: pass the N ≥ 1 layers' (T, T) attention of one sentence")
        shapes = {tuple(torch.as_tensor(x).shape) for x in items}
        if len(shapes) != 1:
            raise ValueError(f"the layers' attention maps have different shapes {sorted(shapes)}; each must be (T, T)")
        a = torch.stack([torch.as_tensor(x) for x in items])
    if a.dim() != 3 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"attention must be one sentence's (layer, T, T) stack, got shape {tuple(a.shape)}; "
            "for several sentences use attention_flow_many (one (N, T_i, T_i) stack each)"
        )
    if a.shape[0] < 1 or a.shape[-1] < 1:
        raise ValueError(f"attention must have at least one layer and one token, got shape {tuple(a.shape)}")
    if not (a.is_floating_point()):
        raise TypeError(f"attention must be floating point (post-softmax probabilities), got {a.dtype}")
    return a.detach().to("cpu", torch.float64).numpy()


def _residual(layers, row_sum_tol: float) -> np.ndarray:
    """``Â = (A + I) / rowsum(A + I)`` with padded tokens' nodes removed, float64 (layer, query, key)."""
    a = _as_stack(layers)
    n, t, _ = a.shape
    if not np.isfinite(a).all():
        li, qi, _ = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(
            f"attention has NaN or inf (first at layer {li}, row {qi}): attention flow needs finite weights"
        )
    if (a < 0).any():
        li, qi, ki = np.argwhere(a < 0)[0]
        raise ValueError(
            f"attention has negative weights (first {a[li, qi, ki]:.3g} at layer {li}, row {qi}, column {ki}): "
            "pass post-softmax probabilities, not scores or attributions"
        )
    zero = (a == 0).all(-1)  # (N, T): a row of zeros is a padded query, as the capture leaves it
    padded = zero.all(0)
    if padded.all():
        raise ValueError(
            f"every attention row is zero in every layer (shape {tuple(a.shape)}): no real token, only padding; "
            "pass head-averaged post-softmax attention (each real token's rows sum to 1)"
        )
    mixed = zero.any(0) & ~padded
    if mixed.any():
        q = int(np.flatnonzero(mixed)[0])
        raise ValueError(
            f"token {q}'s attention row is zero in layers {np.flatnonzero(zero[:, q]).tolist()} only: a padded "
            "token has a zero row in every layer, a real one in none"
        )
    if padded.any() and (a[:, :, padded] != 0).any():
        q = int(np.flatnonzero(padded & (a != 0).any((0, 1)))[0])
        raise ValueError(f"token {q} has zero attention rows (padding) but receives attention: not padding")
    sums = a.sum(-1)
    bad = (np.abs(sums - 1) > row_sum_tol) & ~padded[None, :]
    if bad.any():
        li, qi = np.argwhere(bad)[0]
        raise ValueError(
            f"layer {li}, row {qi} of the attention sums to {sums[li, qi]:.6g}, not 1 within {row_sum_tol:g}: "
            "pass head-averaged post-softmax attention (rows sum to 1; padded rows all zero)"
        )
    ahat = (a + np.eye(t)) / (1 + sums)[..., None]
    ahat[:, padded, :] = 0
    ahat[:, :, padded] = 0
    return ahat


def _capacities(ahat: np.ndarray, scale: int) -> np.ndarray:
    return np.rint(ahat * scale).astype(np.int32)


def _check_options(scale, method: str, pairs_per_call) -> None:
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or not 1 <= scale <= DEFAULT_SCALE:
        raise ValueError(f"scale must be an integer in 1..2**30 (capacities must fit scipy's int32), got {scale!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if pairs_per_call is not None and (isinstance(pairs_per_call, bool) or int(pairs_per_call) < 1):
        raise ValueError(f"pairs_per_call must be a positive integer or None (automatic), got {pairs_per_call!r}")


def _reachable(caps: np.ndarray) -> np.ndarray:
    """(query, key) bool: output i reaches input j through non-zero capacities (else the flow is 0)."""
    r = caps[-1] > 0
    for c in caps[-2::-1]:
        r = (r.astype(np.float32) @ (c > 0).astype(np.float32)) > 0
    return r


def _pair_edges(num_tokens: int, num_layers: int, causal: bool = False) -> int:
    """Edges of one pair's graph: the middle layers' (at most) plus 2T source/sink slots."""
    t, n = num_tokens, num_layers
    if n < 2:
        return 0
    per_layer = t * (t + 1) // 2 if causal else t * t
    return (n - 2) * per_layer + 2 * t


def _auto_pairs(edges: int) -> int:
    lo, hi = PAIRS_PER_CALL_RANGE
    return max(lo, min(hi, TARGET_EDGES_PER_CALL // max(edges, 1)))


class _Copies:
    """The CSR of ``b`` disjoint copies of a sentence's pair graph sharing S (node 0) and Z (node 1)."""

    def __init__(self, caps: np.ndarray, b: int):
        n, t, _ = caps.shape
        self.b, self.t, self.m = b, t, (n - 1) * t  # m: nodes per copy (layers N-1..1)
        cols, data, counts = [], [], []
        for q in range(n - 2):  # copy-local layer q = layer N-1-q, edges into layer N-2-q
            c = caps[n - 2 - q]
            k, j = np.nonzero(c)
            cols.append((q + 1) * t + j)
            data.append(c[k, j])
            counts.append(np.bincount(k, minlength=t))
        mid_cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        mid_data = np.concatenate(data) if data else np.zeros(0, np.int32)
        self.mid = len(mid_cols)
        self.local = self.mid + t  # entries per copy: the middle edges, then one edge per layer-1 node to Z
        counts = np.concatenate([*counts, np.ones(t, np.int64)])
        offsets = 2 + self.m * np.arange(b)
        src_cols = (offsets[:, None] + np.arange(t)).ravel()
        copy_cols = np.concatenate([mid_cols[None, :] + offsets[:, None], np.ones((b, t), np.int64)], 1).ravel()
        self.indices = np.concatenate([src_cols, copy_cols]).astype(np.int32)
        row_ends = b * t + np.cumsum(np.tile(counts, b))
        self.indptr = np.concatenate([[0, b * t, b * t], row_ends]).astype(np.int32)
        self.data = np.concatenate(
            [np.zeros(b * t, np.int32), np.tile(np.concatenate([mid_data, np.zeros(t, np.int32)]), b)]
        )
        self.shape = (2 + b * self.m,) * 2

    def solve(self, caps: np.ndarray, outs: np.ndarray, ins: np.ndarray, method: str) -> np.ndarray:
        """Integer max-flow of pairs ``(outs[p], ins[p])``, ``len(outs) == b``; int64 (b,)."""
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import maximum_flow

        b, t = self.b, self.t
        data = self.data
        data[: b * t] = caps[-1][outs].ravel()
        data[b * t :].reshape(b, self.local)[:, self.mid :] = caps[0][:, ins].T
        graph = csr_array((data, self.indices, self.indptr), shape=self.shape)
        flow = maximum_flow(graph, 0, 1, method=method).flow
        lo, hi = flow.indptr[0], flow.indptr[1]
        cols = np.asarray(flow.indices[lo:hi], np.int64)
        vals = np.asarray(flow.data[lo:hi], np.float64)
        keep = cols >= 2
        sums = np.bincount((cols[keep] - 2) // self.m, weights=vals[keep], minlength=b)
        return np.rint(sums).astype(np.int64)


def _flow_rows(caps: np.ndarray, rows: Sequence[int], reach: np.ndarray, method: str, pairs_per_call: int | None):
    """Integer flows of output rows ``rows`` (int64, (row, key)); ``reach`` the rows' (row, key) bool."""
    n, t, _ = caps.shape
    out = np.zeros((len(rows), t), np.int64)
    if n == 1:
        out[:] = np.where(reach, caps[0][list(rows)], 0)
        return out
    r, j = np.nonzero(reach)
    if not len(r):
        return out
    b = pairs_per_call or _auto_pairs(_pair_edges(t, n))
    b = min(b, len(r))
    copies = {b: _Copies(caps, b)}
    outs = np.asarray(rows)[r]
    for s in range(0, len(r), b):
        e = min(s + b, len(r))
        g = copies.get(e - s) or copies.setdefault(e - s, _Copies(caps, e - s))
        out[r[s:e], j[s:e]] = g.solve(caps, outs[s:e], j[s:e], method)
    return out


def attention_flow(
    layers: torch.Tensor | Sequence[torch.Tensor],
    *,
    scale: int = DEFAULT_SCALE,
    method: str = "dinic",
    pairs_per_call: int | None = None,
    row_sum_tol: float = 1e-3,
) -> torch.Tensor:
    """Attention flow of one sentence: ``flow[i, j]``, the maximum flow from output token
    ``i`` to input token ``j`` through its layers' attention graph (Abnar & Zuidema 2020).

    Args:
        layers: ``(layer, query, key)`` tensor, or a sequence of N ``(query, key)`` tensors,
            lowest layer first: each layer's head-averaged post-softmax attention, e.g.
            ``extract_ola(..., layers=range(N))["layer:i"][s]``. Rows sum to 1; an all-zero
            row in every layer marks a padded token (its row and column of the result are 0).
        scale: capacities are ``round(Â · scale)``, integers in ``1..2**30``; the result is
            within :func:`flow_error_bound` of the exact flow.
        method: scipy's ``"dinic"`` (default) or ``"edmonds_karp"``.
        pairs_per_call: pairs solved per scipy call as disjoint copies (None: about
            40,000 edges' worth, 4 to 64 pairs); changes the speed, never the result.
        row_sum_tol: how far a row's sum may be from 1.

    Returns:
        ``(query, key)`` float32 CPU tensor (outputs × inputs), each value in ``[0, 1]``, not
        row-normalised; 0 where no path of non-zero attention joins ``i`` to ``j``.

    Raises:
        ValueError: on a shape that is not ``(N, T, T)``, NaN/inf or negative weights, rows
            not summing to 1 (or zero in some layers only), a bad ``scale``/``method``.
        TypeError: on integer attention.
    """
    _check_options(scale, method, pairs_per_call)
    ahat = _residual(layers, row_sum_tol)
    if ahat.shape[0] == 1:
        return torch.from_numpy(ahat[0].astype(np.float32))
    caps = _capacities(ahat, scale)
    flows = _flow_rows(caps, range(caps.shape[-1]), _reachable(caps), method, pairs_per_call)
    return torch.from_numpy((flows / scale).astype(np.float32))


def flow_error_bound(num_tokens: int, num_layers: int, scale: int = DEFAULT_SCALE) -> float:
    """Largest possible difference between :func:`attention_flow` and the exact flow, from
    rounding the capacities: ``E / (2·scale)``, ``E = (N − 2)·T² + 2T`` the edges of one
    pair's graph; 0 for N = 1 (``docs/method.md#attention-flow``). The float32 result adds at
    most 2⁻²⁴ ≈ 6·10⁻⁸."""
    return _pair_edges(num_tokens, num_layers) / (2 * scale)


@dataclass(frozen=True)
class FlowCost:
    """What an attention-flow run will cost, before it starts (:func:`flow_cost`).

    Attributes:
        sentences: sentences to compute.
        max_flows: max-flow problems (pairs with a path; T² per sentence, T(T+1)/2 causal).
        edges: edges of those problems' graphs, summed (the work Dinic scales with).
        seconds: estimated wall-clock time on ``processes`` worker processes.
        processes: worker processes assumed.
        error_bound: largest rounding error of any flow (:func:`flow_error_bound`).
    """

    sentences: int
    max_flows: int
    edges: int
    seconds: float
    processes: int = 1
    error_bound: float = 0.0

    def __str__(self) -> str:
        s = self.seconds
        when = f"{s:.1f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h")
        return (
            f"attention flow: {self.sentences} sentence(s), {self.max_flows:,} max-flows over {self.edges:,} edges, "
            f"about {when} on {self.processes} process(es); rounding error ≤ {self.error_bound:.1e}"
        )


def _seconds(max_flows: int, edges: int) -> float:
    return max_flows * SECONDS_PER_FLOW + edges * SECONDS_PER_EDGE


def _calibration_factor(num_layers: int, num_tokens: int) -> float:
    """Measured / modelled time of 4 output rows of a random sentence with N layers and
    ``min(T, 24)`` tokens on this machine (well under a second for N ≤ 24)."""
    g = torch.Generator().manual_seed(0)
    n, t = num_layers, max(2, min(num_tokens, 24))
    a = torch.softmax(3 * torch.randn(n, t, t, generator=g, dtype=torch.float64), -1)
    caps = _capacities(_residual(a, 1e-3), DEFAULT_SCALE)
    rows = min(4, t)
    t0 = time.perf_counter()
    _flow_rows(caps, range(rows), _reachable(caps)[:rows], "dinic", None)
    took = time.perf_counter() - t0
    return took / _seconds(rows * t, rows * t * _pair_edges(t, n))


def flow_cost(
    lengths: Sequence[int], num_layers: int, *, causal: bool = False, processes: int = 1, calibrate: bool = False
) -> FlowCost:
    """Estimate the cost of :func:`attention_flow_many` on sentences of these lengths.

    Args:
        lengths: token count T of each sentence.
        num_layers: N, the model's attention layers.
        causal: a causal model (only ``j ≤ i`` pairs have a flow, and half the edges).
        processes: worker processes (the estimate divides the time by them, an ideal).
        calibrate: time 4 output rows of a random sentence with ``num_layers`` layers and
            up to 24 tokens (well under a second) and rescale the estimate by how this machine
            and depth compare with the documented constants (``SECONDS_PER_FLOW``,
            ``SECONDS_PER_EDGE``: one thread, Dinic).

    Returns:
        A :class:`FlowCost`; ``str()`` of it is one readable line.

    Raises:
        TypeError: ``lengths`` is a number or string, not a list of lengths.
        ValueError: a length below 1 or not a whole number; ``num_layers`` or ``processes`` below 1.
    """
    if isinstance(lengths, (int, np.integer, float, str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(
            f"lengths must be a list of token counts, one per sentence, got {type(lengths).__name__} {lengths!r}; "
            f"for one sentence pass [{lengths!r}]"
        )
    lengths = list(lengths)
    bad = [t for t in lengths if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1]
    if bad:
        raise ValueError(
            f"lengths must be positive whole token counts (T >= 1 per sentence), got {bad[0]!r} among {len(lengths)}"
        )
    if isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) or num_layers < 1:
        raise ValueError(f"num_layers must be a whole number >= 1, got {num_layers!r}")
    if isinstance(processes, bool) or not isinstance(processes, (int, np.integer)) or processes < 1:
        raise ValueError(f"processes must be a whole number >= 1, got {processes!r}")
    flows = edges = 0
    for t in lengths:
        if num_layers >= 2:
            pairs = t * (t + 1) // 2 if causal else t * t
            flows += pairs
            edges += pairs * _pair_edges(t, num_layers, causal)
    if calibrate and flows:
        secs = _seconds(flows, edges) * _calibration_factor(num_layers, max(lengths))
    else:
        secs = _seconds(flows, edges)
    bound = max((flow_error_bound(t, num_layers) for t in lengths), default=0.0)
    return FlowCost(len(lengths), flows, edges, secs / processes, processes, bound)


def _init_worker() -> None:
    torch.set_num_threads(1)


def _run_task(task: tuple) -> tuple[int, int, np.ndarray, int]:
    """One (sentence, block of output rows) task: ``(sentence, first row, int flows, pairs solved)``."""
    s, r0, caps, reach, method, ppc = task
    return s, r0, _flow_rows(caps, range(r0, r0 + len(reach)), reach, method, ppc), int(reach.sum())


def attention_flow_many(
    per_sentence_layers: Sequence[torch.Tensor | Sequence[torch.Tensor]],
    *,
    processes: int = 1,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    too_long: str = "error",
    progress: bool = True,
    scale: int = DEFAULT_SCALE,
    method: str = "dinic",
    pairs_per_call: int | None = None,
    row_sum_tol: float = 1e-3,
) -> list[torch.Tensor | None]:
    """:func:`attention_flow` of many sentences, opt-in because it is costly (T² max-flows
    per sentence; :func:`flow_cost` estimates it), optionally over worker processes.

    Every sentence is checked before any flow is solved; the result does not depend on
    ``processes`` or ``pairs_per_call``.

    Args:
        per_sentence_layers: one ``(layer, query, key)`` stack (or sequence of ``(query,
            key)``) per sentence, cropped to its tokens, e.g.
            ``[torch.stack([res[f"layer:{i}"][s] for i in range(N)]) for s in range(B)]``.
        processes: spawned worker processes of one thread each, given (sentence, block of
            output rows) tasks; 1 (default) computes in this process.
        max_tokens: the longest sentence accepted (default 128: 16,384 max-flows); None
            for no cap.
        too_long: a sentence over ``max_tokens``: ``"error"`` (default) raises before any
            work; ``"skip"`` leaves it out (its entry is None) with one warning naming it.
        progress: print the cost estimate and show a progress bar.
        scale, method, pairs_per_call, row_sum_tol: as in :func:`attention_flow`.

    Returns:
        One ``(query, key)`` float32 tensor per sentence (None for a skipped one), in order.

    Raises:
        ValueError: on a sentence over ``max_tokens`` (with ``too_long="error"``), a bad
            ``processes`` / ``too_long`` / option, or a sentence :func:`attention_flow`
            refuses (its index named).
    """
    _check_options(scale, method, pairs_per_call)
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    if too_long not in ("error", "skip"):
        raise ValueError(f"too_long must be 'error' or 'skip', got {too_long!r}")
    prepared, skipped = [], []  # per sentence: None (skipped), ("exact", Â_1) or (capacities, reachable)
    for s, layers in enumerate(per_sentence_layers):
        try:
            ahat = _residual(layers, row_sum_tol)
        except (ValueError, TypeError) as e:
            raise type(e)(f"sentence {s}: {e}") from None
        n, t, _ = ahat.shape
        if max_tokens is not None and t > max_tokens:
            if too_long == "skip":
                skipped.append(s)
                prepared.append(None)
                continue
            raise ValueError(
                f"sentence {s} has {t} tokens, more than max_tokens={max_tokens}: attention flow solves T² = {t * t:,} "
                f"max-flows for it ({flow_cost([t], n)}). Pass max_tokens={t} (or None) to compute it anyway, "
                "or too_long='skip' to leave such sentences out"
            )
        if n == 1:
            prepared.append(("exact", ahat[0]))
        else:
            caps = _capacities(ahat, scale)
            prepared.append((caps, _reachable(caps)))
    if skipped:
        warnings.warn(
            f"attention flow skipped {len(skipped)} sentence(s) over max_tokens={max_tokens}: {skipped}", stacklevel=2
        )
    solved = [s for s, p in enumerate(prepared) if p is not None and not isinstance(p[0], str)]
    ints = {s: np.zeros(prepared[s][1].shape, np.int64) for s in solved}
    n_flows = sum(int(prepared[s][1].sum()) for s in solved)
    if progress:
        sizes = {s: (prepared[s][0].shape[-1], prepared[s][0].shape[0]) for s in solved}  # (T, N)
        edges = sum(int(prepared[s][1].sum()) * _pair_edges(*sizes[s]) for s in solved)
        bound = max((flow_error_bound(*sizes[s], scale) for s in solved), default=0.0)
        cost = FlowCost(len(solved), n_flows, edges, _seconds(n_flows, edges) / processes, processes, bound)
        tqdm.write(str(cost))
    pieces = max(1, math.ceil(4 * processes / max(len(solved), 1))) if processes > 1 else 4
    tasks = []
    for s in solved:
        caps, reach = prepared[s]
        step = max(1, math.ceil(caps.shape[-1] / pieces))
        tasks += [(s, r0, caps, reach[r0 : r0 + step], method, pairs_per_call) for r0 in range(0, caps.shape[-1], step)]
    bar = tqdm(total=n_flows, unit="flow", desc="attention flow", disable=not progress)

    def collect(s: int, r0: int, block: np.ndarray, done: int) -> None:
        ints[s][r0 : r0 + len(block)] = block
        bar.update(done)

    try:
        if processes == 1 or len(tasks) <= 1:
            for task in tasks:
                collect(*_run_task(task))
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            ctx = multiprocessing.get_context("spawn")  # fork after OpenMP start-up can deadlock the child
            with ProcessPoolExecutor(min(processes, len(tasks)), mp_context=ctx, initializer=_init_worker) as pool:
                for fut in as_completed([pool.submit(_run_task, task) for task in tasks]):
                    collect(*fut.result())
    finally:
        bar.close()
    out: list[torch.Tensor | None] = [None] * len(prepared)
    for s, p in enumerate(prepared):
        if p is not None:
            exact = isinstance(p[0], str)
            out[s] = torch.from_numpy((p[1] if exact else ints[s] / scale).astype(np.float32))
    return out
