"""Notebooks 03 and 04's bar charts stay legible with the whole zoo: split into panels (by
family in 04, whole models onto lines of at most 12 cells in 03), one bar per (cell, condition),
<= 1,600 px wide at the saved dpi."""

import matplotlib

matplotlib.use("Agg")

from pathlib import Path  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from PIL import Image  # noqa: E402

from olas_utils.studies import transfer_report  # noqa: E402
from olas_utils.studies.plots import save_figure  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "results"
WIDE = RESULTS / "wide"


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


def test_parser_figure_of_eleven_models_wraps_whole_models_and_fits_1600_px(tmp_path):
    from olas_utils.studies import syntax_report
    from olas_utils.zoo import REGISTRY

    # the committed quick run's parser outcomes (2 models x 4 keys) on 20 sentences, copied
    # under the zoo's 11 names: 44 cells
    items = pd.read_parquet(RESULTS / "03_parser_items.parquet")
    items = items[items.sentence < 20]
    base = items[items.condition == "baseline"]
    src = {"encoder": "minilm-l6", "causal": "smollm2-135m"}
    copies = [items[items.model == src[spec.family]].assign(model=name) for name, spec in REGISTRY.items()]
    items = pd.concat([base, *copies], ignore_index=True)
    fig = syntax_report.uas_figure(items, "uas")
    axes = [a for a in fig.axes if a.patches]
    shown = [[t.get_text().split("\n")[0] for t in a.get_xticklabels()] for a in axes]
    assert [len(x) for x in shown] == [12, 12, 12, 8]  # 3 whole models a line
    assert all(len(set(x)) == 3 for x in shown[:3])
    assert sum(shown, []) == [name for name in REGISTRY for _ in range(4)]  # each model's 4 keys, once
    n_conds = sum(isinstance(c, BarContainer) for c in axes[0].containers)
    assert all(len(a.patches) == len(x) * n_conds for a, x in zip(axes, shown))
    width, _ = Image.open(save_figure(fig, tmp_path / "03_parser_uas.png")).size
    assert width <= 1600, width
    plt.close(fig)
