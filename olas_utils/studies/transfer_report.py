"""Tables, figures and the verdict of notebook 04 from :func:`olas_utils.studies.transfer.run_transfer`'s
long table and per-sentence outcomes: per task and target, transfer (every remedy) beside self
and every control, each headline number with its 95 % bootstrap interval and each claim a
Holm-corrected three-way verdict (``docs/method.md#uncertainty``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from olas_utils.stats.across_models import NOT_TESTABLE, across_verdicts, model_reading, units_needed
from olas_utils.stats.uncertainty import (
    BEATS,
    INDISTINGUISHABLE,
    LOSES,
    against_every_control,
    verdict_counts,
    verdicts,
)
from olas_utils.studies.outcomes import capped_runs, estimate, family, rate, select, task_metric, versus
from olas_utils.studies.plots import grid_shape
from olas_utils.studies.seed_reading import every_control, seed_columns, seed_reading, seed_values
from olas_utils.studies.transfer import CONTROLS, PAPER_CLAIMS, transfer_condition
from olas_utils.vocabulary import Control

__all__ = [
    "CLAIMS",
    "task_summary",
    "bar_chart",
    "bars_caption",
    "transfer_verdicts",
    "lineage_frame",
    "comparison_markdown",
]

#: Condition names of the controls this text names.
_BASELINE, _POS, _TOK, _RIT = (
    c.condition for c in (Control.BASELINE, Control.POSITION_ONLY, Control.TOKENIZER_ONLY, Control.RANDOM_INIT_TARGET)
)
_TOA, _MULTI = "TOA (headline)", "transfer (multi-source)"
_TRANSFER = ("transfer", "transfer (rank)", "transfer (augmented)", _MULTI, _TOA)
#: The summary's claims: name → (condition, what it is compared with: the strongest control or
#: the stronger input control, position-only or tokenizer-only, its margin column). Each gives
#: the columns ``<margin>``, ``<margin> low``, ``<margin> high`` and ``<name> verdict``,
#: Holm-corrected across the summary's (task, target) cells.
CLAIMS = {
    "TOA": (_TOA, "strongest", "TOA − strongest"),
    "self": ("self", "strongest", "self − strongest"),
    "multi-source": (_MULTI, "strongest", "multi-source − strongest"),
    "self vs inputs": ("self", "inputs", "self − inputs"),
}
#: Which runs a condition's number averages: (source, seed) for single-source adapters, seed otherwise.
_BY_SOURCE = ("source", "seed")


def _make(task: str, metric: str):
    from olas_utils.data.tasks import TASKS

    return task_metric(task, TASKS[task].kind, metric)


def _system(items: pd.DataFrame, task: str, target: str, condition: str, variant: str | None = None):
    """``(rows, runs)`` of one condition of a (task, target) cell (the headline: ``variant``'s
    transfer from the other models)."""
    if condition == _BASELINE:
        return select(items, task=task, condition=_BASELINE), ("seed",)
    if condition == _TOA:
        return select(items, task=task, target=target, condition=transfer_condition(variant)), _BY_SOURCE
    rows = select(items, task=task, target=target, condition=condition)
    by_source = (
        condition == _RIT or condition == "transfer" or condition.startswith("transfer (") and condition != _MULTI
    )
    return rows, _BY_SOURCE if by_source else ("seed",)


def task_summary(frame: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Per task and target model, from the per-sentence outcomes: the headline metric (%) of
    every condition (mean over its runs: seeds, and sources for single-source transfer and
    the random-init target), intervals and the spread over seeds of ``self`` and the headline
    TOA, the headline's chosen variant, the strongest control (highest mean) and the claims
    of :data:`CLAIMS` as paired margins (intervals over seeds, sources and test sentences)
    with verdicts Holm-corrected across the table's cells (the conditional reading: these runs),
    and each claim read *across seeds* (the seed is the unit, "this training recipe":
    ``<claim> seed sd`` / ``low`` / ``high`` / ``p`` / ``verdict``,
    :mod:`olas_utils.studies.seed_reading`; against every control at once by the conditional rule,
    :func:`~olas_utils.studies.seed_reading.every_control`). A claim against "the strongest
    control" is tested against every control at once
    (:func:`olas_utils.stats.uncertainty.against_every_control`), so no control is chosen on the test
    sentences; its margin columns are those of the control that decides
    (``<claim> decided by``)."""
    rows, margins, seed_reads = [], {c: [] for c in CLAIMS}, {c: [] for c in CLAIMS}
    for task, d in frame.groupby("task", sort=False):
        metric = d.metric.iloc[0]
        make = _make(task, metric)
        for target, t in d[d.condition != _BASELINE].groupby("target", sort=False):
            head = t[t.condition == _TOA]
            variant = head.variant.iloc[0] if len(head) else None
            r = {"task": task, "metric": metric, "family": t.family.iloc[0], "target": target}
            r["seeds"] = int(t[t.condition == "self"].seed.nunique())
            systems = {}
            for cond in ("self",) + _TRANSFER + CONTROLS:
                if cond == _TOA and variant is None or cond != _BASELINE and not (t.condition == cond).any():
                    r[cond] = float("nan")
                    continue
                systems[cond] = _system(items, task, target, cond, variant)
                r[cond] = 100 * estimate(systems[cond][0], make, systems[cond][1])
            for name, cond in (("self", "self"), ("TOA", _TOA)):
                if cond in systems:
                    iv = rate(systems[cond][0], make, systems[cond][1])
                    per_seed = list(seed_values(systems[cond][0], make, systems[cond][1]).values())
                    r.update({f"{name} low": 100 * iv.low, f"{name} high": 100 * iv.high})
                    r[f"{name} sd (seeds)"] = 100 * float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0
            r["headline variant"] = variant or "-"
            ctrl = {c: r[c] for c in CONTROLS if c in systems}
            r["strongest control"] = max(ctrl, key=lambda c: ctrl[c])
            r["strongest"] = ctrl[r["strongest control"]]
            inputs = max((_POS, _TOK), key=lambda c: ctrl.get(c, -1.0))
            for name, (cond, against, col) in CLAIMS.items():
                others = list(ctrl) if against == "strongest" else [inputs]
                if cond not in systems or not others or any(o not in systems for o in others):
                    r.update({col: float("nan"), f"{col} low": float("nan"), f"{col} high": float("nan")})
                    margins[name].append(None)
                    seed_reads[name].append(None)
                    continue
                a, ra = systems[cond]
                each = [versus(a, systems[o][0], make, ra, systems[o][1]) for o in others]
                # against every control at once, none chosen on the test sentences: the decisive one is kept
                p, i = against_every_control([m.estimate for m in each], [m.p_value for m in each])
                m = dataclasses.replace(each[i], p_value=p)
                margins[name].append(m)
                per = [
                    seed_reading(a, systems[o][0], make, e, hi_runs=ra, lo_runs=systems[o][1], lo_fixed=o == _BASELINE)
                    for o, e in zip(others, each)
                ]
                seed_reads[name].append(every_control(per, i))
                r.update({col: 100 * m.estimate, f"{col} low": 100 * m.low, f"{col} high": 100 * m.high})
                if against == "strongest":
                    r[f"{name} decided by"] = others[i]
            rows.append(r)
    out = pd.DataFrame(rows)
    for name, ms in margins.items():
        out[f"{name} verdict"] = [v or "-" for v in verdicts(ms)]
    for name, rs in seed_reads.items():
        out = out.assign(**seed_columns(rs, prefix=f"{name} seed"))
        out[f"{name} seed verdict"] = out[f"{name} seed verdict"].replace("", "-")
    ps = [c for c in out if c.endswith(" p")]
    num = [c for c in out.select_dtypes("number").columns if c != "seeds" and c not in ps]
    out[num] = out[num].round(1)
    out[ps] = out[ps].round(4)
    # a control no run of the frame has (e.g. the trained random-weights input of a profile without it)
    return out.drop(columns=[c for c in CONTROLS if c in out and c != _BASELINE and out[c].isna().all()])


