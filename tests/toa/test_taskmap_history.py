"""Task maps do not depend on the cache's history (issue 43, item 2): a sentence's bytes are the
same whether the cache was filled in one call or over several calls that each extracted other
sentences beside it. Reference: a fresh cache filled in one call; compared with ``torch.equal``
(bit for bit), on a real encoder and a real causal model."""

from __future__ import annotations

import pytest
import torch
from _support.tasks import subset

#: real zoo models: not in `make test-fast`
pytestmark = pytest.mark.models


@pytest.mark.parametrize("model", ["minilm-l6", "smollm2-135m"])
def test_maps_are_byte_identical_whatever_the_cache_held_before(tmp_path, model):
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "dev", n=10, max_words=14, min_words=3, seed=0)
    assert len({len(w) for w in ewt.words}) > 3  # sentences of several lengths: batches would pad them
    kw = {"orders": (1, 2), "rollout": True, "progress": False}
    pool = taskmaps.ModelPool(seed=0)
    one_call = taskmaps.task_maps(pool, model, ewt, cache_dir=tmp_path / "fresh", **kw)
    # another history: two earlier runs extracted odd-sized groups of these sentences (and a
    # sentence of another split beside them), the last call extracts only what is left
    other = load_task("dependency", "train", n=2, max_words=30, min_words=20, seed=0)
    taskmaps.task_maps(pool, model, subset(ewt, [7, 2, 9]), cache_dir=tmp_path / "grown", **kw)
    taskmaps.task_maps(pool, model, other, cache_dir=tmp_path / "grown", **kw)
    taskmaps.task_maps(pool, model, subset(ewt, [0, 5]), cache_dir=tmp_path / "grown", **kw)
    grown = taskmaps.task_maps(pool, model, ewt, cache_dir=tmp_path / "grown", **kw)
    assert len(list((tmp_path / "grown" / "taskmaps").rglob("*.pt"))) == 4  # the last call extracted the rest
    assert one_call.keys() == grown.keys() == ["ola:1", "ola:2", "rollout"]
    for key in one_call.keys():
        for i, (a, b) in enumerate(zip(one_call[key], grown[key], strict=True)):
            assert torch.equal(a, b), f"{model} {key} sentence {i}: bytes depend on the cache's history"


def test_the_cache_key_records_extraction_and_thread_count(monkeypatch):
    from olas_utils.toa import taskmaps
    from olas_utils.vocabulary import Control

    args = ("w" * 64, "minilm-l6", Control.TRAINED, 0, (1, 2), True)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    one = taskmaps.maps_key(*args)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    two = taskmaps.maps_key(*args)
    assert one != two  # maps made at another thread count are another folder, never reused
    monkeypatch.setattr(taskmaps, "EXTRACTION", "batches of 8")
    assert taskmaps.maps_key(*args) != two
