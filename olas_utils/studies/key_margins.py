"""The reading of notebook 02's key-against-key margins (:func:`olas_utils.studies.crosslm_stats.key_margin_frame`):
OLA order 1 set against each other aggregation of the run (rollout, the single layers, ALTI, value
norms, attention flow) on the same items, in retrieval and in the visual classifier — the
paper's OLA / rollout / ALTI comparison stated as paired margins with their verdicts, not as
numbers side by side.
"""

from __future__ import annotations

import pandas as pd

from olas_utils.stats.across_models import NOT_TESTABLE
from olas_utils.stats.uncertainty import BEATS, INDISTINGUISHABLE, LOSES
from olas_utils.studies.wording import verdict_counts
from olas_utils.vocabulary import key_label

__all__ = ["key_margin_markdown"]


def _span(d: pd.DataFrame) -> str:
    lo, hi = 100 * d["margin"].min(), 100 * d["margin"].max()
    return f"{lo:+.1f} points" if len(d) == 1 else f"{lo:+.1f} to {hi:+.1f} points"


def key_margin_markdown(retrieval: pd.DataFrame, classifier: pd.DataFrame | None = None) -> str:
    """Markdown lines, one per other key: how many cells the reference key (OLA order 1) beats,
    is indistinguishable from or loses to, and the range of the margins.

    Args:
        retrieval: :func:`~olas_utils.studies.crosslm_stats.key_margin_frame` of the retrieval
            items (cells: protocol × family, over ordered pairs × chunks).
        classifier: the same of the classifier items (cells: family × target × protocol, over
            seeds × test images), or None.

    Returns:
        The lines joined by newlines; a single sentence saying so when neither table has a row.
    """
    tables = [("retrieval, Hit@1 over pairs × chunks, cells = protocol × family", retrieval)]
    if classifier is not None:
        tables.append(("classifier, top-1 on the unseen model over seeds × test images, cells = target", classifier))
    tables = [(name, t) for name, t in tables if t is not None and len(t)]
    if not tables:
        return "*No key to set against OLA order 1 in this run.*"
    ref = tables[0][1]["reference"].iloc[0]
    lines = [
        f"**{key_label(ref)} against the other aggregations of the run**, paired on the same items "
        "(`beats`: OLA scores higher; Holm across each table):",
        "",
    ]
    keys = list(dict.fromkeys(k for _, t in tables for k in t["key"]))
    for key in keys:
        parts = []
        for name, t in tables:
            d = t[t["key"] == key]
            if len(d):
                part = f"{name}: **{verdict_counts(d['verdict'])}** on these models, margins {_span(d)}"
                if "across_verdict" in d:
                    c = d["across_verdict"].value_counts()
                    part += (
                        f"; across models {int(c.get(BEATS, 0))} beat, {int(c.get(INDISTINGUISHABLE, 0))} "
                        f"indistinguishable, {int(c.get(LOSES, 0))} lose, {int(c.get(NOT_TESTABLE, 0))} not testable"
                    )
                parts.append(part)
        lines.append(f"* against {key_label(key)}: " + "; ".join(parts) + ".")
    losses = [(name, t[t["verdict"] == LOSES]) for name, t in tables]
    for name, d in losses:
        for key, g in d.groupby("key", sort=False):
            where = ", ".join(
                "/".join(str(r[c]) for c in ("protocol", "family", "target") if c in g and isinstance(r[c], str))
                for _, r in g.iterrows()
            )
            lines.append(
                f"* **{key_label(key)} is more similar across these models than {key_label(ref)}** ({name.split(',')[0]}: "
                f"{where}; margins {_span(g)}): the commonality measured here is at least as much context mixing's "
                "as attention's."
                if str(key).startswith(("alti", "valuenorm", "globenc"))
                else f"* **{key_label(key)} beats {key_label(ref)}** ({name.split(',')[0]}: {where}; margins {_span(g)})."
            )
    return "\n".join(lines)
