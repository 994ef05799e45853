"""The *across-models* reading of a margin: tests whose unit is the language model, beside the
*conditional* reading of :mod:`olas_utils.stats.uncertainty` (items resampled: "on these models").

The across-models p-value is the largest of the exact sign-flip p-values over targets, sources
and dyads (one sign per model, ``s_t·s_s`` on pair (t, s)) and the conditional p-value (Berger
1982); below ``min_p(n) <= alpha`` (6 models at 5 %) a cell reads :data:`NOT_TESTABLE`. The
interval is Student's t over the per-model margins (``n − 1`` degrees of freedom). Why, and the
calibration: ``docs/method.md#two-readings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from olas_utils.stats.uncertainty import ALPHA, BEATS, CONFIDENCE, INDISTINGUISHABLE, LOSES, NOT_TESTABLE, holm_reject

__all__ = [
    "CONDITIONAL",
    "ACROSS_MODELS",
    "ACROSS_SEEDS",
    "NOT_TESTABLE",
    "ModelReading",
    "min_p",
    "sign_flip_p",
    "dyadic_sign_flip_p",
    "pair_reading",
    "model_reading",
    "across_verdicts",
    "holm_reachable",
    "units_needed",
]

#: The two readings' names, as tables and text write them.
CONDITIONAL = "conditional"
ACROSS_MODELS = "across models"
#: The reading whose unit is the training seed ("this training recipe"): a :class:`ModelReading`
#: whose units are seeds (:func:`model_reading` over per-seed margins).
ACROSS_SEEDS = "across seeds"
#: The across-models verdict of a cell whose models are too few for any test at ``alpha``:
#: :data:`olas_utils.stats.uncertainty.NOT_TESTABLE`, imported above (one label for both readings).

_EXACT_MAX = 16  # units up to which every sign vector is enumerated (2**16 = 65,536)
_N_RANDOM = 2**16  # random sign vectors above that


@dataclass(frozen=True)
class ModelReading:
    """A margin read with the model as the unit.

    Attributes:
        estimate: the margin (mean over pairs or targets and items), as the conditional one.
        low, high: Student's t interval (``confidence``) over the per-model margins; NaN for
            one model.
        p_value: the across-models p-value (the largest of ``p_items`` and the model-level
            tests); NaN when not testable.
        p_items: the conditional (item bootstrap) p-value it was given, or NaN.
        p_models: the largest of the model-level sign-flip p-values.
        models: the unit models, in order.
        per_model: each model's margin (per target; fractions like ``estimate``).
        testable: whether the model-level test can reach ``alpha`` at this model count.
    """

    estimate: float
    low: float
    high: float
    p_value: float
    p_items: float
    p_models: float
    models: tuple[str, ...]
    per_model: tuple[float, ...]
    testable: bool

    @property
    def n_models(self) -> int:
        """How many models are the units."""
        return len(self.models)

    @property
    def positive(self) -> int:
        """How many per-model margins are above zero."""
        return int(sum(v > 0 for v in self.per_model))

    def per_model_text(self, scale: float = 100.0, digits: int = 1) -> str:
        """``"minilm-l6 +12.0; e5-small -3.1"``: each model's margin, multiplied by ``scale``."""
        return "; ".join(f"{m} {v * scale:+.{digits}f}" for m, v in zip(self.models, self.per_model))


def min_p(n: int) -> float:
    """The smallest two-sided p-value an exact sign-flip test over ``n`` units can give:
    ``2 / 2**n`` (the observed signs and their negation)."""
    if n < 1:
        raise ValueError(f"a sign-flip test needs at least one unit, got {n}")
    return min(1.0, 2.0 / 2.0**n)


def holm_reachable(units: Sequence[int], *, alpha: float = ALPHA) -> list[bool]:
    """Which cells of one Holm family could be rejected at all, given only each cell's number of
    units (models, seeds): Holm run on every cell's smallest possible p-value (:func:`min_p`),
    the most any data could give, since Holm rejects more when any p-value falls. A cell it
    cannot reject there can never be rejected; it leaves the family (a choice made from unit
    counts, not from the data, so the smaller family keeps Holm's guarantee) and the rest are
    run again until nothing changes (when none is left, no cell of the family can be rejected:
    which to leave out would be an arbitrary choice). E.g. 6 models reach p = 0.031: one cell alone can be
    rejected, none of 2 or more (0.031 > 0.05 / 2); 9 seeds reach 0.0039, so up to 12 cells.

    Raises:
        ValueError: a count below 1, ``alpha`` outside (0, 1).
    """
    best = [min_p(int(n)) for n in units]
    keep = [i for i, b in enumerate(best) if b <= alpha]  # a cell no test can reject alone is out first
    while keep:
        rejected = holm_reject([best[i] for i in keep], alpha=alpha)
        if rejected.all():
            break
        keep = [i for i, r in zip(keep, rejected) if r]
    kept = set(keep)
    return [i in kept for i in range(len(units))]


