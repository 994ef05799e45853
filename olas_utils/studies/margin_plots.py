"""Dot plots of verdict margins (OLA minus its strongest control, with 95 % intervals): one
dot per verdict cell, one panel per family, cells grouped by target or protocol, sized to
stay legible in HTML and on GitHub (notebook 02's ``02_verdict_hit1.png`` and
``02_classifier_top1.png``)."""

from __future__ import annotations

import pandas as pd

from olas_utils.stats.uncertainty import BEATS, CONFIDENCE, INDISTINGUISHABLE, LOSES
from olas_utils.vocabulary import FAMILIES, key_label

__all__ = ["MARGIN_COLUMNS", "margin_figure", "margin_rows", "short_key"]

#: Columns a verdict table needs for :func:`margin_figure`.
MARGIN_COLUMNS = ("family", "key", "margin", "margin_low", "margin_high", "verdict", "strongest_control")

#: How each verdict's dot is drawn: (label, marker, face colour, edge colour).
_STYLE = {
    BEATS: ("beats", "o", "tab:blue", "tab:blue"),
    INDISTINGUISHABLE: ("indistinguishable", "o", "white", "dimgray"),
    LOSES: ("loses", "v", "tab:red", "tab:red"),
}
#: Height of one line of the plot (a cell or a group header), in inches.
ROW_INCHES = 0.19


def short_key(key: str) -> str:
    """A map key's label without its parenthesis, e.g. ``"OLA order 1"`` for ``"ola:1"``,
    ``"ALTI"`` for ``"alti"`` (the key itself if it has no label)."""
    return key_label(key).split(" (")[0]


def group_column(verdict: pd.DataFrame) -> str | None:
    """The column the cells of a panel are grouped by: ``target`` (classifier tables) if
    present, else ``protocol`` (retrieval tables), else None."""
    return next((c for c in ("target", "protocol") if c in verdict.columns), None)


def margin_rows(verdict: pd.DataFrame, family: str) -> list[tuple[str, pd.Series | None]]:
    """The lines of ``family``'s panel, top to bottom: a header ``(group, None)`` before each
    group's cells, then ``(label, row)`` per cell in the table's order (groups in order of
    first appearance).

    Args:
        verdict: a verdict table (see :func:`margin_figure`).
        family: a value of its ``family`` column.

    Returns:
        A list of ``(text, row or None)``; as many rows as ``family`` has cells. A cell's
        text is its key (:func:`short_key`) and its strongest control as the table names it
        (the control's identifier, e.g. ``half-random``, short enough to keep the figure narrow),
        after the cell's protocol when a family grouped by target has several.
    """
    v = verdict[verdict.family == family]
    by = group_column(v)
    groups = list(dict.fromkeys(v[by])) if by else [None]
    varying = [c for c in ("protocol",) if c in v.columns and c != by and v[c].nunique() > 1]
    out: list[tuple[str, pd.Series | None]] = []
    for g in groups:
        cells = v[v[by] == g] if by else v
        if by:
            out.append((str(g), None))
        for _, r in cells.iterrows():
            where = "".join(f"{r[c]}: " for c in varying)
            out.append((f"{where}{short_key(r['key'])} vs {r['strongest_control']}", r))
    return out


def margin_figure(verdict: pd.DataFrame, *, title: str | None = None, points: bool = True):
    """Each verdict cell's margin (its key, OLA or a baseline, minus its strongest control)
    as a dot with its 95 % interval,
    one panel per family side by side (shared x axis, a line at 0), cells grouped under
    their target (classifier) or protocol (retrieval); the dot's style gives the verdict
    (filled blue beats, open grey indistinguishable, red triangle loses).

    About 11 inches wide for two families (1,200–1,400 px at 110 dpi) whatever the number
    of cells; the height grows with the cells (:data:`ROW_INCHES` a line).

    Args:
        verdict: :func:`olas_utils.studies.crosslm_report.retrieval_verdict_table` or
            :func:`olas_utils.studies.classifier_stats.classifier_verdict_frame` (or any
            table with :data:`MARGIN_COLUMNS`, fractions, and an ``ola_<measure>`` column
            naming the measure).
        title: the figure's title (default: what the dots are, the Holm family size).
        points: draw margins in percentage points (else fractions).

    Returns:
        A matplotlib Figure; each panel holds one ``errorbar`` container per verdict drawn,
        their points together one per cell.

    Raises:
        ValueError: if a column of :data:`MARGIN_COLUMNS` is missing or the table is empty.
    """
    import matplotlib.pyplot as plt

    missing = [c for c in MARGIN_COLUMNS if c not in verdict.columns]
    if missing or verdict.empty:
        raise ValueError(f"a verdict table with rows and columns {MARGIN_COLUMNS} is needed; missing {missing}")
    measure = next(
        (c[len("ola_") :] for c in verdict.columns if c.startswith("ola_") and c not in ("ola_low", "ola_high")),
        "score",
    )
    fams = [f for f in FAMILIES if (verdict.family == f).any()]
    fams += [f for f in dict.fromkeys(verdict.family) if f not in fams]
    lines = {f: margin_rows(verdict, f) for f in fams}
    n_lines = max(len(rows) for rows in lines.values())
    scale = 100.0 if points else 1.0
    fig, axes = plt.subplots(
        1,
        len(fams),
        figsize=(5.5 * len(fams), ROW_INCHES * n_lines + 1.6),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    for ax, fam in zip(axes[0], fams):
        rows = lines[fam]
        y = {i: len(rows) - 1 - i for i in range(len(rows))}  # first line at the top
        drawn = list(_STYLE) + [x for x in dict.fromkeys(verdict.verdict) if x not in _STYLE]
        for verdict_name in drawn:  # a verdict without a style (e.g. not testable): a black cross
            label, marker, face, edge = _STYLE.get(verdict_name, (str(verdict_name), "x", "black", "black"))
            idx = [i for i, (_, r) in enumerate(rows) if r is not None and r["verdict"] == verdict_name]
            if not idx:
                continue
            est = [scale * rows[i][1]["margin"] for i in idx]
            lo = [scale * (rows[i][1]["margin"] - rows[i][1]["margin_low"]) for i in idx]
            hi = [scale * (rows[i][1]["margin_high"] - rows[i][1]["margin"]) for i in idx]
            ax.errorbar(
                est,
                [y[i] for i in idx],
                xerr=[lo, hi],
                fmt=marker,
                mfc=face,
                mec=edge,
                ecolor=edge,
                ms=5,
                elinewidth=1,
                capsize=2,
                label=label,
            )
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks([y[i] for i in range(len(rows))], [t for t, _ in rows], fontsize=8)
        for tick, (_, r) in zip(ax.get_yticklabels(), rows):
            if r is None:
                tick.set_fontweight("bold")
        ax.set_ylim(len(rows) - 0.5 - n_lines, len(rows) - 0.5)  # a panel of fewer lines keeps the line height
        ax.grid(axis="x", lw=0.4, alpha=0.5)
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel(f"key − its strongest control ({'points of ' if points else ''}{measure})", fontsize=8)
        ax.set_title(f"{fam} ({sum(r is not None for _, r in rows)} cells)", fontsize=9)
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]}
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncols=len(handles),
        fontsize=8,
        frameon=False,
        title=f"verdict (Holm over {len(verdict)} cells)",
        title_fontsize=8,
    )
    fig.suptitle(
        title or f"{measure}: each map key minus its strongest control, {int(100 * CONFIDENCE)} % bootstrap intervals",
        fontsize=10,
    )
    return fig