def transfer_verdicts(summary: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Per task (and per task and family where there are several): how many targets the
    headline TOA and the self-trained adapter beat / are indistinguishable from / lose to
    the strongest control (the summary's verdicts), and the mean margin over targets with
    its interval, targets resampled too (``(target, run, sentence)``), against every control
    shared by the targets at once (the decisive one named in ``<name> decided by``); and the same margin read
    *across models* (the target is the unit: ``<name> across_verdict``, Holm over the table's
    testable rows, ``not testable`` below 6 targets; :mod:`olas_utils.stats.across_models`)."""
    s = summary.dropna(subset=[_TOA])
    rows, readings = [], {}
    for task, t in s.groupby("task", sort=False):
        make = _make(task, t.metric.iloc[0])
        groups = [("all", t)] + (list(t.groupby("family", sort=False)) if t.family.nunique() > 1 else [])
        for fam, g in groups:
            r = {"task": task, "metric": t.metric.iloc[0], "family": fam, "targets": len(g)}
            for name, cond in (("TOA", _TOA), ("self", "self")):
                for v in (BEATS, INDISTINGUISHABLE, LOSES):
                    r[f"{name} {v}"] = int((g[f"{name} verdict"] == v).sum())
                sys = [_system(items, task, x.target, cond, x["headline variant"]) for _, x in g.iterrows()]
                shared = [c for c in CONTROLS if c in g and g[c].notna().all()]
                each = [family(sys, make, [_system(items, task, x.target, c) for _, x in g.iterrows()]) for c in shared]
                p, i = against_every_control([e.estimate for e in each], [e.p_value for e in each])
                m = dataclasses.replace(each[i], p_value=p)
                r[f"{name} decided by"] = shared[i]
                across = model_reading(dict(zip(g.target, g[f"{name} − strongest"] / 100)), p_items=m.p_value)
                readings.setdefault(name, []).append(across)
                r.update(
                    {
                        f"mean {name} − strongest": round(100 * m.estimate, 1),
                        f"mean {name} − strongest low": round(100 * m.low, 1),
                        f"mean {name} − strongest high": round(100 * m.high, 1),
                        f"mean {name} − strongest p": m.p_value,
                        f"{name} models_positive": f"{across.positive} of {across.n_models}",
                        f"{name} across_low": round(100 * across.low, 1),
                        f"{name} across_high": round(100 * across.high, 1),
                        f"{name} across_p": across.p_value,
                    }
                )
            rows.append(r)
    out = pd.DataFrame(rows)
    for name, rs in readings.items():
        out[f"{name} across_verdict"] = across_verdicts(rs)
    return out


def lineage_frame(summary: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Single-source transfer split by lineage: per task, family and lineage (``within``: the
    source adapter's model and the target descend from one pretrained checkpoint,
    :func:`olas_utils.zoo.registry.same_lineage`; ``across``: from different ones), the mean over
    the group's ordered (source, target) pairs of the headline variant's transfer and of its
    margin over the target's strongest control (the summary's), with intervals over pairs, seeds
    and test sentences (``(pair, seed, sentence)``) and verdicts Holm-corrected over the table's
    cells. Pairs with a model outside the zoo (lineage unknown) are left out.

    Args:
        summary: :func:`task_summary`.
        items: the per-sentence outcomes it was made from.

    Returns:
        One row per cell: ``task``, ``metric``, ``family``, ``lineage``, ``pairs`` (count),
        ``pair list`` (``source→target``), ``transfer`` with ``transfer low`` / ``high`` (%),
        ``transfer − strongest`` with its ``low`` / ``high`` (points), ``p``, ``verdict``,
        ``holm_cells``. Empty when no target has a headline transfer.
    """
    from olas_utils.zoo.registry import same_lineage

    s = summary.dropna(subset=[_TOA])
    cells = []
    for (task, fam), g in s.groupby(["task", "family"], sort=False):
        make = _make(task, g.metric.iloc[0])
        groups: dict[str, list] = {}
        for _, x in g.iterrows():
            cond = transfer_condition(x["headline variant"])
            for source in dict.fromkeys(select(items, task=task, target=x.target, condition=cond).source):
                lin = same_lineage(source, x.target)
                if lin is None:
                    continue
                groups.setdefault("within" if lin else "across", []).append((source, x.target, cond, x))
        for lin in ("within", "across"):
            if lin not in groups:
                continue
            sys = [
                (select(items, task=task, target=t, condition=c, source=src), ("seed",)) for src, t, c, _ in groups[lin]
            ]
            base = [_system(items, task, t, x["strongest control"]) for _, t, _, x in groups[lin]]
            cells.append(
                {
                    "task": task,
                    "metric": g.metric.iloc[0],
                    "family": fam,
                    "lineage": lin,
                    "pairs": len(sys),
                    "pair list": ", ".join(f"{src}→{t}" for src, t, _, _ in groups[lin]),
                    "_rate": family(sys, make),
                    "_margin": family(sys, make, base),
                }
            )
    rows = []
    for c in cells:
        r, m = c.pop("_rate"), c.pop("_margin")
        rows.append(
            {
                **c,
                "transfer": round(100 * r.estimate, 1),
                "transfer low": round(100 * r.low, 1),
                "transfer high": round(100 * r.high, 1),
                "transfer − strongest": round(100 * m.estimate, 1),
                "transfer − strongest low": round(100 * m.low, 1),
                "transfer − strongest high": round(100 * m.high, 1),
                "p": m.p_value,
                "_m": m,
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["verdict"] = verdicts(list(out.pop("_m")))
        out["holm_cells"] = len(out)
    return out


def bars_caption(cfg) -> str:
    """The caption of notebook 04's bar charts: a :class:`~olas_utils.studies.profiles.TransferProfile`'s
    split sizes, adapter and training seeds, and the interval."""
    return (
        f"{cfg.sizes.n_train} train / {cfg.sizes.n_dev} dev / {cfg.sizes.n_test} test, adapter '{cfg.training.adapter}', "
        f"seeds {list(cfg.training.seeds)}, 95 % CI"
    )


def bar_chart(summary: pd.DataFrame, items: pd.DataFrame, task: str, *, caption: str = "", per_row: int = 4):
    """Bars per target model: self, each transfer condition and each control (means over
    runs) with 95 % bootstrap intervals as error bars; the model-free baseline as a dashed line.
    One panel per family (when ``summary`` has a ``family`` column), at most ``per_row``
    targets a panel (more wrap onto the next, spread evenly: 6 as 3 + 3), the legend below: about 12.5 inches wide at
    most (<= 1,600 px at 110 dpi) however many targets.

    Returns:
        The matplotlib figure; one panel per (family, slice of ``per_row`` targets).
    """
    import matplotlib.pyplot as plt

    s = summary[summary.task == task].reset_index(drop=True)
    make = _make(task, s.metric.iloc[0])
    conds = [c for c in ("self",) + _TRANSFER + CONTROLS[:-1] if c in s and s[c].notna().any()]
    groups = [s[s.family == f] for f in dict.fromkeys(s.family)] if "family" in s else [s]
    parts = []
    for g in groups:  # spread evenly: 6 targets at 4 a panel as 3 + 3
        n = grid_shape(len(g), per_row)[1]
        parts += [g.iloc[i : i + n] for i in range(0, len(g), n)]
    w = 0.85 / len(conds)
    fig, axes = plt.subplots(
        len(parts),
        1,
        figsize=(2.5 + 2.0 * max(len(p) for p in parts), 3.0 * len(parts) + 0.8),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax, part in zip(axes[:, 0], parts):
        x = np.arange(len(part))
        for j, c in enumerate(conds):
            est, lo, hi = [], [], []
            for _, r in part.iterrows():
                if np.isnan(r[c]):
                    est.append(0.0), lo.append(0.0), hi.append(0.0)
                    continue
                rows, runs = _system(items, task, r.target, c, r["headline variant"])
                iv = rate(rows, make, runs)
                (
                    est.append(100 * iv.estimate),
                    lo.append(100 * (iv.estimate - iv.low)),
                    hi.append(100 * (iv.high - iv.estimate)),
                )
            ax.bar(
                x + (j - (len(conds) - 1) / 2) * w, est, w, yerr=[lo, hi], capsize=1.5, label=c, error_kw={"lw": 0.7}
            )
        ax.axhline(s.baseline.iloc[0], color="k", ls="--", lw=1, label="baseline (model-free)")
        ax.set_xticks(x, part.target, fontsize=8)
        ax.set_xlim(-0.5, max(len(p) for p in parts) - 0.5)  # every panel's bars the same width
        ax.set_ylabel(f"{s.metric.iloc[0]} (%, 95 % CI)", fontsize=8)
        if "family" in part:
            ax.set_title(str(part.family.iloc[0]), fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8, frameon=False)  # never on the bars
    fig.suptitle(f"{task}{' — ' + caption if caption else ''}", fontsize=9)
    return fig


def _pair(r, table: pd.DataFrame) -> str:
    """A (task, target) row's name: the target, prefixed by the task when ``table`` has several."""
    return f"{r.task}/{r.target}" if table.task.nunique() > 1 else str(r.target)


def _margin(r, name: str) -> str:
    col = CLAIMS[name][2]
    return f"{r[col]:+.1f} [{r[col + ' low']:+.1f}, {r[col + ' high']:+.1f}]"


def _by_verdict(table: pd.DataFrame, column: str, describe) -> str:
    parts = []
    for v in (BEATS, INDISTINGUISHABLE, LOSES):
        got = [describe(r) for _, r in table[table[column] == v].iterrows()]
        if got:
            parts.append(f"{v}: " + "; ".join(got))
    return " — " + ". ".join(parts) if parts else ""


def _lineage_lines(lineage: pd.DataFrame) -> list[str]:
    """The reading of :func:`lineage_frame`: per task and family, transfer between models of one
    lineage and between models of different lineages against the targets' strongest controls."""
    lines = []
    for (task, fam), g in lineage.groupby(["task", "family"], sort=False):
        parts = [
            f"{r.lineage} lineage ({r.pairs} pairs) transfer {r.transfer:.1f} [{r['transfer low']:.1f}, "
            f"{r['transfer high']:.1f}], {r['transfer − strongest']:+.1f} [{r['transfer − strongest low']:+.1f}, "
            f"{r['transfer − strongest high']:+.1f}] over the strongest control — **{r.verdict}**"
            for _, r in g.iterrows()
        ]
        missing = {"within", "across"} - set(g.lineage)
        note = f" (no {' or '.join(sorted(missing))}-lineage pair in this run)" if missing else ""
        lines.append(f"* {task} ({g.metric.iloc[0]}), {fam}: " + "; ".join(parts) + note + ".")
    held = lineage[(lineage.lineage == "across") & (lineage.verdict == BEATS)]
    lines.append(
        "* So transfer is shown between independent lineages for "
        + (", ".join(f"{r.task} ({r.family})" for _, r in held.iterrows()) if len(held) else "no task and family")
        + " (`04_lineage`; headline variant per target; Holm over the table's cells)."
    )
    return lines


def _seed_line(summary: pd.DataFrame) -> str | None:
    """The summary's claims read *across seeds* (:func:`task_summary`'s ``<claim> seed`` columns),
    with what the seed count allows: None when the summary has no such column."""
    parts, said = [], []
    for name in ("TOA", "self", "self vs inputs"):
        col = f"{name} seed verdict"
        got = [v for v in summary.get(col, []) if v not in ("-", "")]
        if got:
            said += got
            tested = [v for v in got if v != NOT_TESTABLE]
            counts = verdict_counts(tested) if tested else ""
            parts.append(
                f"{name} {counts}{', ' if counts and len(tested) < len(got) else ''}"
                + (f"{len(got) - len(tested)} not testable" if len(tested) < len(got) else "")
            )
    if not parts:
        return None
    seeds, cells = int(summary.seeds.max()), len(summary)
    text = (
        "* The same claims read *across seeds* (the seed is the unit: the training recipe, not these runs; "
        "Student's t interval over the per-seed margins, the exact sign-flip test against every control at "
        "once, Holm over the summary's cells; `<claim> seed` columns of `04_transfer_summary`): "
        + "; ".join(parts)
        + "."
    )
    if NOT_TESTABLE in said:
        text += (
            f" With {seeds} seeds a cell can pass Holm over {cells} cells only if 2/2^{seeds} ≤ 0.05/{cells}: "
            f"that needs {units_needed(cells)} seeds, so where it reads *not testable* the verdicts above are "
            "about these runs only."
        )
    return text


def comparison_markdown(
    summary: pd.DataFrame,
    verdict: pd.DataFrame,
    *,
    sizes: str,
    frame: pd.DataFrame | None = None,
    lineage: pd.DataFrame | None = None,
) -> str:
    """The closing text, computed from this run's summary (:func:`task_summary`) and verdict
    (:func:`transfer_verdicts`): each claim with the verdict cells that decide it — the headline
    TOA, self and multi-source against the strongest control per (task, target), the family
    means with their intervals — what that means for the paper's claim
    (:data:`~olas_utils.studies.transfer.PAPER_CLAIMS`), transfer within and across lineages
    when ``lineage`` (:func:`lineage_frame`) is given, and relation accuracy (the paper's
    measure) when the long ``frame`` is given."""
    seeds = sorted(set(frame[frame.condition == "self"].seed)) if frame is not None and "seed" in frame else []
    lines = [
        f"**This run** ({sizes}). Headline metric per task; percentages; controls: "
        + ", ".join(CONTROLS)
        + ". "
        + (
            f"Trained numbers are means over {len(seeds)} training seeds ({', '.join(map(str, seeds))}) and, for "
            "transfer, the source models; "
            if seeds
            else ""
        )
        + "intervals are 95 % bootstrap intervals over seeds, sources and test sentences (targets too for a "
        "family's mean); margins are paired on the same sentences; verdicts are Holm-corrected across the "
        "summary's (task, target) cells.",
        "",
        "| task | family | targets | TOA vs strongest control (beats / indist. / loses) | mean TOA − strongest "
        "[95 % CI] | self vs strongest (beats / indist. / loses) | mean self − strongest [95 % CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in verdict.iterrows():
        lines.append(
            f"| {r.task} ({r.metric}) | {r.family} | {r.targets} | {r['TOA beats']} / {r['TOA indistinguishable']} / "
            f"{r['TOA loses']} | {r['mean TOA − strongest']:+.1f} [{r['mean TOA − strongest low']:+.1f}, "
            f"{r['mean TOA − strongest high']:+.1f}] | {r['self beats']} / {r['self indistinguishable']} / "
            f"{r['self loses']} | {r['mean self − strongest']:+.1f} [{r['mean self − strongest low']:+.1f}, "
            f"{r['mean self − strongest high']:+.1f}] |"
        )
    scored = summary.dropna(subset=[_TOA])
    toa = list(scored["TOA verdict"])
    n, won = len(toa), toa.count(BEATS)
    lines += [
        "",
        f"**Paper (§4):** {PAPER_CLAIMS}",
        "",
        f"* The headline TOA (variant chosen on the other models' dev data) beats the strongest control on "
        f"**{won} of {n}** (task, target) pairs ({toa.count(INDISTINGUISHABLE)} indistinguishable, "
        f"{toa.count(LOSES)} lose)"
        + _by_verdict(
            scored,
            "TOA verdict",
            lambda r: (
                f"{_pair(r, scored)} TOA {r[_TOA]:.1f} ({r['headline variant']}) vs {r['strongest control']} "
                f"{r['strongest']:.1f}, {_margin(r, 'TOA')}"
            ),
        )
        + ". "
        + (
            "So in this run an adapter trained on one model reads, from another model's OLA, more than "
            "position, tokenisation, an untrained copy or word statistics give."
            if n and won == n
            else "Where it does not beat it, this run gives **no evidence of transfer** beyond what those controls "
            "explain: the paper's claim is not supported there at this size."
        ),
    ]
    if lineage is not None and len(lineage):
        lines += _lineage_lines(lineage)
    multi = summary.dropna(subset=[_MULTI])
    if len(multi):
        mv = list(multi["multi-source verdict"])
        lines.append(
            "* Multi-source (trained on every other model of the family, one source's data budget) against the "
            f"strongest control: {verdict_counts(mv)}"
            + _by_verdict(multi, "multi-source verdict", lambda r: f"{_pair(r, multi)} {_margin(r, 'multi-source')}")
            + ". Exploratory (the best single-source variant is picked on test, so this is not a test of a "
            "pre-specified claim): multi-source vs the best single-source variant "
            + ", ".join(
                f"{_pair(r, multi)} {r[_MULTI]:.1f} vs {b:.1f}"
                for (_, r), b in zip(
                    multi.iterrows(), multi[["transfer", "transfer (rank)", "transfer (augmented)"]].max(axis=1)
                )
            )
            + "."
        )
    sv = list(summary["self verdict"])
    lines.append(
        f"* Self-trained adapters against the strongest control: {verdict_counts(sv)}"
        + _by_verdict(summary, "self verdict", lambda r: f"{_pair(r, summary)} {_margin(r, 'self')}")
        + (
            ". Where self does not beat it, the task is not shown to be readable from OLA at this size, so "
            "transfer cannot be tested there."
            if sv.count(BEATS) < len(sv)
            else "."
        )
    )
    iv = list(summary["self vs inputs verdict"])
    lines.append(
        "* Self-trained adapters against the stronger of their position-only and tokenizer-only controls (do they "
        f"learn from OLA what word order and tokenisation do not give?): {verdict_counts(iv)}"
        + _by_verdict(
            summary, "self vs inputs verdict", lambda r: f"{_pair(r, summary)} {_margin(r, 'self vs inputs')}"
        )
        + "."
    )
    seed_line = _seed_line(summary)
    if seed_line:
        lines.append(seed_line)
    if frame is not None and {"best_epoch", "epochs_run"} <= set(frame):
        own = frame[frame.condition.isin(["self", _MULTI])].dropna(subset=["best_epoch"])
        lines.append(
            f"* Self-trained and multi-source adapter runs (× seeds) stopped by the epoch cap, not by early "
            f"stopping (not converged: lower bounds for the recipe): {capped_runs(own)}/{len(own)}."
        )
    heads = scored["headline variant"].value_counts()
    lines.append("* Headline variants chosen: " + ", ".join(f"{k} {n}×" for k, n in heads.items()) + ".")
    if frame is not None and "accuracy" in frame and (frame.task == "relation").any():
        r = frame[frame.task == "relation"]

        def acc(cond):
            a = r[r.condition == cond].accuracy * 100
            return f"{a.mean():.1f} ({a.min():.1f}–{a.max():.1f})" if len(a) else "–"

        lines.append(
            f"* Relation accuracy (19-way, the released code's measure), mean (min–max) over runs: "
            f"TOA headline {acc(_TOA)}, transfer {acc('transfer')}, self {acc('self')}, "
            f"random-init target {acc(_RIT)}, position-only {acc(_POS)}, "
            f"model-free baseline {acc(_BASELINE)}; the paper's 30–33 % is for a 3B source model on "
            "1.5–2B targets, full training data and a 768-dim adapter."
        )
    if frame is not None and "accuracy_released" in frame and (frame.task == "pos").any():
        p = frame[frame.task == "pos"]

        def both(cond):
            d = p[p.condition == cond]
            return f"{100 * d.accuracy_released.mean():.1f} (per word {100 * d.accuracy.mean():.1f})" if len(d) else "–"

        higher = bool((p.accuracy_released > p.accuracy).all())
        lines.append(
            "* POS accuracy as the released code counts it (every subword carries its word's tag, special "
            f"tokens count as correct; docs/method.md#released-code), mean over runs: self {both('self')}, transfer "
            f"{both('transfer')}, TOA headline {both(_TOA)}, position-only {both(_POS)}. "
            + ("It is higher than per word in every run; " if higher else "")
            + "it grows with subwords per word, so it is not comparable across tokenizers."
        )
    return "\n".join(lines)
