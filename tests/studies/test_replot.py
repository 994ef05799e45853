"""Table-drawn figures redrawn from committed results (``olas_utils.studies.replot``): the notebooks'
file names, legible widths, and a refusal when the profile's seeds are not the table's; every committed
figure fits 1,600 px (issue 40, item 7)."""

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from olas_utils.studies import replot  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _saved_names() -> set[str]:
    """File stems the notebooks pass to save_figure (literal or with a {task} field)."""
    names = set()
    for book in sorted((ROOT / "notebooks").glob("0[24]_*.ipynb")):
        src = "".join("".join(c["source"]) for c in json.loads(book.read_text())["cells"])
        names |= set(re.findall(r'figures_dir / f?"([0-9a-z_{}]+)\.png"', src))
    return names


@pytest.mark.slow  # reads the wide profile's transfer items
def test_replot_draws_the_notebooks_figures_from_the_committed_tables_within_1600_px(tmp_path):
    saved = _saved_names()
    for profile, folder in (("mixing", "mixing"), ("wide", "wide")):
        figs = replot.figures_of(ROOT / "results" / folder, profile)
        assert figs, profile
        for stem, fig in figs.items():
            pattern = re.sub(r"^04_bars_.*", "04_bars_{task}", stem)
            assert pattern in saved, (stem, saved)
            fig.savefig(tmp_path / f"{stem}.png", dpi=110, bbox_inches="tight")
            plt.close(fig)
            assert Image.open(tmp_path / f"{stem}.png").size[0] <= 1600, stem
    assert set(replot.figures_of(ROOT / "results" / "mixing", "mixing")) == {"02_verdict_hit1", "02_classifier_top1"}


def test_replot_refuses_a_caption_whose_seeds_the_table_was_not_run_with(tmp_path):
    folder = tmp_path / "wide"
    folder.mkdir()
    s = pd.read_csv(ROOT / "results" / "wide" / "04_transfer_summary.csv")
    s.assign(seeds=s.seeds + 2).to_csv(folder / "04_transfer_summary.csv", index=False)
    shutil.copy(ROOT / "results" / "wide" / "04_transfer_items.parquet", folder)
    with pytest.raises(ValueError, match="re-run notebook 04"):
        replot.figures_of(folder, "wide")
    with pytest.raises(ValueError, match="name the profile that wrote them"):
        replot.figures_of(folder, "gemma")


def test_every_committed_figure_is_at_most_1600_px_wide():
    wide = [
        (p.relative_to(ROOT).as_posix(), Image.open(p).size[0])
        for p in sorted((ROOT / "figures").rglob("*.png"))
        if Image.open(p).size[0] > 1600
    ]
    assert not wide, f"redraw them (python -m olas_utils.studies.replot) or re-run their notebooks: {wide}"
