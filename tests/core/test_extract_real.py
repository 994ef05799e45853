"""Streaming OLA on every default zoo model with real sentences: capture equals
output_attentions, batch invariance, causality, row sums."""

import pytest
import torch
from _support.capture import hand_head_mean
from conftest import zoo_models_to_test

from olas_utils.capture.attention import AttentionCapture
from olas_utils.extract import extract_ola
from olas_utils.maths.ola import ola_from_layers

DEFAULT = zoo_models_to_test()  # every default zoo model, then the optional ones prepared here


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
    ref_layers = [hand_head_mean(w, valid) for w in out.attentions]  # the head mean by hand
    top = min(3, lm.num_layers)  # splade-tiny has 2 layers: orders 1, 2
    with AttentionCapture(lm.model, max_order=top, keep_layers=range(lm.num_layers)) as cap:
        acc = cap.forward(**inputs)
    for i in range(lm.num_layers):
        torch.testing.assert_close(acc.layers[i], ref_layers[i], rtol=0, atol=1e-6)
    ref = ola_from_layers(ref_layers, list(range(1, top + 1)))
    for k in range(1, top + 1):
        torch.testing.assert_close(acc.ola(k), ref[k], rtol=0, atol=1e-6)
    # the capture restores the model's own attention implementation
    assert lm.model.config._attn_implementation == "eager"


@pytest.mark.real_model
@pytest.mark.parametrize("name", DEFAULT)
def test_padded_batch_equals_each_sentence_alone(zoo_model, name, ewt_sentences):
    lm = zoo_model(name)
    orders = tuple(range(min(3, lm.num_layers) + 1))
    batched = extract_ola(lm.model, lm.tokenizer, ewt_sentences, orders=orders, batch_size=8, progress=False)
    for i, s in enumerate(ewt_sentences):
        alone = extract_ola(lm.model, lm.tokenizer, [s], orders=orders, batch_size=1, progress=False)
        for k in orders:
            diff = (batched[f"ola:{k}"][i] - alone[f"ola:{k}"][0]).abs().max().item()
            assert diff <= 1e-5, (name, i, k, diff)
        # one layer's softmax carries the float32 rounding of every batch-shaped product below it,
        # which grows with depth: 1e-5 up to 12 layers, in proportion beyond (qwen2.5-1.5b's 28th
        # layer differs by 1.4e-5 between batch 8 and batch 1, about 120 float32 steps at 1.0; the
        # OLA orders, means over layers, stay within 1e-5 on every model)
        tol = 1e-5 * max(1.0, lm.num_layers / 12)
        for key in ("layer:0", "layer:-1"):
            diff = (batched[key][i] - alone[key][0]).abs().max().item()
            assert diff <= tol, (name, i, key, diff, tol)
        # rollout grows like 2^N: compare relative to its row sums
        scale = 2.0**lm.num_layers
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
    # a property of the Clark et al. pooling rule (rows averaged, columns summed)
    res = extract_ola(
        lm.model, lm.tokenizer, ewt_sentences[:3], orders=(1, 2), level="word", pooling="clark", progress=False
    )
    for i, words in enumerate(ewt_sentences[:3]):
        m, sp = res["ola:2"][i], res.special["ola:2"][i]
        assert m.shape == (len(words), len(words))
        torch.testing.assert_close(m.sum(-1) + sp.sum(-1), torch.ones(len(words)), rtol=0, atol=1e-5)


# -- sentences longer than the model's maximum ------------------------------------------


@pytest.fixture(scope="module")
def long_words():
    """About 700 real words (EWT dev sentences run together): > 512 MiniLM tokens."""
    from olas_utils.data import load_ud_ewt

    words = []
    for w in load_ud_ewt("dev")["words"]:
        words.extend(w)
        if len(words) >= 700:
            return words


