"""Notebook 02's verdict figures as dot plots of margins: one dot per verdict cell, each
dot on its margin with its interval, grouped by target or protocol, at a legible width."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from PIL import Image  # noqa: E402

from olas_utils.stats.uncertainty import BEATS, INDISTINGUISHABLE, LOSES  # noqa: E402
from olas_utils.studies.margin_plots import margin_figure, margin_rows, short_key  # noqa: E402
from olas_utils.studies.plots import save_figure  # noqa: E402
from olas_utils.zoo import REGISTRY  # noqa: E402

KEYS = ("ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1", "alti", "valuenorm")


def classifier_verdict():
    """A classifier verdict table shaped like the mixing profile's (targets x keys, the zoo's
    11 models), margins spread over beats / indistinguishable / loses."""
    rng = np.random.default_rng(0)
    rows = []
    for name, spec in REGISTRY.items():
        for key in KEYS:
            m = float(rng.uniform(-0.3, 0.8))
            half = float(rng.uniform(0.03, 0.12))
            lo, hi = m - half, m + half
            verdict = BEATS if lo > 0 else LOSES if hi < 0 else INDISTINGUISHABLE
            rows.append(
                dict(
                    family=spec.family,
                    target=name,
                    key=key,
                    protocol="paper",
                    ola_top1=0.5 + m / 2,
                    ola_low=0.4,
                    ola_high=0.9,
                    strongest_control="half-random",
                    control_top1=0.5 - m / 2,
                    margin=m,
                    margin_low=lo,
                    margin_high=hi,
                    verdict=verdict,
                )
            )
    return pd.DataFrame(rows)


def _dots(ax):
    """(x, y, x_low, x_high) of every dot on ``ax``, from its error-bar containers."""
    out = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            line, _caps, (bars,) = c.lines
            xs, ys = line.get_xdata(), line.get_ydata()
            for (x, y), seg in zip(zip(xs, ys), bars.get_segments()):
                out.append((float(x), float(y), float(seg[0][0]), float(seg[1][0])))
    return out


def test_one_dot_per_cell_on_its_margin_and_interval_split_by_family():
    v = classifier_verdict()
    fig = margin_figure(v)
    fams = list(dict.fromkeys(v.family))
    assert [ax.get_title() for ax in fig.axes] == [f"{f} ({(v.family == f).sum()} cells)" for f in fams]
    for ax, fam in zip(fig.axes, fams):
        cells = v[v.family == fam]
        dots = _dots(ax)
        assert len(dots) == len(cells)  # one dot per verdict cell, none for the group headers
        labels = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
        # one header per target, in the table's order, above its cells
        headers = [labels[y] for y in sorted(labels, reverse=True) if labels[y] in set(cells.target)]
        assert headers == list(dict.fromkeys(cells.target))
        want = sorted(zip(100 * cells.margin, 100 * cells.margin_low, 100 * cells.margin_high))
        got = sorted((x, lo, hi) for x, _, lo, hi in dots)
        assert np.allclose(got, want)
        # each dot sits on its cell's line
        rows = margin_rows(v, fam)
        y_of = {len(rows) - 1 - i: r for i, (_, r) in enumerate(rows) if r is not None}
        for x, y, _, _ in dots:
            assert x == pytest.approx(100 * y_of[round(y)]["margin"])
            assert labels[round(y)] == f"{short_key(y_of[round(y)]['key'])} vs half-random"
    plt.close(fig)


def test_the_zoo_classifier_figure_is_at_most_1600_px_wide(tmp_path):
    from matplotlib.figure import Figure

    v = classifier_verdict()
    assert len(v) == 11 * len(KEYS)  # 88 cells: more than the mixing profile's 80
    fig = margin_figure(v)
    path = save_figure(fig, tmp_path / "02_classifier_top1.png")
    width, height = Image.open(path).size
    assert width <= 1600, width
    assert isinstance(fig, Figure)
    # every text is at least 8 pt
    sizes = [t.get_fontsize() for ax in fig.axes for t in ax.get_yticklabels() + ax.get_xticklabels()]
    assert min(sizes) >= 8
    plt.close(fig)


def test_a_retrieval_verdict_table_is_grouped_by_protocol():
    rows = []
    for protocol in ("released", "paper", "word"):
        for fam in ("encoder", "causal"):
            for key in ("ola:1", "rollout"):
                rows.append(
                    dict(
                        protocol=protocol,
                        family=fam,
                        key=key,
                        **{"ola_hit@1": 0.5},
                        ola_low=0.4,
                        ola_high=0.6,
                        strongest_control="uniform",
                        margin=0.1,
                        margin_low=-0.02,
                        margin_high=0.2,
                        verdict=INDISTINGUISHABLE,
                    )
                )
    v = pd.DataFrame(rows)
    fig = margin_figure(v)
    assert len(fig.axes) == 2 and all(len(_dots(ax)) == 6 for ax in fig.axes)
    texts = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert texts == [
        "released",
        "OLA order 1 vs uniform",
        "attention rollout vs uniform",
        "paper",
        "OLA order 1 vs uniform",
        "attention rollout vs uniform",
        "word",
        "OLA order 1 vs uniform",
        "attention rollout vs uniform",
    ]
    assert "hit@1" in fig.axes[0].get_xlabel()
    plt.close(fig)
    with pytest.raises(ValueError, match="margin_low"):
        margin_figure(v.drop(columns="margin_low"))
    with pytest.raises(ValueError, match="with rows"):
        margin_figure(v.iloc[:0])


def test_the_example_chunk_figure_of_the_whole_zoo_is_at_most_1600_px_wide(tmp_path):
    from _support.studies import FakeImages

    from olas_utils.studies import crosslm, crosslm_report

    rng = np.random.default_rng(0)
    caches = {name: FakeImages({"ola:1": rng.random((2, 8, 8)).astype(np.float32)}) for name in REGISTRY}
    images = crosslm.ImageSet(
        caches={("none", "word"): caches},
        families={name: spec.family for name, spec in REGISTRY.items()},
        keys=["ola:1"],
    )
    fig = crosslm_report.example_pairs_figure(images, protocol="word")
    assert sum(1 for a in fig.axes if a.images) == len(REGISTRY)  # one panel per model
    width, _ = Image.open(save_figure(fig, tmp_path / "02_example_word_chunk0.png")).size
    assert width <= 1600, width
    plt.close(fig)