def units_needed(cells: int, *, alpha: float = ALPHA) -> int:
    """The fewest units (models, seeds) each of ``cells`` cells of one Holm family needs for an
    exact sign-flip test to be able to reject them all: the smallest n with
    ``2 / 2**n <= alpha / cells`` (6 for one cell, 9 for 12, 10 for 14 to 25).

    Raises:
        ValueError: ``cells`` below 1, ``alpha`` outside (0, 1).
    """
    if cells < 1 or not 0 < alpha < 1:
        raise ValueError(f"need cells >= 1 and alpha in (0, 1), got {cells}, {alpha}")
    n = 1
    while min_p(n) > alpha / cells:
        n += 1
    return n


def _signs(n: int, seed: int) -> np.ndarray:
    """``(k, n)`` sign vectors: all ``2**n`` when ``n <= 16``, else 65,536 random ones (the
    observed signs first)."""
    if n <= _EXACT_MAX:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        return ((codes >> np.arange(n)) & 1) * -2.0 + 1.0
    rng = np.random.default_rng(seed)
    s = rng.choice([-1.0, 1.0], size=(_N_RANDOM, n))
    s[0] = 1.0
    return s


def _p_of(stats: np.ndarray, observed: float) -> float:
    tol = 1e-12 * max(1.0, abs(observed))
    return float(np.mean(np.abs(stats) >= abs(observed) - tol))


def _finite_vector(values, name: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array of per-model margins, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} holds NaN or infinite margins: a test over them would be silently wrong")
    return v


def sign_flip_p(values, *, seed: int = 20251202) -> float:
    """Exact two-sided sign-flip p-value of "the mean of ``values`` is 0", the units' signs
    flipped independently (Fisher's randomisation test; exact for ``n <= 16`` units, else
    65,536 random flips).

    Args:
        values: ``(n,)`` per-unit margins (e.g. per target model).
        seed: the generator's seed for ``n > 16``.

    Returns:
        ``P(|mean(s·values)| >= |mean(values)|)`` over the sign vectors ``s``; at least
        :func:`min_p` ``(n)``.

    Raises:
        ValueError: an empty or non-1-d array, NaN or infinite values.
    """
    v = _finite_vector(values, "values")
    s = _signs(v.size, seed)
    return _p_of(s @ v / v.size, v.mean())


def dyadic_sign_flip_p(
    models: Sequence[str], pairs: Sequence[tuple[str, str]], margins, *, seed: int = 20251202
) -> float:
    """Exact two-sided sign-flip p-value of "the mean pair margin is 0" with one sign per
    *model*, acting on the ordered pair (t, s) as ``sign_t · sign_s`` — valid when OLA and its
    baseline are exchangeable per unordered pair {t→s, s→t} (or per ordered pair).

    Args:
        models: the unit models.
        pairs: ``(target, source)`` of each margin, both in ``models``, target ≠ source.
        margins: ``(pairs,)`` per-pair margins.
        seed: the generator's seed for more than 16 models.

    Returns:
        The p-value (at least :func:`min_p` ``(len(models))``).

    Raises:
        ValueError: NaN margins, a pair naming an unknown model or one model twice, or
            lengths that differ.
    """
    d = _finite_vector(margins, "margins")
    if len(pairs) != d.size:
        raise ValueError(f"{len(pairs)} pairs for {d.size} margins: give one margin per ordered pair")
    index = {m: i for i, m in enumerate(models)}
    try:
        t = np.array([index[a] for a, _ in pairs])
        s = np.array([index[b] for _, b in pairs])
    except KeyError as e:
        raise ValueError(f"pair model {e} is not among the models {list(models)}") from None
    if (t == s).any():
        raise ValueError("a pair names the same model twice: ordered pairs are (target, source) of two models")
    signs = _signs(len(models), seed)
    return _p_of((signs[:, t] * signs[:, s]) @ d / d.size, d.mean())


def _t_interval(v: np.ndarray, confidence: float) -> tuple[float, float]:
    if v.size < 2:
        return float("nan"), float("nan")
    from scipy import stats

    half = stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean() - half), float(v.mean() + half)