@pytest.mark.real_model
def test_too_long_sentence_is_an_error_by_default(zoo_model, long_words):
    lm = zoo_model("minilm-l6")
    from olas_utils.extract import max_tokens

    assert max_tokens(lm.model, lm.tokenizer) == 512
    with pytest.raises(
        ValueError, match=r"sentence 1 has \d+ tokens, more than the model's maximum of 512.*truncation='warn'"
    ):
        extract_ola(lm.model, lm.tokenizer, [["A", "short", "one", "."], long_words], orders=(1,), progress=False)
    with pytest.raises(ValueError, match="truncation must be 'error' or 'warn'"):
        extract_ola(lm.model, lm.tokenizer, [long_words], truncation="cut", progress=False)


@pytest.mark.real_model
@pytest.mark.parametrize("level", ["subword", "word"])
def test_truncation_warn_cuts_at_a_word_boundary(zoo_model, long_words, level):
    from olas_utils.align import tokenize_words

    lm = zoo_model("minilm-l6")
    short = ["A", "short", "one", "."]
    n_full = len(tokenize_words(lm.tokenizer, [long_words]).tokens[0])
    assert n_full > 512
    with pytest.warns(
        UserWarning,
        match=rf"sentence 1: {n_full} → \d+ tokens, kept the first \d+ of {len(long_words)} words \(\d+ words, \d+ tokens cut\)",
    ):
        res = extract_ola(
            lm.model, lm.tokenizer, [short, long_words], orders=(1, 2), level=level, truncation="warn", progress=False
        )
    keep = len(res.words[1])
    assert res.words[0] == short and res.words[1] == long_words[:keep] and 0 < keep < len(long_words)
    # the cut is the longest whole-word prefix that fits: one more word would not
    assert len(res.tokens[1]) <= 512
    assert len(tokenize_words(lm.tokenizer, [long_words[: keep + 1]]).tokens[0]) > 512
    # identical to extracting the cut sentence directly
    direct = extract_ola(lm.model, lm.tokenizer, [short, long_words[:keep]], orders=(1, 2), level=level, progress=False)
    assert direct.tokens == res.tokens
    for key in res.keys():
        for a, b in zip(res[key], direct[key]):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    side = keep if level == "word" else len(res.tokens[1])
    assert res["ola:2"][1].shape == (side, side)


@pytest.mark.real_model
def test_truncation_warn_cannot_cut_inside_a_word(zoo_model):
    from olas_utils.align import tokenize_words

    tok = zoo_model("minilm-l6").tokenizer
    with pytest.raises(ValueError, match="first word alone.*split that word"):
        tokenize_words(tok, [["unbelievable", "b"]], max_length=2, truncation="warn")  # [CLS] [SEP] fill it


# -- models loaded with an attention implementation that returns no weights -------------


@pytest.mark.real_model
def test_sdpa_loaded_model_equals_eager(zoo_model, ewt_sentences):
    import transformers

    from olas_utils.zoo import prepared_dir

    eager = zoo_model("minilm-l6")
    sdpa = transformers.AutoModel.from_pretrained(prepared_dir("minilm-l6"), attn_implementation="sdpa").eval()
    assert sdpa.config._attn_implementation == "sdpa"
    kw = dict(orders=(1, 2, 3), level="word", progress=False)
    ref = extract_ola(eager.model, eager.tokenizer, ewt_sentences[:4], **kw)
    for impl in ("sdpa", "flash_attention_2"):  # fa2 is not installed: simulated through the config
        sdpa.config._attn_implementation = impl
        with pytest.warns(UserWarning, match=rf"attn_implementation='{impl}'.*switched"):
            res = extract_ola(sdpa, eager.tokenizer, ewt_sentences[:4], **kw)
        assert sdpa.config._attn_implementation == impl
        assert all(layer.attention.self.config._attn_implementation == impl for layer in sdpa.encoder.layer)
        for key in ref.keys():
            for a, b in zip(res[key], ref[key]):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    # and the model still runs with its own implementation afterwards
    sdpa.config._attn_implementation = "sdpa"
    with torch.no_grad():
        sdpa(**{k: v for k, v in eager.tokenizer("hello world", return_tensors="pt").items()})
