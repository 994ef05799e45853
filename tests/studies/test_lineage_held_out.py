"""Leave-one-lineage-out beside leave-one-model-out (issue 43, item 5): which sources a target
gets, and how much of its accuracy its siblings carry, on hand-built inputs with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _support.studies import FakeImages

from olas_utils.stats.uncertainty import BEATS, INDISTINGUISHABLE
from olas_utils.studies import classifier_stats, crosslm

ENCODERS = ("minilm-l6", "e5-small", "mpnet-base", "splade-tiny")  # MiniLM, MiniLM, MPNet, BERT-tiny


def _image_set():
    rng = np.random.default_rng(0)
    base = rng.random((6, 16, 16)).astype(np.float32)
    caches = {("none", "paper"): {m: FakeImages({"ola:1": base + 0.05 * rng.random(base.shape)}) for m in ENCODERS}}
    return crosslm.ImageSet(caches=caches, families={m: "encoder" for m in ENCODERS}, keys=["ola:1"])


@pytest.mark.parametrize("held_out", ["model", "lineage"])
def test_a_lineage_held_out_target_has_no_sibling_among_its_sources(held_out):
    runs, items = crosslm.classifier_frame(
        _image_set(), keys=["ola:1"], epochs=1, design="logistic", held_out=held_out, progress=False, workers=1
    )
    sources = dict(zip(runs.target, runs.sources))
    if held_out == "model":
        assert sources == {t: ", ".join(m for m in ENCODERS if m != t) for t in ENCODERS}
    else:  # only the two MiniLM targets have a sibling; each loses it and keeps the other lineages
        assert sources == {"minilm-l6": "mpnet-base, splade-tiny", "e5-small": "mpnet-base, splade-tiny"}
    assert set(runs.held_out) == {held_out} and set(items.target) == set(sources)


def test_an_unknown_held_out_is_refused():
    with pytest.raises(ValueError, match="held_out must be one of"):
        crosslm.classifier_frame(_image_set(), keys=["ola:1"], epochs=1, held_out="family", progress=False)


def _items(target: str, hits: int, n: int = 60, seeds=(0, 1)) -> pd.DataFrame:
    rows = []
    for s in seeds:
        for c in range(n):
            rows.append(("encoder", "none", target, "ola:1", "paper", s, c, 0 if c < hits else 7))
    return pd.DataFrame(rows, columns=list(crosslm.CLASSIFIER_ITEM_COLUMNS))


def test_the_drop_is_the_siblings_share_of_the_accuracy():
    model = pd.concat([_items("minilm-l6", 48), _items("e5-small", 30), _items("mpnet-base", 12)])
    lineage = pd.concat(
        [
            _items("minilm-l6", 12),  # 48/60 -> 12/60: the sibling carried 0.6 of the accuracy
            _items("e5-small", 30),  # the same without its sibling
            _items("mpnet-base", 12, n=50),  # other images: no paired comparison, left out
        ]
    )
    t = classifier_stats.lineage_held_out_frame(model, lineage).set_index("target")
    assert list(t.index) == ["minilm-l6", "e5-small"]
    assert t.loc["minilm-l6", "siblings"] == "e5-small" and t.loc["e5-small", "siblings"] == "minilm-l6"
    assert t.loc["minilm-l6", "model_top1"] == pytest.approx(0.8)
    assert t.loc["minilm-l6", "lineage_top1"] == pytest.approx(0.2)
    assert t.loc["minilm-l6", "drop"] == pytest.approx(0.6)
    assert t.loc["minilm-l6", "drop_low"] > 0.4 and t.loc["minilm-l6", "verdict"] == BEATS
    assert t.loc["e5-small", "drop"] == 0 and t.loc["e5-small", "verdict"] == INDISTINGUISHABLE
    assert set(t.holm_cells) == {2} and set(t.images) == {60} and set(t.seeds) == {2}


def test_a_table_of_more_cells_than_4000_resamples_resolve_still_finds_a_large_drop():
    """150 cells (11 models' targets × keys × controls in the gemma profile): at 4,000 resamples
    the smallest bootstrap p, 2/4001, is above Holm's first threshold 0.05/150, so no cell could be
    rejected and a 60-point drop would read "indistinguishable". The resamples grow with the table."""
    from olas_utils.stats.uncertainty import N_RESAMPLES, resamples_for

    keys = [f"k{i}" for i in range(75)]

    def many(target, hits):
        one = _items(target, hits)
        return pd.concat([one.assign(key=k) for k in keys])

    model = pd.concat([many("minilm-l6", 48), many("e5-small", 30)])
    lineage = pd.concat([many("minilm-l6", 12), many("e5-small", 30)])
    t = classifier_stats.lineage_held_out_frame(model, lineage)
    assert len(t) == 150 and set(t.holm_cells) == {150}
    assert 2 / (N_RESAMPLES + 1) > 0.05 / 150 and 2 / (resamples_for(150) + 1) <= 0.05 / 150
    assert set(t[t.target == "minilm-l6"].verdict) == {BEATS}  # p = 2/12001 for every one of them
    assert set(t[t.target == "e5-small"].verdict) == {INDISTINGUISHABLE}
