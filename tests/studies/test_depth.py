"""Models shallower than an OLA order (the 2-layer splade-tiny has no order 3): the studies
give each model the orders it has and compare, per key, the models that have it."""

import numpy as np
import pytest

from olas_utils.studies import crosslm
from olas_utils.studies.depth import keys_for, orders_for


def test_orders_and_keys_follow_the_number_of_layers():
    assert orders_for("splade-tiny", (1, 2, 3)) == (1, 2)
    assert orders_for("minilm-l6", [1, 2, 3]) == (1, 2, 3)
    assert orders_for("some/hub-model", (1, 2, 3)) == (1, 2, 3)  # depth unknown: extraction decides
    assert orders_for("anything", (0, 1, 2, 3), num_layers=1) == (0, 1)
    keys = ["ola:1", "ola:2", "ola:3", "rollout", "layer:-1"]
    assert keys_for("splade-tiny", keys) == ["ola:1", "ola:2", "rollout", "layer:-1"]
    assert keys_for("e5-small", keys) == keys


class _Images:
    def __init__(self, arrays):
        self.arrays = arrays

    def images(self, key):
        return self.arrays[key]


def test_retrieval_pairs_per_key_are_those_of_the_models_that_have_it():
    rng = np.random.default_rng(0)
    img = lambda: rng.random((6, 8, 8)).astype(np.float32)  # noqa: E731
    full = ["ola:1", "ola:3"]
    caches = {m: _Images({k: img() for k in full}) for m in ("a", "b")}
    caches["c"] = _Images({"ola:1": img()})  # shallow: no order 3
    s = crosslm.ImageSet(
        caches={("none", "word"): caches},
        families={"a": "encoder", "b": "encoder", "c": "encoder"},
        keys=full,
        model_keys={"c": ["ola:1"]},
    )
    assert s.with_key("ola:3", ["a", "b", "c"]) == ["a", "b"] and s.with_key("ola:1", ["c", "a"]) == ["c", "a"]
    f = crosslm.retrieval_items(s, metrics=("pearson",), progress=False)
    pairs = {k: set(zip(g.target, g.source)) for k, g in f.groupby("key")}
    assert pairs["ola:1"] == {(t, u) for t in "abc" for u in "abc" if t != u}  # 6 ordered pairs
    assert pairs["ola:3"] == {("a", "b"), ("b", "a")}


@pytest.mark.real_model
def test_gallery_draws_each_order_with_the_models_that_have_it(tmp_path):
    from olas_utils.studies import gallery

    sents = [["The", "cat", "sat", "on", "the", "mat", "."]]
    g = gallery.extract_gallery(["splade-tiny", "paraphrase-minilm-l3"], sents, [1, 2, 3], progress=False)
    keys = {m.name: m.maps.keys() for m in g}
    assert "ola:3" not in keys["splade-tiny"] and {"ola:1", "ola:2"} <= set(keys["splade-tiny"])
    assert {"ola:1", "ola:2", "ola:3"} <= set(keys["paraphrase-minilm-l3"])
    paths = gallery.gallery_figures(g, [1, 2, 3], tmp_path)
    assert [p.name for p in paths] == [f"ola_gallery_s1_order{k}.png" for k in (1, 2, 3)]
    assert all(p.stat().st_size > 0 for p in paths)


@pytest.mark.real_model
def test_syntax_and_transfer_run_with_a_two_layer_model(tmp_path):
    from dataclasses import replace

    from olas_utils.studies import syntax as syntax_study
    from olas_utils.studies import transfer
    from olas_utils.toa.taskmaps import ModelPool

    smoke = transfer.PROFILES["smoke"]
    cfg = replace(
        smoke,
        models=("splade-tiny", "paraphrase-minilm-l3"),
        tasks=("dependency",),
        sizes=replace(smoke.sizes, n_train=8, n_dev=4, n_test=4, max_words=8),
    )
    splits = transfer.load_splits(cfg.tasks, cfg, seed=0)
    pool = ModelPool(device="cpu", seed=0)
    frame, _ = transfer.run_transfer(cfg.models, splits, cfg, pool, seeds=(0,), checkpoint_dir=tmp_path, progress=False)
    assert {("splade-tiny", "paraphrase-minilm-l3"), ("paraphrase-minilm-l3", "splade-tiny")} <= set(
        zip(frame.source, frame.target)
    )
    train, dev, test = splits["dependency"]
    scfg = replace(syntax_study.PROFILES["smoke"], keys=("ola:1", "ola:3", "rollout"))
    parser, _ = syntax_study.parser_frame(
        ["splade-tiny"], train, dev, test, pool, scfg, seeds=(0,), checkpoint_dir=tmp_path, progress=False
    )
    ola = parser[(parser.model == "splade-tiny") & (parser.condition == "ola")]
    assert list(ola.key) == ["ola:1", "rollout"]
    probes, _ = syntax_study.probe_frame(["splade-tiny"], test, pool, keys=["ola:2", "ola:3"], progress=False)
    assert set(probes[probes.model == "splade-tiny"].key) == {"ola:2"}
