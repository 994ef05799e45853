"""Notebook 02 across the families, beyond the paper (which compares models within a family):
every encoder against every causal LM, in both directions, on what both can see — the encoder's
image put in the causal form the ``paper`` and ``word`` protocols give a causal map
(:func:`olas_utils.similarity.images.causal_view`: lower triangle mirrored) — with every control
and the tables and verdicts of :mod:`olas_utils.studies.crosslm_stats`. With an encoder and a
causal LM of one lineage in the run (``embeddinggemma-300m``, a bidirectional encoder trained from
Gemma 3, and the ``gemma3-270m`` decoder: notebook 02's ``gemma`` profile), the lineage tables say
whether inheritance reaches across the families.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from olas_utils.stats.uncertainty import BEATS, CONFIDENCE, INDISTINGUISHABLE, LOSES
from olas_utils.studies import crosslm_report, crosslm_stats
from olas_utils.studies.crosslm import RETRIEVAL_ITEM_COLUMNS, ImageSet, add_retrieval_ranks, items_frame
from olas_utils.studies.wording import VERDICT_SAYS, percent_ci, points_ci, verdict_counts
from olas_utils.vocabulary import CAUSAL, ENCODER, Control

__all__ = ["CROSS_FAMILY", "cross_family_items", "cross_family_tables", "cross_family_markdown"]


#: The ``family`` value of :func:`cross_family_items`: an encoder and a causal LM compared.
CROSS_FAMILY = "cross-family"


def cross_family_items(
    images: ImageSet,
    *,
    metric: str = "ssim",
    protocols: Sequence[str] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Retrieval between the families: the rank of every chunk's true match for every ordered
    (encoder, causal LM) and (causal LM, encoder) pair, every control, key and protocol that
    symmetrises causal maps. The encoder's images are put in the causal form first
    (:func:`olas_utils.similarity.images.causal_view`: lower triangle mirrored), so both
    images show the same entries; the causal model's are used as they are. Beyond the paper,
    which compares models within a family: with ``embeddinggemma-300m`` (a bidirectional
    encoder trained from Gemma 3) and ``gemma3-270m`` in one run, one lineage appears on both
    sides (:func:`olas_utils.studies.crosslm_stats.lineage_gap_frame` on these items).

    Args:
        images: :func:`olas_utils.studies.crosslm.extract_images` with models of both families.
        metric: ``"ssim"`` (the paper's) or ``"pearson"``, for the models and the controls alike.
        protocols: of :data:`olas_utils.similarity.images.SYMMETRISED` (default: those the
            run has); ``"released"`` treats causal maps as bidirectional and is never used.
        progress: a progress bar over the pairs.

    Returns:
        A DataFrame with :data:`~olas_utils.studies.crosslm.RETRIEVAL_ITEM_COLUMNS`, ``family`` = :data:`CROSS_FAMILY`;
        empty (the same columns) when a family has no model.

    Raises:
        ValueError: a protocol outside :data:`~olas_utils.similarity.images.SYMMETRISED`.
    """
    from olas_utils.infra.progress import tqdm
    from olas_utils.similarity import retrieval_ranks
    from olas_utils.similarity.images import SYMMETRISED, TIES, causal_view

    have = [p for (_, p) in images.caches]
    if protocols is None:
        protocols = [p for p in SYMMETRISED if p in have]
    bad = [p for p in protocols if p not in SYMMETRISED]
    if bad:
        raise ValueError(
            f"cross-family retrieval needs a protocol that symmetrises causal maps ({list(SYMMETRISED)}), got {bad}"
        )
    cells = []
    for (control, protocol), caches in images.caches.items():
        if protocol not in protocols:
            continue
        enc = [m for m in images.family_models(ENCODER) if m in caches]
        cau = [m for m in images.family_models(CAUSAL) if m in caches]
        for key in images.keys:
            for e in images.with_key(key, enc, protocol):
                for c in images.with_key(key, cau, protocol):
                    cells.append((control, protocol, key, e, c))
    cols: dict[str, list] = {c: [] for c in RETRIEVAL_ITEM_COLUMNS}
    for control, protocol, key, e, c in tqdm(cells, desc=f"cross-family retrieval ({metric})", disable=not progress):
        imgs = images.images(control, protocol, key, [e, c])
        imgs[e] = causal_view(imgs[e])
        for r in retrieval_ranks(imgs, metric=metric, ties=TIES[protocol], progress=False):
            add_retrieval_ranks(cols, r, family=CROSS_FAMILY, control=control, protocol=protocol, key=key)
    return items_frame(cols, RETRIEVAL_ITEM_COLUMNS)


