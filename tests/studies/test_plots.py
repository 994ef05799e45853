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
    bars = [a for a in fig.axes if not a.images and a.axison]  # empty places of a wrapped row are off
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


def test_grid_shape_spreads_a_long_row_evenly():
    from olas_utils.studies.plots import grid_shape

    assert grid_shape(3, 4) == (1, 3) and grid_shape(4, 4) == (1, 4) and grid_shape(9, None) == (1, 9)
    assert grid_shape(7, 4) == (2, 4) and grid_shape(6, 4) == (2, 3) and grid_shape(9, 4) == (3, 3)
    with pytest.raises(ValueError, match="max_cols"):
        grid_shape(3, 0)


def _images_by_row(fig, n_rows, sub=1):
    """The panels' images of each condition row, top to bottom (sub-rows merged)."""
    ims = sorted(
        ((a.get_position().y0, a.get_position().x0, a.images[0]) for a in fig.axes if a.images),
        key=lambda t: (-t[0], t[1]),
    )
    per_row = len(ims) // n_rows
    return [[im for _, _, im in ims[r * per_row : (r + 1) * per_row]] for r in range(n_rows)]


def test_shared_scale_puts_every_panel_of_a_row_on_the_row_range_with_one_bar():
    import matplotlib.pyplot as plt

    g = torch.Generator().manual_seed(1)
    rows = [
        [torch.rand(6, 6, generator=g) * (c + 1) for c in range(7)],
        [torch.rand(6, 6, generator=g) for _ in range(7)],
    ]
    rows[1][3][2, 2] = float("nan")  # a missing entry does not set the scale
    labels = list("abcdef")
    panels = [[(f"m{c}", m, labels) for c, m in enumerate(row)] for row in rows]
    fig = grouped_heatmaps(panels, row_titles=["with sinks", "sinks removed"], shared_scale=True, max_cols=4)
    assert sum(1 for a in fig.axes if a.images) == 14  # one panel per (row, model), 7 models wrapped 4 + 3
    for row, ims in zip(rows, _images_by_row(fig, 2)):
        a = torch.stack(row).numpy()
        lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
        assert len(ims) == 7 and all(im.get_clim() == pytest.approx((lo, hi)) for im in ims)
    bars = _colorbar_label(fig)
    assert len(bars) == 2  # one colour bar per row, not one per panel
    lo0, hi0 = float(torch.stack(rows[0]).min()), float(torch.stack(rows[0]).max())
    assert bars[0] == f"weight: {lo0:.3g} to {hi0:.3g}"
    # the per-panel scale stays available: each panel on its own range, one bar each
    own = grouped_heatmaps(panels, row_titles=["with sinks", "sinks removed"], shared_scale=False, max_cols=4)
    assert len(_colorbar_label(own)) == 14
    clims = {im.get_clim() for row in _images_by_row(own, 2) for im in row}
    assert len(clims) == 14
    with pytest.raises(ValueError, match="group titles"):
        grouped_heatmaps(panels, row_titles=["a", "b"], group_titles=[("x", 7)], max_cols=4)
    plt.close(fig)
    plt.close(own)


def _zoo_gallery(n_words=13):
    from olas_utils.maps import OLAMaps
    from olas_utils.studies.gallery import GalleryModel
    from olas_utils.zoo import REGISTRY

    words = ["The", "hottest", "item", "on", "Christmas", "wish", "lists", "this", "year", "is", "nuclear"]
    words = (words * 3)[: n_words - 1] + ["."]
    g = torch.Generator().manual_seed(0)
    out = []
    for name, spec in REGISTRY.items():
        causal = spec.family == "causal"
        m = torch.rand(n_words, n_words, generator=g) * 3
        m = torch.tril(m) if causal else m
        orders = {f"ola:{k}": [m / k] for k in (1, 2, 3) if k <= spec.num_layers}
        maps = OLAMaps(
            maps=orders,
            tokens=[words],
            words=[words],
            word_ids=[torch.arange(n_words)],
            model_name=name,
            num_layers=spec.num_layers,
            is_causal=causal,
            level="word",
            capture_path="interface",
            dtype="float32",
        )
        out.append(GalleryModel(name, causal, maps))
    return sorted(out, key=lambda x: x.is_causal)


def test_gallery_of_the_whole_zoo_is_split_by_family_fits_1600_px_and_shares_each_row_scale(tmp_path):
    import matplotlib.pyplot as plt
    from PIL import Image

    from olas_utils.studies import gallery

    zoo = _zoo_gallery()
    assert len(zoo) == 11
    before = set(plt.get_fignums())
    paths = gallery.gallery_figures(zoo, [1, 3], tmp_path, close=False)
    figs = [plt.figure(n) for n in plt.get_fignums() if n not in before]
    assert [p.name for p in paths] == [
        "ola_gallery_s1_order1_encoders.png",
        "ola_gallery_s1_order1_causal.png",
        "ola_gallery_s1_order3_encoders.png",
        "ola_gallery_s1_order3_causal.png",
    ]
    widths = {p.name: Image.open(p).size[0] for p in paths}
    assert all(w <= 1600 for w in widths.values()), widths  # at the default 110 dpi
    enc = [z for z in zoo if not z.is_causal]
    cau = [z for z in zoo if z.is_causal]
    enc3 = [z for z in enc if "ola:3" in z.maps.keys()]  # splade-tiny (2 layers) has no order 3
    assert len(enc) == 7 and len(cau) == 4 and len(enc3) == 6
    for fig, have in zip(figs, (enc, cau, enc3, cau)):
        panels = [a for a in fig.axes if a.images]
        assert len(panels) == 2 * len(have)  # with and without sinks, one panel per model
        assert sorted({a.get_title() for a in panels} - {""}) == sorted(z.name for z in have)
        assert len(_colorbar_label(fig)) == 2  # one bar per row
        for ims in _images_by_row(fig, 2):
            vals = np.concatenate([np.asarray(im.get_array(), dtype=float).ravel() for im in ims])
            assert all(im.get_clim() == pytest.approx((np.nanmin(vals), np.nanmax(vals))) for im in ims)
        plt.close(fig)
