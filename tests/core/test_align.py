"""Word alignment on every default zoo tokenizer, including hard words."""

import pytest
import torch
from conftest import zoo_models_to_test

from olas_utils.align import SPECIAL, pool_to_words, tokenize_words

HARD = [
    ["Mr.", "O'Neil", "paid", "$", "3,000.50", "--", "in", "2019", "!"],
    ["naïve", "café", "Zürich", "Ελλάδα", "東京", "🙂", "👍🏽", "end", "."],
    ["(", "see", "e-mail", ")", "U.S.A.", "isn't", "co-op", "...", "?"],
]


def _check_batch(tok, batch, sentences):
    for i, words in enumerate(sentences):
        n = int(batch.attention_mask[i].sum())
        wid = batch.word_ids[i, :n].tolist()
        assert all(w == SPECIAL or 0 <= w < len(words) for w in wid)
        seq = [w for w in wid if w != SPECIAL]
        assert seq == sorted(seq), "word ids must be non-decreasing (no shift, no reordering)"
        assert set(seq) == set(range(len(words))), "every word gets at least one subword"
        # each word's subwords decode back to (a normalised form of) that word
        ids = batch.input_ids[i, :n]
        for j, w in enumerate(words):
            piece = tok.decode(ids[torch.tensor(wid) == j]).strip()
            norm = lambda s: "".join(s.lower().split())  # noqa: E731
            if "[UNK]" not in piece and "<unk>" not in piece:
                assert norm(piece).replace("##", "") in (
                    norm(w),
                    norm(tok.backend_tokenizer.normalizer.normalize_str(w))
                    if tok.backend_tokenizer.normalizer
                    else norm(w),
                ), (w, piece)
        assert (batch.word_ids[i, n:] == -2).all()


@pytest.mark.real_model
@pytest.mark.parametrize("name", zoo_models_to_test())
def test_word_ids_on_zoo_tokenizers(zoo_model, name):
    tok = zoo_model(name).tokenizer
    batch = tokenize_words(tok, HARD)
    _check_batch(tok, batch, HARD)


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m"])
def test_errors_name_the_bad_word(zoo_model, name):
    tok = zoo_model(name).tokenizer
    with pytest.raises(ValueError, match="word 1"):
        tokenize_words(tok, [["ok", "", "x"]])
    with pytest.raises(ValueError, match="no words"):
        tokenize_words(tok, [[]])
    with pytest.raises(TypeError, match="list of words"):
        tokenize_words(tok, ["a raw string"])


@pytest.mark.real_model
def test_word_deleted_by_normaliser_is_an_error(zoo_model):
    tok = zoo_model("minilm-l6").tokenizer  # BERT's normaliser strips control/format chars
    with pytest.raises(ValueError, match=r"word 1 .*yields no subword"):
        tokenize_words(tok, [["a", "\u200b", "b"]])


def test_pool_to_words_hand_computed():
    # tokens: [CLS] w0a w0b w1 [SEP]
    word_ids = torch.tensor([-1, 0, 0, 1, -1])
    m = torch.arange(25, dtype=torch.float64).reshape(5, 5)
    word_map, special = pool_to_words(m, word_ids, 2, pooling="clark")
    rows0 = (m[1] + m[2]) / 2
    expected = torch.tensor([[rows0[1] + rows0[2], rows0[3]], [m[3, 1] + m[3, 2], m[3, 3]]])
    torch.testing.assert_close(word_map, expected)
    torch.testing.assert_close(special, torch.stack([torch.stack([rows0[0], rows0[4]]), m[3, [0, 4]]]))


def test_pool_to_words_keeps_row_mass_and_batches_leading_dims():
    g = torch.Generator().manual_seed(0)
    m = torch.rand(3, 6, 6, generator=g, dtype=torch.float64)
    m = m / m.sum(-1, keepdim=True)
    word_ids = torch.tensor([-1, 0, 1, 1, 2, -1])
    wm, sp = pool_to_words(m, word_ids, 3, pooling="clark")
    assert wm.shape == (3, 3, 3) and sp.shape == (3, 3, 2)
    torch.testing.assert_close(wm.sum(-1) + sp.sum(-1), torch.ones(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="word 3"):
        pool_to_words(m, word_ids, 4, pooling="clark")
