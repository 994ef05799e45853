"""Notebook 02's classifier tables from its per-image outcomes (the items of
:func:`olas_utils.studies.crosslm.classifier_frame`): the accuracy on each unseen target, OLA
against every control per target (conditional: seeds × images resampled), and across the
targets at both readings (:mod:`olas_utils.stats.across_models`). The verdict machinery is
:mod:`olas_utils.studies.crosslm_stats`'."""

from __future__ import annotations

import numpy as np
import pandas as pd

from olas_utils.stats.across_models import ModelReading, model_reading
from olas_utils.stats.uncertainty import Interval, interval, margin, resamples_for
from olas_utils.studies.crosslm_stats import (
    across_columns,
    estimate_columns,
    every_control,
    groups,
    insert_verdicts,
    outcome_array,
    verdict_cells,
)
from olas_utils.vocabulary import Control

__all__ = ["classifier_summary", "classifier_verdict_frame", "classifier_across_frame", "lineage_held_out_frame"]

_TRAINED = Control.TRAINED.ident
_CLASSIFIER_GROUP = ["family", "control", "target", "key", "protocol"]


def classifier_summary(runs: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The classifier's accuracy on each unseen target, over seeds and test images.

    Args:
        runs, items: the two frames of :func:`olas_utils.studies.crosslm.classifier_frame`.

    Returns:
        One row per ``(family, control, target, key, protocol)``: ``seeds``, ``distinct_fits``
        (seeds whose ranks differ: 1 for a deterministic learner, whose seeds repeat one fit
        and count once), ``n`` (test images), ``top1`` (mean over seeds and images) with
        ``top1 low``/``top1 high`` (95 % interval; ``resampled`` names the axes: ``"seeds ×
        images"``, or images only for one seed or one fit), ``top1 sd`` (spread over distinct
        fits, NaN for one), ``top5`` with its
        interval, ``chance``, ``heldout_top1`` and ``source_top1`` (means over seeds),
        ``design`` and ``chosen`` (what selection chose per seed: ``"epoch 8"``, ``"C=0.1"``),
        ``max_epochs``, ``chosen_epochs`` and ``epochs_run`` (per seed, ``;``-joined; lbfgs iterations
        for the logistic design), ``capped`` (seeds stopped by the epoch or iteration cap while
        still at their best), ``selection`` (``"source:<model>"`` or ``"augmented"``, the distinct
        values over seeds, ``;``-joined) and ``fit_workers`` (the logistic fits' processes).
    """
    rows = []
    for names, g in groups(items, _CLASSIFIER_GROUP):
        meta = dict(zip(_CLASSIFIER_GROUP, names))
        r = runs
        for c, v in meta.items():
            r = r[r[c] == v]
        hits1, seeds, ranks = outcome_array(g, k=1, units=["seed"])
        hits5, _, _ = outcome_array(g, k=5, units=["seed"])
        fits = len({r.tobytes() for r in ranks})  # seeds whose every rank is the same are one fit
        if fits == 1:  # a deterministic learner: its "seeds" repeat one fit, no spread to resample
            hits1, hits5 = hits1[:1], hits5[:1]
        per_seed = hits1.mean(axis=1)
        top1, top5 = interval(hits1), interval(hits5)
        rows.append(
            {
                **meta,
                "seeds": len(seeds),
                "distinct_fits": fits,
                "n": hits1.shape[1],
                "top1": top1.estimate,
                "top1 low": top1.low,
                "top1 high": top1.high,
                "top1 sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan"),
                "top5": top5.estimate,
                "top5 low": top5.low,
                "top5 high": top5.high,
                "resampled": (
                    "seeds × images"
                    if fits > 1
                    else "images (1 seed)"
                    if len(seeds) == 1
                    else f"images (one deterministic fit: its {len(seeds)} seeds give identical ranks)"
                ),
                "chance": 1.0 / hits1.shape[1],
                "heldout_top1": float(r["heldout_top1"].mean()),
                "source_top1": float(r["source_top1"].mean()),
                "design": str(r["design"].iloc[0]) if "design" in r else "resnet18",
                "chosen": ";".join(map(str, r["chosen"])) if "chosen" in r else "",
                "max_epochs": int(r["max_epochs"].iloc[0]),
                "chosen_epochs": ";".join(str(int(v)) for v in r["chosen_epoch"]),
                "epochs_run": ";".join(str(int(v)) for v in r["epochs_run"]),
                "capped": int(r["capped"].sum()),
                "selection": ";".join(dict.fromkeys(map(str, r["selection"]))) if "selection" in r else "",
                "fit_workers": int(r["fit_workers"].max()) if "fit_workers" in r else 1,
            }
        )
    return pd.DataFrame(rows)


def classifier_verdict_frame(items: pd.DataFrame) -> pd.DataFrame:
    """The trained models' classifier top-1 on each unseen target against its strongest
    control (by point estimate), paired over seeds and test images, with three-way verdicts
    Holm-corrected across the table's cells.

    Args:
        items: the items of :func:`olas_utils.studies.crosslm.classifier_frame`.

    Returns:
        One row per ``(family, target, key, protocol)`` that has a control, with the columns
        of :func:`olas_utils.studies.crosslm_stats.retrieval_verdicts` (``ola_top1``, ``control_top1``, ...) and ``seeds``,
        ``images`` in place of ``pairs``, ``chunks``. Empty when no control was trained.
    """
    cells = []
    by = ["family", "target", "key", "protocol"]
    for names, g in groups(items, by):
        systems = {}
        for c, gc in groups(g, ["control"]):
            systems[c[0] if isinstance(c, tuple) else c] = outcome_array(gc, units=["seed"])
        if _TRAINED not in systems or len(systems) < 2:
            continue
        trained = systems.pop(_TRAINED)
        cells.append(
            {"meta": dict(zip(by, names)), "trained": trained, "controls": systems, "units": ["seeds", "images"]}
        )
    return verdict_cells(cells, "top1", across=False)


def _target_stack(g: pd.DataFrame, *, k: int = 1) -> tuple[np.ndarray, list[str]]:
    """A classifier system's items as ``(target, seed, image)`` hits and the targets' names.

    Raises:
        ValueError: the targets do not share their seeds and test images (no complete grid)."""
    hits, labels, _ = outcome_array(g, k=k, units=["target", "seed"])
    targets = list(dict.fromkeys(t for t, _ in labels))
    seeds = [s for t, s in labels if t == targets[0]]
    if len(labels) != len(targets) * len(seeds) or any([s for t, s in labels if t == x] != seeds for x in targets):
        raise ValueError("the classifier's targets do not share their seeds: no (target, seed, image) grid")
    return hits.reshape(len(targets), len(seeds), hits.shape[1]), targets


def _target_margin(mine: np.ndarray, theirs: np.ndarray, targets: list[str]) -> tuple[Interval, ModelReading]:
    """The margin of two ``(target, seed, image)`` systems: conditional (the targets fixed,
    seeds × images resampled, the same draws for every target) and across the targets."""
    m = margin(mine.mean(axis=0), theirs.mean(axis=0))
    per = dict(zip(targets, (mine - theirs).mean(axis=(1, 2))))
    return m, model_reading(per, p_items=m.p_value, estimate=m.estimate)


def classifier_across_frame(items: pd.DataFrame, *, reference: str = "ola:1") -> pd.DataFrame:
    """The classifier across its unseen targets: per ``(family, protocol, key)`` the trained
    models' top-1 (mean over targets, seeds and test images) against every control, and per
    ``(family, protocol)`` ``reference`` against every other non-OLA key of the run, each
    with both readings — *conditional* (these targets; seeds × images resampled, verdict
    Holm-corrected over the table) and *across models* (the target is the unit:
    :func:`olas_utils.stats.across_models.model_reading`, ``not testable`` below 6 targets).

    Args:
        items: the items of :func:`olas_utils.studies.crosslm.classifier_frame`.
        reference: the key set against the other keys.

    Returns:
        One row per comparison: ``family``, ``protocol``, ``key``, ``against`` (``"every
        control"`` or the other key), ``strongest_control`` (the deciding control, or the other
        key), ``ola_top1``, ``other_top1``, ``margin`` with ``margin_low``/``margin_high``,
        ``p``, ``verdict``, ``holm_cells``, the across-models columns (``models``,
        ``models_positive``, ``per_model_margins`` in points, ``across_low``, ``across_high``,
        ``across_p``, ``across_verdict``), ``seeds``, ``images``. Empty without a control or
        another key.
    """
    rows, margins, readings = [], [], []

    def add(meta, against, name, mine, theirs, targets, m, r):
        margins.append(m)
        readings.append(r)
        rows.append(
            {
                **meta,
                "against": against,
                "strongest_control": name,
                "ola_top1": float(mine.mean()),
                "other_top1": float(theirs.mean()),
                **estimate_columns("margin", m),
                "p": m.p_value,
                **across_columns(r),
                "seeds": mine.shape[1],
                "images": mine.shape[2],
            }
        )

    for (family, protocol), g in groups(items, ["family", "protocol"]):
        trained = g[g["control"] == _TRAINED]
        for key in dict.fromkeys(trained["key"].astype(str)):
            mine, targets = _target_stack(trained[trained["key"] == key])
            per = {}
            for c, gc in groups(g[(g["key"] == key) & (g["control"] != _TRAINED)], ["control"]):
                theirs, ctargets = _target_stack(gc)
                if ctargets != targets or theirs.shape != mine.shape:
                    continue  # a control without every target's images: not on the same items
                m, r = _target_margin(mine, theirs, targets)
                per[c[0] if isinstance(c, tuple) else c] = {"margin": m, "reading": r, "theirs": theirs}
            if per:
                name, m, r = every_control(per)
                add(
                    dict(family=family, protocol=protocol, key=key),
                    "every control",
                    name,
                    mine,
                    per[name]["theirs"],
                    targets,
                    m,
                    r,
                )
        keys = list(dict.fromkeys(trained["key"].astype(str)))
        if reference in keys:
            ref, targets = _target_stack(trained[trained["key"] == reference])
            for key in keys:
                if key == reference or key.startswith("ola:"):
                    continue
                other, otargets = _target_stack(trained[trained["key"] == key])
                if otargets != targets or other.shape != ref.shape:
                    continue
                m, r = _target_margin(ref, other, targets)
                add(dict(family=family, protocol=protocol, key=reference), key, key, ref, other, targets, m, r)
    return insert_verdicts(pd.DataFrame(rows), margins, readings)


def lineage_held_out_frame(model_items: pd.DataFrame, lineage_items: pd.DataFrame) -> pd.DataFrame:
    """How much of each target's classifier accuracy comes from its siblings: top-1 with
    leave-one-model-out sources (``model_items``) against leave-one-lineage-out sources
    (``lineage_items``: no model of the target's lineage among them), paired over seeds and
    test images, Holm-corrected over the table (conditional reading: these targets and images).

    Args:
        model_items, lineage_items: the items of
            :func:`olas_utils.studies.crosslm.classifier_frame` with ``held_out="model"`` and
            ``held_out="lineage"``.

    Returns:
        One row per ``(family, control, target, key, protocol)`` of ``lineage_items`` that
        ``model_items`` has on the same seeds and images: ``siblings`` (the family's models of
        the target's lineage, left out), ``model_top1``, ``lineage_top1``, ``drop`` (model −
        lineage) with ``drop_low``/``drop_high``, ``p``, ``verdict`` (``beats``: the siblings
        raise the accuracy), ``holm_cells``, ``seeds``, ``images``. Empty without such rows.
    """
    from olas_utils.zoo.registry import same_lineage

    by = ["family", "control", "target", "key", "protocol"]
    lomo = {names: g for names, g in groups(model_items, by)}  # (dict() would call GroupBy.keys)
    members = {f: set(g["target"].astype(str)) for (f,), g in groups(model_items, ["family"])}
    pairs = []
    for names, g in groups(lineage_items, by):
        if names not in lomo:
            continue
        mine, seeds, _ = outcome_array(lomo[names], units=["seed"])
        theirs, their_seeds, _ = outcome_array(g, units=["seed"])
        if seeds != their_seeds or mine.shape != theirs.shape:
            continue  # not the same seeds and test images: no paired comparison
        pairs.append((names, mine, theirs))
    # one target per model and lineage, every key and control: more cells than 4,000 resamples
    # resolve under Holm (150 with 11 models), so the resamples grow with the table
    n = resamples_for(max(1, len(pairs)))
    rows, margins = [], []
    for names, mine, theirs in pairs:
        meta = dict(zip(by, names))
        m = margin(mine, theirs, n_resamples=n)
        margins.append(m)
        rows.append(
            {
                **meta,
                "siblings": ", ".join(
                    sorted(
                        x
                        for x in members.get(meta["family"], ())
                        if x != meta["target"] and same_lineage(x, meta["target"])
                    )
                ),
                "model_top1": float(mine.mean()),
                "lineage_top1": float(theirs.mean()),
                **estimate_columns("drop", m),
                "p": m.p_value,
                "seeds": mine.shape[0],
                "images": mine.shape[1],
            }
        )
    return insert_verdicts(pd.DataFrame(rows), margins, None)
