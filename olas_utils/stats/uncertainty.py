"""How sure a number is: bootstrap intervals over every unit a result rests on (items, model
pairs, seeds) and three-way verdicts with a Holm correction (``docs/method.md#uncertainty``).

Pure numpy. An *outcome array* ``num`` has one axis per resampling unit, items last
(``(pair, chunk)``, ``(seed, sentence)``, ``(pair, seed, sentence)``); ``den`` of the same shape
makes the statistic ``Σ num / Σ den``, else the mean. Every axis is resampled independently (the
crossed bootstrap, Owen 2007, *Ann. Appl. Stat.* 1(2)); a margin uses the same draws for both
systems; p = ``min(1, 2·min(P*(m ≤ 0), P*(m ≥ 0)))`` with the +1 correction; Holm (1979)
across a table's cells. Why and how: ``docs/method.md#uncertainty``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "ALPHA",
    "BEATS",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "INDISTINGUISHABLE",
    "LOSES",
    "MIN_ITEMS",
    "N_RESAMPLES",
    "VERDICTS",
    "Interval",
    "interval",
    "interval_of",
    "margin",
    "margin_of",
    "ratio",
    "verdicts",
    "NOT_TESTABLE",
    "resamples_for",
    "verdict_counts",
    "against_every_control",
    "holm_reject",
]

#: Coverage of every reported interval (two-sided).
CONFIDENCE = 0.95
#: Family-wise error rate of one table's verdicts, Holm-corrected across its cells.
ALPHA = 0.05
#: Bootstrap resamples per interval. With Holm over m cells the smallest threshold is
#: ``ALPHA / m``; 4,000 resamples resolve p-values down to 2/4001 ≈ 0.0005 (m up to 100).
N_RESAMPLES = 4000
#: Seed of the resampling generator (each interval draws from its own generator seeded
#: with it, so a table's intervals do not depend on the order they are computed in).
BOOTSTRAP_SEED = 20251202
#: The fewest items (chunks, images, sentences) an interval or a verdict is computed from: with
#: fewer, the bootstrap cannot resample a spread (one item drawn n times is itself) and a margin
#: of 1 against 0 on one item would read "beats" at p = 0.0005.
MIN_ITEMS = 5
#: The three verdicts, as tables write them.
BEATS, INDISTINGUISHABLE, LOSES = "beats", "indistinguishable", "loses"
VERDICTS = (BEATS, INDISTINGUISHABLE, LOSES)
#: What a cell reads when no test at ``alpha`` could reject it, whatever the data: too few units
#: for the across-models or across-seeds reading, or a table with more Holm cells than its
#: bootstrap p-values can resolve (:func:`verdicts`, :func:`resamples_for`).
NOT_TESTABLE = "not testable"

_CHUNK = 500  # resamples per vectorised block (bounds memory at ~_CHUNK × items floats)


@dataclass(frozen=True)
class Interval:
    """A statistic with its bootstrap interval.

    Attributes:
        estimate: the statistic on the data as observed (not a bootstrap mean).
        low, high: the ``confidence`` percentile interval.
        p_value: two-sided bootstrap p-value of "the statistic is 0" (meaningful for
            margins; for a plain rate it only says whether the rate is above 0).
        shape: the outcome array's shape (units per axis, items last).
        confidence: the interval's coverage.
        n_resamples: resamples drawn.
    """

    estimate: float
    low: float
    high: float
    p_value: float
    shape: tuple[int, ...]
    confidence: float = CONFIDENCE
    n_resamples: int = N_RESAMPLES

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def format(self, scale: float = 1.0, digits: int = 3) -> str:
        """``"estimate [low, high]"`` with the values multiplied by ``scale`` (100 for points)."""
        f = f"{{:.{digits}f}}"
        return f"{f.format(self.estimate * scale)} [{f.format(self.low * scale)}, {f.format(self.high * scale)}]"

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return (self.high - self.low) / 2


def _as_array(x, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{name} must hold numbers (per-item outcomes: 0/1 hits, counts or scores), got {type(x).__name__} "
            f"{str(x)[:60]!r} ({e})"
        ) from None
    if a.ndim == 0 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty array with items on its last axis, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(
            f"{name} holds NaN or infinite values: an interval over them would be silently wrong; drop or fix "
            "those items first"
        )
    return a


def _weights(rng: np.random.Generator, b: int, n: int) -> np.ndarray:
    """``(b, n)`` resampling counts: how often each of ``n`` units is drawn, ``b`` times."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)


