"""Interop with the real packages: OLAS maps rendered by bertviz's head_view / model_view (the
values read back out of the HTML they write), and OLA from attention patterns recorded by another
tool through the same recurrence (olas_utils.interop)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from olas_utils.extract import OLAMaps, extract_ola
from olas_utils.interop import bertviz_attention, ola_from_patterns, transformer_lens_patterns


def _toy() -> OLAMaps:
    return OLAMaps(
        maps={
            "ola:1": [torch.tensor([[0.25, 0.75], [0.5, 0.5]])],
            "rollout": [torch.tensor([[1.0, 3.0], [2.0, 2.0]])],
            "zeros": [torch.zeros(2, 2)],
        },
        tokens=[["Ġcat", "▁sat"]],
        words=[["cat", "sat"]],
        word_ids=[torch.tensor([0, 1])],
        model_name="toy",
        num_layers=2,
        is_causal=False,
        level="subword",
        capture_path="interface",
        dtype="float32",
    )


def _params_in(html: str) -> dict:
    """The parameters bertviz wrote into its page (``const params = {...};``)."""
    start = html.index("const params = ") + len("const params = ")
    return json.JSONDecoder().raw_decode(html[start:])[0]


def test_bertviz_attention_shapes_and_rows():
    att, labels = bertviz_attention(_toy(), 0, ["ola:1", "rollout", "zeros"])
    assert labels == ["Ġcat", "▁sat"]
    assert [tuple(a.shape) for a in att] == [(1, 1, 2, 2)] * 3
    assert att[0][0, 0].tolist() == [[0.25, 0.75], [0.5, 0.5]]
    assert att[1][0, 0].tolist() == [[0.25, 0.75], [0.5, 0.5]]  # rollout's rows scaled to sum 1
    assert att[2][0, 0].tolist() == [[0.0, 0.0], [0.0, 0.0]]  # an all-zero row stays zero
    raw, _ = bertviz_attention(_toy(), keys=["rollout"], normalize=False)
    assert raw[0][0, 0].tolist() == [[1.0, 3.0], [2.0, 2.0]]
    with pytest.raises(IndexError, match="1 sentences"):
        bertviz_attention(_toy(), 3)


@pytest.mark.real_model
@pytest.mark.parametrize("view", ["head_view", "model_view"])
def test_bertviz_renders_real_maps_to_html(zoo_model, view):
    import bertviz

    lm = zoo_model("minilm-l6")
    res = extract_ola(lm, ["The cat sat on the mat."], orders=(1, 2, 3), progress=False)
    assert res.words == [["The", "cat", "sat", "on", "the", "mat."]]
    keys = ["ola:1", "ola:2", "ola:3"]
    html = getattr(bertviz, view)(*bertviz_attention(res, 0, keys), html_action="return").data
    assert "<script" in html
    params = _params_in(html)
    (data,) = params["attention"]
    assert data["left_text"] == data["right_text"] == res.tokens[0]  # WordPiece tokens need no prettifying
    got = np.array(data["attn"])  # (layers = keys, heads = 1, T, T)
    assert got.shape == (3, 1, len(res.tokens[0]), len(res.tokens[0]))
    for i, key in enumerate(keys):
        np.testing.assert_allclose(got[i, 0], res[key][0].numpy(), rtol=1e-6, atol=1e-7)


def test_ola_from_patterns_averages_heads_first():
    # two layers, two heads, hand-made row-stochastic patterns: OLA order 2 of two layers is the
    # single product A2 A1 (layers in forward order), with A_l the mean over layer l's heads
    h = torch.tensor(
        [
            [[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]],
            [[[0.2, 0.8], [1.0, 0.0]], [[0.6, 0.4], [0.0, 1.0]]],
        ],
        dtype=torch.float64,
    )  # (layer, head, q, k)
    a1, a2 = h[0].mean(0), h[1].mean(0)
    got = ola_from_patterns([h[0][None], h[1][None]], orders=(1, 2), rollout=True)
    torch.testing.assert_close(got["ola:1"][0].double(), (a1 + a2) / 2)
    torch.testing.assert_close(got["ola:2"][0].double(), a2 @ a1, rtol=1e-6, atol=1e-7)
    eye = torch.eye(2, dtype=torch.float64)
    torch.testing.assert_close(got["rollout"][0].double(), (a2 + eye) @ (a1 + eye))
    with pytest.raises(ValueError, match="one shape"):
        ola_from_patterns([h[0][None], h[1]])


def test_transformer_lens_patterns_reads_every_layer_in_order():
    cache = {f"blocks.{l}.attn.hook_pattern": torch.full((1, 2, 3, 3), float(l)) for l in range(3)}
    cache["blocks.0.hook_resid_pre"] = torch.zeros(1)
    got = transformer_lens_patterns(cache)
    assert [float(p[0, 0, 0, 0]) for p in got] == [0.0, 1.0, 2.0]
    with pytest.raises(KeyError, match="blocks.3.attn.hook_pattern"):
        transformer_lens_patterns(cache, n_layers=4)
    with pytest.raises(KeyError, match="no 'blocks.0"):
        transformer_lens_patterns({})


@pytest.mark.real_model
def test_ola_from_hugging_face_attentions_equals_extract_ola(zoo_model):
    """The patterns path is the extraction's maths: Hugging Face's own output_attentions of one
    sentence through ola_from_patterns equal extract_ola's streaming capture."""
    lm = zoo_model("minilm-l6")
    res = extract_ola(lm, ["The cat sat on the mat."], orders=(1, 2, 3), progress=False)
    enc = lm.tokenizer("The cat sat on the mat.", return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**enc, output_attentions=True)
    got = ola_from_patterns(out.attentions, orders=(1, 2, 3), rollout=True)
    for key in ("ola:1", "ola:2", "ola:3", "rollout"):
        torch.testing.assert_close(got[key][0], res[key][0], rtol=1e-4, atol=1e-6)


TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def smollm_reference(zoo_model):
    """extract_ola's maps of TEXT on smollm2-135m (the session's shared copy, never wrapped)."""
    lm = zoo_model("smollm2-135m")
    return lm, extract_ola(lm, [TEXT], orders=(1, 2, 3), progress=False)


def _fresh(name: str):
    """A copy of its own: TransformerLens and nnsight wrap the model they are given."""
    from olas_utils.zoo import load_model

    return load_model(name, device="cpu")


def _check(got: dict, res: OLAMaps) -> None:
    for key in ("ola:1", "ola:2", "ola:3"):
        torch.testing.assert_close(got[key][0], res[key][0], rtol=1e-4, atol=1e-6)
    if "rollout" in got:  # unnormalised Π(A + I): values up to 2^N, compared relative to their size
        torch.testing.assert_close(got["rollout"][0], res["rollout"][0], rtol=1e-4, atol=0)


@pytest.mark.real_model
def test_ola_from_a_transformer_lens_cache_equals_extract_ola(smollm_reference):
    """TransformerLens's TransformerBridge over the local zoo folder (offline: the Hugging Face
    model and tokenizer are handed to it), run_with_cache, hook_pattern of every layer."""
    import logging

    level = logging.getLogger("transformers").level
    try:  # importing TransformerLens sets transformers' logger to ERROR for the whole process
        from transformer_lens.model_bridge import TransformerBridge
    finally:
        logging.getLogger("transformers").setLevel(level)

    lm, res = smollm_reference
    own = _fresh("smollm2-135m")
    bridge = TransformerBridge.boot_transformers(own.source, hf_model=own.model, tokenizer=own.tokenizer, device="cpu")
    ids = own.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    assert own.tokenizer.convert_ids_to_tokens(ids[0]) == res.tokens[0]
    _, cache = bridge.run_with_cache(ids)
    patterns = transformer_lens_patterns(cache)
    assert len(patterns) == lm.num_layers == 30
    _check(ola_from_patterns(patterns, orders=(1, 2, 3), rollout=True), res)


@pytest.mark.real_model
def test_ola_from_nnsight_saved_attention_equals_extract_ola(smollm_reference):
    """nnsight's trace of the model, each layer's attention weights (the eager attention's second
    output) saved."""
    from nnsight import NNsight

    _, res = smollm_reference
    own = _fresh("smollm2-135m")
    enc = own.tokenizer(TEXT, return_tensors="pt")
    model = NNsight(own.model)
    saved = []
    with model.trace(enc["input_ids"], attention_mask=enc["attention_mask"]):
        for layer in model.model.layers:
            saved.append(layer.self_attn.output[1].save())
    _check(ola_from_patterns(saved, orders=(1, 2, 3), rollout=True), res)
