"""Context-mixing baselines (olas_utils.maths.mixing): the tensor math against hand-worked and
independent references, order-k decompositions against enumeration, and the errors. Real-model
checks (decomposition identity on every zoo model, batch invariance) are in
test_mixing_real.py."""

from itertools import combinations
from math import comb

import numpy as np
import pytest
import torch

from olas_utils.capture.attention import AttentionCapture
from olas_utils.extract import extract_ola, mixing_layers, parse_key
from olas_utils.maths.mixing import (
    LinearisedNorm,
    MixingAccumulator,
    alti_from_vectors,
    contribution_vectors,
    globenc_from_vectors,
    head_outputs,
    inverse_scale,
    layer_mixing,
    mixing_plan,
    row_normalise,
    value_norms,
)
from olas_utils.maths.uniform import uniform_reference

SENTS = [["The", "cat", "sat", "on", "the", "mat", "."], ["Dogs", "bark", "."]]


# -- a 3-token case worked by hand ---------------------------------------------------------


def hand_case():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)[None]  # (1, 3, 2)
    f = torch.tensor([[2.0, 0.0], [0.0, 2.0], [-1.0, 1.0]], dtype=torch.float64)[None, :, None]  # (1, 3, 1, 2)
    a = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.25, 0.25, 0.5]], dtype=torch.float64)[None, None]
    return x, f, a


def test_alti_three_tokens_by_hand():
    # one head, pre-norm block y_i = x_i + Σ_j α_ij f(x_j):
    # row 0: T00 = (3,0) = y0                          → c = (3, 0, 0)          → (1, 0, 0)
    # row 1: T10 = (1,0), T11 = (0,2), y1 = (1,2)      → c = (3-2, 3-1, 0)      → (1/3, 2/3, 0)
    # row 2: T20 = (.5,0), T21 = (0,.5), T22 = (.5,1.5), y2 = (1,2)
    #        → c = (3-2.5, 3-2.5, 3-1) = (.5, .5, 2)                            → (1/6, 1/6, 2/3)
    x, f, a = hand_case()
    vec = contribution_vectors(a, f, x, slice(0, 3))
    y = vec.sum(2)
    torch.testing.assert_close(y[0], torch.tensor([[3.0, 0], [1, 2], [1, 2]], dtype=torch.float64))
    raw = alti_from_vectors(vec, y)[0]
    torch.testing.assert_close(raw, torch.tensor([[3.0, 0, 0], [1, 2, 0], [0.5, 0.5, 2]], dtype=torch.float64))
    c = row_normalise(raw[None], torch.ones(1, 3, dtype=torch.bool))[0]
    want = torch.tensor([[1.0, 0, 0], [1 / 3, 2 / 3, 0], [1 / 6, 1 / 6, 2 / 3]], dtype=torch.float64)
    torch.testing.assert_close(c, want, rtol=0, atol=1e-12)
    # the streaming path (blocks of one row) gives the same, and rebuilds y exactly
    lm = layer_mixing(a, f, x, y, reconstruct=True, block_elements=1)
    torch.testing.assert_close(lm.alti[0], raw, rtol=0, atol=1e-12)
    torch.testing.assert_close(lm.reconstruction, y, rtol=0, atol=1e-12)
    # value norms: row 2 is (‖.25 f0‖, ‖.25 f1‖, ‖.5 f2‖) = (.5, .5, √2/2)
    n = value_norms(a, f)[0]
    torch.testing.assert_close(n[2], torch.tensor([0.5, 0.5, 2**0.5 / 2], dtype=torch.float64))
    assert n[0, 1] == 0 and n[1, 2] == 0