def _weighted_sums(x: np.ndarray, ws: list[np.ndarray]) -> np.ndarray:
    """``(b,)`` sums of ``x`` (shape ``(n_1, ..., n_k)``) weighted by ``ws[a]`` ``(b, n_a)`` per axis."""
    letters = "abcdefghijklmnopqrstuvwxy"[: x.ndim]
    spec = letters + "," + ",".join("z" + c for c in letters) + "->z"
    return np.einsum(spec, x, *ws, optimize=True)


def _check_items(shape: tuple, name: str) -> None:
    if shape[-1] < MIN_ITEMS:
        raise ValueError(
            f"{name} has {shape[-1]} item(s) on its last axis: a bootstrap over fewer than {MIN_ITEMS} items cannot "
            "give a 95 % interval or a verdict (one item resampled is always itself); collect more items"
        )


def _check_pair(num, den, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    n = _as_array(num, name)
    _check_items(n.shape, name)
    if den is None:
        return n, None
    d = _as_array(den, f"{name}'s den")
    if d.shape != n.shape:
        raise ValueError(f"{name} has shape {n.shape} but its den {d.shape}: give one denominator per cell")
    if (d < 0).any() or d.sum() <= 0:
        raise ValueError(f"{name}'s den must be >= 0 with a positive total (items' word or token counts)")
    return n, d


def _ratio(n: np.ndarray, d: np.ndarray | None, ws: list[np.ndarray] | None) -> np.ndarray | float:
    if ws is None:
        return float(n.sum() / (d.sum() if d is not None else n.size))
    top = _weighted_sums(n, ws)
    bottom = _weighted_sums(d, ws) if d is not None else np.prod([w.sum(axis=1) for w in ws], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return top / bottom


def _bootstrap(
    systems: list[tuple[np.ndarray, np.ndarray | None]],
    signs: Sequence[float],
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Interval:
    shape = systems[0][0].shape
    for n, _ in systems[1:]:
        if n.shape != shape:
            raise ValueError(
                f"a margin needs both systems on the same cells (paired resampling), got shapes {shape} and {n.shape}"
            )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100 for a percentile interval, got {n_resamples}")
    estimate = sum(s * _ratio(n, d, None) for s, (n, d) in zip(signs, systems))
    rng = np.random.default_rng(seed)
    stats = []
    done = 0
    while done < n_resamples:
        b = min(_CHUNK, n_resamples - done)
        ws = [_weights(rng, b, k) for k in shape]
        stats.append(sum(s * _ratio(n, d, ws) for s, (n, d) in zip(signs, systems)))
        done += b
    return _summary(float(estimate), np.concatenate(stats), tuple(shape), confidence, n_resamples)


def _summary(estimate: float, boot: np.ndarray, shape: tuple, confidence: float, n_resamples: int) -> Interval:
    """The percentile interval and two-sided p-value of bootstrap values ``boot``."""
    boot = boot[np.isfinite(boot)]  # a resample whose denominators are all zero has no value
    if boot.size < n_resamples // 2:
        raise ValueError("most resamples had a zero denominator: too few items with a positive den")
    tail = (1 - confidence) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    b1 = boot.size + 1
    p = min(1.0, 2 * min((1 + np.sum(boot <= 0)) / b1, (1 + np.sum(boot >= 0)) / b1))
    return Interval(float(estimate), float(low), float(high), float(p), tuple(shape), confidence, int(boot.size))


def interval(
    num,
    den=None,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Percentile bootstrap interval of a rate, resampling every axis of its outcomes.

    Args:
        num: outcome array, one axis per resampling unit, items last, e.g. ``(pair,
            chunk)`` hits (0/1) or ``(seed, sentence)`` correct arcs.
        den: ``None`` (the statistic is the mean of ``num``) or an array of ``num``'s
            shape with each cell's denominator (the statistic is ``Σ num / Σ den``).
        confidence: coverage (default :data:`CONFIDENCE`).
        n_resamples: resamples (default :data:`N_RESAMPLES`).
        seed: the resampler's seed (default :data:`BOOTSTRAP_SEED`).

    Returns:
        :class:`Interval`, in ``num``'s units (fractions stay fractions).

    Raises:
        ValueError: an empty array, fewer than :data:`MIN_ITEMS` items, NaN/inf cells, a
            ``den`` of another shape, negative or all-zero denominators, ``confidence``
            outside (0, 1), fewer than 100 resamples.
    """
    return _bootstrap([_check_pair(num, den, "num")], [1.0], confidence=confidence, n_resamples=n_resamples, seed=seed)


def margin(
    num,
    baseline_num,
    den=None,
    baseline_den=None,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Paired bootstrap interval of a system's rate minus a baseline's on the same cells.

    Both outcome arrays have the same shape and cell order; each resample's draws apply to both.

    Args:
        num, den: the system's outcomes (as in :func:`interval`).
        baseline_num, baseline_den: the baseline's (the strongest control), same shape.
        confidence, n_resamples, seed: as in :func:`interval`.

    Returns:
        :class:`Interval` of ``rate(system) − rate(baseline)``, with the two-sided p-value
        of "no difference" that :func:`verdicts` corrects.

    Raises:
        ValueError: as :func:`interval`, and when the two shapes differ.
    """
    return _bootstrap(
        [_check_pair(num, den, "num"), _check_pair(baseline_num, baseline_den, "baseline_num")],
        [1.0, -1.0],
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )


def resamples_for(cells: int, *, alpha: float = ALPHA) -> int:
    """Bootstrap resamples for a table of ``cells`` Holm cells: :data:`N_RESAMPLES` while the
    smallest bootstrap p-value, 2 / (n + 1), can pass Holm's first threshold ``alpha / cells`` (up
    to 100 cells at 5 %); beyond, enough for twice that resolution (n ≥ 4 · cells / alpha, in
    thousands: 12,000 for 150 cells).

    Raises:
        ValueError: ``cells`` < 1."""
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    if 2 / (N_RESAMPLES + 1) <= alpha / cells:
        return N_RESAMPLES
    return int(np.ceil(4 * cells / alpha / 1000.0)) * 1000


def verdicts(margins: Sequence[Interval | None], *, alpha: float = ALPHA) -> list[str | None]:
    """Three-way verdicts of one table's cells from their margins, Holm-corrected.

    *beats* when the Holm-adjusted p < ``alpha`` and the margin is positive, *loses* when it is
    negative, else *indistinguishable* (Holm 1979; ``docs/method.md#uncertainty``). A bootstrap
    p-value is at least 2 / (resamples + 1): when no cell's could reach Holm's first threshold
    ``alpha / m`` (more than 100 cells at 4,000 resamples), no cell can be rejected whatever the
    data, and every cell reads :data:`NOT_TESTABLE` instead of *indistinguishable* (compute the
    margins with :func:`resamples_for` resamples).

    Args:
        margins: one :class:`Interval` per cell (from :func:`margin`); ``None`` for a cell
            without a margin (no control), which gets ``None`` and takes no part in the
            correction.
        alpha: family-wise error rate (default :data:`ALPHA`).

    Returns:
        One of :data:`VERDICTS` (or None) per cell, in order.

    Raises:
        ValueError: ``alpha`` outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    idx = [i for i, m in enumerate(margins) if m is not None]
    out: list[str | None] = [None] * len(margins)
    if not idx:
        return out
    ps = [margins[i].p_value for i in idx]
    if not np.isfinite(ps).all():
        raise ValueError("a cell's p-value is NaN: no verdict from it (its margin has no bootstrap values)")
    if min(2 / (margins[i].n_resamples + 1) for i in idx) > alpha / len(idx):
        for i in idx:
            out[i] = NOT_TESTABLE
        return out
    reject = holm_reject(ps, alpha=alpha)
    for i, r in zip(idx, reject):
        m = margins[i]
        out[i] = (BEATS if m.estimate > 0 else LOSES) if r and m.estimate != 0 else INDISTINGUISHABLE
    return out


def holm_reject(p_values: Sequence[float], *, alpha: float = ALPHA) -> np.ndarray:
    """Holm's (1979) step-down rejections: reject the i-th smallest p-value (i = 0, 1, ...) while
    it is at most ``alpha / (m − i)`` (equal to statsmodels' ``multipletests(method="holm")``;
    ``docs/method.md#uncertainty``).

    Args:
        p_values: ``(m,)`` p-values, finite.
        alpha: family-wise error rate, in (0, 1).

    Returns:
        ``(m,)`` bool, in the input's order.

    Raises:
        ValueError: NaN p-values, ``alpha`` outside (0, 1).
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not np.isfinite(p).all():
        raise ValueError("a p-value is NaN or infinite: no verdict from it")
    m = p.size
    out = np.zeros(m, dtype=bool)
    for i, j in enumerate(np.argsort(p, kind="stable")):
        if p[j] > alpha / (m - i):
            break
        out[j] = True
    return out


def verdict_counts(cells: Sequence[str | None]) -> str:
    """``"2 beat, 9 indistinguishable, 1 lose (of 12)"``: a table's verdicts counted, for text."""
    got = [c for c in cells if c is not None]
    parts = [
        f"{got.count(BEATS)} beat",
        f"{got.count(INDISTINGUISHABLE)} indistinguishable",
        f"{got.count(LOSES)} lose",
    ]
    return ", ".join(parts) + f" (of {len(got)})"


def ratio(sums: np.ndarray) -> np.ndarray:
    """The statistic ``Σ num / Σ den`` of count columns ``(..., 2)`` = ``(num, den)`` (UAS:
    correct arcs over words), for :func:`interval_of` and :func:`margin_of`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[..., 0] / sums[..., 1]


def _check_counts(counts, name: str) -> tuple[list[np.ndarray], bool, bool]:
    """``counts`` as a list of ``(runs, items, k)`` arrays (one per pair), whether it was a list
    of pairs, and whether it had a run axis."""
    if isinstance(counts, (list, tuple)):
        if not counts:
            raise ValueError(f"{name} is an empty list of pairs")
        arrs = [_as_array(c, f"{name}[{i}]") for i, c in enumerate(counts)]
        for i, a in enumerate(arrs):
            if a.ndim == 3:
                _check_items(a.shape[:-1], f"{name}[{i}]")
        if any(a.ndim != 3 for a in arrs):
            raise ValueError(
                f"{name} must list one (runs, items, k) array per pair, got shapes {[a.shape for a in arrs]}"
            )
        return arrs, True, True
    c = _as_array(counts, name)
    if c.ndim in (2, 3):
        _check_items(c.shape[:-1], name)
    if c.ndim not in (2, 3):
        raise ValueError(
            f"{name} must be (items, k) or (runs, items, k) counts, or a list of (runs, items, k) arrays (one per "
            f"pair), got shape {c.shape}"
        )
    return [c if c.ndim == 3 else c[None]], False, c.ndim == 3


def _run_stat(statistic, x: np.ndarray, wr, wn) -> np.ndarray:
    """``(b,)`` values of ``statistic`` on ``x`` ``(runs, items, k)`` with resampling weights ``wn``
    ``(b, items)`` and ``wr`` ``(b, runs)`` (None: one run): counts summed over the drawn
    items, the statistic per run, averaged over the drawn runs."""
    v = np.asarray(statistic(np.einsum("rnk,zn->zrk", x, wn, optimize=True)), dtype=np.float64)
    if wr is None:
        return v[:, 0]
    return (v * wr).sum(axis=1) / wr.sum(axis=1)


def _statistic_bootstrap(statistic, systems: list, *, confidence, n_resamples, seed) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100 for a percentile interval, got {n_resamples}")
    first, listed, _ = systems[0]
    has_runs = any(h for _, _, h in systems)
    items = first[0].shape[1:]
    for arrs, lst, _ in systems:
        if lst != listed or len(arrs) != len(first) or any(a.shape[1:] != items for a in arrs):
            raise ValueError(
                "a margin needs both systems on the same items, count columns and pairs (paired resampling), got "
                f"shapes {[a.shape for a in first]} and {[a.shape for a in arrs]}"
            )
    signs = [1.0, -1.0][: len(systems)]
    n_pairs, n_items = len(first), items[0]

    def value(wp, draw_runs, wn):
        total = 0.0
        for p in range(n_pairs):
            runs = [arrs[p].shape[0] for arrs, _, _ in systems]
            joint = len(set(runs)) == 1  # equal run axes are drawn together (a seed index is a shared unit)
            wrs = [draw_runs(runs[0])] * len(systems) if joint else [draw_runs(r) for r in runs]
            v = sum(s * _run_stat(statistic, arrs[p], wr, wn) for s, (arrs, _, _), wr in zip(signs, systems, wrs))
            total = total + (v if wp is None else v * wp[:, p])
        return total if wp is None else total / wp.sum(axis=1)

    def ones(r):
        return np.ones((1, r)) if has_runs else None

    estimate = float(value(np.ones((1, n_pairs)) if listed else None, ones, np.ones((1, n_items)))[0])
    rng = np.random.default_rng(seed)
    stats, done = [], 0
    while done < n_resamples:
        b = min(_CHUNK, n_resamples - done)
        wp = _weights(rng, b, n_pairs) if listed else None
        if listed:  # pairs, then items, then each pair's runs
            wn = _weights(rng, b, n_items)
            stats.append(value(wp, functools.partial(_weights, rng, b), wn))
        else:  # runs, then items: the draws of interval() and margin()
            wr = {r: _weights(rng, b, r) for r in sorted({a[0].shape[0] for a, _, _ in systems})} if has_runs else {}
            wn = _weights(rng, b, n_items)
            stats.append(value(None, wr.get, wn))
        done += b
    shape = ((n_pairs,) if listed else ()) + (first[0].shape[:2] if has_runs else first[0].shape[1:2])
    return _summary(estimate, np.concatenate(stats), tuple(shape), confidence, n_resamples)


def interval_of(
    statistic,
    counts,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Percentile bootstrap interval of a metric computed from summed per-item counts.

    Args:
        statistic: sums ``(..., k)`` → metric ``(...)``, vectorised over the leading axes
            (e.g. :func:`ratio`, or entity F1 from ``(tp, fp, fn)``); must be the corpus
            metric when given the counts summed over a corpus.
        counts: ``(items, k)`` or ``(runs, items, k)`` count columns per item, or a list of
            ``(runs, items, k)`` arrays, one per pair, on the same items. Pairs, runs and items
            are resampled independently; the statistic is computed per run from its drawn
            items' sums, then averaged over runs and pairs.
        confidence, n_resamples, seed: as in :func:`interval`.

    Returns:
        :class:`Interval` (``shape``: the counts' shape without the count columns). With
        :func:`ratio` and a denominator that is the same in every run it equals
        :func:`interval` of ``(num, den)`` draw for draw.

    Raises:
        ValueError: as :func:`interval`; counts of another number of axes.
    """
    return _statistic_bootstrap(
        statistic, [_check_counts(counts, "counts")], confidence=confidence, n_resamples=n_resamples, seed=seed
    )


def margin_of(
    statistic,
    counts,
    baseline_counts,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Paired bootstrap interval of ``statistic`` of a system minus that of a baseline.

    Items and pairs are drawn once for both; run axes of equal size are drawn together, of
    different sizes independently.

    Args:
        statistic, counts, confidence, n_resamples, seed: as in :func:`interval_of`.
        baseline_counts: the baseline's (the strongest control's) counts.

    Returns:
        :class:`Interval` of the difference, with the p-value :func:`verdicts` corrects.

    Raises:
        ValueError: as :func:`interval_of`, and when items, pairs or count columns differ.
    """
    return _statistic_bootstrap(
        statistic,
        [_check_counts(counts, "counts"), _check_counts(baseline_counts, "baseline_counts")],
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )


def against_every_control(estimates: Sequence[float], p_values: Sequence[float]) -> tuple[float, int]:
    """One cell's p-value when OLA is set against *every* control, none chosen on the test items.

    All margins positive: the largest p-value (intersection-union test, Berger 1982,
    *Technometrics* 24(4)); else the smallest p-value of the negative margins times the number
    of controls (Bonferroni). ``docs/method.md#rules-of-evidence``.

    Args:
        estimates: each control's margin (OLA − control).
        p_values: each margin's two-sided p-value, same order.

    Returns:
        ``(p, index)``: the cell's p-value for :func:`verdicts` and the control that decides
        it: when every margin is positive the one with the largest p-value (ties: the smallest
        margin, the hardest to beat); else the negative margin with the smallest p-value (ties:
        the most negative); with a zero margin and none negative, the first zero. Read its sign from
        ``estimates[index]``.

    Raises:
        ValueError: no control, lengths that differ, NaN estimates or p-values.
    """
    e = np.asarray(estimates, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    if e.ndim != 1 or e.size == 0 or e.shape != p.shape:
        raise ValueError(f"give one estimate and one p-value per control, got {e.shape} and {p.shape}")
    if not (np.isfinite(e).all() and np.isfinite(p).all()):
        raise ValueError("a control's margin or p-value is NaN: no verdict from it; drop that control or fix its items")
    if (e > 0).all():
        i = int(np.lexsort((e, -p))[0])  # the largest p; among equal p the smallest margin
        return float(p[i]), i
    neg = np.flatnonzero(e < 0)
    if neg.size == 0:
        return 1.0, int(np.flatnonzero(e == 0)[0])
    i = int(neg[np.lexsort((e[neg], p[neg]))[0]])  # the smallest p; among equal p the most negative margin
    return float(min(1.0, p[i] * e.size)), i