def model_reading(
    per_model: Mapping[str, float],
    *,
    p_items: float = float("nan"),
    estimate: float | None = None,
    alpha: float = ALPHA,
    confidence: float = CONFIDENCE,
) -> ModelReading:
    """The across-models reading of a margin whose units are models (the classifier's unseen
    targets): the larger of the sign-flip p-value over per-model margins and ``p_items``.

    Args:
        per_model: model → its margin (fractions).
        p_items: the conditional p-value of the same margin (item bootstrap); NaN to leave out.
        estimate: the margin as the conditional reading reports it (default: the mean of
            ``per_model``).
        alpha: the level a test must be able to reach to be called testable.
        confidence: the t interval's coverage.

    Returns:
        :class:`ModelReading`; ``testable`` is False (and ``p_value`` NaN) when
        ``min_p(n) > alpha``, i.e. with fewer than 6 models at 5 %.

    Raises:
        ValueError: no model, NaN margins.
    """
    models = tuple(per_model)
    v = _finite_vector([per_model[m] for m in models], "per_model")
    testable = min_p(v.size) <= alpha
    p_models = sign_flip_p(v)
    low, high = _t_interval(v, confidence)
    p = max(p_models, p_items) if np.isfinite(p_items) else p_models
    return ModelReading(
        float(v.mean() if estimate is None else estimate),
        low,
        high,
        float(p) if testable else float("nan"),
        float(p_items),
        float(p_models),
        models,
        tuple(float(x) for x in v),
        bool(testable),
    )


def pair_reading(
    pairs: Sequence[tuple[str, str]],
    margins,
    *,
    p_items: float = float("nan"),
    alpha: float = ALPHA,
    confidence: float = CONFIDENCE,
) -> ModelReading:
    """The across-models reading of a margin averaged over ordered model pairs (retrieval,
    transfer): per-target margins for the interval and the table, and the largest of the
    targets', sources' and dyads' sign-flip p-values and ``p_items``.

    Args:
        pairs: ``(target, source)`` of each ordered pair.
        margins: ``(pairs,)`` each pair's margin (mean over its items).
        p_items: the conditional p-value of the same margin; NaN to leave out.
        alpha, confidence: as in :func:`model_reading`.

    Returns:
        :class:`ModelReading` with ``models`` the targets and ``per_model`` each target's mean
        over its sources; ``estimate`` is the mean over pairs. Not testable when the targets,
        the sources or all the models number fewer than 6 (at 5 %).

    Raises:
        ValueError: as :func:`dyadic_sign_flip_p`.
    """
    d = _finite_vector(margins, "margins")
    if len(pairs) != d.size:
        raise ValueError(f"{len(pairs)} pairs for {d.size} margins: give one margin per ordered pair")
    targets = list(dict.fromkeys(t for t, _ in pairs))
    sources = list(dict.fromkeys(s for _, s in pairs))
    models = list(dict.fromkeys(targets + sources))
    per_t = np.array([d[[i for i, (t, _) in enumerate(pairs) if t == m]].mean() for m in targets])
    per_s = np.array([d[[i for i, (_, s) in enumerate(pairs) if s == m]].mean() for m in sources])
    testable = max(min_p(len(targets)), min_p(len(sources)), min_p(len(models))) <= alpha
    p_models = max(sign_flip_p(per_t), sign_flip_p(per_s), dyadic_sign_flip_p(models, pairs, d))
    low, high = _t_interval(per_t, confidence)
    p = max(p_models, p_items) if np.isfinite(p_items) else p_models
    return ModelReading(
        float(d.mean()),
        low,
        high,
        float(p) if testable else float("nan"),
        float(p_items),
        float(p_models),
        tuple(targets),
        tuple(float(x) for x in per_t),
        bool(testable),
    )


def across_verdicts(readings: Sequence[ModelReading | None], *, alpha: float = ALPHA) -> list[str | None]:
    """Three-way across-models verdicts, Holm-corrected over the *testable* cells; a cell with
    too few models (or seeds) reads :data:`NOT_TESTABLE` and takes no part in the correction —
    alone (:func:`min_p` above ``alpha``) or within the family (:func:`holm_reachable`: no
    data could let Holm reject it beside the other cells, e.g. 6 models in a family of 2 or
    more cells), instead of an ``indistinguishable`` that the unit counts decided in advance.

    Args:
        readings: one :class:`ModelReading` per cell, or None (no margin: None out).
        alpha: family-wise error rate.

    Returns:
        ``"beats"`` / ``"indistinguishable"`` / ``"loses"`` / ``"not testable"`` / None per cell.

    Raises:
        ValueError: ``alpha`` outside (0, 1), or a testable reading with a NaN p-value.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    out: list[str | None] = [None] * len(readings)
    idx = []
    for i, r in enumerate(readings):
        if r is None:
            continue
        if not r.testable:
            out[i] = NOT_TESTABLE
            continue
        if not np.isfinite(r.p_value):
            raise ValueError(f"cell {i} is testable but its p-value is {r.p_value}: no verdict from a NaN")
        idx.append(i)
    reach = holm_reachable([readings[i].n_models for i in idx], alpha=alpha)
    for i in [i for i, ok in zip(idx, reach) if not ok]:
        out[i] = NOT_TESTABLE
    idx = [i for i, ok in zip(idx, reach) if ok]
    if not idx:
        return out
    reject = holm_reject([readings[i].p_value for i in idx], alpha=alpha)
    for i, rej in zip(idx, reject):
        e = readings[i].estimate
        out[i] = (BEATS if e > 0 else LOSES) if rej and e != 0 else INDISTINGUISHABLE
    return out
