"""A task-map shard is used only if it holds what was written for this folder: a flipped byte
inside a tensor, a reordered sentence list, another folder's (model's) shard dropped in, a
maps file swapped between shards or a shard written before content hashes is set aside with
a warning naming the file, and its sentences are extracted again. References: the maps as
written (compared tensor by tensor) and the file system."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from olas_utils.maps import OLAMaps
from olas_utils.toa.mapshards import DamagedShardError, MapShards, sentence_id

WORDS = [["the", "cat", "sat"], ["a", "dog", "ran", "far"], ["hello"]]


def _maps(words, model="model-a", seed=0) -> OLAMaps:
    g = torch.Generator().manual_seed(seed)
    n = [len(w) + 2 for w in words]
    return OLAMaps(
        maps={"ola:1": [torch.rand(k, k, generator=g) + 1.0 for k in n]},
        tokens=[["[CLS]", *w, "[SEP]"] for w in words],
        words=[list(w) for w in words],
        word_ids=[torch.tensor([-1, *range(len(w)), -1]) for w in words],
        model_name=model,
        num_layers=2,
        is_causal=False,
        level="subword",
        capture_path="interface",
        dtype="float32",
    )


def _ids(words):
    return [sentence_id(w) for w in words]


def test_an_intact_shard_reads_back_exactly(tmp_path):
    shards = MapShards(tmp_path / "a", key="key-a")
    m = _maps(WORDS)
    shards.write(m, _ids(WORDS))
    got = shards.read(_ids(WORDS)[::-1])
    for x, y in zip(got["ola:1"], m["ola:1"][::-1]):
        assert torch.equal(x, y)


def test_a_flipped_byte_inside_a_shard_tensor_is_refused(tmp_path):
    shards = MapShards(tmp_path / "a", key="key-a")
    m = _maps(WORDS)
    name = shards.write(m, _ids(WORDS))
    pt = tmp_path / "a" / f"{name}.pt"
    raw = bytearray(pt.read_bytes())
    at = raw.find(m["ola:1"][1].numpy().tobytes())
    assert at > 0
    raw[at + 3] ^= 0x08
    pt.write_bytes(bytes(raw))
    assert not torch.equal(torch.load(pt, weights_only=True)["maps"]["ola:1"][1], m["ola:1"][1])
    with pytest.raises(DamagedShardError, match=f"{name}.pt") as ei:
        shards.read(_ids(WORDS))
    assert ei.value.name == name and isinstance(ei.value, ValueError)


def test_a_reordered_sentence_list_is_set_aside(tmp_path):
    shards = MapShards(tmp_path / "a", key="key-a")
    ids = _ids(WORDS)
    name = shards.write(_maps(WORDS), ids)
    lst = tmp_path / "a" / f"{name}.json"
    data = json.loads(lst.read_text())
    data["sentences"] = [ids[2], ids[0], ids[1]]
    lst.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match=f"{name}.json"):
        index = shards.index()
    assert index == {}  # its sentences count as missing: extracted again
    assert (tmp_path / "a" / f"{name}.json.bad").exists() and not lst.exists()
    with pytest.raises(KeyError):
        shards.read(ids)


def test_a_shard_of_another_model_dropped_into_the_folder_is_set_aside(tmp_path):
    ours, theirs = MapShards(tmp_path / "a", key="key-a"), MapShards(tmp_path / "b", key="key-b")
    ids = _ids(WORDS)
    name = theirs.write(_maps(WORDS, model="model-b", seed=1), ids)
    (tmp_path / "a").mkdir()
    for ext in (".pt", ".json"):
        shutil.copy2(tmp_path / "b" / f"{name}{ext}", tmp_path / "a" / f"{name}{ext}")
    with pytest.warns(UserWarning, match=f"{name}.json"):
        assert ours.index() == {}
    with pytest.raises(KeyError):
        ours.read(ids)
    # the other folder's own shard still reads
    assert theirs.read(ids).model_name == "model-b"


def test_a_maps_file_swapped_between_shards_is_refused(tmp_path):
    shards = MapShards(tmp_path / "a", key="key-a")
    first, second = WORDS[:2], WORDS[2:]
    a = shards.write(_maps(first), _ids(first))
    b = shards.write(_maps(second, seed=3), _ids(second))
    shutil.copy2(tmp_path / "a" / f"{a}.pt", tmp_path / "a" / f"{b}.pt")
    with pytest.raises(DamagedShardError, match=f"{b}.pt"):
        shards.read(_ids(second))


def test_a_shard_written_before_content_hashes_is_set_aside(tmp_path):
    import dataclasses

    shards = MapShards(tmp_path / "a", key="key-a")
    ids = _ids(WORDS)
    name = shards.write(_maps(WORDS), ids)
    torch.save(dataclasses.asdict(_maps(WORDS)), tmp_path / "a" / f"{name}.pt")  # the old format
    (tmp_path / "a" / f"{name}.json").write_text(json.dumps({"sentences": ids}))
    with pytest.warns(UserWarning, match=f"{name}.json"):
        assert shards.index() == {}


@pytest.mark.real_model
def test_task_maps_extracts_a_damaged_shard_again(tmp_path):
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=3, max_words=10, min_words=3, seed=0)
    pool = taskmaps.ModelPool(seed=0)
    kw = {"orders": (1,), "rollout": False, "cache_dir": tmp_path, "progress": False}
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    (shard,) = (tmp_path / "taskmaps").rglob("*.pt")
    raw = bytearray(shard.read_bytes())
    at = raw.find(a["ola:1"][0].contiguous().numpy().tobytes())
    assert at > 0
    raw[at + 7] ^= 0x20
    shard.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match=shard.name):
        b = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    for x, y in zip(a["ola:1"], b["ola:1"]):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert len(list(shard.parent.glob("*.json.bad"))) == 1
