"""Capture paths on tiny randomly initialised models (shapes, paths, dtypes, edge cases).
Real-model correctness lives in test_extract_real.py."""

import pytest
import torch
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM, MPNetConfig, MPNetModel

from olas_utils.capture import AttentionCapture, capture_path, head_average, is_causal_model
from olas_utils.ola import ola_from_layers


def tiny(kind, dtype=torch.float32):
    torch.manual_seed(0)
    common = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64, vocab_size=100)
    if kind == "bert":
        m = BertModel(BertConfig(**common, max_position_embeddings=64))
    elif kind == "mpnet":
        m = MPNetModel(MPNetConfig(**common, max_position_embeddings=66))
    else:
        m = LlamaForCausalLM(LlamaConfig(**common, num_key_value_heads=2, max_position_embeddings=64))
    m.config._attn_implementation = "eager"
    return m.eval().to(dtype)


def inputs(b=3, t=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def reference(model, x):
    with torch.no_grad():
        out = model(**x, output_attentions=True)
    valid = x["attention_mask"].bool()
    return [head_average(w, valid) for w in out.attentions]


@pytest.mark.parametrize("kind,path", [("bert", "interface"), ("llama", "interface"), ("mpnet", "hook")])
def test_paths_match_output_attentions(kind, path):
    model, x = tiny(kind), inputs()
    assert capture_path(model) == path
    ref = ola_from_layers(reference(model, x), [1, 2, 3, 4])
    with AttentionCapture(model, max_order=4) as cap:
        acc = cap.forward(**x)
    for k in (1, 2, 3, 4):
        torch.testing.assert_close(acc.ola(k), ref[k], rtol=0, atol=1e-6)
    assert is_causal_model(model) == (kind == "llama")


def test_forced_fallback_path_warns_and_matches():
    model, x = tiny("bert"), inputs()
    ref = ola_from_layers(reference(model, x), [2])
    with pytest.warns(UserWarning, match="output_attentions=True"):
        with AttentionCapture(model, max_order=2, path="output_attentions") as cap:
            acc = cap.forward(**x)
    torch.testing.assert_close(acc.ola(2), ref[2], rtol=0, atol=1e-6)


def test_no_weights_escape_the_forward_pass():
    model, x = tiny("llama"), inputs()
    with AttentionCapture(model, max_order=2) as cap:
        assert model.config._attn_implementation == "olas_capture"
        acc = cap.forward(**x)
    assert model.config._attn_implementation == "eager"
    assert acc.n_added == 4 and set(acc.layers) == set()


def test_mpnet_hooks_return_no_weights_to_the_model():
    model, x = tiny("mpnet"), inputs()
    seen = []
    h = model.encoder.layer[0].attention.register_forward_hook(lambda m, a, o: seen.append(len(o)))
    with AttentionCapture(model, max_order=1) as cap:
        cap.forward(**x)
    h.remove()
    assert seen == [1]  # the attention block passed on no probabilities
    assert not model.encoder.layer[0].attention.attn._forward_hooks  # hooks removed on exit


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_models_accumulate_in_fp32(dtype):
    ref_model, x = tiny("llama"), inputs()
    with AttentionCapture(ref_model, max_order=3) as cap:
        ref = cap.forward(**x)
    model = tiny("llama", dtype)
    with AttentionCapture(model, max_order=3) as cap:
        acc = cap.forward(**x)
    assert acc.ola(3).dtype == torch.float32
    # rows still sum to 1 to fp32 precision (weights never rounded to bf16/fp16)
    valid = x["attention_mask"].bool()
    sums = acc.ola(3).sum(-1)[valid]
    torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-5)
    # and the maps are close to the fp32 model's (weights differ only by rounding)
    assert (acc.ola(3) - ref.ola(3)).abs().max() < 0.05


def test_errors():
    model = tiny("bert")
    with pytest.raises(ValueError, match="outside 0..4"):
        AttentionCapture(model, max_order=5)
    cap = AttentionCapture(model, max_order=1)
    with pytest.raises(RuntimeError, match="inside"):
        cap.forward(**inputs())


def test_head_average_zeroes_padding_even_with_nan():
    w = torch.full((1, 2, 3, 3), 1 / 3)
    w[0, :, 2, :] = float("nan")
    valid = torch.tensor([[True, True, False]])
    a = head_average(w, valid)
    assert torch.isfinite(a).all() and a[0, 2].abs().sum() == 0 and a[0, :, 2].abs().sum() == 0
