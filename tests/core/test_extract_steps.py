"""The extraction steps (plan, batch, assemble) against an independent reference on real zoo
models: each sentence's attention from Hugging Face ``output_attentions``, its head mean, order-k
OLA (the mean over every k-subset of layers of their product, later layers on the left) and
rollout written out here, not with the package's capture or recurrence."""

import itertools
from math import comb

import pytest
import torch

from olas_utils.align import tokenize_words
from olas_utils.extract import extract_ola
from olas_utils.extract_steps import assemble, extract_batch, open_capture, plan_extraction


@pytest.fixture(scope="module")
def sentences():
    from olas_utils.data import load_ud_ewt

    words = load_ud_ewt("dev")["words"]
    return [list(w) for w in words if 3 <= len(w) <= 14][:4]


def _reference(lm, words, orders):
    """``{key: (query, key) float64}`` of one sentence, alone (no padding)."""
    batch = tokenize_words(lm.tokenizer, [words])
    with torch.no_grad():
        out = lm.model(**batch.model_inputs(lm.device), output_attentions=True)
    layers = []
    for w in out.attentions:  # (batch, head, query, key)
        w = w[0].double()
        total = torch.zeros_like(w[0])
        for h in range(w.shape[0]):
            total = total + w[h]
        layers.append(total / w.shape[0])
    n, t = len(layers), layers[0].shape[0]
    eye = torch.eye(t, dtype=torch.float64)
    ref = {}
    for k in orders:
        total = torch.zeros(t, t, dtype=torch.float64)
        for subset in itertools.combinations(range(n), k):
            prod = eye
            for i in subset:  # lowest layer first: later layers multiply on the left
                prod = layers[i] @ prod
            total = total + prod
        ref[f"ola:{k}"] = total / comb(n, k)
    roll = eye
    for a in layers:
        roll = (a + eye) @ roll
    ref["rollout"] = roll
    ref["layer:0"], ref["layer:-1"] = layers[0], layers[-1]
    return ref, n


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m"])
def test_steps_equal_output_attentions_written_out(zoo_model, name, sentences):
    lm = zoo_model(name)
    orders = (1, 2, 3)
    plan = plan_extraction(lm, sentences, orders=orders, batch_size=3)
    assert sorted(i for b in plan.buckets for i in b) == list(range(len(sentences)))
    assert [len(b) for b in plan.buckets] == [3, 1]
    with open_capture(plan) as cap:  # one capture for every batch
        batches = [extract_batch(plan, cap, idx) for idx in plan.buckets]
    res = assemble(plan, batches, capture_path=cap.path)
    assert res.keys() == ["ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1"]
    for i, words in enumerate(sentences):
        ref, n = _reference(lm, words, orders)
        for key, want in ref.items():
            got = res[key][i]
            assert got.dtype == torch.float32 and got.shape == want.shape, (key, i)
            scale = 2.0**n if key == "rollout" else 1.0  # rollout's rows sum to 2^N
            torch.testing.assert_close(got.double() / scale, want / scale, rtol=0, atol=2e-5, msg=f"{name} {key} {i}")
    # a subset assembled from one batch is the same maps, in the batch's order
    idx = plan.buckets[0]
    part = assemble(plan, [batches[0]], indices=idx)
    for j, i in enumerate(idx):
        assert torch.equal(part["ola:2"][j], res["ola:2"][i]) and part.words[j] == res.words[i]
    # extract_ola is the same composition
    whole = extract_ola(lm, sentences, orders=orders, batch_size=3, progress=False)
    for key in res.keys():
        assert all(torch.equal(a, b) for a, b in zip(whole[key], res[key])), key


@pytest.mark.real_model
def test_assemble_refuses_a_sentence_in_no_batch(zoo_model, sentences):
    lm = zoo_model("minilm-l6")
    plan = plan_extraction(lm, sentences, orders=(1,), batch_size=2)
    with open_capture(plan) as cap:
        first = extract_batch(plan, cap, plan.buckets[0])
    with pytest.raises(ValueError, match=r"sentence\(s\) \[.*\] are in no batch \(2 missing\)"):
        assemble(plan, [first])


def test_plan_refuses_bad_arguments_before_tokenising(tiny_lm):
    lm = tiny_lm("bert")
    with pytest.raises(ValueError, match="level must be 'subword' or 'word'"):
        plan_extraction(lm, [["a", "b"]], level="char")
    with pytest.raises(TypeError, match="batch_size must be a positive int"):
        plan_extraction(lm, [["a", "b"]], batch_size=0)
    with pytest.raises(ValueError, match="attention='uniform' runs no forward pass"):
        plan_extraction(lm, [["a", "b"]], attention="uniform", mixing=("alti",))