def test_post_ln_alti_against_numpy():
    # an independent NumPy implementation of Ferrando et al.'s post-LN decomposition
    rng = np.random.default_rng(0)
    b, h, t, d = 1, 2, 4, 6
    a = rng.random((b, h, t, t))
    a /= a.sum(-1, keepdims=True)
    f = rng.normal(size=(b, t, h, d))
    x = rng.normal(size=(b, t, d))
    bo, gamma, beta, eps = rng.normal(size=d), rng.random(d) + 0.5, rng.normal(size=d), 1e-5
    s = x + np.einsum("bhij,bjhd->bid", a, f) + bo  # the real pre-LN sum
    mu, sd = s.mean(-1, keepdims=True), np.sqrt(s.var(-1, keepdims=True) + eps)
    y = gamma * (s - mu) / sd + beta
    gamma2 = rng.random(d) + 0.5  # GlobEnc: the norm after the feed-forward block (its 1/σ2_i comes later)
    ref, ref_g = np.zeros((t, t)), np.zeros((t, t))
    for i in range(t):
        for j in range(t):
            tij = sum(a[0, hh, i, j] * f[0, j, hh] for hh in range(h)) + (x[0, j] if i == j else 0)
            lij = gamma * (tij - tij.mean()) / sd[0, i, 0]
            ref[i, j] = max(0.0, np.abs(y[0, i]).sum() - np.abs(y[0, i] - lij).sum())
            ref_g[i, j] = np.linalg.norm(gamma2 * (lij - lij.mean()))
    tt = [torch.tensor(v) for v in (a, f, x, y, s)]
    post = LinearisedNorm(torch.tensor(gamma), inverse_scale(tt[4], eps, centered=True), True)
    for block in (1, 10**6):  # one row per block, or all rows at once
        lm = layer_mixing(
            tt[0],
            tt[1],
            tt[2],
            tt[3],
            post_norm=post,
            out_bias=torch.tensor(bo),
            shift=torch.tensor(beta),
            ffn_gain=torch.tensor(gamma2),
            reconstruct=True,
            block_elements=block,
        )
        torch.testing.assert_close(lm.alti[0], torch.tensor(ref), rtol=0, atol=1e-10)
        torch.testing.assert_close(lm.globenc[0], torch.tensor(ref_g), rtol=0, atol=1e-10)
    # the definitions (contribution_vectors, then alti_from_vectors / globenc_from_vectors) agree
    vec = contribution_vectors(tt[0], tt[1], tt[2], slice(0, t), post_norm=post)
    torch.testing.assert_close(alti_from_vectors(vec, tt[3])[0], torch.tensor(ref), rtol=0, atol=1e-10)
    torch.testing.assert_close(
        globenc_from_vectors(vec, torch.tensor(gamma2))[0], torch.tensor(ref_g), rtol=0, atol=1e-10
    )
    torch.testing.assert_close(lm.reconstruction, tt[3], rtol=0, atol=1e-10)  # Σ_j T_i(x_j) + b_i = y_i
    torch.testing.assert_close(lm.pre_norm_sum, tt[4], rtol=0, atol=1e-10)


@pytest.mark.parametrize("norms", ["none", "attn", "post", "both"])
def test_streamed_alti_equals_its_definition(norms):
    # causal weights with padding, blocks of one and two rows: the folded, column-trimmed path
    # against contribution_vectors + alti_from_vectors (the definition), in float64
    g = torch.Generator().manual_seed(2)
    b, h, t, d = 2, 3, 5, 4
    w = torch.rand(b, h, t, t, generator=g, dtype=torch.float64).tril()
    w[1, :, 3:] = 0
    w[1, :, :, 3:] = 0
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    f, x = (
        torch.randn(b, t, h, d, generator=g, dtype=torch.float64),
        torch.randn(b, t, d, generator=g, dtype=torch.float64),
    )
    f[1, 3:], x[1, 3:] = 0, 0

    def norm(centered):
        return LinearisedNorm(
            torch.rand(d, generator=g, dtype=torch.float64) + 0.5,
            torch.rand(b, t, generator=g, dtype=torch.float64) + 0.5,
            centered,
        )

    attn = norm(False) if norms in ("attn", "both") else None
    post = norm(True) if norms in ("post", "both") else None
    vec = contribution_vectors(w, f, x, slice(0, t), attn_norm=attn, post_norm=post)
    y = vec.sum(2) + torch.randn(b, t, d, generator=g, dtype=torch.float64) * 0.1  # plus some bias
    ref = alti_from_vectors(vec, y)
    for block in (b * t * d, 2 * b * t * d, 10**6):
        got = layer_mixing(w, f, x, y, attn_norm=attn, post_norm=post, block_elements=block).alti
        reach = (w > 0).any(1) | torch.eye(t, dtype=torch.bool)
        torch.testing.assert_close(got, ref * reach, rtol=0, atol=1e-12)
        assert torch.triu(got[0], 1).abs().max() == 0


