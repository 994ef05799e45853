"""Context-mixing keys in the task maps of notebooks 03/04 (``task_maps(..., mixing=...)``): their
cache key adds the keys only when there are some, the maps are those of
``extract_ola(..., mixing=...)``, the tokenizer-only control's are the uniform counterparts, and a
map store skips (with a warning) the keys a model cannot give."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from olas_utils.infra.fingerprint import library_versions
from olas_utils.toa.taskmaps import maps_key
from olas_utils.vocabulary import Control


def test_maps_key_adds_the_mixing_keys_only_when_there_are_some():
    payload = {
        "weights": "w" * 64,
        "model": "minilm-l6",
        "control": None,
        "control_seed": None,
        "orders": [1, 2, 3],
        "rollout": True,
        "versions": library_versions(),
        "extraction": "one sentence per forward pass",
        "torch_threads": torch.get_num_threads(),
    }
    old = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    assert maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2, 3), True) == old
    assert maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2, 3), True, mixing=()) == old
    with_mix = {**payload, "mixing": ["alti", "alti:1"]}
    new = hashlib.sha256(json.dumps(with_mix, sort_keys=True).encode()).hexdigest()
    assert maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2, 3), True, mixing=("alti:1", "alti")) == new
    assert maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2, 3), True, mixing=["alti", "alti:01"]) == new
    assert maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2, 3), True, mixing=["alti"]) not in (new, old)
    with pytest.raises(ValueError, match="not a context-mixing key"):
        maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1,), True, mixing=("rollout",))
    with pytest.raises(TypeError, match="collection"):
        maps_key("w" * 64, "minilm-l6", Control.TRAINED, 0, (1,), True, mixing="alti")


class _Pool:
    """A stand-in pool whose every model is the tiny Llama (3 layers, causal, pre-RMSNorm)."""

    def __init__(self, lm):
        self.lm, self.calls = lm, []

    def get(self, name, control=Control.TRAINED):
        self.calls.append((name, control))
        return self.lm


def test_a_map_store_skips_the_mixing_keys_a_model_cannot_give(tiny_lm):
    from olas_utils.studies.adapters import MapStore

    pool = _Pool(tiny_lm("llama"))
    store = MapStore(pool, level="word", orders=(1,), mixing=("alti:1", "globenc", "alti:1"))
    assert store.mixing == ("alti:1", "globenc")
    with pytest.warns(UserWarning, match="m: no 'globenc' maps.*post-LN"):
        assert store.keys_for("m", ["ola:1", "alti:1", "globenc", "rollout"]) == ["ola:1", "alti:1", "rollout"]
    assert store.mixing_for("m") == ("alti:1",) and pool.calls == [("m", Control.TRAINED)]  # asked once
    with pytest.raises(ValueError, match=r"extracts the mixing keys \['alti:1', 'globenc'\], not \['valuenorm'\]"):
        store.keys_for("m", ["ola:1", "valuenorm"])
    assert MapStore(pool).keys_for("m", ["ola:1", "rollout"]) == ["ola:1", "rollout"] and len(pool.calls) == 1
    for bad in (("ola:1",), "alti"):
        with pytest.raises(ValueError, match="context-mixing keys"):
            MapStore(pool, mixing=bad)


def test_a_word_level_store_skips_a_product_of_many_causal_layers(tiny_lm, monkeypatch):
    from olas_utils.maths import uniform
    from olas_utils.studies.adapters import MapStore

    monkeypatch.setattr(uniform, "MAX_NEUTRAL_PRODUCT", 2)  # the tiny Llama has 3 layers
    pool = _Pool(tiny_lm("llama"))
    with pytest.warns(UserWarning, match="m: no 'alti' maps.*neutral word pooling"):
        assert MapStore(pool, level="word", mixing=("alti", "alti:1")).mixing_for("m") == ("alti:1",)
    assert MapStore(pool, level="subword", mixing=("alti", "alti:1")).mixing_for("m") == ("alti", "alti:1")


@pytest.mark.real_model
def test_task_maps_of_mixing_keys(tmp_path, zoo_model):
    from olas_utils.data.tasks import load_task
    from olas_utils.extract import extract_ola
    from olas_utils.maths.uniform import uniform_reference
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=3, max_words=8, min_words=3, seed=0)
    pool = taskmaps.ModelPool(seed=0)
    mixing = ("alti:1", "valuenorm")
    kw = dict(orders=(1,), cache_dir=tmp_path, progress=False)
    got = taskmaps.task_maps(pool, "minilm-l6", ewt, mixing=mixing, **kw)
    lm = zoo_model("minilm-l6")
    want = extract_ola(lm.model, lm.tokenizer, ewt.words, orders=(1,), layers=(), mixing=mixing, progress=False)
    for key in ("ola:1", "rollout", *mixing):
        for a, b in zip(got[key], want[key]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    plain = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    assert plain.keys() == ["ola:1", "rollout"]
    for a, b in zip(plain["ola:1"], got["ola:1"]):
        assert torch.equal(a, b)  # the mixing keys change no other map
    assert len(list((tmp_path / "taskmaps").iterdir())) == 2  # one folder each, no collision
    # tokenizer-only: the uniform counterparts, no forward pass
    uni = taskmaps.task_maps(pool, "minilm-l6", ewt, control="uniform", mixing=mixing, **kw)
    for key in mixing:
        for m in uni[key]:
            assert torch.equal(m, uniform_reference(key, m.shape[-1], causal=False, num_layers=6))
    # random weights: a forward pass, so real (different) mixing maps
    rnd = taskmaps.task_maps(pool, "minilm-l6", ewt, control="random", mixing=mixing, **kw)
    assert all(not torch.allclose(a, b, atol=1e-3) for a, b in zip(rnd["alti:1"], got["alti:1"]))
