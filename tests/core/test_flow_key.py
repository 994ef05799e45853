"""The ``"flow"`` map key: attention flow extracted through ``extract_ola(..., mixing=("flow",))``,
checked against ``olas_utils.maths.flow.attention_flow`` run on the same model's per-layer attention
extracted one sentence at a time (that function is checked against networkx in test_flow.py),
against hand-computed flows of uniform attention, and through the plumbing that hands it to the
notebooks (map caches, skips, refusals)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from olas_utils.extract import extract_ola, mixing_layers, uniform_mixing
from olas_utils.maths.flow import attention_flow
from olas_utils.maths.uniform import uniform_reference
from olas_utils.vocabulary import MapKey

SENTS = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Dogs", "bark", "."],
    ["A", "much", "longer", "sentence", ",", "with", "several", "unusual", "words", "in", "it", "."],
]


def per_layer_flow(lm, sentence) -> torch.Tensor:
    """The reference: every layer's head-averaged attention of one sentence alone (no padding),
    then attention_flow on the stack."""
    from olas_utils.capture.architecture import num_attention_layers

    n = num_attention_layers(lm.model)
    alone = extract_ola(lm.model, lm.tokenizer, [sentence], orders=(1,), layers=range(n), progress=False)
    return attention_flow(torch.stack([alone[f"layer:{i}"][0] for i in range(n)]))


@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m"])
def test_flow_key_equals_attention_flow_of_the_layers_batched_and_padded(zoo_model, name):
    """batch_size=2 pads the short sentences; the flow of each equals the flow of its layers alone
    within float32 rounding of the attention (capacities are rounded to 2⁻³⁰). Other keys are
    bit-identical with and without flow. A causal model's flow is 0 above the diagonal."""
    lm = zoo_model(name)
    res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1, 2), mixing=("flow",), batch_size=2, progress=False)
    plain = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1, 2), batch_size=2, progress=False)
    assert res.keys() == plain.keys() + ["flow"]
    for key in plain.keys():
        for a, b in zip(res[key], plain[key]):
            assert torch.equal(a, b), key
    for s, sentence in enumerate(SENTS):
        f = res["flow"][s]
        assert f.dtype == torch.float32 and f.shape == res["ola:1"][s].shape
        torch.testing.assert_close(f, per_layer_flow(lm, sentence), rtol=0, atol=1e-5)
        assert float(f.min()) >= 0 and float(f.max()) <= 1 + 1e-6
        if res.is_causal:
            assert torch.equal(f.triu(1), torch.zeros_like(f))
    # at word level, neutral pooling divides by the flow of uniform attention (below)
    words = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), mixing=("flow",), level="word", progress=False)
    assert [tuple(m.shape) for m in words["flow"]] == [(len(s), len(s)) for s in SENTS]


def test_uniform_flow_equals_the_hand_computation():
    """Uniform attention over T tokens in every layer: the residual graph's capacities are
    (U + I) / 2. One layer: the flow is that matrix. Two encoder layers of two tokens: each pair's
    flow is Σ_k min(Â[i, k], Â[k, j]) (disjoint two-edge paths): 1 on the diagonal, 1/2 off it."""
    for t, causal in [(3, False), (4, True)]:
        i = np.arange(t)
        u = np.tril(np.ones((t, t))) / (i[:, None] + 1.0) if causal else np.full((t, t), 1.0 / t)
        np.testing.assert_allclose(
            uniform_reference("flow", t, causal=causal, num_layers=1).numpy(), (u + np.eye(t)) / 2, atol=1e-7
        )
    two = uniform_reference("flow", 2, causal=False, num_layers=2).numpy()
    np.testing.assert_allclose(two, [[1.0, 0.5], [0.5, 1.0]], atol=2e-9 * 8)
    # causal, two layers, two tokens: token 0 sees only itself (capacity 1 on its self-edges); token 1
    # sends 3/4 to itself and 1/4 to token 0 in each layer: flow(1 → 0) = min(1/4, 1) + min(3/4, 1/4) = 1/2,
    # flow(1 → 1) = min(3/4, 3/4) (token 0 has no edge back to token 1) = 3/4
    two = uniform_reference("flow", 2, causal=True, num_layers=2).numpy()
    np.testing.assert_allclose(two, [[1.0, 0.0], [0.5, 0.75]], atol=2e-9 * 8)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_the_tokenizer_only_control_has_the_flow_of_uniform_attention(tiny_lm, kind):
    lm = tiny_lm(kind)
    uni = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), layers=range(3), attention="uniform", progress=False)
    out = uniform_mixing(uni, ["flow"])
    for s in range(len(SENTS)):
        stack = torch.stack([uni[f"layer:{i}"][s] for i in range(3)])
        torch.testing.assert_close(out["flow"][s], attention_flow(stack), rtol=0, atol=1e-6)
    words = out.to_words()  # neutral pooling divides by this very map: 1 on every visible word pair
    for s, ws in enumerate(SENTS):
        ones = torch.ones(len(ws), len(ws))
        torch.testing.assert_close(words["flow"][s], ones.tril() if kind == "llama" else ones)


def test_flow_is_requested_like_a_mixing_key_but_is_no_context_mixing(tiny_lm):
    from olas_utils.studies.depth import drop_skipped, mixing_keys, mixing_skips

    key = MapKey.parse("flow")
    assert key.on_request and not key.mixing and key.index is None
    assert mixing_keys(["ola:1", "flow", "alti:1", "rollout"]) == ["flow", "alti:1"]
    lm = tiny_lm("llama")
    assert mixing_skips(lm.model, ["flow"], level="word") == {}
    assert drop_skipped("m", ["ola:1", "flow"], {}) == ["ola:1", "flow"]
    with pytest.raises(ValueError, match="no per-layer matrices of its own"):
        mixing_layers(lm.model, lm.tokenizer, SENTS, methods=("flow",))
    with pytest.raises(ValueError, match="uniform_mixing"):
        extract_ola(lm.model, lm.tokenizer, SENTS, mixing=("flow",), attention="uniform", progress=False)
    long = [["word"] * 130]
    with pytest.raises(ValueError, match="more than 128 tokens"):
        extract_ola(lm.model, lm.tokenizer, long, mixing=("flow",), progress=False)
    with pytest.raises(ValueError, match="'flow' takes no index"):
        MapKey.parse("flow:1")


def test_the_flow_profile_of_notebook_03_is_quick_with_flow_beside_ola_and_rollout():
    import dataclasses

    from olas_utils.studies import syntax
    from olas_utils.ui.reproduce import NOTEBOOKS_OF

    f, q = syntax.PROFILES["flow"], syntax.PROFILES["quick"]
    assert f.keys == ("ola:1", "rollout", "flow") and dataclasses.replace(f, keys=q.keys) == q
    assert NOTEBOOKS_OF["flow"] == ("02", "03")