# -- value norms against explicit per-head (T, T, d) tensors -------------------------------


def explicit_value_norms(model, input_ids, attention_mask):
    """Per layer ``‖Σ_h α^h_ij f^h(x_j)‖`` with the (T, T, d) tensor of every head built
    explicitly, in float64, from output_attentions and the value / output projections run
    on the attention module's own input (hooked)."""
    attn_mods = [m for m in model.modules() if type(m).__name__ in ("BertSelfAttention", "LlamaAttention")]
    seen = []
    hs = [
        m.register_forward_pre_hook(lambda mod, a, k: seen.append(a[0] if a else k["hidden_states"]), with_kwargs=True)
        for m in attn_mods
    ]
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    for hk in hs:
        hk.remove()
    norms = []
    for mod, xin, w in zip(attn_mods, seen, out.attentions):
        if hasattr(mod, "v_proj"):
            v, wo, n_h = mod.v_proj(xin), mod.o_proj.weight, mod.config.num_attention_heads
        else:
            parent = next(p for p in model.modules() if getattr(p, "self", None) is mod)
            v, wo, n_h = mod.value(xin), parent.output.dense.weight, mod.num_attention_heads
        v, wo, w = v.double(), wo.double(), w.double()
        bsz, t, _ = v.shape
        dh = wo.shape[1] // n_h
        n_kv = v.shape[-1] // dh
        v = v.reshape(bsz, t, n_kv, dh)
        total = 0
        for h in range(n_h):
            fh = v[:, :, h // (n_h // n_kv)] @ wo[:, h * dh : (h + 1) * dh].T  # (B, T, d)
            total = total + w[:, h, :, :, None] * fh[:, None, :, :]  # (B, T, T, d)
        keep = attention_mask.bool()
        norms.append(total.norm(dim=-1) * (keep[:, :, None] & keep[:, None, :]))
    return norms


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_value_norms_against_explicit_tensors_tiny(tiny_lm, kind):
    lm = tiny_lm(kind)  # llama: 2 query heads over 1 value head (grouped-query attention)
    check_value_norms(lm, n_layers=3)


@pytest.mark.real_model
def test_value_norms_against_explicit_tensors_real(zoo_model):
    lm = zoo_model("smollm2-135m")  # 9 query heads over 3 value heads
    check_value_norms(lm, n_layers=lm.num_layers)


def check_value_norms(lm, n_layers):
    from olas_utils.align import tokenize_words

    batch = tokenize_words(lm.tokenizer, SENTS)
    ref = explicit_value_norms(lm.model, batch.input_ids, batch.attention_mask)
    got = mixing_layers(lm.model, lm.tokenizer, SENTS, methods=("valuenorm",))["valuenorm"]
    for i, n in enumerate(batch.lengths):
        for layer in range(n_layers):
            r = ref[layer][i, :n, :n]
            # fp32 Gram-matrix path vs float64 explicit tensors: within 1e-5 of the row's largest norm
            err = ((got[i][layer].double() - r).abs().amax(-1) / r.amax(-1)).max().item()
            assert err <= 1e-5, (layer, i, err)


# -- order-k decompositions against enumeration ---------------------------------------------


@pytest.mark.real_model
def test_order_k_of_mixing_matrices_equals_enumeration(zoo_model):
    lm = zoo_model("paraphrase-minilm-l3")  # a real 3-layer encoder
    keys = [f"{m}:{k}" for m in ("valuenorm", "alti", "globenc") for k in (0, 1, 2, 3)] + [
        "valuenorm",
        "alti",
        "globenc",
    ]
    res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), mixing=keys, progress=False)
    per_layer = mixing_layers(lm.model, lm.tokenizer, SENTS, methods=("valuenorm", "alti", "globenc"), normalised=True)
    n = 3
    for m in ("valuenorm", "alti", "globenc"):
        for i in range(len(SENTS)):
            mats = per_layer[m][i].double()  # (N, T, T), rows sum to 1
            t = mats.shape[-1]
            torch.testing.assert_close(mats.sum(-1), torch.ones(n, t, dtype=torch.float64), rtol=0, atol=1e-5)
            torch.testing.assert_close(res[f"{m}:1"][i].double(), mats.mean(0), rtol=0, atol=1e-6)
            for k in (0, 1, 2, 3):
                brute = torch.zeros(t, t, dtype=torch.float64)
                for subset in combinations(range(n), k):
                    prod = torch.eye(t, dtype=torch.float64)
                    for layer in subset:  # later layers multiply on the left
                        prod = mats[layer] @ prod
                    brute += prod
                torch.testing.assert_close(res[f"{m}:{k}"][i].double(), brute / comb(n, k), rtol=0, atol=1e-6)
            eye = torch.eye(t, dtype=torch.float64)
            agg = eye.clone()
            for layer in range(n):
                agg = (mats[layer] + (eye if m == "valuenorm" else 0)) @ agg
            torch.testing.assert_close(res[m][i].double(), agg, rtol=0, atol=1e-5)
    # ALTI's aggregate is the product of all layers, i.e. its top order
    for i in range(len(SENTS)):
        torch.testing.assert_close(res["alti"][i], res["alti:3"][i], rtol=0, atol=1e-6)


