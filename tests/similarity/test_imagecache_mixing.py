"""Context-mixing keys in the image cache (notebook 02): accepted among the baselines, computed in
the same forward pass, recorded in the manifest's keys (so a cache with them is another folder),
refused when unknown or when the model cannot give them; a cache without them keeps the manifest
and folder it always had; the tokenizer-only control stores each key's uniform counterpart."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import olas_utils.similarity.imagecache as ic
from olas_utils.data.corpus import build_chunks, corpus_hash
from olas_utils.extract import extract_ola
from olas_utils.infra.fingerprint import library_versions, sha256_json
from olas_utils.similarity.imagecache.plan import validate_keys
from olas_utils.similarity.images import PREPROCESSING, PROTOCOLS, RESIZE, to_image
from olas_utils.vocabulary import DEFAULT_BASELINES

SETTINGS = dict(orders=(1, 2), image_size=12, batch_size=4, progress=False)


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


@pytest.fixture(scope="module")
def llama(tiny_lm):
    return tiny_lm("llama")


@pytest.fixture(scope="module")
def chunks():
    return build_chunks(n_chunks=4)


def test_validate_keys_accepts_mixing_keys_and_keeps_the_others_as_they_were():
    assert validate_keys((1, 2, 3), DEFAULT_BASELINES) == (
        [1, 2, 3],
        True,
        [0, -1],
        [],
        ["ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1"],
    )
    orders, rollout, layers, mixing, keys = validate_keys([1], ["rollout", "alti", "valuenorm:2", "globenc"])
    assert (orders, rollout, layers) == ([1], True, [])
    assert mixing == ["alti", "valuenorm:2", "globenc"]
    assert keys == ["ola:1", "rollout", "alti", "valuenorm:2", "globenc"]
    assert validate_keys([], ["alti"])[3:] == (["alti"], ["alti"])


def test_attention_flow_is_an_image_cache_baseline_with_its_uniform_counterpart_for_the_control(tmp_path, llama):
    """``"flow"`` travels like a mixing key (extracted on request, in the manifest's keys): its images are
    ``extract_ola(..., mixing=("flow",))``'s maps through the protocol, and the tokenizer-only control's
    are those of uniform attention's flow (1 on every visible word pair at word level)."""
    from olas_utils.extract import uniform_mixing
    from olas_utils.zoo.controls import uniform_attention_copy

    assert validate_keys([1], ["rollout", "flow"])[3:] == (["flow"], ["ola:1", "rollout", "flow"])
    few = build_chunks(n_chunks=2, chunk_words=10)
    for lm, attention in ((llama, "model"), (uniform_attention_copy(llama), "uniform")):
        got = ic.extract_protocols(
            lm, few, protocols=["paper", "word"], baselines=("flow",), cache_dir=tmp_path / attention, **SETTINGS
        )
        assert got["paper"].keys == ["ola:1", "ola:2", "flow"]
        real = extract_ola(
            llama.model,
            llama.tokenizer,
            few,
            orders=(1,),
            attention=attention,
            progress=False,
            **({"mixing": ("flow",)} if attention == "model" else {}),
        )
        if attention == "uniform":
            real = uniform_mixing(real, ["flow"])
        for i in range(len(few)):
            want = to_image(real["flow"][i], causal=True, image_size=12, protocol="paper")
            np.testing.assert_allclose(got["paper"].images("flow")[i], want.numpy(), rtol=1e-5, atol=1e-6)
            if attention == "uniform":
                w = int(got["word"].lengths()[i])
                ones = to_image(torch.ones(w, w).tril(), causal=True, image_size=12, protocol="word")
                np.testing.assert_allclose(got["word"].images("flow")[i], ones.numpy(), atol=1e-6)


@pytest.mark.parametrize("bad", ["ola:1", "alti:x", "attention", "valuenorm:-1", "flow:2"])
def test_an_unknown_baseline_is_refused_with_what_is_accepted(tmp_path, bert, chunks, bad):
    with pytest.raises(
        ValueError, match=f"unknown baseline {bad!r}: use 'rollout', 'layer:I', 'flow' or a context-mixing key"
    ):
        validate_keys([1], ["rollout", bad])
    with pytest.raises(ValueError, match="'valuenorm', 'alti', 'globenc'"):
        ic.extract_to_cache(bert, chunks, cache_root=tmp_path / "c", baselines=("rollout", bad), **SETTINGS)
    assert not (tmp_path / "c").exists()  # refused before anything is written
    with pytest.raises(ValueError, match="duplicates"):
        validate_keys([1], ["alti:1", "alti:01"])  # the same key twice


def test_a_mixing_key_the_model_cannot_give_is_refused_before_anything_is_written(tmp_path, llama, chunks):
    with pytest.raises(ValueError, match=r"cannot give the context-mixing key\(s\) \['globenc'\].*post-LN.*Leave"):
        ic.extract_to_cache(llama, chunks, cache_root=tmp_path / "g", baselines=("alti", "globenc"), **SETTINGS)
    with pytest.raises(ValueError, match="outside"):  # 3 layers: no order 4
        ic.extract_to_cache(llama, chunks, cache_root=tmp_path / "g", baselines=("alti:4",), **SETTINGS)
    assert not (tmp_path / "g").exists()


def _formula_manifest(lm, chunks, plan, *, keys, protocol="paper") -> dict:
    """``manifest.json`` by its documented formula (the module docstring of
    ``olas_utils.similarity.imagecache.manifest``), field by field."""
    return {
        "format": ic.FORMAT_VERSION,
        "model": lm.name,
        "weights_sha256": lm.weights_sha256,
        "attention": "model",
        "is_causal": False,
        "num_layers": 3,
        "model_dtype": "float32",
        "orders": [1, 2],
        "keys": keys,
        "image_size": 12,
        "dtype": "float32",
        "n_chunks": len(chunks),
        "corpus_sha256": corpus_hash(chunks),
        "seed": 0,
        "batch_size": 4,
        "plan_sha256": sha256_json(plan),
        "tokenizer": ic.tokenizer_settings(lm.tokenizer),
        "versions": library_versions(),
        "protocol": protocol,
        "level": PROTOCOLS[protocol],
        "preprocessing": PREPROCESSING[protocol],
        "resize": RESIZE[protocol],
    }


def test_without_mixing_keys_the_manifest_and_folder_are_those_of_before(tmp_path, bert, chunks):
    """The cache key of a run without mixing keys is the formula it was defined by, so caches on
    disk stay valid (the same code path as before mixing keys existed: no new field)."""
    lm = dataclasses.replace(bert, weights_sha256="0" * 64)
    c = ic.extract_protocols(lm, chunks, protocols=["paper"], baselines=("rollout",), cache_dir=tmp_path, **SETTINGS)
    c = c["paper"]
    plan = json.loads((c.root / "plan.json").read_text())
    want = _formula_manifest(lm, chunks, plan, keys=["ola:1", "ola:2", "rollout"])
    # the thread count is recorded beside the identity, outside its hash and its comparison
    assert c.manifest.pop(ic.RECORDED) == {"torch_threads": torch.get_num_threads()}
    assert c.manifest == want
    assert c.root == tmp_path / "ola" / "tiny-bert" / f"paper-{sha256_json(want)[:12]}"
    # with mixing keys: the same manifest but its keys, hence another folder; OLA images bit-identical
    m = ic.extract_protocols(
        lm, chunks, protocols=["paper"], baselines=("rollout", "alti:1"), cache_dir=tmp_path, **SETTINGS
    )["paper"]
    assert ic.manifest_diff(c.manifest, m.manifest) == {
        "keys": (["ola:1", "ola:2", "rollout"], ["ola:1", "ola:2", "rollout", "alti:1"])
    }
    assert m.root != c.root and m.root == ic.default_cache_root(m.manifest, tmp_path)
    for key in c.keys:
        assert np.array_equal(c.images(key), m.images(key)), key
    assert not np.array_equal(m.images("alti:1"), m.images("ola:1"))


def test_tokenizer_only_images_of_mixing_keys_are_the_uniform_counterparts(tmp_path, llama, chunks):
    """A causal model's uniform attention by hand (1/(i+1) on and below the diagonal, every
    layer): ``alti:1`` is U, ``alti`` U³, ``valuenorm`` (U + I)³ (3 layers); at word level under
    neutral pooling every visible word pair is 1."""
    from olas_utils.zoo.controls import uniform_attention_copy

    u = uniform_attention_copy(llama)
    keys = ("alti", "alti:1", "valuenorm")
    got = ic.extract_protocols(u, chunks, protocols=["paper", "word"], baselines=keys, cache_dir=tmp_path, **SETTINGS)
    lengths = np.asarray(got["paper"].lengths())
    for i, t in enumerate(lengths):
        a = np.tril(np.ones((t, t))) / (np.arange(t)[:, None] + 1.0)
        hand = {
            "alti": np.linalg.matrix_power(a, 3),
            "alti:1": a,
            "valuenorm": np.linalg.matrix_power(a + np.eye(t), 3),
        }
        for key in keys:
            want = to_image(torch.from_numpy(hand[key]).float(), causal=True, image_size=12, protocol="paper")
            np.testing.assert_allclose(got["paper"].images(key)[i], want.numpy(), rtol=1e-5, atol=1e-7)
            w = int(got["word"].lengths()[i])
            ones = to_image(torch.ones(w, w).tril(), causal=True, image_size=12, protocol="word")
            assert np.array_equal(got["word"].images(key)[i], ones.numpy()), key
    assert got["paper"].manifest["attention"] == "uniform"


def test_the_word_protocol_leaves_out_a_product_of_many_causal_layers(tmp_path, llama, chunks, monkeypatch):
    """With the limit lowered to 2 layers, the 3-layer tiny Llama's 'alti' (the product of its layers) has
    no word-level images (neutral pooling would divide by underflowing numbers): the word cache
    stores the other keys, says so in its manifest and a warning, and the subword caches keep it."""
    from olas_utils.maths import uniform
    from olas_utils.similarity.imagecache.plan import plan_targets

    monkeypatch.setattr(uniform, "MAX_NEUTRAL_PRODUCT", 2)
    kw = dict(SETTINGS, baselines=("rollout", "alti", "alti:1"), cache_dir=tmp_path)
    with pytest.warns(UserWarning, match="tiny-llama: no 'word' images of 'alti': 'alti' is the product of all 3"):
        got = ic.extract_protocols(llama, chunks, protocols=["paper", "word"], **kw)
    assert got["paper"].keys == ["ola:1", "ola:2", "rollout", "alti", "alti:1"]
    assert got["word"].keys == got["word"].manifest["keys"] == ["ola:1", "ola:2", "rollout", "alti:1"]
    for c in got.values():
        for key in c.keys:
            assert np.isfinite(np.asarray(c.images(key))).all(), key
    assert ic.cache_complete(
        llama, chunks, protocols=["paper", "word"], **{k: v for k, v in kw.items() if k != "progress"}
    )
    # a causal run without such a key keeps the manifest it always had
    settings = ic.CacheSettings(orders=[1], baselines=["rollout"], image_size=12, batch_size=4, cache_dir=tmp_path)
    targets = plan_targets(llama, chunks, ["word"], settings)
    assert targets[0].keys == targets[0].manifest["keys"] == ["ola:1", "rollout"] and targets[0].dropped == {}


@pytest.mark.real_model
def test_mixing_images_are_extract_olas_maps_through_each_protocol(tmp_path, zoo_model):
    """minilm-l6, 2 chunks, every protocol: each mixing image is ``extract_ola(..., mixing=...)``'s map
    of the same batch through the protocol's ``to_image``, bit for bit (word: pooled first)."""
    lm = zoo_model("minilm-l6")
    chunks = build_chunks(n_chunks=2)
    mixing = ("alti", "alti:1", "valuenorm", "globenc")
    got = ic.extract_protocols(
        lm,
        chunks,
        protocols=list(PROTOCOLS),
        orders=(1,),
        baselines=("rollout",) + mixing,
        batch_size=2,
        cache_dir=tmp_path,
        progress=False,
    )
    (batch,) = got["paper"].plan
    res = extract_ola(
        lm.model,
        lm.tokenizer,
        [chunks[i] for i in batch],
        orders=(1,),
        layers=(),
        batch_size=2,
        mixing=mixing,
        progress=False,
        model_name=lm.name,
    )
    words = res.to_words()
    for protocol, c in got.items():
        assert c.keys == ["ola:1", "rollout", *mixing]
        maps = words if PROTOCOLS[protocol] == "word" else res
        for j, i in enumerate(batch):
            for key in c.keys:
                want = to_image(maps[key][j], causal=False, image_size=50, protocol=protocol).numpy()
                assert np.array_equal(c.images(key)[i], want), (protocol, key, i)
        assert not np.array_equal(c.images("alti"), c.images("ola:1"))


@pytest.mark.real_model
def test_a_deep_causal_models_alti_has_finite_images_and_none_at_word_level(tmp_path, zoo_model):
    """smollm2-135m (30 layers): neutral pooling of 'alti' would give infinite word maps, so the word
    cache leaves it out; its subword images are finite, like every other key's."""
    lm = zoo_model("smollm2-135m")
    chunks = build_chunks(n_chunks=2)
    with pytest.warns(UserWarning, match="no 'word' images of 'alti'"):
        got = ic.extract_protocols(
            lm,
            chunks,
            protocols=["paper", "word"],
            orders=(1,),
            baselines=("alti", "alti:1"),
            batch_size=2,
            cache_dir=tmp_path,
            progress=False,
        )
    assert got["paper"].keys == ["ola:1", "alti", "alti:1"] and got["word"].keys == ["ola:1", "alti:1"]
    for c in got.values():
        assert all(np.isfinite(np.asarray(c.images(k))).all() for k in c.keys)
