"""Models shallower than an OLA order (the 2-layer splade-tiny has no order 3): the studies
give each model the orders it has and compare, per key, the models that have it."""

import numpy as np
import pytest
from _support.studies import FakeImages as _Images

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
    assert [p.name for p in paths] == [f"ola_gallery_s1_order{k}_encoders.png" for k in (1, 2, 3)]
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


def test_mixing_keys_a_model_lacks_are_named_with_the_reason(tiny_lm, monkeypatch):
    from olas_utils.capture import mixing_specs
    from olas_utils.studies.depth import drop_skipped, mixing_keys, mixing_skips

    llama, bert = tiny_lm("llama").model, tiny_lm("bert").model  # 3 layers each
    keys = ["ola:1", "rollout", "alti", "globenc", "alti:4", "valuenorm:3", "layer:-1"]
    assert mixing_keys(keys) == ["alti", "globenc", "alti:4", "valuenorm:3"]
    skips = mixing_skips(llama, keys)
    assert set(skips) == {"globenc", "alti:4"}
    assert "post-LN" in skips["globenc"] and "LlamaAttention" in skips["globenc"]
    assert skips["alti:4"] == "order 4 multiplies 4 distinct layers and the model has 3"
    assert mixing_skips(bert, keys) == {"alti:4": "order 4 multiplies 4 distinct layers and the model has 3"}
    assert mixing_skips(llama, ["ola:1", "rollout"]) == {}
    with pytest.warns(UserWarning) as seen:
        kept = drop_skipped("tiny-llama", keys, skips)
    assert [str(w.message).split(" (")[0] for w in seen] == [
        "tiny-llama: no 'globenc' maps",
        "tiny-llama: no 'alti:4' maps",
    ]
    assert "post-LN" in str(seen[0].message) and str(seen[1].message).endswith(
        "that key's comparisons leave tiny-llama out"
    )
    assert kept == ["ola:1", "rollout", "alti", "valuenorm:3", "layer:-1"]
    # an architecture without a MixingSpec: every mixing key, with what to add
    monkeypatch.setattr(mixing_specs, "MIXING_SPECS", {})
    none = mixing_skips(bert, ["alti", "valuenorm"])
    assert set(none) == {"alti", "valuenorm"} and "add a MixingSpec for its attention class" in none["alti"]
    # depth from the registry: splade-tiny has 2 layers
    assert keys_for("splade-tiny", ["alti:3", "alti", "alti:2", "ola:3", "valuenorm"]) == [
        "alti",
        "alti:2",
        "valuenorm",
    ]


def test_notebook_02_leaves_a_mixing_key_out_for_the_models_that_lack_it(tmp_path, tiny_lm, monkeypatch):
    """Two causal models asked for globenc (post-LN only): each is warned about and has no globenc
    images; alti is extracted for them and their tokenizer-only control, and compared."""
    import dataclasses

    from olas_utils import zoo
    from olas_utils.data.corpus import build_chunks
    from olas_utils.studies import crosslm_report

    base = tiny_lm("llama")
    made = {n: dataclasses.replace(base, name=n, weights_sha256=n * 64) for n in ("a", "b")}
    monkeypatch.setattr(zoo, "load_model", lambda name, device=None: made[name])
    chunks = build_chunks(n_chunks=6)  # at least MIN_ITEMS chunks: the verdict needs 5 items
    with pytest.warns(UserWarning, match="no 'globenc' maps") as seen:
        images = crosslm.extract_images(
            ["a", "b"],
            chunks,
            orders=[1],
            baselines=["rollout", "alti", "globenc"],
            protocols=["paper"],
            controls=["uniform"],
            batch_size=4,
            cache_dir=tmp_path,
            progress=False,
        )
    assert sorted(str(w.message).split(":")[0] for w in seen if "globenc" in str(w.message)) == ["a", "b"]
    assert images.keys == ["ola:1", "rollout", "alti", "globenc"]
    assert images.model_keys == {m: ["ola:1", "rollout", "alti"] for m in ("a", "b")}
    for control in ("none", "uniform"):
        assert images.caches[(control, "paper")]["a"].keys == ["ola:1", "rollout", "alti"]
    items = crosslm.retrieval_items(images, progress=False)
    assert set(items.key) == {"ola:1", "rollout", "alti"} and set(items.control) == {"none", "uniform"}
    verdict = crosslm_report.retrieval_verdict_table(items)
    assert "alti" in set(verdict.key)


def test_at_word_level_a_product_of_many_causal_layers_is_skipped(tiny_lm, monkeypatch):
    from olas_utils.maths import uniform
    from olas_utils.studies.depth import mixing_skips

    llama, bert = tiny_lm("llama").model, tiny_lm("bert").model
    keys = ["alti", "alti:1", "valuenorm"]
    assert mixing_skips(llama, keys, level="word") == {}  # 3 layers: within MAX_NEUTRAL_PRODUCT
    monkeypatch.setattr(uniform, "MAX_NEUTRAL_PRODUCT", 2)
    skips = mixing_skips(llama, keys, level="word")
    assert list(skips) == ["alti"] and "neutral word pooling" in skips["alti"]
    assert mixing_skips(llama, keys) == {} and mixing_skips(bert, keys + ["globenc"], level="word") == {}
    with pytest.raises(ValueError, match="level"):
        mixing_skips(llama, keys, level="token")