def test_accumulator_streams_like_a_stack():
    g = torch.Generator().manual_seed(0)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    raw = [torch.rand(2, 5, 5, generator=g, dtype=torch.float64) for _ in range(4)]
    acc = MixingAccumulator("alti", max_order=2, bare=True, num_layers=4, keep_layers=True, dtype=torch.float64)
    for r in raw:
        acc.add_layer(r, valid)
    mats = [row_normalise(r, valid) for r in raw]
    torch.testing.assert_close(acc.order(1), sum(mats) / 4)
    torch.testing.assert_close(acc.aggregate(), mats[3] @ mats[2] @ mats[1] @ mats[0])
    assert acc.aggregate()[1, 3:].abs().sum() == 0 and acc.aggregate()[1, :, 3:].abs().sum() == 0  # padding
    assert len(acc.raw_layers) == 4 and acc.raw_layers[0][1, 4].abs().sum() == 0
    with pytest.raises(ValueError, match="not accumulated"):
        MixingAccumulator("valuenorm", num_layers=1).aggregate()


def test_head_outputs_follow_grouped_query_order():
    g = torch.Generator().manual_seed(1)
    v = torch.rand(1, 2, 3, 4, generator=g)  # 2 value heads, dh 4
    wo = torch.rand(5, 6 * 4, generator=g)  # 6 query heads: heads 0-2 read value head 0
    f = head_outputs(v, wo)
    for h in range(6):
        torch.testing.assert_close(f[0, :, h], v[0, h // 3] @ wo[:, h * 4 : (h + 1) * 4].T)
    with pytest.raises(ValueError, match="multiple"):
        head_outputs(torch.rand(1, 4, 3, 4), wo)


# -- keys, pooling and errors ----------------------------------------------------------------


def test_keys_parse_and_plan():
    assert parse_key("alti", 6) == ("alti", None) and parse_key("valuenorm:2", 6) == ("valuenorm", 2)
    with pytest.raises(ValueError, match="outside"):
        parse_key("alti:7", 6)
    assert mixing_plan(["alti:2", "alti", "valuenorm:1"], 6) == {"alti": (2, True), "valuenorm": (1, False)}
    with pytest.raises(ValueError, match="not a context-mixing key"):
        mixing_plan(["ola:1"], 6)
    with pytest.raises(TypeError):
        mixing_plan("alti", 6)


def test_uniform_references_of_mixing_keys():
    for causal in (False, True):
        kw = dict(causal=causal, num_layers=4)
        for k in (0, 1, 2, 4):
            assert torch.equal(uniform_reference(f"alti:{k}", 6, **kw), uniform_reference(f"ola:{k}", 6, **kw))
        assert torch.equal(uniform_reference("valuenorm", 6, **kw), uniform_reference("rollout", 6, **kw))
        torch.testing.assert_close(uniform_reference("alti", 6, **kw), uniform_reference("ola:4", 6, **kw))
        torch.testing.assert_close(uniform_reference("globenc", 6, **kw), uniform_reference("ola:4", 6, **kw))


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_word_pooling_of_mixing_keys(tiny_lm, kind):
    lm = tiny_lm(kind)
    keys = ["valuenorm", "alti", "alti:2"] + (["globenc:1"] if kind == "bert" else [])
    res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), mixing=keys, progress=False)
    assert set(keys) <= set(res.keys())
    for pooling in ("neutral", "clark"):
        words = res.to_words(pooling)
        for key in keys:
            for i, s in enumerate(SENTS):
                assert words[key][i].shape == (len(s), len(s)) and torch.isfinite(words[key][i]).all()
    # Clark pooling keeps row mass: word rows plus special columns sum to 1 for row-stochastic keys
    clark = res.to_words("clark")
    for i, s in enumerate(SENTS):
        m, sp = clark["alti:2"][i], clark.special["alti:2"][i]
        torch.testing.assert_close(m.sum(-1) + sp.sum(-1), torch.ones(len(s)), rtol=0, atol=1e-5)


