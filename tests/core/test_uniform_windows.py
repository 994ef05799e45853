"""Uniform attention (tokenizer-only control, neutral-pooling reference) on sliding-window layers.

References are independent of :mod:`olas_utils.maths.uniform`: masks built by hand from the rule
``i - w < j <= i`` (the one in transformers' ``sliding_window_overlay`` and
``causal_mask_function``), brute-force enumeration of layer products, and the real
gemma3-270m's own attention (``output_attentions=True``, eager) on a 600-token EWT text.
"""

from __future__ import annotations

import itertools
from math import comb

import pytest
import torch

from olas_utils.align import pool_to_words, tokenize_words
from olas_utils.extract import extract_ola
from olas_utils.maths.uniform import uniform_attention, uniform_reference


def _hand_uniform(t: int, causal: bool, window: int | None) -> torch.Tensor:
    """Rows 1/count over {j : j <= i (causal), i - w < j (causal window) / |i - j| < w (bidirectional)}."""
    out = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        seen = [
            j
            for j in range(t)
            if (not causal or j <= i) and (window is None or (i - j < window if causal else abs(i - j) < window))
        ]
        for j in seen:
            out[i, j] = 1.0 / len(seen)
    return out


def test_hand_built_causal_window_with_padding():
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    u = uniform_attention(mask, causal=True, window=2)
    want0 = torch.tensor(
        [[1, 0, 0, 0, 0], [0.5, 0.5, 0, 0, 0], [0, 0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5, 0], [0, 0, 0, 0.5, 0.5]]
    )
    torch.testing.assert_close(u[0], want0, rtol=0, atol=0)
    torch.testing.assert_close(
        u[1],
        torch.tensor([[1, 0, 0, 0, 0], [0.5, 0.5, 0, 0, 0], [0, 0.5, 0.5, 0, 0], [0.0] * 5, [0.0] * 5]),
        rtol=0,
        atol=0,
    )
    for causal, w in ((True, 3), (False, 2), (False, 3)):
        torch.testing.assert_close(
            uniform_attention(torch.ones(1, 6), causal=causal, window=w)[0].double(),
            _hand_uniform(6, causal, w),
            rtol=0,
            atol=1e-7,
        )


@pytest.mark.parametrize("causal", [True, False])
def test_short_inputs_are_byte_identical(causal):
    # a window as long as the input or longer changes nothing, bit for bit
    for t in (1, 4, 9):
        plain = uniform_attention(torch.ones(2, t), causal=causal)
        for w in (t, t + 1, 512):
            assert torch.equal(uniform_attention(torch.ones(2, t), causal=causal, window=w), plain)
        for key in ("ola:1", "ola:2", "rollout", "layer:-1"):
            ref = uniform_reference(key, t, causal=causal, num_layers=3)
            win = uniform_reference(key, t, causal=causal, num_layers=3, windows=(512, None, t))
            assert torch.equal(ref, win)
    # and the hand formula: 1/(i+1) (causal), 1/T (encoder)
    t = 7
    hand = (
        torch.tensor([[1.0 / (i + 1) if j <= i else 0.0 for j in range(t)] for i in range(t)])
        if causal
        else torch.full((t, t), 1.0 / t)
    )
    assert torch.equal(uniform_attention(torch.ones(1, t), causal=causal)[0], hand)


@pytest.mark.parametrize("causal", [True, False])
def test_reference_with_windows_against_brute_force(causal):
    t, windows = 6, (2, None, 3, None)
    n = len(windows)
    us = [_hand_uniform(t, causal, w) for w in windows]
    for k in (1, 2, 3):
        brute = torch.zeros(t, t, dtype=torch.float64)
        for combo in itertools.combinations(range(n), k):
            prod = torch.eye(t, dtype=torch.float64)
            for i in combo:  # later layers multiply on the left
                prod = us[i] @ prod
            brute += prod
        got = uniform_reference(f"ola:{k}", t, causal=causal, num_layers=n, windows=windows)
        torch.testing.assert_close(got.double(), brute / comb(n, k), rtol=0, atol=1e-6)
    roll = torch.eye(t, dtype=torch.float64)
    for u in us:
        roll = (u + torch.eye(t, dtype=torch.float64)) @ roll
    torch.testing.assert_close(
        uniform_reference("rollout", t, causal=causal, num_layers=n, windows=windows).double(),
        roll,
        rtol=1e-6,
        atol=1e-6,
    )
    for i in (0, 1, 2, -1, -4):
        torch.testing.assert_close(
            uniform_reference(f"layer:{i}", t, causal=causal, num_layers=n, windows=windows).double(),
            us[i],
            rtol=0,
            atol=1e-7,
        )
    with pytest.raises(ValueError, match="windows"):
        uniform_reference("ola:1", t, causal=causal, num_layers=n, windows=(2, None))


