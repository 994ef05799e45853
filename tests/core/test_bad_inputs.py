"""Bad arguments and files at the core: errors name the argument or the path, and a failed
save leaves nothing behind."""

from __future__ import annotations

import pytest
import torch

from olas_utils.extract import OLAMaps, extract_ola

SENTS = [["The", "cat", "sat", "."], ["A", "dog", "barked", "loudly", "."]]


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


def test_failed_save_leaves_no_tmp(tmp_path):
    maps = OLAMaps(
        maps={"ola:1": [torch.eye(2)]},
        tokens=[["a", "b"]],
        words=[["a", "b"]],
        word_ids=[torch.tensor([0, 1])],
        model_name="m",
        num_layers=1,
        is_causal=False,
        level="subword",
        capture_path="interface",
        dtype="float32",
    )
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(OSError, match="out"):
        maps.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not list(target.iterdir())


@pytest.fixture(scope="module")
def model_tok(bert):
    return bert.model, bert.tokenizer


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"sentences": None}, "sentences"),
        ({"sentences": 5}, "sentences"),
        ({"orders": 2}, "orders"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"batch_size": "8"}, "batch_size"),
    ],
)
def test_bad_arguments_name_the_argument(model_tok, kwargs, match):
    m, tok = model_tok
    args = {"sentences": SENTS, **kwargs}
    with pytest.raises((TypeError, ValueError), match=match) as e:
        extract_ola(m, tok, args.pop("sentences"), progress=False, **args)
    assert "\n" not in str(e.value)


def test_maps_load_on_something_else_names_the_path(tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello\n")
    with pytest.raises(ValueError, match="notes.txt.*OLAMaps.save"):
        OLAMaps.load(txt)
    with pytest.raises((ValueError, OSError), match=str(tmp_path.name)):
        OLAMaps.load(tmp_path)
