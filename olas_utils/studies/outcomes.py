"""Per-sentence outcomes of notebooks 03 and 04 (``docs/method.md#uncertainty``): the items
tables saved beside every result table (one row per run and test sentence), and from them
each cell's metric and its margin over a control with a bootstrap interval.

An *items* frame has the run's identifying columns (model or source / target, key,
condition, variant, ``seed``), ``sentence`` (the index of the test sentence) and the
outcome columns of :func:`olas_utils.toa.fit.sentence_outcomes` (or of the probes). A
*system* is a set of its rows: one run per value of its run columns (``seed``, or
``source`` and ``seed``), every run on the same sentences. :func:`counts` turns a system
into the ``(runs, sentences, k)`` array of :func:`olas_utils.stats.uncertainty.interval_of`, with
the metric's statistic; :func:`rate` and :func:`versus` give the intervals.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from olas_utils.stats.uncertainty import Interval, interval_of, margin_of, ratio

__all__ = [
    "SENTENCE",
    "item_rows",
    "select",
    "task_metric",
    "ratio_of",
    "counts",
    "estimate",
    "run_values",
    "rate",
    "versus",
    "family",
    "points",
    "capped_runs",
]

#: The items column naming the test sentence (its index in the test split).
SENTENCE = "sentence"

#: ``make(rows) -> (counts (n, k), statistic)`` for one run's rows, in sentence order.
Maker = Callable[[pd.DataFrame], tuple]


def item_rows(run: dict, outcomes: dict) -> list[dict]:
    """One row per sentence: the run's fields, ``sentence`` and the outcome columns
    (``outcomes``: column → one value per sentence)."""
    cols = list(outcomes)
    n = len(outcomes[cols[0]]) if cols else 0
    return [{**run, SENTENCE: i, **{c: outcomes[c][i] for c in cols}} for i in range(n)]


def select(items: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows of ``items`` whose columns equal ``where``'s values (a list or tuple: any of them)."""
    mask = np.ones(len(items), dtype=bool)
    for col, v in where.items():
        mask &= items[col].isin(v).to_numpy() if isinstance(v, (list, tuple, set)) else (items[col] == v).to_numpy()
    return items[mask]


def task_metric(task: str, kind: str, metric: str) -> Maker:
    """The counts and statistic of ``metric`` of ``task`` (:func:`olas_utils.toa.fit.metric_counts`)."""
    from olas_utils.toa.fit import metric_counts

    return lambda rows: metric_counts(task, kind, metric, rows)


def ratio_of(num: str, den: str) -> Maker:
    """The statistic ``Σ num / Σ den`` of two outcome columns (the probes' rates)."""
    return lambda rows: (rows[[num, den]].to_numpy(dtype=np.float64), ratio)


def counts(rows: pd.DataFrame, make: Maker, runs: Sequence[str] = ("seed",)) -> tuple[np.ndarray, Callable]:
    """A system's ``(runs, sentences, k)`` counts and statistic.

    Args:
        rows: the system's items (every run on the same sentences).
        make: :func:`task_metric` or :func:`ratio_of`.
        runs: the columns that tell runs apart (sorted by them; absent columns are ignored).

    Raises:
        ValueError: no rows, or runs on different sentences (or a sentence twice in a run).
    """
    if rows.empty:
        raise ValueError("no items for this system: was it run?")
    by = [c for c in runs if c in rows]
    groups = [g for _, g in rows.groupby(by, sort=True)] if by else [rows]
    ref = None
    arrays, stat = [], None
    for g in groups:
        g = g.sort_values(SENTENCE)
        ids = g[SENTENCE].to_numpy()
        if ref is None:
            ref = ids
            if len(np.unique(ids)) != len(ids):
                raise ValueError("a run has a sentence twice: select one system's rows only")
        elif len(ids) != len(ref) or (ids != ref).any():
            raise ValueError(f"runs on different sentences ({len(ids)} vs {len(ref)}): select one system's rows only")
        c, stat = make(g.reset_index(drop=True))
        arrays.append(np.asarray(c, dtype=np.float64))
    return np.stack(arrays), stat


def estimate(rows: pd.DataFrame, make: Maker, runs: Sequence[str] = ("seed",)) -> float:
    """The mean over runs of the metric (no resampling): a table's value."""
    return float(np.mean(run_values(rows, make, runs)))


def run_values(rows: pd.DataFrame, make: Maker, runs: Sequence[str] = ("seed",)) -> np.ndarray:
    """The metric of each run (sorted by the run columns)."""
    c, stat = counts(rows, make, runs)
    return np.asarray(stat(c.sum(axis=1)), dtype=np.float64)


def rate(rows: pd.DataFrame, make: Maker, runs: Sequence[str] = ("seed",)) -> Interval:
    """The system's metric (mean over runs) with its interval over runs and sentences."""
    c, stat = counts(rows, make, runs)
    return interval_of(stat, c)


def versus(
    rows: pd.DataFrame,
    baseline: pd.DataFrame,
    make: Maker,
    runs: Sequence[str] = ("seed",),
    baseline_runs: Sequence[str] | None = None,
) -> Interval:
    """Paired margin: the system's metric minus the baseline's on the same sentences
    (:func:`olas_utils.stats.uncertainty.margin_of`; ``baseline_runs`` default ``runs``)."""
    a, stat = counts(rows, make, runs)
    b, _ = counts(baseline, make, runs if baseline_runs is None else baseline_runs)
    return margin_of(stat, a, b)


def family(
    systems: Sequence[tuple[pd.DataFrame, Sequence[str]]],
    make: Maker,
    baselines: Sequence[tuple[pd.DataFrame, Sequence[str]]] | None = None,
) -> Interval:
    """The mean over pairs (models, targets) of a metric, or of a margin over each pair's own
    baseline, with pairs resampled too (``(pair, run, sentence)``; the pairs' sentences must
    be the same). ``systems`` / ``baselines``: ``(rows, runs)`` per pair."""
    sys = [counts(r, make, ru) for r, ru in systems]
    stat = sys[0][1]
    if baselines is None:
        return interval_of(stat, [c for c, _ in sys])
    base = [counts(r, make, ru)[0] for r, ru in baselines]
    return margin_of(stat, [c for c, _ in sys], base)


def points(iv: Interval | None, digits: int = 1) -> str:
    """``"60.6 [58.9, 62.3]"`` in points (×100); ``"–"`` for no interval."""
    return "–" if iv is None else iv.format(100, digits)


def capped_runs(runs: pd.DataFrame) -> int:
    """How many of ``runs`` (rows of a parser or transfer frame) did not stop by early stopping on dev:
    ``stopped_early`` False where the frame has it, else (frames written before it existed) the best
    dev epoch was the last one run."""
    if "stopped_early" in runs and runs.stopped_early.notna().all():
        return int((~runs.stopped_early.astype(bool)).sum())
    return int((runs.best_epoch == runs.epochs_run).sum())