def _shared_tokenizers(models: list[str]) -> str:
    """``"a and b share one tokenizer (…)"`` for zoo models of one tokenizer family, else ``""``."""
    from olas_utils.zoo import REGISTRY

    fams = {REGISTRY[m].tokenizer_family for m in models if m in REGISTRY}
    if len(fams) != 1 or not all(m in REGISTRY for m in models) or not next(iter(fams)):
        return ""
    return f"{' and '.join(models)} share one tokenizer ({next(iter(fams))})"


_CROSS_GAP_SAYS = {
    BEATS: "the same lineage retrieves better across the families than different lineages do.",
    LOSES: "different lineages retrieve better across the families than the same lineage does.",
    INDISTINGUISHABLE: "indistinguishable after the Holm correction (the interval is uncorrected).",
}


def cross_family_tables(items: pd.DataFrame, *, metric: str = "ssim") -> dict[str, pd.DataFrame]:
    """The tables of the cross-family items (:func:`olas_utils.studies.crossfamily.cross_family_items`),
    computed as notebook 02 computes those of its families.

    Returns:
        ``{"pairs": retrieval_frame, "verdict": retrieval_verdict_table (with weak_controls),
        "lineage": lineage_verdict_frame, "gap": lineage_gap_frame}``
        (:mod:`olas_utils.studies.crosslm_stats`); each empty for empty items.
    """
    if not len(items):
        return {k: pd.DataFrame() for k in ("pairs", "verdict", "lineage", "gap")}
    return {
        "pairs": crosslm_stats.retrieval_frame(items),
        "verdict": crosslm_report.retrieval_verdict_table(items, metric=metric),
        "lineage": crosslm_stats.lineage_verdict_frame(items, metric=metric),
        "gap": crosslm_stats.lineage_gap_frame(items, metric=metric),
    }


