"""Bad arguments give errors that name the argument, the environment variable or the
problem, converted at the boundary: an invalid device, a pooling at subword level, Hit@k
that cannot miss, and attention that overflowed to NaN in float16."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from olas_utils.infra.settings import resolve_device


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "", "CPU0"])
def test_an_invalid_device_argument_is_named_with_the_valid_values(bad, monkeypatch):
    monkeypatch.delenv("OLAS_DEVICE", raising=False)
    with pytest.raises(ValueError) as e:
        resolve_device(bad)
    msg = str(e.value)
    assert f"device={bad!r}" in msg and "cpu" in msg and "cuda:1" in msg


def test_an_invalid_olas_device_is_named_with_the_valid_values(monkeypatch):
    monkeypatch.setenv("OLAS_DEVICE", "gpu")
    with pytest.raises(ValueError) as e:
        resolve_device(None)
    msg = str(e.value)
    assert "OLAS_DEVICE='gpu'" in msg and "cpu" in msg and "unset OLAS_DEVICE" in msg


def test_valid_devices_still_resolve(monkeypatch):
    monkeypatch.setenv("OLAS_DEVICE", "cpu")
    assert resolve_device(None).type == "cpu"
    assert resolve_device("cpu").type == "cpu" and resolve_device(torch.device("cpu")).type == "cpu"


def test_a_missing_cuda_names_the_variable(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    monkeypatch.setenv("OLAS_DEVICE", "cuda:1")
    with pytest.raises(RuntimeError, match="OLAS_DEVICE"):
        resolve_device(None)


def tiny_bert(dtype=torch.float32, blow_up: bool = False):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = BertModel(cfg).eval()
    model = model.to(dtype)
    if blow_up:  # layer 1's queries overflow float16 (inf), as large activations do: its softmax gives NaN
        model.encoder.layer[1].attention.self.query.register_forward_hook(lambda mod, inp, out: out * float("inf"))
    return model


@pytest.fixture(scope="module")
def wordpiece():
    from transformers import AutoTokenizer

    from olas_utils.zoo import prepare

    return AutoTokenizer.from_pretrained(prepare("minilm-l6"))


def test_pooling_with_subword_level_is_refused(wordpiece):
    from olas_utils import extract_ola

    model = tiny_bert()
    with pytest.raises(ValueError, match=r"pooling='clark'.*word level.*to_words\(pooling='clark'\)"):
        extract_ola(model, wordpiece, [["The", "cat"]], orders=(1,), level="subword", pooling="clark", progress=False)
    res = extract_ola(model, wordpiece, [["The", "cat"]], orders=(1,), level="word", pooling="clark", progress=False)
    assert res.pooling == "clark"
    assert extract_ola(model, wordpiece, [["The", "cat"]], orders=(1,), progress=False).level == "subword"


def test_float16_attention_that_overflows_is_reported_as_such(wordpiece):
    from olas_utils import extract_ola

    model = tiny_bert(torch.float16, blow_up=True)
    with pytest.raises(FloatingPointError) as e:
        extract_ola(model, wordpiece, [["The", "cat", "sat", "on", "the", "mat"]], orders=(1,), progress=False)
    msg = str(e.value)
    assert "float16" in msg and "layer 1" in msg and "float32" in msg and "bfloat16" in msg
    assert "causal" not in msg


def test_hit_at_k_that_cannot_miss_is_nan_with_a_warning():
    from olas_utils.similarity import retrieval_table

    rng = np.random.default_rng(0)
    imgs = {m: rng.random((5, 8, 8)) for m in ("a", "b")}
    with pytest.warns(UserWarning, match=r"hit@5.*5 items"):
        rows = retrieval_table(imgs, metric="pearson", ks=(1, 5), progress=False)
    assert all(math.isnan(r["hit@5"]) and not math.isnan(r["hit@1"]) for r in rows)
    imgs = {m: rng.random((6, 8, 8)) for m in ("a", "b")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = retrieval_table(imgs, metric="pearson", ks=(1, 5), progress=False)
    assert all(0 <= r["hit@5"] <= 1 for r in rows)


def small_classifier_result():
    from olas_utils.similarity.result import ClassifierResult

    return ClassifierResult(
        state_dict={"w": torch.zeros(2)},
        n_classes=2,
        in_channels=1,
        image_size=(8, 8),
        stem="cifar",
        seed=0,
        epochs=1,
        chosen_epoch=1,
        selection="last",
        train_models=("a",),
    )


def test_classifier_save_to_a_folder_names_the_path(tmp_path):
    with pytest.raises(OSError) as e:
        small_classifier_result().save(tmp_path)
    assert str(tmp_path) in str(e.value)


def test_classifier_save_to_an_unwritable_path_names_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "sub" / "clf.pt"  # a file where a folder should be: cannot be created, even by root
    with pytest.raises(OSError) as e:
        small_classifier_result().save(target)
    assert str(target) in str(e.value) and "classifier checkpoint" in str(e.value)