def test_mixing_errors(tiny_lm, monkeypatch):
    lm = tiny_lm("llama")
    with pytest.raises(ValueError, match="attention='uniform' runs no forward pass"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("alti",), attention="uniform", progress=False)
    with pytest.raises(ValueError, match="not a context-mixing key"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("rollout",), progress=False)
    with pytest.raises(TypeError, match="collection"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing="alti", progress=False)
    with pytest.raises(ValueError, match="globenc.*post-LN.*LlamaAttention"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("globenc",), progress=False)
    with pytest.raises(ValueError, match="exceeds|outside"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("alti:4",), progress=False)

    from olas_utils.capture import mixing_specs

    # an architecture without a spec: mixing refused, naming what is missing; OLA keys still work
    monkeypatch.delitem(mixing_specs.MIXING_SPECS, "LlamaAttention")
    with pytest.raises(ValueError, match="no self-attention module listed in .*MIXING_SPECS.*LlamaAttention"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("alti",), progress=False)
    assert "ola:2" in extract_ola(lm.model, lm.tokenizer, SENTS, orders=(2,), progress=False).keys()
    # a spec whose path is not in the model
    bad = mixing_specs.MixingSpec(layer_up=1, out_proj="self_attn.nope", residual="input_layernorm", block_output="x")
    monkeypatch.setitem(mixing_specs.MIXING_SPECS, "LlamaAttention", bad)
    with pytest.raises(ValueError, match="out_proj at 'self_attn.nope'"):
        AttentionCapture(lm.model, max_order=1, mixing=("alti",))


def test_output_attentions_path_refuses_mixing():
    from transformers import BioGptConfig, BioGptForCausalLM

    torch.manual_seed(0)
    cfg = BioGptConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=100)
    cfg._attn_implementation = "eager"
    model = BioGptForCausalLM(cfg).eval()
    with pytest.raises(ValueError, match="MIXING_SPECS.*BioGptAttention"):
        AttentionCapture(model, max_order=1, mixing=("valuenorm",))


def test_low_precision_model_mixes_in_fp32(tiny_lm):
    lm = tiny_lm("llama")
    keys = ["valuenorm", "alti", "alti:2"]
    ref = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), mixing=keys, progress=False)
    lm.model.to(torch.bfloat16)
    try:
        res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), mixing=keys, progress=False)
    finally:
        lm.model.to(torch.float32)
    for key in keys:
        for a, b in zip(ref[key], res[key]):
            assert a.dtype == b.dtype == torch.float32 and torch.isfinite(b).all()
            scale = 2.0**3 if key == "valuenorm" else 1.0  # rollout of 3 layers
            assert ((a - b).abs().max() / scale).item() < 0.05, key  # bf16 rounding of the weights only
