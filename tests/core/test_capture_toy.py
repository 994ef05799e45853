"""Capture paths on tiny randomly initialised models (shapes, paths, dtypes, edge cases).
Real-model correctness lives in test_extract_real.py."""

import pytest
import torch
from _support.capture import hand_head_mean
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM, MPNetConfig, MPNetModel

from olas_utils.capture.architecture import capture_path, is_causal_model
from olas_utils.capture.attention import AttentionCapture, head_average
from olas_utils.maths.ola import ola_from_layers


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
    return [hand_head_mean(w, valid) for w in out.attentions]


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


def test_head_average_is_the_mean_over_heads_by_hand():
    # heads that differ, padding in one sentence: a mean written out cell by cell
    w = torch.tensor(
        [
            [[[0.5, 0.5], [0.2, 0.8]], [[1.0, 0.0], [0.6, 0.4]], [[0.0, 1.0], [0.1, 0.9]]],
            [[[1.0, 0.0], [0.3, 0.7]], [[0.4, 0.6], [0.5, 0.5]], [[0.7, 0.3], [0.9, 0.1]]],
        ]
    )  # (batch 2, head 3, query 2, key 2)
    valid = torch.tensor([[True, True], [True, False]])
    expected = torch.tensor(
        [
            [[(0.5 + 1.0 + 0.0) / 3, (0.5 + 0.0 + 1.0) / 3], [(0.2 + 0.6 + 0.1) / 3, (0.8 + 0.4 + 0.9) / 3]],
            [[(1.0 + 0.4 + 0.7) / 3, 0.0], [0.0, 0.0]],
        ]
    )
    torch.testing.assert_close(head_average(w, valid), expected, rtol=0, atol=1e-7)
    torch.testing.assert_close(hand_head_mean(w, valid), expected, rtol=0, atol=1e-7)


# -- attention implementations that return no weights ------------------------------------


@pytest.mark.parametrize("impl", ["sdpa", "flash_attention_2"])
@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_no_weights_implementation_switches_warns_and_restores(kind, impl):
    model, x = tiny(kind), inputs()
    ref = ola_from_layers(reference(model, x), [1, 2, 3])  # eager reference
    # flash-attn is not installed here: setting the config simulates a model loaded with it
    model.config._attn_implementation = impl
    with pytest.warns(UserWarning, match=rf"attn_implementation='{impl}'.*switched.*restores '{impl}'"):
        with AttentionCapture(model, max_order=3) as cap:
            assert model.config._attn_implementation == "olas_capture"
            acc = cap.forward(**x)
    for k in (1, 2, 3):
        torch.testing.assert_close(acc.ola(k), ref[k], rtol=0, atol=1e-6)
    assert model.config._attn_implementation == impl  # restored, although fa2 cannot be selected here


def test_eager_model_gets_no_switch_warning():
    import warnings

    model, x = tiny("bert"), inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with AttentionCapture(model, max_order=1) as cap:
            cap.forward(**x)


def test_implementation_restored_when_the_block_fails():
    model = tiny("llama")
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(RuntimeError, match="boom"), pytest.warns(UserWarning):
        with AttentionCapture(model, max_order=1):
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "flash_attention_2"
    assert model.model.config._attn_implementation == "flash_attention_2"


def tiny_biogpt():
    from transformers import BioGptConfig, BioGptForCausalLM

    torch.manual_seed(0)
    cfg = BioGptConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64, vocab_size=100)
    cfg._attn_implementation = "eager"
    return BioGptForCausalLM(cfg).eval()


def test_output_attentions_path_switches_sdpa_to_eager():
    # BioGPT does not declare attention-backend support: the output_attentions path. Under
    # sdpa, transformers returns no weights at all (only a log line), so OLAS must switch.
    model, x = tiny_biogpt(), inputs()
    ref = ola_from_layers(reference(model, x), [1, 2])
    model.set_attn_implementation("sdpa")
    assert capture_path(model) == "output_attentions"
    with pytest.warns(UserWarning, match="sdpa.*switched it to 'eager'"):
        with AttentionCapture(model, max_order=2) as cap:
            acc = cap.forward(**x)
    torch.testing.assert_close(acc.ola(2), ref[2], rtol=0, atol=1e-6)
    assert model.config._attn_implementation == "sdpa"


def test_output_attentions_path_without_weights_is_a_clear_error(monkeypatch):
    model, x = tiny_biogpt(), inputs()
    model.set_attn_implementation("sdpa")
    # an architecture that cannot switch at run time and returns no weights
    monkeypatch.setattr(type(model), "_can_set_attn_implementation", classmethod(lambda cls: False))
    with pytest.warns(UserWarning, match="output_attentions=True"):
        with AttentionCapture(model, max_order=1) as cap:
            with pytest.raises(RuntimeError, match="returned no attention weights.*attn_implementation='eager'"):
                cap.forward(**x)
    assert model.config._attn_implementation == "sdpa"


def test_architecture_without_eager_path_is_a_clear_error(monkeypatch):
    import transformers.models.bert.modeling_bert as modeling_bert

    model = tiny("bert")
    monkeypatch.delattr(modeling_bert, "eager_attention_forward")
    with pytest.raises(ValueError, match="no eager attention path"):
        with AttentionCapture(model, max_order=1):
            pass
    assert model.config._attn_implementation == "eager"  # nothing was switched


# -- things that are not encoder-only / decoder-only transformers -----------------------


def test_not_a_transformer_is_a_clear_error():
    from transformers import MambaConfig, MambaModel, ResNetConfig, ResNetModel, T5Config, T5Model

    from olas_utils.extract import extract_ola

    sent = [["a", "b"]]
    with pytest.raises(TypeError, match="not a Hugging Face transformers model.*load_model"):
        extract_ola(torch.nn.Linear(4, 4), None, sent)
    with pytest.raises(TypeError, match="expected a transformers model.*got str"):
        extract_ola("minilm-l6", None, sent)
    with pytest.raises(ValueError, match="no self-attention layers"):
        extract_ola(
            MambaModel(MambaConfig(hidden_size=16, num_hidden_layers=2, vocab_size=100, state_size=4)).eval(),
            None,
            sent,
        )
    with pytest.raises(ValueError, match="no num_hidden_layers.*self-attention"):
        extract_ola(ResNetModel(ResNetConfig(embedding_size=8, hidden_sizes=[8, 8], depths=[1, 1])).eval(), None, sent)
    t5 = T5Model(T5Config(num_layers=1, d_model=8, d_ff=16, num_heads=1, d_kv=8, vocab_size=100)).eval()
    with pytest.raises(ValueError, match="encoder-decoder"):
        extract_ola(t5, None, sent)
    with pytest.raises(ValueError, match="encoder-decoder"):
        AttentionCapture(t5, max_order=1)
