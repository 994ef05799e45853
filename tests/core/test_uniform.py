"""Uniform attention (the tokenizer-only control) and neutral word pooling, against
hand-computed cases and brute force."""

from math import comb

import pytest
import torch

from olas_utils.align import pool_to_words
from olas_utils.extract import extract_ola
from olas_utils.maths.uniform import uniform_attention, uniform_reference

WORDS = [["Unbelievably", "tokenized", "words", "arrive", "."], ["A", "cat", "sat"]]


def test_uniform_attention_hand_built_with_padding():
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    enc = uniform_attention(mask, causal=False)
    torch.testing.assert_close(enc[0], torch.full((3, 3), 1 / 3))
    torch.testing.assert_close(enc[1], torch.tensor([[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 0]]))
    dec = uniform_attention(mask, causal=True)
    torch.testing.assert_close(dec[0], torch.tensor([[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]]))
    torch.testing.assert_close(dec[1], torch.tensor([[1, 0, 0], [0.5, 0.5, 0], [0, 0, 0]]))


@pytest.mark.parametrize("causal", [False, True])
def test_uniform_reference_against_brute_force(causal):
    t, n = 5, 4
    u = uniform_attention(torch.ones(1, t), causal=causal)[0].double()
    # order-k OLA = mean over the C(N, k) ordered layer products, all equal to U^k
    for k in (1, 2, 3):
        brute = sum(torch.linalg.matrix_power(u, k) for _ in range(comb(n, k))) / comb(n, k)
        torch.testing.assert_close(uniform_reference(f"ola:{k}", t, causal=causal, num_layers=n).double(), brute)
    rollout = torch.linalg.matrix_power(u + torch.eye(t, dtype=torch.float64), n)
    torch.testing.assert_close(
        uniform_reference("rollout", t, causal=causal, num_layers=n).double(), rollout, rtol=1e-6, atol=1e-6
    )
    torch.testing.assert_close(uniform_reference("layer:-1", t, causal=causal, num_layers=n).double(), u)
    with pytest.raises(ValueError, match="no uniform reference"):
        uniform_reference("nosuch", t, causal=causal, num_layers=n)


def test_neutral_pooling_hand_computed_encoder():
    # tokens: [CLS] w0a w0b w1 [SEP]; uniform attention 1/5; Clark-pooled reference:
    # word 0 receives 2/5 (two columns), word 1 1/5, each special token 1/5.
    word_ids = torch.tensor([-1, 0, 0, 1, -1])
    m = torch.arange(25, dtype=torch.float64).reshape(5, 5)
    ref = torch.full((5, 5), 0.2, dtype=torch.float64)
    clark, sp_clark = pool_to_words(m, word_ids, 2, pooling="clark")
    neutral, sp = pool_to_words(m, word_ids, 2, reference=ref)
    torch.testing.assert_close(neutral, clark / torch.tensor([[0.4, 0.2], [0.4, 0.2]], dtype=torch.float64))
    torch.testing.assert_close(sp, sp_clark / 0.2)
    with pytest.raises(ValueError, match="reference"):
        pool_to_words(m, word_ids, 2)
    with pytest.raises(ValueError, match="pooling must be"):
        pool_to_words(m, word_ids, 2, pooling="sum")


def test_neutral_pooling_hand_computed_causal():
    # tokens w0a w0b w1 w2 (no special tokens), causal uniform attention:
    # rows [1,0,0,0], [.5,.5,0,0], [1/3,1/3,1/3,0], [1/4]*4. Clark pooling by hand:
    word_ids = torch.tensor([0, 0, 1, 2])
    ref = uniform_reference("layer:0", 4, causal=True, num_layers=2)
    clark_ref, _ = pool_to_words(ref, word_ids, 3, pooling="clark")
    torch.testing.assert_close(clark_ref, torch.tensor([[1.0, 0, 0], [2 / 3, 1 / 3, 0], [0.5, 0.25, 0.25]]))
    # uniform attention itself pools to exactly 1 on the visible words, 0 on the future
    neutral, _ = pool_to_words(ref, word_ids, 3, reference=ref)
    assert torch.equal(neutral, torch.tensor([[1.0, 0, 0], [1, 1, 0], [1, 1, 1]]))


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m"])
def test_uniform_control_runs_no_forward_and_is_neutral(zoo_model, name, monkeypatch):
    lm = zoo_model(name)

    def boom(*a, **k):
        raise AssertionError("the uniform control ran the model")

    monkeypatch.setattr(lm.model, "forward", boom)
    sub = extract_ola(lm.model, lm.tokenizer, WORDS, orders=(1, 2, 3), attention="uniform", progress=False)
    assert sub.attention == "uniform"
    for i, toks in enumerate(sub.tokens):
        u = uniform_attention(torch.ones(1, len(toks)), causal=lm.is_causal)[0]
        torch.testing.assert_close(sub["ola:1"][i], u)
        torch.testing.assert_close(sub["layer:-1"][i], u)
    words = sub.to_words()
    clark = sub.to_words("clark")
    for key in words.keys():
        for i, w in enumerate(words.words):
            n = len(w)
            visible = torch.ones(n, n).tril() if lm.is_causal else torch.ones(n, n)
            # exactly 1 where a word may look, whatever the segmentation
            assert torch.equal(words[key][i], visible), (key, i)
    # the Clark rule is not neutral: the multi-subword first word gets more column mass
    first = clark["ola:1"][0][-1]
    assert first[0] > 1.5 * first[3]


@pytest.mark.real_model
def test_word_level_extraction_defaults_to_neutral_pooling(zoo_model):
    lm = zoo_model("minilm-l6")
    sub = extract_ola(lm.model, lm.tokenizer, WORDS, orders=(1, 2), progress=False)
    word = extract_ola(lm.model, lm.tokenizer, WORDS, orders=(1, 2), level="word", progress=False)
    assert word.pooling == "neutral" and sub.pooling is None
    for key in ("ola:1", "ola:2", "rollout"):
        for i, m in enumerate(sub[key]):
            ref = uniform_reference(key, m.shape[-1], causal=False, num_layers=lm.num_layers)
            wm, _ = pool_to_words(m, sub.word_ids[i], len(sub.words[i]), reference=ref)
            torch.testing.assert_close(word[key][i], wm)
    clark = extract_ola(lm.model, lm.tokenizer, WORDS, orders=(1,), level="word", pooling="clark", progress=False)
    assert clark.pooling == "clark"
    torch.testing.assert_close(
        clark["ola:1"][1], pool_to_words(sub["ola:1"][1], sub.word_ids[1], 3, pooling="clark")[0]
    )
