"""Notebook 02's tables from its per-item outcomes, each number with a bootstrap interval
(:mod:`olas_utils.stats.uncertainty`): Hit@k per model pair and per family, the classifier's
accuracy per target, and the three-way verdicts of OLA against its strongest control.

Items: :func:`olas_utils.studies.crosslm.retrieval_items` and those of
:func:`olas_utils.studies.crosslm.classifier_frame`. Outcome arrays: ``(chunk,)`` per pair,
``(pair, chunk)`` per family, ``(seed, image)`` per classifier target; what is resampled and
why: ``docs/method.md#retrieval``, ``docs/method.md#uncertainty``.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pandas as pd

from olas_utils.stats.across_models import ModelReading, across_verdicts, pair_reading
from olas_utils.stats.uncertainty import Interval, against_every_control, interval, margin, margin_of, ratio, verdicts
from olas_utils.vocabulary import Control

__all__ = [
    "outcome_array",
    "retrieval_frame",
    "retrieval_summary",
    "retrieval_verdicts",
    "with_lineage",
    "lineage_verdict_frame",
    "lineage_gap_frame",
    "key_margin_frame",
    "groups",
    "estimate_columns",
    "across_columns",
    "insert_verdicts",
    "every_control",
    "verdict_cells",
]

#: The ``lineage`` column of :func:`with_lineage`: the two models' weights descend from one
#: pretrained checkpoint (``olas_utils.zoo.registry.same_lineage``), or from different ones.
WITHIN, ACROSS = "within", "across"

_TRAINED = Control.TRAINED.ident
_RETRIEVAL_GROUP = ["protocol", "family", "control", "key", "metric"]


def groups(df: pd.DataFrame, by: Sequence[str]):
    """``groupby`` in order of first appearance, only the combinations present."""
    return df.groupby(list(by), sort=False, observed=True)


def outcome_array(
    items: pd.DataFrame, *, k: int = 1, units: Sequence[str] = ("target", "source")
) -> tuple[np.ndarray, list[tuple], np.ndarray]:
    """One group's items as an outcome array: 1.0 where the true match ranked in the top
    ``k`` (``rank < k``), one row per unit (e.g. ordered pair, or seed), one column per item
    (chunk), units in order of first appearance and chunks sorted.

    Args:
        items: rows of one system (one family, control, protocol, key and metric; or one
            classifier target, control and key) with columns ``units``, ``chunk``, ``rank``.
        k: the cut-off.
        units: the columns naming a unit.

    Returns:
        ``(hits, unit_labels, ranks)``: ``hits`` ``(units, chunks)`` float, the units'
        labels (tuples), and the ``(units, chunks)`` int ranks.

    Raises:
        ValueError: the units do not all have the same chunks (the crossed resampling needs
            a complete grid), or a (unit, chunk) appears twice.
    """
    units = list(units)
    bad = items["rank"].isna() | items["chunk"].isna()
    if bad.any():
        raise ValueError(
            f"{int(bad.sum())} item(s) have no rank or chunk (NaN), e.g. {items[bad].iloc[0].to_dict()}: the items "
            "file is damaged or was edited; regenerate it with the notebook that wrote it"
        )
    keys = [tuple(r) for r in items[units].astype(object).itertuples(index=False, name=None)]
    labels = list(dict.fromkeys(keys))
    index = {u: i for i, u in enumerate(labels)}
    chunks = np.unique(items["chunk"].to_numpy())
    col = np.searchsorted(chunks, items["chunk"].to_numpy())
    row = np.fromiter((index[u] for u in keys), dtype=np.int64, count=len(keys))
    ranks = np.full((len(labels), len(chunks)), -1, dtype=np.int64)
    ranks[row, col] = items["rank"].to_numpy()
    if len(items) != ranks.size or (ranks < 0).any():
        raise ValueError(
            f"the items do not form a complete (unit, chunk) grid: {len(items)} rows for {len(labels)} units × "
            f"{len(chunks)} chunks; every {'/'.join(units)} needs the same chunks, once each"
        )
    return (ranks < k).astype(np.float64), labels, ranks


class _PairIntervals:
    """Chunk-only intervals of single pairs, memoised on the sorted outcomes (a one-axis
    bootstrap does not depend on item order): equal to ``interval(np.sort(hits))``."""

    def __init__(self):
        self.cache: dict[bytes, Interval] = {}

    def __call__(self, x: np.ndarray) -> Interval:
        s = np.sort(x)
        key = s.tobytes()
        if key not in self.cache:
            self.cache[key] = interval(s)
        return self.cache[key]


def _hit_columns(prefix: str, iv: Interval | None, value: float) -> dict:
    if iv is None:
        return {prefix: value, f"{prefix} low": float("nan"), f"{prefix} high": float("nan")}
    return {prefix: iv.estimate, f"{prefix} low": iv.low, f"{prefix} high": iv.high}


def retrieval_frame(items: pd.DataFrame, ks: Sequence[int] = (1, 5)) -> pd.DataFrame:
    """Hit@k per ordered model pair, from the items, with its interval over the pair's
    chunks.

    Args:
        items: :func:`olas_utils.studies.crosslm.retrieval_items`.
        ks: cut-offs; a Hit@k with ``k >= n`` cannot miss and is NaN.

    Returns:
        One row per ``(family, control, protocol, key, metric, target, source)`` with ``n``
        (chunks) and, per k, ``hit@k``, ``hit@k low``, ``hit@k high`` (fractions).
    """
    ivs = _PairIntervals()
    rows = []
    by = ["family", "control", "protocol", "key", "metric", "target", "source"]
    for names, g in groups(items, by):
        ranks = g.sort_values("chunk")["rank"].to_numpy()
        row = dict(zip(by, names), n=len(ranks))
        for k in ks:
            row.update(
                _hit_columns(f"hit@{k}", None, float("nan"))
                if k >= len(ranks)
                else _hit_columns(f"hit@{k}", ivs((ranks < k).astype(np.float64)), 0.0)
            )
        rows.append(row)
    return pd.DataFrame(rows)


def retrieval_summary(items: pd.DataFrame, ks: Sequence[int] = (1, 5)) -> pd.DataFrame:
    """Hit@k of each family: the mean over its ordered model pairs and chunks, with the
    interval of the crossed bootstrap over pairs and chunks, and the range over pairs.

    Args:
        items: :func:`olas_utils.studies.crosslm.retrieval_items`.
        ks: cut-offs (a Hit@k with ``k >= n`` is NaN).

    Returns:
        One row per ``(protocol, family, control, key, metric)`` with ``pairs``, ``n``
        (chunks), per k ``hit@k``, ``hit@k low``, ``hit@k high`` (95 % interval),
        ``hit@k min``, ``hit@k max`` (over pairs), and ``chance@1`` (``1/n``).
    """
    rows = []
    for names, g in groups(items, _RETRIEVAL_GROUP):
        row = dict(zip(_RETRIEVAL_GROUP, names))
        for k in ks:
            hits, labels, _ = outcome_array(g, k=k)
            n = hits.shape[1]
            row.update(pairs=len(labels), n=n)
            if k >= n:
                row.update(_hit_columns(f"hit@{k}", None, float("nan")))
                row.update({f"hit@{k} min": float("nan"), f"hit@{k} max": float("nan")})
                continue
            per_pair = hits.mean(axis=1)
            row.update(_hit_columns(f"hit@{k}", interval(hits), 0.0))
            row.update({f"hit@{k} min": float(per_pair.min()), f"hit@{k} max": float(per_pair.max())})
        row["chance@1"] = 1.0 / row["n"]
        rows.append(row)
    return pd.DataFrame(rows)


def _align(a: tuple, b: tuple) -> tuple[np.ndarray, np.ndarray, list[tuple]]:
    """Two outcome arrays ``(hits, labels, _)`` restricted to their common units, in ``a``'s
    order (a control lacking a model's images has fewer pairs), and those units' labels."""
    common = [u for u in a[1] if u in set(b[1])]
    ia = [a[1].index(u) for u in common]
    ib = [b[1].index(u) for u in common]
    return a[0][ia], b[0][ib], common


def estimate_columns(prefix: str, iv, name: str | None = None) -> dict:
    """``{name: estimate, "<prefix>_low": low, "<prefix>_high": high}`` (``name`` defaults to ``prefix``)
    of an interval or margin, in that column order."""
    return {name or prefix: iv.estimate, f"{prefix}_low": iv.low, f"{prefix}_high": iv.high}


def across_columns(reading: ModelReading | None) -> dict:
    """The across-models columns of a verdict row (NaN / empty without a reading)."""
    if reading is None:
        return {}
    return {
        "models": reading.n_models,
        "models_positive": reading.positive,
        "per_model_margins": reading.per_model_text(),
        "across_low": reading.low,
        "across_high": reading.high,
        "across_p": reading.p_value,
    }


def insert_verdicts(out: pd.DataFrame, margins: list, readings: list | None) -> pd.DataFrame:
    """``verdict`` (conditional) after ``p`` and ``across_verdict`` after ``across_p``, each
    Holm-corrected over the table's cells, with ``holm_cells``."""
    if not len(out):
        return out
    out.insert(out.columns.get_loc("p") + 1, "verdict", verdicts(margins))
    out.insert(out.columns.get_loc("verdict") + 1, "holm_cells", len(margins))
    if readings is not None and "across_p" in out:
        out.insert(out.columns.get_loc("across_p") + 1, "across_verdict", across_verdicts(readings))
    return out


def every_control(per: dict) -> tuple[str, Interval, ModelReading | None]:
    """The control that decides a cell when OLA is set against every control
    (:func:`olas_utils.stats.uncertainty.against_every_control`), the cell's conditional margin (its
    p-value replaced by the combined one) and across-models reading (likewise; None without)."""
    names = list(per)
    ms = [per[n]["margin"] for n in names]
    p, i = against_every_control([m.estimate for m in ms], [m.p_value for m in ms])
    m = dataclasses.replace(ms[i], p_value=p)
    rs = [per[n]["reading"] for n in names]
    if any(r is None for r in rs):
        return names[i], m, None
    r = rs[i]
    if r.testable:
        pr, _ = against_every_control([x.estimate for x in rs], [x.p_value for x in rs])
        r = dataclasses.replace(r, p_value=pr)
    return names[i], m, r


def verdict_cells(cells: list[dict], label: str, *, across: bool) -> pd.DataFrame:
    """Rows of a verdict table from ``cells`` (``meta``: the row's key columns, ``trained``:
    an outcome array, ``controls``: ``{name: outcome array}``), OLA set against every control
    (no control chosen on the test items), Holm over all cells; with ``across`` (outcome
    units are ordered ``(target, source)`` pairs) the across-models reading beside it."""
    rows, margins, readings = [], [], []
    for c in cells:
        t = c["trained"]
        per = {}
        for name, arr in c["controls"].items():
            mine, theirs, labels = _align(t, arr)
            m = margin(mine, theirs)
            r = pair_reading(labels, (mine - theirs).mean(axis=1), p_items=m.p_value) if across else None
            per[name] = {"mine": mine, "theirs": theirs, "margin": m, "reading": r}
        name, m, r = every_control(per)
        mine, theirs = per[name]["mine"], per[name]["theirs"]
        ola, ctrl = interval(mine), interval(theirs)
        margins.append(m)
        readings.append(r)
        rows.append(
            {
                **c["meta"],
                **estimate_columns("ola", ola, f"ola_{label}"),
                "strongest_control": name,
                "controls_tested": len(per),
                **estimate_columns("control", ctrl, f"control_{label}"),
                **estimate_columns("margin", m),
                "p": m.p_value,
                **across_columns(r),
                **c.get("extra", {}),
                **dict(zip(c["units"], mine.shape)),
            }
        )
    return insert_verdicts(pd.DataFrame(rows), margins, readings if across else None)


def with_lineage(items: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``items`` whose two models' lineages are known, with a ``lineage`` column:
    :data:`WITHIN` (one lineage, e.g. minilm-l6 and e5-small, both MiniLM) or :data:`ACROSS`.

    Args:
        items: rows with ``target`` and ``source`` model names (retrieval items, transfer rows).

    Returns:
        A copy of the rows of known lineage (zoo models; a Hugging Face id or folder has none and
        is left out), ``lineage`` added.
    """
    from olas_utils.zoo.registry import same_lineage

    pairs = items[["target", "source"]].drop_duplicates()
    known = {(t, s): same_lineage(t, s) for t, s in pairs.itertuples(index=False, name=None)}
    flag = pd.Series([known[(t, s)] for t, s in zip(items["target"], items["source"])], index=items.index)
    out = items[flag.notna()].copy()
    out["lineage"] = np.where(flag[flag.notna()].astype(bool), WITHIN, ACROSS)
    return out


def lineage_verdict_frame(items: pd.DataFrame, *, metric: str = "ssim") -> pd.DataFrame:
    """:func:`retrieval_verdicts` with the ordered pairs of one lineage and of different lineages
    apart: per ``(protocol, family, key, lineage)`` the trained models' Hit@1 against the
    strongest control *on the same pairs*, Holm-corrected over this table's cells. Whether a
    claim holds across lineages is read from the ``across`` rows.

    Args:
        items: :func:`olas_utils.studies.crosslm.retrieval_items`.
        metric: the retrieval metric compared.

    Returns:
        The columns of :func:`retrieval_verdicts` (without ``same_trained_as``) plus ``lineage``
        and ``models`` (the models of the cell's pairs). Empty when no cell has both kinds of
        pairs' lineage known or the run has no control.
    """
    s = with_lineage(items[items["metric"] == metric])
    cells = []
    by = ["protocol", "family", "key", "lineage"]
    for names, g in groups(s, by):
        systems = {c: outcome_array(gc) for c, gc in groups(g, ["control"])}
        systems = {(c[0] if isinstance(c, tuple) else c): v for c, v in systems.items()}
        if _TRAINED not in systems or len(systems) < 2:
            continue
        trained = systems.pop(_TRAINED)
        models = sorted({m for pair in trained[1] for m in pair})
        cells.append(
            {
                "meta": dict(zip(by, names)),
                "trained": trained,
                "controls": systems,
                "extra": {"models": ", ".join(models)},
                "units": ["pairs", "chunks"],
            }
        )
    return verdict_cells(cells, "hit@1", across=True)


def lineage_gap_frame(items: pd.DataFrame, *, metric: str = "ssim") -> pd.DataFrame:
    """How much higher the trained models' Hit@1 is between models of one lineage than between
    models of different lineages, per ``(protocol, family, key)`` with pairs of both kinds: the
    difference with :func:`olas_utils.stats.uncertainty.margin_of` (chunks shared, each group's
    pairs as runs), verdicts Holm-corrected over the table (``beats``: within-lineage higher).

    Args:
        items: :func:`olas_utils.studies.crosslm.retrieval_items`.
        metric: the retrieval metric.

    Returns:
        One row per cell: ``within_hit@1``, ``within_low``, ``within_high``, ``within_pairs``,
        the same for ``across``, ``gap``, ``gap_low``, ``gap_high``, ``p``, ``verdict``,
        ``holm_cells``, ``chunks``. Empty when no cell has both kinds of pairs.
    """
    s = with_lineage(items[(items["metric"] == metric) & (items["control"] == _TRAINED)])
    rows, gaps = [], []
    for names, g in groups(s, ["protocol", "family", "key"]):
        by_lineage = {lin: outcome_array(gl)[0] for lin, gl in groups(g, ["lineage"])}
        by_lineage = {(k[0] if isinstance(k, tuple) else k): v for k, v in by_lineage.items()}
        if set(by_lineage) != {WITHIN, ACROSS}:
            continue
        counts = {k: np.stack([v, np.ones_like(v)], axis=-1) for k, v in by_lineage.items()}  # (pairs, chunks, 2)
        row = dict(zip(["protocol", "family", "key"], names))
        for k in (WITHIN, ACROSS):
            iv = interval(by_lineage[k])
            row.update({f"{k}_hit@1": iv.estimate, f"{k}_low": iv.low, f"{k}_high": iv.high})
            row[f"{k}_pairs"] = by_lineage[k].shape[0]
        gap = margin_of(ratio, counts[WITHIN], counts[ACROSS])
        gaps.append(gap)
        row.update(
            gap=gap.estimate, gap_low=gap.low, gap_high=gap.high, p=gap.p_value, chunks=by_lineage[WITHIN].shape[1]
        )
        rows.append(row)
    return insert_verdicts(pd.DataFrame(rows), gaps, None)


def retrieval_verdicts(items: pd.DataFrame, *, metric: str = "ssim") -> pd.DataFrame:
    """The trained models' Hit@1 against every control at once (it beats only if it beats
    each: :func:`olas_utils.stats.uncertainty.against_every_control`), per protocol, family and key,
    with three-way verdicts Holm-corrected across the table's cells at both readings
    (``docs/method.md#two-readings``).

    Args:
        items: :func:`olas_utils.studies.crosslm.retrieval_items`.
        metric: the retrieval metric compared.

    Returns:
        One row per ``(protocol, family, key)`` that has a control: ``ola_hit@1`` with
        ``ola_low``/``ola_high`` (95 % interval over pairs and chunks), ``strongest_control``
        (the control that decides the verdict), ``controls_tested``,
        ``control_hit@1`` with ``control_low``/``control_high``, ``margin`` with
        ``margin_low``/``margin_high`` (paired: the same pairs and chunks), ``p`` (the
        every-control p-value), ``verdict`` (conditional: ``"beats"``, ``"indistinguishable"``
        or ``"loses"``), ``holm_cells`` (the cells corrected together: the table's rows), the
        across-models columns (``models``, ``models_positive``, ``per_model_margins`` in points,
        ``across_low``/``across_high``, ``across_p``, ``across_verdict``, ``"not testable"``
        below 6 models: :func:`olas_utils.stats.across_models.pair_reading`), ``same_trained_as`` (an earlier protocol whose trained-model ranks are identical for
        this family and key — the same evidence, to be counted once; empty otherwise),
        ``pairs`` and ``chunks``. Empty when the run has no control.
    """
    s = items[items["metric"] == metric]
    cells, seen = [], {}
    by = ["protocol", "family", "key"]
    for names, g in groups(s, by):
        meta = dict(zip(by, names))
        systems = {c: outcome_array(gc) for c, gc in groups(g, ["control"])}
        systems = {(c[0] if isinstance(c, tuple) else c): v for c, v in systems.items()}
        if _TRAINED not in systems or len(systems) < 2:
            continue
        trained = systems.pop(_TRAINED)
        same = ""
        for (fam, key, proto), (labels, ranks) in seen.items():
            if (
                fam == meta["family"]
                and key == meta["key"]
                and labels == trained[1]
                and np.array_equal(ranks, trained[2])
            ):
                same = proto
                break
        seen.setdefault((meta["family"], meta["key"], meta["protocol"]), (trained[1], trained[2]))
        cells.append(
            {
                "meta": meta,
                "trained": trained,
                "controls": systems,
                "extra": {"same_trained_as": same},
                "units": ["pairs", "chunks"],
            }
        )
    return verdict_cells(cells, "hit@1", across=True)


def key_margin_frame(items: pd.DataFrame, *, reference: str = "ola:1", metric: str = "ssim") -> pd.DataFrame:
    """The trained models' ``reference`` key (default OLA order 1) against every other non-OLA
    key of the run, paired over the same units and items, verdicts Holm-corrected across the
    table (``beats``: ``reference`` higher; ``docs/method.md#retrieval``).

    Args:
        items: retrieval items (:func:`olas_utils.studies.crosslm.retrieval_items`: rows with
            ``metric``, compared per protocol and family over ordered pairs × chunks) or
            classifier items (those of :func:`olas_utils.studies.crosslm.classifier_frame`:
            compared per family, target and protocol over seeds × test images).
        reference: the key every other is set against.
        metric: retrieval only: the metric compared.

    Returns:
        One row per cell and other key: the cell's columns, ``key`` (the other key),
        ``reference``, ``reference_score`` / ``key_score`` (Hit@1 or top-1, fractions) with
        ``_low`` / ``_high`` 95 % intervals, ``margin`` (reference − key) with ``margin_low`` /
        ``margin_high``, ``p``, ``verdict``, ``holm_cells`` and the unit counts (``pairs`` and
        ``chunks``, or ``seeds`` and ``images``). Empty when no cell has ``reference`` beside
        another non-OLA key.
    """
    retrieval = "metric" in items.columns
    if retrieval:
        items = items[items["metric"] == metric]
        by, units, names = ["protocol", "family"], ["target", "source"], ["pairs", "chunks"]
    else:
        by, units, names = ["family", "target", "protocol"], ["seed"], ["seeds", "images"]
    items = items[items["control"] == _TRAINED]
    rows, margins, readings = [], [], []
    for cell, g in groups(items, by):
        keys = list(dict.fromkeys(g["key"].astype(str)))
        if reference not in keys:
            continue
        ref = outcome_array(g[g["key"] == reference], units=units)
        for key in keys:
            if key == reference or key.startswith("ola:"):
                continue
            mine, theirs, labels = _align(ref, outcome_array(g[g["key"] == key], units=units))
            a, b, m = interval(mine), interval(theirs), margin(mine, theirs)
            r = pair_reading(labels, (mine - theirs).mean(axis=1), p_items=m.p_value) if retrieval else None
            margins.append(m)
            readings.append(r)
            rows.append(
                {
                    **dict(zip(by, cell)),
                    "key": key,
                    "reference": reference,
                    **estimate_columns("reference", a, "reference_score"),
                    **estimate_columns("key", b, "key_score"),
                    **estimate_columns("margin", m),
                    "p": m.p_value,
                    **across_columns(r),
                    **dict(zip(names, mine.shape)),
                }
            )
    return insert_verdicts(pd.DataFrame(rows), margins, readings if retrieval else None)
