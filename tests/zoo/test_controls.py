"""Tests of the negative controls (olas_utils.zoo.controls).

Real models (``real_model``): minilm-l6 (BERT encoder) and smollm2-135m (Llama decoder),
on one short sentence. A tiny random Gemma 3 (mixed sliding/full attention layers, a
window shorter than the input) checks that per-layer attention types move with the layers.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from olas_utils.extract import extract_ola
from olas_utils.zoo import LoadedModel
from olas_utils.zoo.controls import (
    find_layer_list,
    layer_permutation,
    permute_layers,
    random_weights_copy,
    shuffled_layers_copy,
)

WORDS = [["The", "old", "man", "saw", "the", "boat", "on", "the", "river", "."]]
REAL = ["minilm-l6", "smollm2-135m"]
LAYER_LIST = {"minilm-l6": "encoder.layer", "smollm2-135m": "model.layers"}


def _output(lm: LoadedModel) -> torch.Tensor:
    ids = lm.tokenizer(" ".join(WORDS[0]), return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**ids, use_cache=False) if lm.is_causal else lm.model(**ids)
    return out.logits if lm.is_causal else out.last_hidden_state


def _incremental_last_logits(model, x):
    """Logits of the last token computed with a KV cache of the others (cache kwarg name of
    this transformers version)."""
    import inspect

    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        first = model(input_ids=x[:, :-1], use_cache=True)
        cache = getattr(first, "cache", None) or first.past_key_values
        return model(input_ids=x[:, -1:], use_cache=True, **{kw: cache}).logits[0, -1]


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


# --------------------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------------------


def test_layer_permutation_seeded_and_never_identity():
    for n in (2, 3, 6, 30):
        for seed in range(20):
            p = layer_permutation(n, seed)
            assert sorted(p) == list(range(n))
            assert p != tuple(range(n))
            assert p == layer_permutation(n, seed)
    assert layer_permutation(6, 0) != layer_permutation(6, 1)
    assert layer_permutation(1, 0) == (0,)
    with pytest.raises(ValueError):
        layer_permutation(0)


def test_find_layer_list_generic_and_errors():
    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.small = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
            self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
            self.other = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    name, lst = find_layer_list(Toy(), 3)
    assert name == "blocks" and len(lst) == 3
    with pytest.raises(ValueError, match="no nn.ModuleList"):
        find_layer_list(Toy(), 5)

    class Tie(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
            self.b = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])

    with pytest.raises(ValueError, match="ambiguous"):
        find_layer_list(Tie(), 2)


# --------------------------------------------------------------------------------------
# layer-shuffled copies of real models
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shuffled(zoo_model):
    """name -> (original, its output before copying, shuffled copy); built once."""
    made = {}

    def get(name):
        if name not in made:
            lm = zoo_model(name)
            before = _output(lm)
            made[name] = (lm, before, shuffled_layers_copy(lm, seed=0))
        return made[name]

    yield get
    made.clear()


@pytest.mark.real_model
@pytest.mark.parametrize("name", REAL)
def test_shuffled_parameters_are_the_originals_permuted(shuffled, name):
    lm, _, sh = shuffled(name)
    n = lm.num_layers
    perm = layer_permutation(n, 0)
    assert sh.name == f"{name}+shuffled(seed=0)"
    assert sh.model.olas_layer_permutation == perm
    # derived identity (a permutation of pinned weights is deterministic), so caches of
    # the copy can be found without building it
    assert sh.weights_sha256 == f"{lm.weights_sha256}+shuffled(seed=0)" and sh.tokenizer is lm.tokenizer
    assert sh.is_causal == lm.is_causal and sh.num_layers == n
    assert not sh.model.training

    lname, orig_layers = find_layer_list(lm.model, n)
    assert lname == LAYER_LIST[name]
    _, new_layers = find_layer_list(sh.model, n)
    for i, p in enumerate(perm):
        a, b = new_layers[i].state_dict(), orig_layers[p].state_dict()
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)
    # everything outside the layer list is unchanged
    prefix = lname + "."
    orig = {k: v for k, v in lm.model.state_dict().items() if not k.startswith(prefix)}
    new = {k: v for k, v in sh.model.state_dict().items() if not k.startswith(prefix)}
    assert orig.keys() == new.keys()
    assert all(torch.equal(orig[k], new[k]) for k in orig)
    # a deep copy: no shared storage with the original
    orig_ptrs = {p.data_ptr() for p in lm.model.parameters()}
    assert not any(p.data_ptr() in orig_ptrs for p in sh.model.parameters())


@pytest.mark.real_model
@pytest.mark.parametrize("name", REAL)
def test_original_untouched_and_outputs_differ(shuffled, name):
    lm, before, sh = shuffled(name)
    n = lm.num_layers
    _, layers = find_layer_list(lm.model, n)
    for i, layer in enumerate(layers):
        for m in layer.modules():
            if isinstance(getattr(m, "layer_idx", None), int):
                assert m.layer_idx == i
    assert not hasattr(lm.model, "olas_layer_permutation")
    assert lm.name == name
    assert torch.equal(_output(lm), before)
    after = _output(sh)
    assert after.shape == before.shape
    assert (after - before).abs().max() > 1e-2


@pytest.mark.real_model
@pytest.mark.parametrize("name", REAL)
def test_shuffle_is_deterministic_and_invertible(shuffled, name):
    lm, before, sh = shuffled(name)
    again = shuffled_layers_copy(lm, seed=0)
    assert again.model.olas_layer_permutation == sh.model.olas_layer_permutation
    assert torch.equal(_output(again), _output(sh))
    del again
    other = layer_permutation(lm.num_layers, 1)
    assert other != sh.model.olas_layer_permutation
    # undoing the permutation gives back the original model exactly
    back = permute_layers(sh, _inverse(sh.model.olas_layer_permutation))
    assert back.model.olas_layer_permutation == tuple(range(lm.num_layers))
    assert torch.equal(_output(back), before)


@pytest.mark.real_model
@pytest.mark.parametrize("name", REAL)
def test_ola_extraction_runs_on_shuffled_copy(shuffled, name):
    lm, _, sh = shuffled(name)
    res = extract_ola(
        sh.model, sh.tokenizer, WORDS, orders=(1, 2), rollout=False, layers=(0,), progress=False, model_name=sh.name
    )
    ref = extract_ola(
        lm.model, lm.tokenizer, WORDS, orders=(1, 2), rollout=False, layers=(0,), progress=False, model_name=lm.name
    )
    for key in ("ola:1", "ola:2", "layer:0"):
        a, b = res[key][0], ref[key][0]
        assert a.shape == b.shape
        assert torch.isfinite(a).all()
        assert torch.allclose(a.sum(-1), torch.ones(a.shape[0]), atol=1e-4)  # rows stay stochastic
        assert (a - b).abs().max() > 1e-3
    # the copy's first layer reads the embeddings: its attention is not the original layer perm[0]'s
    p0 = sh.model.olas_layer_permutation[0]
    orig_p0 = extract_ola(lm.model, lm.tokenizer, WORDS, orders=(1,), rollout=False, layers=(p0,), progress=False)[
        f"layer:{p0}"
    ][0]
    assert (res["layer:0"][0] - orig_p0).abs().max() > 1e-3


@pytest.mark.real_model
def test_shuffled_decoder_kv_cache_consistent(shuffled):
    lm, _, sh = shuffled("smollm2-135m")
    _, layers = find_layer_list(sh.model, sh.num_layers)
    assert [l.self_attn.layer_idx for l in layers] == list(range(sh.num_layers))
    x = lm.tokenizer(" ".join(WORDS[0]), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        full = sh.model(input_ids=x, use_cache=False).logits[0, -1]
    step = _incremental_last_logits(sh.model, x)
    assert torch.allclose(full, step, atol=1e-3, rtol=1e-4)


# --------------------------------------------------------------------------------------
# per-layer attention types (tiny random Gemma 3)
# --------------------------------------------------------------------------------------


def _tiny_gemma3() -> LoadedModel:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=64,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(cfg).eval()
    return LoadedModel(model=model, tokenizer=None, name="tiny-gemma3", source="", is_causal=True, num_layers=4)


def test_layer_types_move_with_layers():
    lm = _tiny_gemma3()
    x = torch.randint(0, 64, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = lm.model(input_ids=x, use_cache=False).logits
    perm = (2, 0, 3, 1)
    pm = permute_layers(lm, perm)
    assert pm.name == "tiny-gemma3+permuted(2,0,3,1)"
    orig_types = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
    assert lm.model.config.layer_types == orig_types  # original untouched
    assert pm.model.config.layer_types == [orig_types[p] for p in perm]
    _, layers = find_layer_list(pm.model, 4)
    for i, layer in enumerate(layers):
        assert layer.layer_idx == i and layer.self_attn.layer_idx == i
        assert layer.self_attn.is_sliding == (pm.model.config.layer_types[i] == "sliding_attention")
        assert layer.self_attn.config is pm.model.config
    with torch.no_grad():
        full = pm.model(input_ids=x, use_cache=False).logits
    assert torch.allclose(full[0, -1], _incremental_last_logits(pm.model, x), atol=1e-5)
    back = permute_layers(pm, _inverse(perm))
    with torch.no_grad():
        assert torch.equal(back.model(input_ids=x, use_cache=False).logits, before)
    with pytest.raises(ValueError, match="permutation"):
        permute_layers(lm, (0, 1, 1, 2))


# --------------------------------------------------------------------------------------
# random-weights copies
# --------------------------------------------------------------------------------------


@pytest.mark.real_model
def test_random_weights_copy(zoo_model):
    lm = zoo_model("minilm-l6")
    before = _output(lm)
    r0 = random_weights_copy(lm, seed=0)
    assert r0.name == "minilm-l6+random(seed=0)"
    assert r0.weights_sha256 == f"{lm.weights_sha256}+random(seed=0)" and r0.num_layers == lm.num_layers
    again = random_weights_copy(lm, seed=0)
    r1 = random_weights_copy(lm, seed=1)
    sd0, sda, sd1 = r0.model.state_dict(), again.model.state_dict(), r1.model.state_dict()
    assert all(torch.equal(sd0[k], sda[k]) for k in sd0)
    assert any(not torch.equal(sd0[k], sd1[k]) for k in sd0 if sd0[k].is_floating_point())
    orig = lm.model.state_dict()
    name = next(k for k in orig if k.endswith("query.weight"))
    assert not torch.equal(orig[name], sd0[name])
    assert torch.equal(_output(lm), before)
    res = extract_ola(r0.model, r0.tokenizer, WORDS, orders=(1,), rollout=False, layers=(), progress=False)
    assert torch.isfinite(res["ola:1"][0]).all()


# --------------------------------------------------------------------------------------
# half-random copies
# --------------------------------------------------------------------------------------


def test_half_random_layers_are_half_seeded_and_sorted():
    from olas_utils.zoo.controls import half_random_layers

    for n in (1, 2, 3, 6, 30):
        got = half_random_layers(n, seed=0)
        assert len(got) == max(1, n // 2) and len(set(got)) == len(got) and list(got) == sorted(got)
        assert all(0 <= i < n for i in got) and got == half_random_layers(n, seed=0)
    assert {half_random_layers(30, seed=s) for s in range(4)} != {half_random_layers(30, seed=0)}
    with pytest.raises(ValueError, match="num_layers"):
        half_random_layers(0)


@pytest.mark.real_model
@pytest.mark.parametrize("name", REAL)
def test_half_random_copy_is_random_where_chosen_and_trained_elsewhere(zoo_model, name):
    """Every parameter of a chosen layer equals the random copy's at that position, every other parameter
    (other layers, embeddings, final norm) the trained model's; the original is untouched."""
    from olas_utils.vocabulary import Control
    from olas_utils.zoo.controls import half_random_copy, half_random_layers, make_control

    lm = zoo_model(name)
    before = _output(lm)
    half = make_control(lm, Control.HALF_RANDOM, seed=0)
    rnd = random_weights_copy(lm, seed=0)
    chosen = half_random_layers(lm.num_layers, 0)
    assert half.name == f"{name}+half-random(seed=0)" and half.model.olas_reinitialised_layers == chosen
    assert half.weights_sha256 == f"{lm.weights_sha256}+half-random(seed=0)"
    prefix = LAYER_LIST[name] + "."
    orig, sd_half, sd_rnd = lm.model.state_dict(), half.model.state_dict(), rnd.model.state_dict()
    assert set(sd_half) == set(orig)
    n_random = 0
    for k, v in sd_half.items():
        layer = int(k[len(prefix) :].split(".")[0]) if k.startswith(prefix) else None
        if layer in chosen:
            assert torch.equal(v, sd_rnd[k]), k
            n_random += v.is_floating_point() and not torch.equal(v, orig[k])
        else:
            assert torch.equal(v, orig[k]), k
    assert n_random > 0
    assert torch.equal(_output(lm), before)
    out = _output(half)
    assert torch.isfinite(out).all() and not torch.allclose(out, before)
    again = half_random_copy(lm, seed=0).model.state_dict()
    assert all(torch.equal(again[k], sd_half[k]) for k in sd_half)
