"""The fused ALTI kernel (olas_utils.maths.alti_kernel) against the blocked torch loop it replaces
and against the definition (contribution_vectors + alti_from_vectors): on random layers with every
norm arrangement (float64, to rounding), and on the real per-layer contributions of every default
zoo model (float32: the tolerance is stated below), batched (right-padded) and each sentence alone."""

import functools

import pytest
import torch
from conftest import zoo_models_to_test

from olas_utils.align import tokenize_words
from olas_utils.capture import mixing_hooks
from olas_utils.capture.attention import AttentionCapture
from olas_utils.maths.alti_kernel import alti_contributions
from olas_utils.maths.mixing import (
    LinearisedNorm,
    alti_from_vectors,
    contribution_vectors,
    layer_mixing,
)

SENTS = [
    ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
    ["It", "rained", "."],
    ["Where", "did", "you", "park", "the", "car", "yesterday", "?"],
]

#: float32 tolerance of a fused raw contribution against the blocked one, relative to the row's
#: ‖y_i‖₁ (both are ‖y_i‖₁ − κ_i·(an L1 distance of d terms), summed in different orders).
RAW_RTOL = 2e-5  # measured on the default zoo: <= 1.3e-6 fused vs blocked, <= 3.6e-6 batched vs alone


def random_layer(b=2, h=3, t=7, d=5, causal=False, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(b, h, t, t, generator=g, dtype=dtype) ** 3
    if causal:
        w = w * torch.tril(torch.ones(t, t, dtype=dtype))
    w[:, 1, 2, 0] = 0  # a key one head ignores
    w = w / w.sum(-1, keepdim=True)
    f = torch.randn(b, t, h, d, generator=g, dtype=dtype)
    x = torch.randn(b, t, d, generator=g, dtype=dtype)
    y = x + torch.einsum("bhij,bjhd->bid", w, f) + 0.3 * torch.randn(b, t, d, generator=g, dtype=dtype)
    return w, f, x, y


def norms(kind, b, t, d, dtype=torch.float64):
    g = torch.Generator().manual_seed(1)
    scale = torch.rand(b, t, generator=g, dtype=dtype) + 0.5
    gain = torch.rand(d, generator=g, dtype=dtype) + 0.5
    return {
        "none": (None, None),
        "post": (None, LinearisedNorm(gain, scale, centered=True)),
        "attn": (LinearisedNorm(gain, scale, centered=False), None),
        "both": (LinearisedNorm(gain, scale, centered=False), LinearisedNorm(gain.flip(0), scale.flip(1), True)),
    }[kind]


@pytest.mark.parametrize("kind", ["none", "post", "attn", "both"])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_and_blocked_equal_the_definition(kind, causal):
    w, f, x, y = random_layer(causal=causal)
    attn, post = norms(kind, *x.shape)
    vec = contribution_vectors(w, f, x, slice(None), attn_norm=attn, post_norm=post)
    reach = (w > 0).any(1) | torch.eye(w.shape[-1], dtype=torch.bool)
    ref = alti_from_vectors(vec, y) * reach  # the definition, keys no head reaches set to 0
    fused = layer_mixing(w, f, x, y, attn_norm=attn, post_norm=post, fused=True).alti
    torch.testing.assert_close(fused, ref, rtol=0, atol=1e-12)
    for block in (1, 40, 10**6):  # one row, a few rows, every row per block
        blocked = layer_mixing(w, f, x, y, attn_norm=attn, post_norm=post, fused=False, block_elements=block).alti
        torch.testing.assert_close(blocked, ref, rtol=0, atol=1e-12)
    if causal:
        assert torch.triu(fused, 1).abs().max().item() == 0.0


def test_fused_reconstruction_and_globenc_equal_the_blocked_path():
    w, f, x, y = random_layer(d=6)
    attn, post = norms("post", *x.shape)
    kw = dict(post_norm=post, out_bias=torch.randn(6, dtype=torch.float64), shift=torch.randn(6, dtype=torch.float64))
    kw.update(reconstruct=True, ffn_gain=torch.rand(6, dtype=torch.float64) + 0.5)
    a, b = layer_mixing(w, f, x, y, fused=True, **kw), layer_mixing(w, f, x, y, fused=False, **kw)
    for name in ("alti", "globenc", "reconstruction", "pre_norm_sum"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=1e-10)


def test_kernel_refuses_mixed_dtypes():
    w, f, x, y = random_layer()
    with pytest.raises(ValueError, match="one dtype"):
        alti_contributions(w.float(), f, x, y, y.abs().sum(-1), torch.ones(2, 7, dtype=torch.float64))


def raw_alti(lm, sentences, fused, monkeypatch):
    """Every layer's raw ALTI contributions (B, T, T) of one captured pass, fused or blocked."""
    with monkeypatch.context() as m:
        m.setattr(mixing_hooks, "layer_mixing", functools.partial(layer_mixing, fused=fused))
        inputs = tokenize_words(lm.tokenizer, sentences).model_inputs()
        with AttentionCapture(lm.model, max_order=1, mixing=("alti",), keep_mixing_layers=True) as cap:
            _, mix = cap.forward_with_mixing(**inputs)
    return mix.accumulators["alti"].raw_layers, inputs["attention_mask"].sum(-1).tolist()


@pytest.mark.real_model
@pytest.mark.parametrize("name", zoo_models_to_test())
def test_fused_alti_equals_blocked_on_real_models_batched_and_alone(zoo_model, name, monkeypatch):
    lm = zoo_model(name)
    fused, lengths = raw_alti(lm, SENTS, True, monkeypatch)
    blocked, _ = raw_alti(lm, SENTS, False, monkeypatch)
    assert len(fused) == len(blocked) == lm.num_layers
    for layer, (a, b) in enumerate(zip(fused, blocked)):
        # relative to each row's largest contribution (at most ‖y_i‖₁: the stricter scale)
        err = ((a - b).abs() / b.amax(-1, keepdim=True).clamp_min(1e-30)).max().item()
        assert err <= RAW_RTOL, (name, layer, err)
    for s, sentence in enumerate(SENTS):  # batch = alone: the padded rows and columns change nothing
        alone, _ = raw_alti(lm, [sentence], True, monkeypatch)
        n = lengths[s]
        for layer, (a, b) in enumerate(zip(fused, alone)):
            assert a[s, n:].abs().sum().item() == a[s, :, n:].abs().sum().item() == 0.0
            a, b = a[s, :n, :n], b[0, :n, :n]
            err = ((a - b).abs() / b.amax(-1, keepdim=True).clamp_min(1e-30)).max().item()
            assert err <= RAW_RTOL, (name, s, layer, err)
