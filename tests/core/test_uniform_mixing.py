"""The tokenizer-only control of the context-mixing keys (``olas_utils.extract.uniform_mixing``):
each key's map is its uniform counterpart, checked against matrices built here by hand with
numpy (every visible token contributes alike in every layer), for an encoder and a causal model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from olas_utils.extract import extract_ola, uniform_mixing

SENTS = [["a", "b", "c"], ["The", "cat", "sat", "down", "."]]
KEYS = ("alti", "alti:1", "alti:2", "valuenorm", "valuenorm:3", "globenc")


def hand_uniform(key: str, t: int, *, causal: bool, n: int) -> np.ndarray:
    """The uniform counterpart of ``key`` for T tokens and N layers, from its definition:
    U = 1/T everywhere (encoder) or 1/(i+1) on and below the diagonal (causal), the same in
    every layer; order k of N identical layers is U^k (each of the C(N, k) ordered products of k
    distinct layers is U^k, and the sum is divided by C(N, k)); ``"alti"`` / ``"globenc"`` are
    the product U^N; ``"valuenorm"`` is the rollout (U + I)^N."""
    i = np.arange(t)
    u = np.tril(np.ones((t, t))) / (i[:, None] + 1.0) if causal else np.full((t, t), 1.0 / t)
    method, _, order = key.partition(":")
    if order:
        return np.linalg.matrix_power(u, int(order))
    if method == "valuenorm":
        return np.linalg.matrix_power(u + np.eye(t), n)
    return np.linalg.matrix_power(u, n)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_uniform_mixing_equals_the_hand_computation(tiny_lm, kind):
    lm = tiny_lm(kind)
    res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), attention="uniform", progress=False)
    out = uniform_mixing(res, KEYS)
    assert out.keys() == res.keys() + list(KEYS) and out.attention == "uniform"
    assert out.maps["ola:1"] is res.maps["ola:1"]  # the control's own maps untouched
    for key in KEYS:
        for s in range(len(SENTS)):
            t = len(res.word_ids[s])
            want = torch.from_numpy(hand_uniform(key, t, causal=kind == "llama", n=3)).float()
            got = out[key][s]
            assert got.dtype == torch.float32 and got.shape == (t, t)
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    if kind == "bert":  # closed forms: U^k = U, (U + I)^3 = I + 7U
        t = len(res.word_ids[1])
        torch.testing.assert_close(out["alti:2"][1], torch.full((t, t), 1 / t), rtol=1e-6, atol=0)
        torch.testing.assert_close(out["valuenorm"][1], torch.eye(t) + 7 / t, rtol=1e-6, atol=0)
    # neutral pooling divides each key by this very map: exactly 1 on every visible word pair
    words = out.to_words()
    for key in KEYS:
        for s, ws in enumerate(SENTS):
            ones = torch.ones(len(ws), len(ws))
            assert torch.equal(words[key][s], ones.tril() if kind == "llama" else ones), key


def test_uniform_mixing_refuses_what_it_does_not_define(tiny_lm):
    lm = tiny_lm("bert")
    real = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), progress=False)
    with pytest.raises(ValueError, match="attention='model'.*extract_ola\\(\\.\\.\\., mixing="):
        uniform_mixing(real, ["alti"])
    uni = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), attention="uniform", progress=False)
    with pytest.raises(ValueError, match="subword-level"):
        uniform_mixing(uni.to_words(), ["alti"])
    with pytest.raises(ValueError, match="not a context-mixing key"):
        uniform_mixing(uni, ["rollout"])
    with pytest.raises(ValueError, match="outside"):
        uniform_mixing(uni, ["alti:4"])  # 3 layers
    with pytest.raises(TypeError, match="collection"):
        uniform_mixing(uni, "alti")
    with pytest.raises(ValueError, match="uniform_mixing"):  # the refusal of extract_ola points here
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("alti",), attention="uniform", progress=False)


def test_neutral_pooling_of_a_product_of_many_causal_layers_is_named_meaningless():
    from olas_utils.maps import OLAMaps
    from olas_utils.maths.uniform import MAX_NEUTRAL_PRODUCT, neutral_problem, uniform_reference

    deep = MAX_NEUTRAL_PRODUCT + 1
    assert "product of all 4 causal layers" in neutral_problem("alti", causal=True, num_layers=deep)
    assert "'globenc:1' .. 'globenc:3'" in neutral_problem("globenc", causal=True, num_layers=30)
    for key, causal, n in [
        ("alti", False, 30),  # an encoder's U·U = U
        ("alti", True, MAX_NEUTRAL_PRODUCT),
        ("alti:3", True, 30),  # divided by U^3, like ola:3
        ("valuenorm", True, 30),  # Π (U + I) keeps the identity
        ("ola:30", True, 30),
        ("rollout", True, 30),
        ("flow", True, 30),  # flows of at most 1 through (U + I) / 2: no product of many layers
    ]:
        assert neutral_problem(key, causal=causal, num_layers=n) is None, key
    # why: the reference's smallest visible entry against float32 at 70 tokens (a 50-word chunk)
    t = 70
    small = lambda key, n: float(uniform_reference(key, t, causal=True, num_layers=n).diagonal().min())  # noqa: E731
    assert small("ola:3", 3) > 1e-6 and small("alti", 4) < 1e-7 and small("alti", 30) == 0.0
    # OLAMaps.to_words says so (and still pools)
    m = torch.softmax(torch.randn(4, 4), -1).tril()
    res = OLAMaps(
        maps={"alti": [m], "alti:1": [m]},
        tokens=[["<s>", "a", "b", "c"]],
        words=[["a", "b", "c"]],
        word_ids=[torch.tensor([-1, 0, 1, 2])],
        model_name="deep",
        num_layers=30,
        is_causal=True,
        level="subword",
        capture_path="test",
        dtype="float32",
    )
    with pytest.warns(UserWarning, match="deep: 'alti' is the product of all 30 causal layers") as seen:
        words = res.to_words()
    assert len(seen) == 1 and words["alti"][0].shape == (3, 3)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res.to_words("clark")
