"""No silent wrong answers from the model side (issue 14): causality read from the config,
tokenizer/model mismatch, two threads on one model, architectures whose attention is not
a T×T map, and words that look like special tokens. Toy random-config models for edge
cases; the zoo's real tokenizers where the case is about them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from olas_utils.capture.architecture import is_causal_config, is_causal_model
from olas_utils.capture.attention import CAPTURE_IMPLEMENTATION
from olas_utils.extract import extract_ola
from olas_utils.maths.sinks import symmetrize_causal

#: real zoo models or their tokenizers: not in `make test-fast`
pytestmark = pytest.mark.models

SENTS = [["The", "cat", "sat", "on", "the", "mat", "."], ["A", "dog", "barked", "."]]


def gemma3(bidirectional: bool, vocab_size: int = 300):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=128,
        sliding_window=4,
        use_bidirectional_attention=bidirectional,
        architectures=["Gemma3ForCausalLM"],
        bos_token_id=1,  # the ids of smollm2-135m's tokenizer, which these toy models are paired with
        eos_token_id=2,
        pad_token_id=2,
    )
    cfg._attn_implementation = "eager"
    return Gemma3ForCausalLM(cfg).eval()


def _zoo_tokenizer(name):
    from olas_utils import zoo

    tok = AutoTokenizer.from_pretrained(zoo.prepare(name))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


# -- 1. causality from the config -----------------------------------------------------------


def test_bidirectional_gemma3_config_is_an_encoder():
    m = gemma3(bidirectional=True)
    assert is_causal_config(m.config) is False
    assert is_causal_model(m) is False
    assert is_causal_model(gemma3(bidirectional=False)) is True


def test_encoder_flags_in_config_win_over_the_class_name():
    from transformers import LlamaConfig

    cfg = LlamaConfig(architectures=["LlamaForCausalLM"], is_causal=False)
    assert is_causal_config(cfg) is False
    assert is_causal_config(LlamaConfig(architectures=["LlamaBidirectionalModel"])) is False
    assert is_causal_config(LlamaConfig(architectures=["LlamaForCausalLM"])) is True


def test_bidirectional_gemma3_extracts_as_encoder_with_full_maps():
    m = gemma3(bidirectional=True, vocab_size=49152)
    tok = _zoo_tokenizer("smollm2-135m")
    res = extract_ola(m, tok, SENTS, orders=(1,), progress=False)
    assert res.is_causal is False
    a = res["layer:0"][0]
    assert a.triu(1).abs().sum() > 0  # it really attends forward: not a causal map
    # and the images built from it are not symmetrised as a causal map would be
    assert not torch.allclose(symmetrize_causal(a), a)


def _llama(**flags):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        **flags,
    )
    cfg._attn_implementation = "eager"
    return LlamaForCausalLM(cfg).eval()


def test_causal_lm_class_configured_bidirectionally_is_handled_as_encoder():
    m = _llama(is_causal=False)  # transformers' Llama honours is_causal=False: full attention
    res = extract_ola(m, _zoo_tokenizer("smollm2-135m"), SENTS, orders=(1,), progress=False)
    assert res.is_causal is False and res["layer:0"][0].triu(1).abs().sum() > 0


def test_declared_bidirectional_but_causal_attention_is_refused():
    m = _llama(use_bidirectional_attention=True)  # Llama ignores this flag: its attention stays causal
    with pytest.raises(ValueError, match=r"use_bidirectional_attention=True.*attention is causal"):
        extract_ola(m, _zoo_tokenizer("smollm2-135m"), SENTS, orders=(1,), progress=False)


def test_bidirectional_folder_loads_as_encoder_and_cache_manifest_says_so(tmp_path):
    from olas_utils.similarity.imagecache import extract_to_cache
    from olas_utils.similarity.images import to_image
    from olas_utils.zoo import load_model

    folder = tmp_path / "bidir-gemma3"
    gemma3(bidirectional=True, vocab_size=49152).save_pretrained(folder)
    _zoo_tokenizer("smollm2-135m").save_pretrained(folder)
    lm = load_model(folder, device="cpu")
    assert lm.is_causal is False
    c = extract_to_cache(lm, SENTS, cache_root=tmp_path / "c", orders=(1,), baselines=(), batch_size=2, progress=False)
    assert c.manifest["is_causal"] is False
    res = extract_ola(lm.model, lm.tokenizer, SENTS, orders=(1,), progress=False, batch_size=2)
    want = to_image(res["ola:1"][0], causal=False, image_size=50).numpy()
    assert np.allclose(c.images("ola:1")[0], want, atol=1e-6)  # not symmetrised as a causal map


# -- 2. tokenizer and model must match ------------------------------------------------------------


@pytest.mark.real_model
@pytest.mark.parametrize("tok_name", ["gemma3-270m", "smollm2-135m"])
def test_tokenizer_larger_than_embedding_table_is_refused(zoo_model, tok_name):
    lm = zoo_model("minilm-l6")
    with pytest.raises(ValueError, match=r"(?s)tokenizer.*\d+.*embedding.*30522"):
        extract_ola(lm.model, _zoo_tokenizer(tok_name), SENTS, orders=(1,), progress=False)


def test_ids_outside_the_embedding_table_are_refused():
    m = gemma3(bidirectional=False, vocab_size=2000)  # the smollm2 tokenizer has 49152 tokens
    tok = _zoo_tokenizer("smollm2-135m")
    with pytest.raises(ValueError, match=r"(?s)49152.*2000"):
        extract_ola(m, tok, SENTS, orders=(1,), progress=False)


# -- 4. threads ----------------------------------------------------------------------------------


def test_two_threads_on_one_model_get_exact_results_and_restore_the_implementation():
    m = gemma3(bidirectional=False, vocab_size=49152)
    m.set_attn_implementation("eager")
    tok = _zoo_tokenizer("smollm2-135m")
    sents = [SENTS[0] * 6, SENTS[1] * 6]
    want = extract_ola(m, tok, sents, orders=(1, 2), progress=False)
    got, errors = [None, None], []

    def work(i):
        try:
            for _ in range(3):
                got[i] = extract_ola(m, tok, sents, orders=(1, 2), progress=False)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for res in got:
        for k in ("ola:1", "ola:2"):
            for a, b in zip(res[k], want[k]):
                assert torch.equal(a, b)
    assert m.config._attn_implementation == "eager"
    assert m.config._attn_implementation != CAPTURE_IMPLEMENTATION


# -- 5. unsupported architectures ----------------------------------------------------------------


def _tiny_unsupported(kind):
    import transformers as tf

    small = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=30522)
    torch.manual_seed(0)
    if kind == "longformer":
        # pad id 0: minilm-l6's tokenizer, which these toy models are paired with
        return tf.LongformerModel(tf.LongformerConfig(**small, num_hidden_layers=2, attention_window=4, pad_token_id=0))
    if kind == "bigbird":
        return tf.BigBirdModel(
            tf.BigBirdConfig(
                **small, num_hidden_layers=2, attention_type="block_sparse", block_size=2, num_random_blocks=1
            )
        )
    if kind == "funnel":
        return tf.FunnelModel(
            tf.FunnelConfig(vocab_size=30522, d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1])
        )
    if kind == "canine":
        return tf.CanineModel(
            tf.CanineConfig(hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=2)
        )
    return tf.XLNetModel(tf.XLNetConfig(vocab_size=30522, d_model=32, n_head=2, d_inner=64, n_layer=2))


@pytest.mark.parametrize(
    "kind,name",
    [
        ("longformer", "Longformer"),
        ("bigbird", "BigBird"),
        ("funnel", "Funnel"),
        ("canine", "Canine"),
        ("xlnet", "XLNet"),
    ],
)
def test_unsupported_architectures_say_so(kind, name):
    m = _tiny_unsupported(kind).eval()
    tok = _zoo_tokenizer("minilm-l6")
    with pytest.raises(ValueError, match=rf"(?is){name}.*OLA is not defined"):
        extract_ola(m, tok, SENTS, orders=(1,), progress=False)


@pytest.mark.parametrize("kind", ["longformer", "funnel", "canine"])
def test_attention_that_is_not_txt_is_refused_even_without_a_table_entry(kind, monkeypatch):
    from olas_utils.capture import architecture

    monkeypatch.setattr(architecture, "UNSUPPORTED_ATTENTION", {})
    m = _tiny_unsupported(kind).eval()
    with pytest.raises(ValueError, match=r"(?s)not \(batch, head, \d+, \d+\).*OLA is not defined"):
        extract_ola(m, _zoo_tokenizer("minilm-l6"), SENTS, orders=(1,), progress=False)


# -- 7. words that look like special tokens -----------------------------------------------------


@pytest.mark.parametrize("tok_name", ["minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m", "qwen2.5-0.5b"])
def test_special_looking_words_are_text(tok_name):
    from olas_utils.align import tokenize_words

    tok = _zoo_tokenizer(tok_name)
    words = ["a", "[SEP]", "<s>", "</s>", "<|endoftext|>", "<bos>", "<eos>", "[CLS]", "<pad>", "b"]
    b = tokenize_words(tok, [words])
    wid = b.word_ids[0, : b.lengths[0]]
    # every typed word got its own subwords, and none of them is a control token
    assert sorted(set(wid[wid >= 0].tolist())) == list(range(len(words)))
    specials = set(tok.all_special_ids)
    word_tokens = b.input_ids[0, : b.lengths[0]][wid >= 0].tolist()
    assert not specials & set(word_tokens), [tok.convert_ids_to_tokens(i) for i in word_tokens if i in specials]
    # the special tokens the tokenizer adds itself are the same as for plain words
    plain = tokenize_words(tok, [["a", "b"]])
    n_special = int((wid == -1).sum())
    assert n_special == int((plain.word_ids[0, : plain.lengths[0]] == -1).sum())