@pytest.mark.parametrize("causal", [True, False])
def test_product_keys_with_windows_against_brute_force(causal):
    """``alti`` and ``globenc`` (bare: Π U_i, later layers on the left) and ``valuenorm`` (Π(U_i + I))
    on layers of different windows, where the order of the product matters."""
    t, windows = 6, (2, None, 3, None)
    us = [_hand_uniform(t, causal, w) for w in windows]
    eye = torch.eye(t, dtype=torch.float64)
    prod, roll = eye.clone(), eye.clone()
    for u in us:  # layer 1 first: each later layer multiplies on the left
        prod, roll = u @ prod, (u + eye) @ roll
    assert not torch.allclose(prod, us[0] @ us[1] @ us[2] @ us[3])  # the order matters here
    for key in ("alti", "globenc"):
        got = uniform_reference(key, t, causal=causal, num_layers=len(windows), windows=windows)
        torch.testing.assert_close(got.double(), prod, rtol=0, atol=1e-6)
    got = uniform_reference("valuenorm", t, causal=causal, num_layers=len(windows), windows=windows)
    torch.testing.assert_close(got.double(), roll, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def long_words():
    from olas_utils.data import load_ud_ewt

    words: list[str] = []
    for sent in load_ud_ewt("dev")["words"]:
        words.extend(sent)
        if len(words) >= 540:
            return words
    raise AssertionError("EWT dev too short")


@pytest.mark.real_model
def test_gemma3_long_input_support_equals_real_attention(zoo_model, long_words):
    lm = zoo_model("gemma3-270m")
    cfg = lm.model.config
    n = cfg.num_hidden_layers
    assert cfg.sliding_window == 512 and sum(x == "sliding_attention" for x in cfg.layer_types) == 15
    batch = tokenize_words(lm.tokenizer, [long_words])
    t = int(batch.lengths[0])
    assert 560 <= t <= 800, t  # longer than the 512-token window
    inputs = batch.model_inputs()
    with torch.no_grad():
        out = lm.model(**inputs, output_attentions=True)
    assert lm.model.config._attn_implementation == "eager" and len(out.attentions) == n
    res = extract_ola(
        lm.model, lm.tokenizer, [long_words], orders=(1,), layers=range(n), attention="uniform", progress=False
    )
    assert res["layer:0"][0].shape == (t, t)
    n_sliding_differs = 0
    for i in range(n):
        real = out.attentions[i][0].double().mean(0)  # (T, T), heads averaged
        uni = res[f"layer:{i}"][0]
        assert torch.equal(real > 0, uni > 0), f"layer {i} ({cfg.layer_types[i]})"
        count = (uni > 0).sum(-1, keepdim=True)
        exact = torch.where(uni > 0, (1.0 / count.double()).float().expand_as(uni), torch.zeros_like(uni))
        assert torch.equal(uni, exact), f"layer {i}: rows are not exactly 1/count"
        full = torch.ones(t, t).tril().bool()
        n_sliding_differs += int(not torch.equal(uni > 0, full))
        if cfg.layer_types[i] == "sliding_attention":  # the hand rule: i - 512 < j <= i
            band = torch.tensor([[0 <= a - b < 512 for b in range(t)] for a in range(t)])
            assert torch.equal(uni > 0, band)
    assert n_sliding_differs == 15


@pytest.mark.real_model
def test_gemma3_long_input_neutral_reference_is_windowed(zoo_model, long_words):
    lm = zoo_model("gemma3-270m")
    n = lm.model.config.num_hidden_layers
    sub = extract_ola(lm.model, lm.tokenizer, [long_words], orders=(1,), layers=(0, 5), progress=False)
    t = sub["layer:0"][0].shape[-1]
    assert t > 512
    word = sub.to_words("neutral")
    wid, w = sub.word_ids[0], len(sub.words[0])
    for key, window in (("layer:0", 512), ("layer:5", None)):  # layer 0 sliding, layer 5 full
        ref = _hand_uniform(t, True, window).float()
        want, _ = pool_to_words(sub[key][0], wid, w, reference=ref)
        torch.testing.assert_close(word[key][0], want, rtol=1e-5, atol=1e-6)
    # the tokenizer-only control, pooled neutrally, is exactly 1 on every pair the layer sees
    uni = extract_ola(
        lm.model,
        lm.tokenizer,
        [long_words],
        orders=(1, 2),
        layers=range(n),
        attention="uniform",
        level="word",
        progress=False,
    )
    for key in ("layer:0", "layer:5", "ola:1", "ola:2"):
        m = uni[key][0]
        assert set(m.unique().tolist()) <= {0.0, 1.0}, key
    sub_u = extract_ola(
        lm.model, lm.tokenizer, [long_words], orders=(1,), layers=(0,), attention="uniform", progress=False
    )
    clark, _ = pool_to_words(sub_u["layer:0"][0], wid, w, pooling="clark")
    assert torch.equal(uni["layer:0"][0] > 0, clark > 0)
    assert not torch.equal(uni["layer:0"][0] > 0, torch.ones(w, w).tril().bool())  # the window shows


@pytest.mark.parametrize("bidirectional", [False, True])
def test_tiny_gemma3_support_equals_its_attention(bidirectional):
    # a random 4-layer Gemma 3 with mixed layers and sliding_window=4 (bidirectional: its config
    # halves it to 3, then |i - j| < 3), on 12 tokens, far past the window
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from olas_utils.capture.architecture import attention_windows, is_causal_model

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=64,
        sliding_window=4,
        use_bidirectional_attention=bidirectional,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        architectures=["Gemma3ForCausalLM"],
    )
    cfg._attn_implementation = "eager"
    model = Gemma3ForCausalLM(cfg).eval()
    causal = is_causal_model(model)
    assert causal is not bidirectional
    windows = attention_windows(model.config, causal=causal)
    assert windows == ((4, None, 4, None) if causal else (3, None, 3, None))
    ids = torch.randint(4, 64, (1, 12))
    with torch.no_grad():
        att = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    for i, w in enumerate(windows):
        uni = uniform_attention(torch.ones(1, 12), causal=causal, window=w)[0]
        assert torch.equal(att[i][0].mean(0) > 0, uni > 0), i
        torch.testing.assert_close(uni.double(), _hand_uniform(12, causal, w), rtol=0, atol=1e-7)


