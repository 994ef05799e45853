"""Task maps stored per sentence: the same sentences of two tasks (or two orders of one
list) are extracted once, and a damaged shard is set aside and extracted again."""

from __future__ import annotations

import pytest
import torch
from _support.tasks import subset

#: real zoo models or their tokenizers: not in `make test-fast`
pytestmark = pytest.mark.models


def test_the_same_sentences_of_two_tasks_share_one_extraction(tmp_path):
    from dataclasses import replace

    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps
    from olas_utils.vocabulary import Control

    ewt = load_task("dependency", "test", n=5, max_words=12, min_words=3, seed=0)
    other = replace(ewt, task="ner-uner", labels=[["O"] * len(w) for w in ewt.words], heads=None)
    calls = []

    class Pool(taskmaps.ModelPool):
        def get(self, name, control=Control.TRAINED):
            calls.append(name)
            return super().get(name, control)

    pool = Pool(seed=0)
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, orders=(1,), cache_dir=tmp_path, progress=False)
    b = taskmaps.task_maps(pool, "minilm-l6", other, orders=(1,), cache_dir=tmp_path, progress=False)
    assert calls == ["minilm-l6"] and len(list((tmp_path / "taskmaps").rglob("*.pt"))) == 1
    torch.testing.assert_close(a["ola:1"][0], b["ola:1"][0], rtol=0, atol=0)
    u = taskmaps.task_maps(
        pool, "minilm-l6", ewt, control="uniform", orders=(1,), cache_dir=tmp_path, progress=False
    ).to_words()
    for m, ws in zip(u["ola:1"], ewt.words):  # tokenizer-only at word level: exactly 1 everywhere
        assert torch.equal(m, torch.ones(len(ws), len(ws), dtype=m.dtype))


def test_uner_sentences_already_extracted_for_ewt_are_not_extracted_again(tmp_path, monkeypatch):
    from olas_utils import extract
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=6, max_words=12, min_words=3, seed=0)
    uner = load_task("ner-uner", "test", min_words=1)
    where = {tuple(w): i for i, w in enumerate(uner.words)}
    shared = [where[tuple(w)] for w in ewt.words[:4] if tuple(w) in where]
    fresh = [
        i
        for i in range(len(uner))
        if len(uner.words[i]) <= 12 and tuple(uner.words[i]) not in {tuple(w) for w in ewt.words}
    ][:2]
    assert len(shared) == 4 and len(fresh) == 2
    mixed = subset(uner, [fresh[0], shared[2], shared[0], fresh[1], shared[3], shared[1]])  # UNER's own order
    seen = []
    real = extract.extract_ola
    monkeypatch.setattr(
        extract,
        "extract_ola",
        lambda m, t=None, sentences=None, **kw: seen.append(list(sentences)) or real(m, t, sentences, **kw),
    )
    pool = taskmaps.ModelPool(seed=0)
    kw = {"orders": (1,), "rollout": False, "cache_dir": tmp_path, "progress": False}
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    b = taskmaps.task_maps(pool, "minilm-l6", mixed, **kw)
    assert seen[1] == [mixed.words[0], mixed.words[3]]  # only the two sentences EWT did not have
    assert b.words == mixed.words and taskmaps.task_maps(pool, "minilm-l6", mixed, **kw).words == mixed.words
    assert len(seen) == 2  # the third call extracted nothing
    direct = real(
        pool.get("minilm-l6").model,
        pool.get("minilm-l6").tokenizer,
        mixed.words,
        orders=(1,),
        rollout=False,
        layers=(),
        progress=False,
    )
    for got, want in zip(b["ola:1"], direct["ola:1"]):  # the stored maps are those of a direct extraction
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert [t for t in b.tokens] == direct.tokens
    for i, j in ((1, 2), (2, 0)):  # mixed[1] = ewt[2], mixed[2] = ewt[0]: the same tensors
        assert torch.equal(b["ola:1"][i], a["ola:1"][j])


def test_a_damaged_shard_is_set_aside_and_its_sentences_extracted_again(tmp_path):
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=3, max_words=10, min_words=3, seed=0)
    pool = taskmaps.ModelPool(seed=0)
    kw = {"orders": (1,), "rollout": False, "cache_dir": tmp_path, "progress": False}
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    (shard,) = (tmp_path / "taskmaps").rglob("*.pt")
    shard.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match="cannot be read"):
        b = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    for x, y in zip(a["ola:1"], b["ola:1"]):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert len(list(shard.parent.glob("*.json.bad"))) == 1 and len(list(shard.parent.glob("*.json"))) == 1
