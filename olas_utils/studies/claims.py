"""The primary claims, declared before any table (``docs/method.md#primary-claims``), read
from the committed per-item files of the profiles that test them, each cell at both readings
(*conditional*: these models, items resampled; *across models*: the model is the unit), with
one Holm correction per reading over the whole primary family.

* **C1** same-order OLA is similar across LMs beyond every control: OLA order 1's SSIM Hit@1
  (retrieval, paper protocol) and the classifier's top-1 on unseen models (paper protocol),
  per family, against every control at once (intersection-union), on every offline model
  (:data:`MODELS_PROFILE`);
* **C2** the similarity collapses for random, half-random and shuffled-layer copies: OLA
  order 1's Hit@1 against each of those controls, per family;
* **C3** lower orders carry more syntax: parser UAS, order 1 − order 2 and order 2 − order 3;
* **C4** a TOA adapter transfers to unseen LMs: headline transfer − the target's strongest
  control, per task and family (the ``wide`` profile);
* **B** OLA order 1 against each baseline on the same items: rollout, first and last layer
  (:data:`MODELS_PROFILE`), ALTI, ALTI order 1 and value norms (``mixing``), attention flow (``flow``): Hit@1
  margins, per family, whichever way they fall.

Every other table of the notebooks is secondary (its own Holm family) or exploratory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from olas_utils.stats.across_models import ACROSS_MODELS, CONDITIONAL, NOT_TESTABLE, holm_reachable, units_needed
from olas_utils.stats.uncertainty import ALPHA, BEATS, INDISTINGUISHABLE, LOSES, holm_reject
from olas_utils.vocabulary import Control

__all__ = [
    "CLAIMS",
    "MODELS_PROFILE",
    "PROFILE_FOLDERS",
    "primary_frame",
    "holm_verdicts",
    "forest_figure",
    "claims_markdown",
    "findings_markdown",
]

#: The primary claims, in the order the README and ``docs/method.md`` state them.
CLAIMS: dict[str, str] = {
    "C1": "same-order OLA is similar across LMs beyond every control",
    "C2": "the similarity collapses for random, half-random and shuffled-layer copies",
    "C3": "lower OLA orders carry more syntax than higher ones",
    "C4": "a TOA adapter transfers to unseen LMs",
    "B": "OLA order 1 against each baseline on the same items",
}
#: Where each profile's committed outputs live, relative to the results root.
PROFILE_FOLDERS = {"quick": ".", "gemma": "gemma", "mixing": "mixing", "flow": "flow", "wide": "wide"}
#: The notebook-02 profile that carries C1, C2 and B's rollout and single-layer cells: ``gemma``,
#: every offline model (7 encoders, 4 causal LMs), the most units the across-models reading has
#: (quick until 2026-12-07, 6 and 3; chosen for the model count before that profile's run).
MODELS_PROFILE = "gemma"
_WEIGHT_CONTROLS = tuple(c.ident for c in (Control.RANDOM_WEIGHTS, Control.HALF_RANDOM, Control.SHUFFLED_LAYERS))
_PROTOCOL = "paper"


def _row(claim, cell, family, source, table, estimate, low, high, p, across: dict | None, units: str) -> dict:
    a = across or {}
    return {
        "claim": claim,
        "cell": cell,
        "family": family,
        "profile": source,
        "table": table,
        "margin": estimate,
        "low": low,
        "high": high,
        "p": p,
        "models": a.get("models", np.nan),
        "models_positive": a.get("models_positive", np.nan),
        "per_model_margins": a.get("per_model_margins", ""),
        "across_low": a.get("across_low", np.nan),
        "across_high": a.get("across_high", np.nan),
        "across_p": a.get("across_p", np.nan),
        "units": units,
    }


def _across(r) -> dict:
    return {
        k: r[k] for k in ("models", "models_positive", "per_model_margins", "across_low", "across_high", "across_p")
    }


def _pairs_row(claim: str, cell: str, profile: str, table: str, r) -> dict:
    """A primary cell from a row of a retrieval verdict or key-margin table (pairs × chunks)."""
    return _row(
        claim, cell, r.family, profile, table, r.margin, r.margin_low, r.margin_high, r.p, _across(r),
        f"{r.pairs} pairs × {r.chunks} chunks",
    )  # fmt: skip


def _retrieval_rows(folder: Path, profile: str) -> list[dict]:
    from olas_utils.studies import crosslm_stats

    items = pd.read_parquet(folder / "02_retrieval_items.parquet")
    items = items[items["protocol"] == _PROTOCOL]
    rows = []
    if profile == MODELS_PROFILE:
        v = crosslm_stats.retrieval_verdicts(items)
        rows += [
            _pairs_row("C1", "retrieval Hit@1, OLA:1 − every control", profile, "02_verdict", r)
            for _, r in v[v.key == "ola:1"].iterrows()
        ]
        trained = items[items.control == Control.TRAINED.ident]
        for ctrl in _WEIGHT_CONTROLS:
            v = crosslm_stats.retrieval_verdicts(pd.concat([trained, items[items.control == ctrl]]))
            rows += [
                _pairs_row("C2", f"retrieval Hit@1, OLA:1 − {ctrl}", profile, "02_retrieval_items", r)
                for _, r in v[v.key == "ola:1"].iterrows()
            ]
    k = crosslm_stats.key_margin_frame(items)
    skip = {MODELS_PROFILE: (), "mixing": ("rollout", "layer:0", "layer:-1"), "flow": ("rollout",)}[profile]
    rows += [
        _pairs_row("B", f"retrieval Hit@1, OLA:1 − {r.key}", profile, "02_key_margins", r)
        for _, r in k[~k.key.isin(skip)].iterrows()
    ]
    return rows


def _classifier_rows(folder: Path, profile: str) -> list[dict]:
    from olas_utils.studies import classifier_stats

    c = classifier_stats.classifier_across_frame(pd.read_parquet(folder / "02_classifier_items.parquet"))
    c = c[(c.protocol == _PROTOCOL) & (c.key == "ola:1") & (c.against == "every control")]
    return [
        _row(
            "C1",
            "classifier top-1 on unseen targets, OLA:1 − every control",
            r.family,
            profile,
            "02_classifier_across",
            r.margin,
            r.margin_low,
            r.margin_high,
            r.p,
            _across(r),
            f"{r.models} targets × {r.seeds} fits × {r.images} images",
        )
        for _, r in c.iterrows()
    ]


def _order_rows(folder: Path, profile: str) -> list[dict]:
    from olas_utils.studies import syntax_report

    o = syntax_report.order_table(pd.read_parquet(folder / "03_parser_items.parquet"))
    o = o[o.comparison.isin(["ola:1 − ola:2", "ola:2 − ola:3"])]
    rows = []
    for _, r in o.iterrows():
        mean = r.model == syntax_report.MEAN
        cell = f"parser UAS, {r.comparison}" + ("" if mean else f" ({r.model})")
        across = None
        if mean:
            n = int(o[(o.comparison == r.comparison) & (o.model != syntax_report.MEAN)].shape[0])
            across = {
                "models": n,
                "models_positive": r.models_show,
                "across_low": r.low / 100,
                "across_high": r.high / 100,
                "across_p": r.p,
            }
            rows.append(
                _row(
                    "C3",
                    cell,
                    "both",
                    profile,
                    "03_parser_orders",
                    r.margin / 100,
                    np.nan,
                    np.nan,
                    np.nan,
                    across,
                    "models as units",
                )
            )
        else:
            rows.append(
                _row(
                    "C3",
                    cell,
                    r.model,
                    profile,
                    "03_parser_orders",
                    r.margin / 100,
                    r.low / 100,
                    r.high / 100,
                    r.p,
                    None,
                    "seeds × sentences",
                )
            )
    return rows


def _transfer_rows(folder: Path, profile: str) -> list[dict]:
    from olas_utils.studies import transfer_report

    s = pd.read_csv(folder / "04_transfer_summary.csv")
    v = transfer_report.transfer_verdicts(s, pd.read_parquet(folder / "04_transfer_items.parquet"))
    v = v[v.family != "all"]
    rows = []
    for _, r in v.iterrows():
        pos, n = str(r["TOA models_positive"]).split(" of ")
        across = {
            "models": int(n),
            "models_positive": int(pos),
            "across_low": r["TOA across_low"] / 100,
            "across_high": r["TOA across_high"] / 100,
            "across_p": r["TOA across_p"],
        }
        rows.append(
            _row(
                "C4",
                f"{r.task} {r.metric}, TOA − strongest control",
                r.family,
                profile,
                "04_verdict",
                r["mean TOA − strongest"] / 100,
                r["mean TOA − strongest low"] / 100,
                r["mean TOA − strongest high"] / 100,
                r["mean TOA − strongest p"],
                across,
                f"{r.targets} targets",
            )
        )
    return rows


def holm_verdicts(
    estimates: Sequence[float], p_values: Sequence[float], *, units: Sequence[float] | None = None, alpha: float = ALPHA
) -> list[str]:
    """Three-way verdicts, Holm over the finite p-values; a NaN p-value (a cell without that
    reading's test, e.g. too few models) reads :data:`NOT_TESTABLE` and takes no part. With
    ``units`` (each cell's number of models, for an exact test over them), a cell that no data
    could let Holm reject beside the others
    (:func:`olas_utils.stats.across_models.holm_reachable`) reads :data:`NOT_TESTABLE` too."""
    e, p = np.asarray(estimates, float), np.asarray(p_values, float)
    out = [NOT_TESTABLE] * len(p)
    idx = np.flatnonzero(np.isfinite(p))
    if units is not None and idx.size:
        n = np.asarray(units, float)
        idx = idx[np.asarray(holm_reachable([int(n[i]) for i in idx], alpha=alpha), dtype=bool)]
    if idx.size:
        reject = holm_reject(p[idx], alpha=alpha)
        for i, r in zip(idx, reject):
            out[i] = (BEATS if e[i] > 0 else LOSES) if r and e[i] != 0 else INDISTINGUISHABLE
    return out


def primary_frame(results_root: Path | str) -> pd.DataFrame:
    """The primary claims' cells from the committed per-item files under ``results_root``
    (the quick profile's folder, with ``gemma/``, ``mixing/``, ``flow/`` and ``wide/`` beneath it), with
    ``verdict`` (conditional) and ``across_verdict`` (across models), each Holm-corrected over
    every primary cell of its reading (``holm_cells``). Margins are fractions.

    Raises:
        FileNotFoundError: a profile folder without the per-item file a claim needs.
    """
    root = Path(results_root)
    rows: list[dict] = []
    for profile, sub in PROFILE_FOLDERS.items():
        folder = root / sub
        if profile in (MODELS_PROFILE, "mixing", "flow"):
            rows += _retrieval_rows(folder, profile)
        if profile == MODELS_PROFILE:
            rows += _classifier_rows(folder, profile)
        if profile == "quick":
            rows += _order_rows(folder, profile)
        if profile == "wide":
            rows += _transfer_rows(folder, profile)
    out = pd.DataFrame(rows)
    out.insert(0, "statement", out["claim"].map(CLAIMS))
    out["verdict"] = holm_verdicts(out["margin"], out["p"])
    out["across_verdict"] = holm_verdicts(out["margin"], out["across_p"], units=out["models"])
    out["holm_cells"] = int(np.isfinite(out["p"]).sum())
    out["across_holm_cells"] = int(np.isfinite(out["across_p"]).sum())  # tested, whether or not reachable
    order = {c: i for i, c in enumerate(CLAIMS)}
    out = out.sort_values("claim", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return out


def forest_figure(frame: pd.DataFrame):
    """A forest plot of the primary cells: each margin (points) with its conditional interval
    (thick) and its across-models t interval (thin), the verdict of each reading on the right."""
    import matplotlib.pyplot as plt

    n = len(frame)
    fig, ax = plt.subplots(figsize=(9.5, 0.28 * n + 1.2))
    y = np.arange(n)[::-1]
    m = 100 * frame["margin"].to_numpy(float)
    ax.hlines(
        y,
        100 * frame["across_low"],
        100 * frame["across_high"],
        color="0.6",
        lw=1,
        label="across models (t over models)",
    )
    ax.hlines(y, 100 * frame["low"], 100 * frame["high"], color="C0", lw=3, label="conditional (items resampled)")
    ax.plot(m, y, "k|", ms=8)
    ax.axvline(0, color="k", lw=0.6)
    labels = [f"{r.claim} · {r.cell} · {r.family}" for r in frame.itertuples()]
    ax.set_yticks(y, labels, fontsize=7)
    short = {BEATS: "beats", INDISTINGUISHABLE: "indist.", LOSES: "loses", NOT_TESTABLE: "n/t"}
    for yi, r in zip(y, frame.itertuples()):
        ax.text(
            1.01,
            yi,
            f"{short.get(r.verdict, r.verdict)} / {short.get(r.across_verdict, r.across_verdict)}",
            transform=ax.get_yaxis_transform(),
            fontsize=7,
            va="center",
        )
    ax.set_xlabel("margin, percentage points (OLA or TOA minus control / baseline)")
    ax.set_title("Primary claims: conditional / across-models verdicts (Holm over each reading's cells)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def claims_markdown(frame: pd.DataFrame) -> str:
    """One line per claim, in words, from the primary table: how many of its cells each
    reading calls beats / indistinguishable / loses / not testable."""
    lines = []
    for claim, g in frame.groupby("claim", sort=False):
        parts = []
        for col, name in (("verdict", CONDITIONAL), ("across_verdict", ACROSS_MODELS)):
            c = g[col].value_counts()
            parts.append(
                f"{name}: {c.get(BEATS, 0)} beat, {c.get(INDISTINGUISHABLE, 0)} indistinguishable, "
                f"{c.get(LOSES, 0)} lose, {c.get(NOT_TESTABLE, 0)} not testable"
            )
        lines.append(f"* **{claim}** — {CLAIMS[claim]} ({len(g)} cells): " + "; ".join(parts) + ".")
    return "\n".join(lines)


#: The markers around the generated findings table in ``README.md``.
START = "<!-- primary claims: generated by olas_utils.studies.claims from results/primary_claims.csv; do not edit -->"
END = "<!-- end of primary claims -->"


def _status(g: pd.DataFrame) -> str:
    cond, across = g["verdict"].tolist(), g["across_verdict"].tolist()
    n = len(g)
    if all(v == BEATS for v in across):
        return "**holds across models**"
    if all(v == BEATS for v in cond):
        testable = [v for v in across if v != NOT_TESTABLE]
        cells = int(g["across_holm_cells"].iloc[0]) if "across_holm_cells" in g else 1
        return "**holds on these models**; " + (
            f"not testable across models (Holm over {cells} cells needs {units_needed(max(cells, 1))} models)"
            if not testable
            else f"across models {sum(v == BEATS for v in testable)} of {len(testable)} testable cells"
        )
    loses = sum(v == LOSES for v in cond)
    beats = sum(v == BEATS for v in cond)
    if beats == 0 and loses == 0:
        return f"**not shown** on these models ({n} of {n} cells indistinguishable)"
    if beats == 0:
        return f"**does not hold**: loses in {loses} of {n} cells, indistinguishable in {n - loses}"
    return f"**holds in {beats} of {n} cells** on these models" + (f", loses in {loses}" if loses else "")


def _numbers(g: pd.DataFrame) -> str:
    out = []
    for r in g.itertuples():
        lo = "" if not np.isfinite(r.low) else f" [{100 * r.low:+.1f}, {100 * r.high:+.1f}]"
        models = "" if not np.isfinite(r.models) else f", {int(r.models)} models"
        out.append(f"{r.family} {100 * r.margin:+.1f}{lo} ({r.verdict} / {r.across_verdict}{models})")
    return "; ".join(out)


def findings_markdown(frame: pd.DataFrame) -> str:
    """The README's table of findings in words: per claim (per baseline for **B**), its status
    — holds across models / holds on these models / does not hold — and the margins that
    decide it (points, conditional 95 % interval, conditional / across-models verdicts)."""
    rows = ["| claim | status | margins, points (conditional / across-models verdict) |", "|---|---|---|"]
    for claim, g in frame.groupby("claim", sort=False):
        if claim == "B":
            for cell, h in g.groupby("cell", sort=False):
                other = cell.split("OLA:1 − ")[-1]
                rows.append(f"| B: OLA order 1 vs {other} | {_status(h)} | {_numbers(h)} |")
        elif claim == "C3":
            h = g[g.family != "both"]
            for comp, k in h.groupby(h.cell.str.extract(r"(ola:\d − ola:\d)")[0], sort=False):
                rows.append(f"| C3: {comp} (parser UAS) | {_status(k)} | {_numbers(k)}; no test across 2 models |")
        else:
            for cell, h in g.groupby("cell", sort=False):
                rows.append(f"| {claim}: {cell} | {_status(h)} | {_numbers(h)} |")
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m olas_utils.studies.claims --results-dir results --figures-dir figures``."""
    ap = argparse.ArgumentParser(
        description="The primary claims' table and forest plot from the committed per-item files."
    )
    ap.add_argument("--results-dir", type=Path, required=True)
    ap.add_argument("--figures-dir", type=Path, required=True)
    ap.add_argument("--readme", type=Path, default=None, help="rewrite the findings table between its markers here")
    args = ap.parse_args(argv)
    if not (args.results_dir / "02_retrieval_items.parquet").is_file():
        ap.error(f"{args.results_dir} has no 02_retrieval_items.parquet: give the quick profile's results folder")
    from olas_utils.studies.plots import save_figure
    from olas_utils.studies.tables import write_table

    frame = primary_frame(args.results_dir)
    write_table(frame, args.results_dir / "primary_claims")
    save_figure(forest_figure(frame), args.figures_dir / "primary_claims.png")
    print(claims_markdown(frame))
    if args.readme is not None:
        from olas_utils.infra.atomic import write_text_atomic

        text = args.readme.read_text(encoding="utf-8")
        if text.count(START) != 1 or text.count(END) != 1:
            ap.error(f"{args.readme} must hold the markers {START!r} and {END!r} once each")
        head, rest = text.split(START)
        tail = rest.split(END)[1]
        saved = pd.read_csv(args.results_dir / "primary_claims.csv")  # the README quotes the committed table
        write_text_atomic(args.readme, f"{head}{START}\n{findings_markdown(saved)}{END}{tail}", what="README")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
