"""Every statistics table of a results folder recomputed from its per-item files, with the
tables' current code: what the notebooks write after their items, without re-running an
extraction or a training (``python -m olas_utils.studies.restat --results-dir results/mixing``).

The notebooks call the same functions on the same items, so a committed table that differs
from :func:`tables_of` of its folder's items is older than its code
(``tests/studies/test_committed_tables.py`` checks every committed profile).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import pandas as pd

__all__ = ["FLOATFMT", "tables_of", "main"]

#: Tables written with one decimal (as their notebooks write them); the others with three.
FLOATFMT = {
    "03_probes_uuas": ".1f",
    "03_parser_controls": ".1f",
    "03_parser_orders": ".1f",
    "04_transfer_summary": ".1f",
    "04_lineage": ".1f",
    "04_verdict": ".1f",
}


def _read(folder: Path, name: str) -> pd.DataFrame | None:
    from olas_utils.studies.tables import read_items

    for ext in (".parquet", ".csv"):
        p = folder / f"{name}{ext}"
        if p.is_file():
            return read_items(p) if ext == ".parquet" else pd.read_csv(p)
    return None


def tables_of(folder: Path | str) -> dict[str, pd.DataFrame]:
    """The statistics tables of notebooks 02, 03 and 04 that ``folder``'s per-item files allow,
    by file stem (``02_verdict``, ``02_classifier_across``, ``03_parser_orders``, ``04_verdict``,
    …), computed as the notebooks compute them.

    Raises:
        FileNotFoundError: ``folder`` has no per-item file at all.
    """
    from olas_utils.studies import (
        classifier_stats,
        crossfamily,
        crosslm_report,
        crosslm_stats,
        syntax_report,
        transfer_report,
    )

    folder = Path(folder)
    out: dict[str, pd.DataFrame] = {}
    items = _read(folder, "02_retrieval_items")
    if items is not None:
        out["02_verdict"] = crosslm_report.retrieval_verdict_table(items)
        out["02_lineage_verdict"] = crosslm_stats.lineage_verdict_frame(items)
        out["02_lineage_gap"] = crosslm_stats.lineage_gap_frame(items)
        out["02_key_margins"] = crosslm_stats.key_margin_frame(items)
    clf = _read(folder, "02_classifier_items")
    runs = _read(folder, "02_classifier_runs")
    if clf is not None and runs is not None:
        out["02_classifier"] = classifier_stats.classifier_summary(runs, clf)
    if clf is not None:
        out["02_classifier_verdict"] = classifier_stats.classifier_verdict_frame(clf)
        out["02_classifier_key_margins"] = crosslm_stats.key_margin_frame(clf)
        out["02_classifier_across"] = classifier_stats.classifier_across_frame(clf)
        lineage = _read(folder, "02_classifier_lineage_items")
        if lineage is not None:
            out["02_classifier_lineage"] = classifier_stats.lineage_held_out_frame(clf, lineage)
            out["02_classifier_lineage_verdict"] = classifier_stats.classifier_verdict_frame(lineage)
    cross = _read(folder, "02_cross_family_items")
    if cross is not None and len(cross):
        for name, table in crossfamily.cross_family_tables(cross).items():
            out[f"02_cross_family_{name}"] = table
    probes = _read(folder, "03_probe_items")
    if probes is not None:
        out["03_probes_uuas"] = syntax_report.probe_table(probes)
    parser, runs = _read(folder, "03_parser_items"), _read(folder, "03_parser")
    if parser is not None:
        if runs is not None:
            out["03_parser_controls"] = syntax_report.parser_table(runs, parser)
        out["03_parser_orders"] = syntax_report.order_table(parser)
    transfer, frame = _read(folder, "04_transfer_items"), _read(folder, "04_transfer_all")
    if transfer is not None and frame is not None:
        summary = transfer_report.task_summary(frame, transfer)
        out["04_transfer_summary"] = summary
        out["04_lineage"] = transfer_report.lineage_frame(summary, transfer)
        out["04_verdict"] = transfer_report.transfer_verdicts(summary, transfer)
    if not out:
        raise FileNotFoundError(f"{folder} has no per-item file (02_retrieval_items, 03_parser_items, ...)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the statistics tables of one or more results folders from their items."""
    ap = argparse.ArgumentParser(description="Recompute every statistics table of a results folder from its items.")
    ap.add_argument("--results-dir", type=Path, nargs="+", required=True)
    args = ap.parse_args(argv)
    from olas_utils.studies.tables import write_table

    for folder in args.results_dir:
        if not folder.is_dir():
            ap.error(f"{folder} is not a folder")
        for name, table in tables_of(folder).items():
            write_table(table, folder / name, floatfmt=FLOATFMT.get(name, ".3f"))
            print(f"{folder / name}: {len(table)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
