"""Figure readability: every heatmap has a colour bar stating its value range, long
sentences get thinned, shortened tick labels, and grouped figures carry a caption."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from olas_utils.studies.plots import grouped_heatmaps, heatmap, short_label, tick_positions  # noqa: E402


def test_tick_positions_keep_every_label_of_short_sentences_and_thin_long_ones():
    assert tick_positions(12, 40) == list(range(12))
    assert tick_positions(40, 40) == list(range(40))
    assert tick_positions(41, 40) == list(range(0, 41, 2))  # step ceil(41/40) = 2
    pos = tick_positions(130, 40)
    assert pos == list(range(0, 130, 4)) and len(pos) <= 40
    assert tick_positions(0, 40) == []
    with pytest.raises(ValueError, match="max_labels"):
        tick_positions(5, 0)


def test_short_label():
    assert short_label("granddaughter") == "granddaughter"
    assert short_label("antidisestablishmentarianism", 10) == "antidises…"


def _colorbar_label(fig):
    bars = [a for a in fig.axes if not a.images]
    return [b.get_ylabel() for b in bars]


def test_heatmap_has_a_colour_bar_with_the_value_range_and_thinned_ticks():
    rng = np.random.default_rng(0)
    m = rng.random((90, 90)).astype(np.float32) * 0.5 + 0.01
    words = [f"word{i}" for i in range(89)] + ["supercalifragilisticexpialidocious"]
    fig = Figure()
    ax = fig.subplots()
    heatmap(ax, torch.from_numpy(m), words, title="t")
    (label,) = _colorbar_label(fig)
    lo, hi = float(m.min()), float(m.max())
    assert label == f"weight: {lo:.3g} to {hi:.3g}"
    xt = [t.get_text() for t in ax.get_xticklabels()]
    assert list(ax.get_xticks()) == list(range(0, 90, 3)) and len(xt) == 30
    assert xt == [words[i] for i in range(0, 90, 3)]  # each label sits on its own word
    assert [t.get_text() for t in ax.get_yticklabels()] == xt
    # a long last word is shortened when it is shown
    fig2 = Figure()
    ax2 = fig2.subplots()
    heatmap(ax2, m[:3, :3], ["a", "b", words[-1]])
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["a", "b", "supercalifragil…"]
    with pytest.raises(ValueError, match="labels has 2 entries"):
        heatmap(ax2, m[:3, :3], ["a", "b"])
    with pytest.raises(ValueError, match="square"):
        heatmap(ax2, m[:3, :2])


def test_grouped_heatmaps_put_a_colour_bar_on_every_panel_and_a_caption():
    maps = [torch.rand(5, 5) for _ in range(4)]
    labels = list("abcde")
    fig = grouped_heatmaps(
        [[("m1", maps[0], labels), ("m2", maps[1], labels)], [("", maps[2], labels), ("", maps[3], labels)]],
        row_titles=["with sinks", "sinks removed"],
        caption="Models: m1, m2. Order 1.",
    )
    bars = _colorbar_label(fig)
    assert bars == [f"weight: {float(x.min()):.3g} to {float(x.max()):.3g}" for x in maps]
    assert any(t.get_text() == "Models: m1, m2. Order 1." for t in fig.texts)
    import matplotlib.pyplot as plt

    plt.close(fig)
