"""Streaming OLA on every default zoo model with real sentences: capture equals
output_attentions, batch invariance, causality, row sums."""

import pytest
import torch

from olas_utils.capture import AttentionCapture, head_average
from olas_utils.extract import extract_ola
from olas_utils.ola import ola_from_layers

DEFAULT = ["minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m", "qwen2.5-0.5b"]


@pytest.fixture(scope="module")
def ewt_sentences():
    from olas_utils.data import load_ud_ewt

    words = load_ud_ewt("dev")["words"]
    # 8 real sentences of mixed lengths (3..40 words)
    picked, seen = [], set()
    for w in words:
        n = len(w)
        bucket = min(n // 5, 7)
        if 3 <= n <= 40 and bucket not in seen:
            seen.add(bucket)
            picked.append(list(w))
        if len(picked) == 8:
            break
    assert len({len(p) for p in picked}) >= 6
    return picked


@pytest.mark.real_model
@pytest.mark.parametrize("name", DEFAULT)
def test_streaming_capture_equals_output_attentions(zoo_model, name, ewt_sentences):
    lm = zoo_model(name)
    from olas_utils.align import tokenize_words

    batch = tokenize_words(lm.tokenizer, ewt_sentences[:4])
    inputs = batch.model_inputs()
    with torch.no_grad():
        out = lm.model(**inputs, output_attentions=True)
    assert len(out.attentions) == lm.num_layers
    valid = inputs["attention_mask"].bool()
    ref_layers = [head_average(w, valid) for w in out.attentions]
    with AttentionCapture(lm.model, max_order=3, keep_layers=range(lm.num_layers)) as cap:
        acc = cap.forward(**inputs)
    for i in range(lm.num_layers):
        torch.testing.assert_close(acc.layers[i], ref_layers[i], rtol=0, atol=1e-6)
    ref = ola_from_layers(ref_layers, [1, 2, 3])
    for k in (1, 2, 3):
        torch.testing.assert_close(acc.ola(k), ref[k], rtol=0, atol=1e-6)
    # the capture restores the model's own attention implementation
    assert lm.model.config._attn_implementation == "eager"


@pytest.mark.real_model
@pytest.mark.parametrize("name", DEFAULT)
def test_padded_batch_equals_each_sentence_alone(zoo_model, name, ewt_sentences):
    lm = zoo_model(name)
    orders = (0, 1, 2, 3)
    batched = extract_ola(lm.model, lm.tokenizer, ewt_sentences, orders=orders, batch_size=8, progress=False)
    for i, s in enumerate(ewt_sentences):
        alone = extract_ola(lm.model, lm.tokenizer, [s], orders=orders, batch_size=1, progress=False)
        for k in orders:
            diff = (batched[f"ola:{k}"][i] - alone[f"ola:{k}"][0]).abs().max().item()
            assert diff <= 1e-5, (name, i, k, diff)
        for key in ("layer:0", "layer:-1"):
            assert (batched[key][i] - alone[key][0]).abs().max().item() <= 1e-5
        # rollout grows like 2^N: compare relative to its row sums
        scale = 2.0 ** lm.num_layers
        assert ((batched["rollout"][i] - alone["rollout"][0]).abs().max() / scale).item() <= 1e-5
    # rows of every order sum to 1; causal models give lower-triangular maps
    for k in orders:
        for m in batched[f"ola:{k}"]:
            torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[0]), rtol=0, atol=1e-5)
            if lm.is_causal:
                assert torch.triu(m, diagonal=1).abs().max().item() == 0.0
            elif k > 0:  # encoders attend to later tokens too
                assert torch.triu(m, diagonal=1).abs().max().item() > 0.0
    assert batched.is_causal == lm.is_causal


@pytest.mark.real_model
def test_word_level_rows_plus_special_sum_to_one(zoo_model, ewt_sentences):
    lm = zoo_model("qwen2.5-0.5b")
    res = extract_ola(lm.model, lm.tokenizer, ewt_sentences[:3], orders=(1, 2), level="word", progress=False)
    for i, words in enumerate(ewt_sentences[:3]):
        m, sp = res["ola:2"][i], res.special["ola:2"][i]
        assert m.shape == (len(words), len(words))
        torch.testing.assert_close(m.sum(-1) + sp.sum(-1), torch.ones(len(words)), rtol=0, atol=1e-5)
