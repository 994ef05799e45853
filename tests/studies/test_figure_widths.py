"""Notebook 04's bar chart stays legible with the whole zoo: one panel per family, at most
four targets a panel (spread evenly), one bar per (target, condition), <= 1,600 px wide."""

import matplotlib

matplotlib.use("Agg")

from pathlib import Path  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from PIL import Image  # noqa: E402

from olas_utils.studies import transfer_report  # noqa: E402
from olas_utils.studies.plots import save_figure  # noqa: E402

WIDE = Path(__file__).resolve().parents[2] / "results" / "wide"


def test_bar_chart_of_eleven_targets_is_split_by_family_and_fits_1600_px(tmp_path):
    # the committed wide run's tables (9 targets) on 30 sentences, two targets copied under the
    # zoo's other names so that there are its 11: 7 encoders and 4 causal LMs
    s = pd.read_csv(WIDE / "04_transfer_summary.csv")
    items = pd.read_parquet(WIDE / "04_transfer_items.parquet")
    s, items = s[s.task == "dependency"], items[(items.task == "dependency") & (items.sentence < 30)]
    extra = {"mpnet-base": "embeddinggemma-300m", "qwen2.5-0.5b": "qwen2.5-1.5b"}
    s = pd.concat([s] + [s[s.target == a].assign(target=b) for a, b in extra.items()], ignore_index=True)
    items = pd.concat([items] + [items[items.target == a].assign(target=b) for a, b in extra.items()])
    assert list(s.family.value_counts()[["encoder", "causal"]]) == [7, 4]
    fig = transfer_report.bar_chart(s, items, "dependency")
    axes = [a for a in fig.axes if a.patches]
    # encoders 4 + 3, causal LMs 4: every target once, each under its family
    assert [a.get_title() for a in axes] == ["encoder", "encoder", "causal"]
    shown = [[t.get_text() for t in a.get_xticklabels()] for a in axes]
    assert [len(x) for x in shown] == [4, 3, 4] and sorted(sum(shown, [])) == sorted(s.target)
    n_conds = sum(isinstance(c, BarContainer) for c in axes[0].containers)
    assert n_conds >= 8  # self, transfer and its remedies, the controls
    assert all(len(a.patches) == len(x) * n_conds for a, x in zip(axes, shown))  # a bar per (target, condition)
    width, _ = Image.open(save_figure(fig, tmp_path / "04_bars_dependency.png")).size
    assert width <= 1600, width
    plt.close(fig)
