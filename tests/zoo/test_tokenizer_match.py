"""A tokenizer must belong to its model: the vocabulary size and the special-token ids of the
tokenizer are checked against the model's config, not only against the embedding table.

Configs and tokenizers of the zoo's 8 default models are read from their prepared folders
without loading weights; one test runs ``extract_ola`` on gemma3-270m with minilm-l6's
WordPiece tokenizer (a smaller vocabulary that fits gemma's table) and must be refused.
"""

from __future__ import annotations

import functools
import itertools

import pytest

from olas_utils.capture.architecture import check_tokenizer, tokenizer_mismatch
from olas_utils.zoo import DEFAULT_MODELS, prepare


@functools.lru_cache(maxsize=None)
def config_and_tokenizer(name: str):
    from transformers import AutoConfig, AutoTokenizer

    folder = prepare(name)
    return AutoConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_every_zoo_model_passes_with_its_own_tokenizer(name):
    config, tok = config_and_tokenizer(name)
    assert tokenizer_mismatch(config, tok) is None


def test_minilm_wordpiece_on_gemma_is_refused_by_the_config_check():
    config, _ = config_and_tokenizer("gemma3-270m")
    _, tok = config_and_tokenizer("minilm-l6")
    why = tokenizer_mismatch(config, tok)
    assert why is not None and "30522" in why and "262144" in why


def test_minilm_tokenizer_on_mpnet_is_refused_by_its_special_tokens():
    # 30,522 tokens fit mpnet's 30,527 (5 rows of slack), but the pad ids differ (0 vs 1)
    config, _ = config_and_tokenizer("mpnet-base")
    _, tok = config_and_tokenizer("minilm-l6")
    why = tokenizer_mismatch(config, tok)
    assert why is not None and "pad" in why


def test_foreign_tokenizers_across_the_zoo_are_refused():
    """Every pair of zoo models with different tokenizers is refused (minilm-l6,
    paraphrase-minilm-l3 and splade-tiny share BERT's uncased WordPiece)."""
    same = {"minilm-l6", "paraphrase-minilm-l3", "splade-tiny"}
    accepted = []
    for m, t in itertools.permutations(DEFAULT_MODELS, 2):
        if m in same and t in same:
            continue
        config, _ = config_and_tokenizer(m)
        _, tok = config_and_tokenizer(t)
        if tokenizer_mismatch(config, tok) is None:
            accepted.append((m, t))
    assert not accepted, f"foreign tokenizers accepted (model, tokenizer): {accepted}"


def test_padded_embedding_slack_is_allowed():
    """Real checkpoints pad their embedding table (Qwen2.5: 151,665 tokens, 151,936 rows)."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(vocab_size=151936, bos_token_id=None, eos_token_id=151643, pad_token_id=None)

    class Tok:
        bos_token_id, eos_token_id, pad_token_id, name_or_path = None, 151643, 151643, "qwen"

        def __len__(self):
            return 151665

    assert tokenizer_mismatch(cfg, Tok()) is None
    cfg.eos_token_id = [151643, 151645]  # a list of end ids: any may be the tokenizer's
    assert tokenizer_mismatch(cfg, Tok()) is None
    cfg.vocab_size = 262144  # minilm-sized gaps are not slack
    assert "vocabulary" in tokenizer_mismatch(cfg, Tok())


@pytest.mark.real_model
def test_extract_ola_refuses_minilm_tokenizer_on_gemma(zoo_model):
    from olas_utils import extract_ola

    lm = zoo_model("gemma3-270m")
    _, tok = config_and_tokenizer("minilm-l6")
    words = [["The", "cat", "sat", "."]]
    with pytest.raises(ValueError, match="check_tokenizer=False"):
        extract_ola(lm.model, tok, words, orders=(1,))
    with pytest.raises(ValueError, match="vocabulary"):
        check_tokenizer(lm.model, tok)
    res = extract_ola(lm.model, tok, words, orders=(1,), check_tokenizer=False)  # the documented override
    assert res["ola:1"][0].shape[0] == len(res.tokens[0])
    assert extract_ola(lm.model, lm.tokenizer, words, orders=(1,))["ola:1"][0].isfinite().all()