def cross_family_markdown(
    verdict: pd.DataFrame,
    pairs: pd.DataFrame,
    lineage: pd.DataFrame | None = None,
    gap: pd.DataFrame | None = None,
) -> str:
    """The reading of the cross-family tables (:func:`olas_utils.studies.crossfamily.cross_family_items`):
    encoders against causal LMs, every number, interval and verdict taken from the tables.

    Args:
        verdict: :func:`olas_utils.studies.crosslm_stats.retrieval_verdicts` of the cross-family items.
        pairs: :func:`olas_utils.studies.crosslm_stats.retrieval_frame` of them.
        lineage: :func:`olas_utils.studies.crosslm_stats.lineage_verdict_frame` of them.
        gap: :func:`olas_utils.studies.crosslm_stats.lineage_gap_frame` of them.
        (:func:`cross_family_tables` gives all four, by these names.)

    Returns:
        Markdown text; a single line saying why when the run has no pair of an encoder and a
        causal LM.
    """
    if not len(verdict):
        return (
            "**Across families:** no (encoder, causal LM) pair with a control in this run (it needs models of both "
            "families and a protocol that symmetrises causal maps, `paper` or `word`)."
        )
    lines = [
        "**Across families** (`02_cross_family_*`, beyond the paper, which compares models within a family): every "
        "encoder against every causal LM in both directions, on what both can see — the encoder's image cut to its "
        "lower triangle and mirrored, the form the `paper` and `word` protocols give a causal map "
        "(`olas_utils.similarity.images.causal_view`). SSIM Hit@1, the mean over ordered pairs with "
        f"{int(100 * CONFIDENCE)} % intervals over pairs and chunks, each against its strongest control on the same "
        f"pairs; verdicts Holm-corrected over the table's {len(verdict)} cells."
    ]
    for _, v in verdict[verdict.key == "ola:1"].iterrows():
        lines.append(
            f"- {v['protocol']}, order 1, {int(v['pairs'])} pairs: OLA {percent_ci(v['ola_hit@1'], v['ola_low'], v['ola_high'])}"
            f" vs {crosslm_report.control_name(v['strongest_control'])} {percent_ci(v['control_hit@1'], v['control_low'], v['control_high'])};"
            f" margin {points_ci(v['margin'], v['margin_low'], v['margin_high'])} — {VERDICT_SAYS.get(v['verdict'], v['verdict'])}."
        )
    per = verdict.groupby("protocol", sort=False)["verdict"]
    lines.append("- Over every key: " + "; ".join(f"{p}: {verdict_counts(g)}" for p, g in per) + ".")
    within = (
        lineage[lineage.lineage == crosslm_stats.WITHIN] if lineage is not None and len(lineage) else pd.DataFrame()
    )
    if not len(within):
        lines.append(
            "- No encoder in this run shares a lineage with a causal LM, so inheritance across the families is not "
            "tested here; `make reproduce PROFILE=gemma` adds embeddinggemma-300m, the encoder sibling of gemma3-270m "
            "(`results/gemma/`)."
        )
        return "\n".join(lines)
    for _, v in within[within.key == "ola:1"].iterrows():
        lines.append(
            f"- **One lineage on both sides** ({v['models']}), {v['protocol']}, order 1: OLA "
            f"{percent_ci(v['ola_hit@1'], v['ola_low'], v['ola_high'])} vs {crosslm_report.control_name(v['strongest_control'])} "
            f"{percent_ci(v['control_hit@1'], v['control_low'], v['control_high'])} on the same pairs — "
            f"{VERDICT_SAYS.get(v['verdict'], v['verdict'])} (`02_cross_family_lineage`, Holm over {int(v['holm_cells'])} cells)."
        )
    models = {m for s in within["models"] for m in str(s).split(", ")}
    one = pairs[(pairs.key == "ola:1") & pairs.target.isin(models) & pairs.source.isin(models)]
    for (protocol, target, source), g in one.groupby(["protocol", "target", "source"], sort=False, observed=True):
        by = {r["control"]: r for _, r in g.iterrows()}
        if Control.TRAINED.ident not in by:
            continue
        t = by.pop(Control.TRAINED.ident)
        ctrl = "; ".join(
            f"{crosslm_report.control_name(c)} {percent_ci(r['hit@1'], r['hit@1 low'], r['hit@1 high'])}"
            for c, r in by.items()
        )
        lines.append(
            f"  - {protocol}, {target} → {source}: OLA {percent_ci(t['hit@1'], t['hit@1 low'], t['hit@1 high'])}"
            + (f"; {ctrl}" if ctrl else "")
            + " (this pair's chunks only)."
        )
    if gap is not None and len(gap):
        for _, r in gap[gap.key == "ola:1"].iterrows():
            lines.append(
                f"- {r['protocol']}, order 1: same lineage − different lineages "
                f"{points_ci(r['gap'], r['gap_low'], r['gap_high'])} ({int(r['within_pairs'])} vs {int(r['across_pairs'])} "
                f"ordered pairs; `02_cross_family_gap`, crossed bootstrap, Holm over {int(r['holm_cells'])} cells) — "
                + _CROSS_GAP_SAYS.get(r["verdict"], _CROSS_GAP_SAYS[INDISTINGUISHABLE])
            )
    shared = _shared_tokenizers(sorted(models))
    if shared:
        lines.append(
            f"- {shared}: the tokenizer-only control gives both sides the same subword positions in `paper`, so "
            "the margin over it is what the pair adds to tokenisation; `word` pools words neutrally (uniform "
            "attention leaves no trace of the tokenizer)."
        )
    return "\n".join(lines)
