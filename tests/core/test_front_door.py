"""The front door of an extraction: a LoadedModel instead of model + tokenizer, raw strings as
well as word lists, and a result that shows itself (repr, padded arrays, .npz, heatmaps)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from olas_utils.extract import OLAMaps, extract_ola

WORDS = [["The", "cat", "sat", "."], ["A", "dog", "barked", "loudly", "."]]


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


def _same(a: OLAMaps, b: OLAMaps) -> None:
    assert a.keys() == b.keys() and a.words == b.words and a.tokens == b.tokens
    for k in a.keys():
        for x, y in zip(a[k], b[k]):
            assert torch.equal(x, y), k


def test_a_loaded_model_is_its_model_and_tokenizer(bert):
    ref = extract_ola(bert.model, bert.tokenizer, WORDS, progress=False, model_name=bert.name)
    _same(extract_ola(bert, WORDS, progress=False), ref)
    got = extract_ola(bert, sentences=WORDS, progress=False, level="word")
    _same(got, extract_ola(bert.model, bert.tokenizer, WORDS, progress=False, level="word"))
    assert extract_ola(bert, WORDS, progress=False).model_name == "tiny-bert"


def test_a_loaded_uniform_control_extracts_uniform_attention(bert):
    control = dataclasses.replace(bert, attention="uniform")
    res = extract_ola(control, WORDS[:1], progress=False, orders=(1,))
    assert res.attention == "uniform"
    # uniform bidirectional attention over T tokens is 1/T everywhere, in every layer
    t = len(res.tokens[0])
    assert torch.allclose(res["ola:1"][0], torch.full((t, t), 1.0 / t))
    assert extract_ola(control, WORDS[:1], progress=False, attention="model").attention == "model"


def test_raw_strings_are_split_at_whitespace_and_tokenised_as_written(bert):
    res = extract_ola(bert, ["The cat  sat.", "A dog barked"], progress=False)
    assert res.words == [["The", "cat", "sat."], ["A", "dog", "barked"]]
    # the tokens are the tokenizer's own tokens of the text (single spaces)
    tok = bert.tokenizer
    assert res.tokens[0] == tok.convert_ids_to_tokens(tok("The cat sat.")["input_ids"])
    _same(res, extract_ola(bert, [["The", "cat", "sat."], ["A", "dog", "barked"]], progress=False))
    mixed = extract_ola(bert, ["The cat sat.", ["A", "dog", "barked"]], progress=False)
    assert mixed.words == [["The", "cat", "sat."], ["A", "dog", "barked"]]


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda b: extract_ola(b, "The cat sat.", progress=False), r"one string .*pass \[text\]"),
        (lambda b: extract_ola(b, b.tokenizer, WORDS, progress=False), "LoadedModel carries its tokenizer"),
        (lambda b: extract_ola(b.model, sentences=WORDS, progress=False), "tokenizer is missing"),
        (lambda b: extract_ola(b.model, WORDS, progress=False), "tokenizer is missing"),
        (lambda b: extract_ola(b, WORDS, progress=False, attention=""), "attention must be one of"),
        (lambda b: extract_ola(b, progress=False), "needs sentences"),
        (lambda b: extract_ola(b, ["   "], progress=False), "sentence 0 has no words"),
    ],
)
def test_front_door_misuse_is_named(bert, call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call(bert)


def _toy(level="word") -> OLAMaps:
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.arange(9, dtype=torch.float32).reshape(3, 3) / 10
    return OLAMaps(
        maps={"ola:1": [a, b]},
        tokens=[["[CLS]", "x", "[SEP]"], ["[CLS]", "p", "q", "r", "[SEP]"]],
        words=[["x", "y"], ["p", "q", "r"]],
        word_ids=[torch.tensor([-1, 0, -1]), torch.tensor([-1, 0, 1, 2, -1])],
        model_name="toy",
        num_layers=1,
        is_causal=False,
        level=level,
        capture_path="interface",
        dtype="float32",
    )


def test_to_numpy_pads_and_masks():
    values, mask = _toy().to_numpy("ola:1")
    expected = np.array(
        [
            [[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 0.0]],
            [[0.0, 0.1, 0.2], [0.3, 0.4, 0.5], [0.6, 0.7, 0.8]],
        ],
        dtype=np.float32,
    )
    assert values.dtype == np.float32 and values.shape == (2, 3, 3)
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-7)
    assert mask.tolist() == [[True, True, False], [True, True, True]]
    with pytest.raises(KeyError, match="available"):
        _toy().to_numpy("ola:9")


def test_repr_is_one_short_line_without_tensors():
    r = repr(_toy())
    assert r == (
        "OLAMaps('toy', 2 sentences of 2-3 words, level='word', keys=['ola:1'], causal=False, attention='model')"
    )
    one = dataclasses.replace(_toy(), maps={"ola:1": [torch.eye(2)]}, words=[["x", "y"]], word_ids=[torch.arange(2)])
    assert repr(one).startswith("OLAMaps('toy', 1 sentence of 2 words, level='word'")
    big = dataclasses.replace(_toy(), maps={"ola:1": [torch.rand(300, 300)] * 2})
    assert "tensor" not in repr(big) and len(repr(big)) < 200


def test_save_npz_is_read_by_numpy_without_pickle(tmp_path):
    out = _toy().save_npz(tmp_path / "sub" / "maps.npz")
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == ["labels", "level", "mask", "model_name", "ola:1"]
        np.testing.assert_allclose(z["ola:1"][0], [[1, 2, 0], [3, 4, 0], [0, 0, 0]])
        assert z["labels"].tolist() == [["x", "y", ""], ["p", "q", "r"]]
        assert z["mask"].tolist() == [[True, True, False], [True, True, True]]
        assert str(z["model_name"]) == "toy" and str(z["level"]) == "word"


def test_save_and_load_still_round_trip(tmp_path):
    m = _toy()
    back = OLAMaps.load(m.save(tmp_path / "m.pt"))
    assert back.content_sha256() == m.content_sha256()
    assert repr(back) == repr(m)


def test_plot_draws_each_sentence_with_its_labels_and_scale():
    m = _toy()
    fig = m.plot("ola:1", sentence=[0, 1])
    axes = [ax for ax in fig.axes if ax.images]
    assert len(axes) == 2
    for ax, i, words in zip(axes, (0, 1), m.words):
        np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), m["ola:1"][i].numpy())
        assert [t.get_text() for t in ax.get_xticklabels()] == words
        assert [t.get_text() for t in ax.get_yticklabels()] == words
    # own scales: each panel from its own minimum to its own maximum
    assert axes[0].images[0].get_clim() == (1.0, 4.0)
    assert axes[1].images[0].get_clim() == pytest.approx((0.0, 0.8))
    shared = m.plot("ola:1", sentence=(0, 1), shared_scale=True)
    for ax in [ax for ax in shared.axes if ax.images]:
        assert ax.images[0].get_clim() == pytest.approx((0.0, 4.0))
    one = m.plot("ola:1", sentence=1)
    assert len([ax for ax in one.axes if ax.images]) == 1
    with pytest.raises(IndexError, match="2 sentences"):
        m.plot("ola:1", sentence=5)
    with pytest.raises(KeyError, match="available"):
        m.plot("rollout")


def test_plot_of_a_long_sentence_labels_at_most_40_positions():
    n = 100
    m = dataclasses.replace(
        _toy(),
        maps={"ola:1": [torch.rand(n, n)]},
        words=[[f"w{i}" for i in range(n)]],
        word_ids=[torch.arange(n)],
        tokens=[[f"w{i}" for i in range(n)]],
    )
    (ax,) = [ax for ax in m.plot("ola:1").axes if ax.images]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"w{i}" for i in range(0, n, 3)]  # every 3rd: ceil(100 / 40)
    assert list(ax.get_xticks()) == list(range(0, n, 3))
