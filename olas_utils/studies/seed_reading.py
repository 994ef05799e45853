"""The *across seeds* reading of a trained margin (notebooks 03 and 04): the seed is the unit, so
the claim read is about "this training recipe", not about one training run
(``docs/method.md#uncertainty``).

Runs of one seed share the adapter's initialisation and batch order and differ in their inputs,
so a seed is a block: per seed, the system's runs minus the control's runs of the same seed, read
by :func:`olas_utils.stats.across_models.model_reading` (the larger of the exact sign-flip p over
the per-seed margins and the margin's item p) — the procedure that
:mod:`olas_utils.studies.calibration` calibrates under a seed-level null (``across seeds``).
Verdicts are Holm-corrected over a table's cells by
:func:`~olas_utils.stats.across_models.across_verdicts`, which reads ``not testable`` where the
seed count could not let Holm reject the cell.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pandas as pd

from olas_utils.stats.across_models import ModelReading, across_verdicts, model_reading
from olas_utils.stats.uncertainty import Interval, against_every_control
from olas_utils.studies.outcomes import Maker, run_values, select

__all__ = ["seed_values", "seed_reading", "every_control", "seed_columns"]


def seed_values(rows: pd.DataFrame, make: Maker, runs: Sequence[str] = ("seed",)) -> dict[int, float]:
    """Per training seed, the system's metric (fraction): the mean over that seed's runs (its
    sources, for a single-source transfer whose ``runs`` are ``("source", "seed")``).

    Raises:
        ValueError: ``rows`` has no ``seed`` column or no row.
    """
    if "seed" not in rows or rows.empty:
        raise ValueError("seed_values needs item rows with a 'seed' column (one run per seed at least)")
    return {int(s): float(np.mean(run_values(select(rows, seed=s), make, runs))) for s in sorted(set(rows.seed))}


def seed_reading(
    hi: pd.DataFrame,
    lo: pd.DataFrame,
    make: Maker,
    m: Interval,
    *,
    hi_runs: Sequence[str] = ("seed",),
    lo_runs: Sequence[str] = ("seed",),
    lo_fixed: bool = False,
) -> ModelReading | None:
    """The across-seeds reading of the paired margin ``m`` = ``hi`` − ``lo`` (its conditional
    reading, whose estimate and item p it keeps).

    Args:
        hi, lo: the two systems' item rows; ``*_runs`` their run columns (``seed`` first of all).
        make: the metric's maker (:func:`olas_utils.studies.outcomes.task_metric`).
        m: the conditional margin (:func:`olas_utils.studies.outcomes.versus`), fractions.
        lo_fixed: ``lo`` is one deterministic run (the model-free baseline), set against every seed.

    Returns:
        A :class:`~olas_utils.stats.across_models.ModelReading` over ``seed <k>`` units (fractions),
        or None when ``lo`` was trained on other seeds than ``hi`` (no blocks to pair).

    Raises:
        ValueError: ``lo_fixed`` with a ``lo`` of several seeds.
    """
    a, b = seed_values(hi, make, hi_runs), seed_values(lo, make, lo_runs)
    if lo_fixed:
        if len(b) != 1:
            raise ValueError(f"lo_fixed needs one deterministic run, got seeds {sorted(b)}")
        b = dict.fromkeys(a, next(iter(b.values())))
    elif sorted(b) != sorted(a):
        return None
    per = {f"seed {s}": a[s] - b[s] for s in a}
    return model_reading(per, p_items=m.p_value, estimate=m.estimate)


def every_control(readings: Sequence[ModelReading | None], decisive: int) -> ModelReading | None:
    """A margin against every control at once, read across seeds, with the rule of the
    conditional reading (:func:`olas_utils.stats.uncertainty.against_every_control`: every margin
    positive, the largest p, intersection-union; else the smallest p of a negative margin times
    the number of controls, Bonferroni) applied to the across-seeds p-values; the reading
    returned (its interval) is that of the control this decides — the conditional reading's
    ``decisive`` one where the two tie.

    Args:
        readings: one :func:`seed_reading` per control (same seeds, so all testable or none).
        decisive: the conditional reading's decisive control, returned where the seed count
            allows no test (its p-value is NaN).

    Returns:
        None when a control has no across-seeds reading (its seeds differ): no reading rather
        than one that leaves a control out.
    """
    if any(r is None for r in readings):
        return None
    ps = [r.p_value for r in readings]
    if not np.isfinite(ps).all():
        return readings[decisive]
    p, j = against_every_control([r.estimate for r in readings], ps)
    i = readings[decisive]
    # the table's decisive control where the across-seeds rule ties it with j (sign-flip p-values are
    # discrete): one control named per row wherever the two readings allow it
    same = np.sign(i.estimate) == np.sign(readings[j].estimate) and i.p_value == readings[j].p_value
    return dataclasses.replace(i if same else readings[j], p_value=p)


def seed_columns(readings: Sequence[ModelReading | None], prefix: str = "seed") -> dict[str, list]:
    """A table's across-seeds columns, one value per cell: ``<prefix> sd`` (SD of the per-seed
    margins), ``<prefix> low`` / ``<prefix> high`` (Student's t interval over them), in points,
    ``<prefix> p`` and ``<prefix> verdict`` (Holm over the cells that have a reading; ``""``
    where a cell has none)."""
    nan = float("nan")
    return {
        f"{prefix} sd": [100 * float(np.std(r.per_model, ddof=1)) if r and r.n_models > 1 else nan for r in readings],
        f"{prefix} low": [100 * r.low if r else nan for r in readings],
        f"{prefix} high": [100 * r.high if r else nan for r in readings],
        f"{prefix} p": [r.p_value if r else nan for r in readings],
        f"{prefix} verdict": [v if v is not None else "" for v in across_verdicts(readings)],
    }
