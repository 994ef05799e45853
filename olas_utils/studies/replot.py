"""Redraw the figures that notebooks 02 and 04 draw from their statistics tables, from a committed
results folder, without re-running the notebook: the margin dot plots of notebook 02
(``02_verdict_hit1``, ``02_classifier_top1``, :func:`olas_utils.studies.margin_plots.margin_figure`)
and notebook 04's bar charts (``04_bars_<task>``, :func:`olas_utils.studies.transfer_report.bar_chart`).
They are the notebooks' own calls on the tables the notebooks wrote (and
:mod:`olas_utils.studies.restat` recomputes), so a figure whose drawing code changed is brought up to
date for the price of reading a table.

    python -m olas_utils.studies.replot --results-dir results/wide --figures-dir figures/wide --profile wide

Figures drawn from a model's maps or images (galleries, examples, Hit@1 matrices) need the
notebook run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import pandas as pd

__all__ = ["figures_of", "main"]

#: Notebook 02's margin figures: figure stem → the verdict table it draws.
MARGIN_FIGURES = {"02_verdict_hit1": "02_verdict", "02_classifier_top1": "02_classifier_verdict"}


def _table(folder: Path, stem: str) -> pd.DataFrame | None:
    path = folder / f"{stem}.csv"
    if not path.is_file() or not path.read_text().strip():
        return None
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def figures_of(folder: str | Path, profile: str) -> dict:
    """The table-drawn figures of a results folder, by file stem (without ``.png``).

    Args:
        folder: a results folder (``results/`` or ``results/<profile>/``).
        profile: the profile that wrote it (notebook 04's caption names its sizes, adapter and seeds,
            from :data:`olas_utils.studies.transfer.PROFILES`).

    Returns:
        ``{stem: matplotlib figure}``: one per non-empty margin table and one per task of
        ``04_transfer_summary`` (when the folder has it and ``04_transfer_items``).

    Raises:
        ValueError: notebook 04's tables with a profile notebook 04 does not have, or whose seeds are not
            the number the transfer table was run with (the caption would misstate them: re-run the
            notebook instead).
    """
    from olas_utils.studies import transfer_report
    from olas_utils.studies.margin_plots import margin_figure

    folder = Path(folder)
    out = {}
    for stem, table in MARGIN_FIGURES.items():
        verdict = _table(folder, table)
        if verdict is not None and len(verdict):
            out[stem] = margin_figure(verdict)
    summary = _table(folder, "04_transfer_summary")
    items_path = folder / "04_transfer_items.parquet"
    if summary is not None and items_path.is_file():
        from olas_utils.studies.transfer import PROFILES

        if profile not in PROFILES:
            raise ValueError(
                f"{folder} holds notebook 04's tables: name the profile that wrote them, one of {sorted(PROFILES)}, "
                f"not {profile!r}"
            )
        cfg = PROFILES[profile]
        seeds = sorted({int(s) for s in summary["seeds"]})
        if seeds != [len(cfg.training.seeds)]:
            raise ValueError(
                f"{folder / '04_transfer_summary.csv'} was run with {seeds} seeds, the {profile!r} profile now has "
                f"{len(cfg.training.seeds)}: its caption would misstate them; re-run notebook 04 with this profile"
            )
        items = pd.read_parquet(items_path)
        for task in dict.fromkeys(summary.task):
            out[f"04_bars_{task}"] = transfer_report.bar_chart(
                summary, items, task, caption=transfer_report.bars_caption(cfg)
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Redraw the table-drawn figures of one results folder into its figures folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from olas_utils.studies.plots import save_figure

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results-dir", type=Path, required=True)
    ap.add_argument("--figures-dir", type=Path, required=True)
    ap.add_argument("--profile", required=True, help="the profile that wrote the folder (quick, wide, mixing, ...)")
    args = ap.parse_args(argv)
    if not args.results_dir.is_dir():
        ap.error(f"{args.results_dir} is not a folder")
    for stem, fig in figures_of(args.results_dir, args.profile).items():
        print(save_figure(fig, args.figures_dir / f"{stem}.png"))
        plt.close(fig)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