def test_attention_windows_of_other_configs():
    from transformers import BertConfig, LlamaConfig, MistralConfig, Qwen2Config

    from olas_utils.capture.architecture import attention_windows

    assert attention_windows(BertConfig(num_hidden_layers=3), causal=False) == (None,) * 3
    assert attention_windows(LlamaConfig(num_hidden_layers=2), causal=True) == (None, None)
    assert attention_windows(MistralConfig(num_hidden_layers=2, sliding_window=7), causal=True) == (7, 7)
    assert attention_windows(MistralConfig(num_hidden_layers=2, sliding_window=None), causal=True) == (None, None)
    assert attention_windows(Qwen2Config(num_hidden_layers=2, sliding_window=7), causal=True) == (None, None)
    q = Qwen2Config(num_hidden_layers=3, sliding_window=7, use_sliding_window=True, max_window_layers=1)
    assert attention_windows(q, causal=True) == (None, 7, 7)
    odd = LlamaConfig(num_hidden_layers=2)
    odd.layer_types = ["full_attention", "linear_attention"]
    with pytest.raises(ValueError, match="linear_attention"):
        attention_windows(odd, causal=True)


def test_maps_keep_their_windows_through_save_and_load(tmp_path):
    from olas_utils.maps import OLAMaps

    eye = torch.eye(3)
    m = OLAMaps(
        maps={"layer:0": [eye]},
        tokens=[["a", "b", "c"]],
        words=[["a", "b", "c"]],
        word_ids=[torch.tensor([0, 1, 2])],
        model_name="x",
        num_layers=2,
        is_causal=True,
        level="subword",
        capture_path="p",
        dtype="float32",
        windows=(2, None),
    )
    back = OLAMaps.load(m.save(tmp_path / "m.pt"))
    assert back.windows == (2, None)
    # layer 0 has a window of 2: query 2 sees tokens 1, 2 (1/2 each), so the identity lifts to 2 there
    torch.testing.assert_close(back.to_words()["layer:0"][0], torch.diag(torch.tensor([1.0, 2.0, 2.0])))
    data = torch.load(tmp_path / "m.pt", weights_only=True)
    del data["windows"], data["content_sha256"]  # a file written before windows (and content hashes) were recorded
    torch.save(data, tmp_path / "old.pt")
    with pytest.warns(UserWarning, match="no content hash"):  # read only on request since content hashes
        assert OLAMaps.load(tmp_path / "old.pt", verify=False).windows is None
