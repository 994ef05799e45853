"""Sharded extraction: `accelerate launch` with 2 CPU processes equals a single-process run
exactly; merging is deterministic and refuses incomplete shards."""

import os
import subprocess
import sys

import numpy as np
import pytest

from olas_utils.data.corpus import build_chunks
from olas_utils.similarity.imagecache import extract_to_cache, merge_shards, open_cache, shard_root

N_CHUNKS = 24
SETTINGS = dict(orders=[1, 2], baselines=["rollout"], protocol="paper", image_size=16, batch_size=4, seed=0)


def one_thread_env():
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", OLAS_DEVICE="cpu")
    return env


@pytest.mark.real_model
def test_two_cpu_processes_equal_single_process(tmp_path):
    merged_root = tmp_path / "merged"
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "29517",
        "-m",
        "olas_utils.similarity.distributed",
        "--model",
        "minilm-l6",
        "--n-chunks",
        str(N_CHUNKS),
        "--orders",
        "1",
        "2",
        "--baselines",
        "rollout",
        "--image-size",
        "16",
        "--batch-size",
        "4",
        "--cache-root",
        str(merged_root),
        "-q",
    ]
    r = subprocess.run(cmd, env=one_thread_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    merged = open_cache(merged_root)
    assert merged.complete and merged.progress["merged_from"] == 2
    assert not shard_root(merged_root, 0, 2).exists()  # shards removed after the merge

    # reference: one process, one thread (thread count can change float bits)
    code = (
        "import sys, torch; torch.set_num_threads(1);"
        "from olas_utils.similarity.imagecache import extract_to_cache; from olas_utils.data.corpus import build_chunks;"
        f"extract_to_cache('minilm-l6', build_chunks(n_chunks={N_CHUNKS}, seed=0), cache_root=sys.argv[1],"
        " orders=[1, 2], baselines=['rollout'], protocol='paper', image_size=16, batch_size=4, seed=0, progress=False)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "single")],
        env=one_thread_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    single = open_cache(tmp_path / "single")
    assert {k: v for k, v in single.manifest.items()} == merged.manifest
    for key in merged.keys:
        a, b = np.asarray(merged.images(key)), np.asarray(single.images(key))
        assert a.any() and np.array_equal(a, b), key
    assert np.array_equal(merged.lengths(), single.lengths())
    assert merged.plan == single.plan


@pytest.mark.real_model
def test_merge_refuses_missing_shard_and_is_idempotent(tmp_path, zoo_model):
    chunks = build_chunks(n_chunks=8, seed=0)
    lm = zoo_model("minilm-l6")
    root = tmp_path / "c"
    s0 = extract_to_cache(lm, chunks, cache_root=root, shard=(0, 2), progress=False, **SETTINGS)
    assert s0.root == shard_root(root, 0, 2) and s0.manifest["shard"] == [0, 2]
    with pytest.raises(RuntimeError, match="shard 1 of 2"):
        merge_shards(s0.root)
    extract_to_cache(lm, chunks, cache_root=root, shard=(1, 2), progress=False, **SETTINGS)
    merged = merge_shards(s0.root)
    again = merge_shards(s0.root)
    for key in merged.keys:
        assert np.array_equal(np.asarray(merged.images(key)), np.asarray(again.images(key)))
        # every row filled by exactly one shard
        assert (np.abs(np.asarray(merged.images(key))).reshape(8, -1).sum(1) > 0).all()
    with pytest.raises(ValueError, match="not a shard"):
        merge_shards(root)
    with pytest.raises(ValueError, match="outside"):
        extract_to_cache(lm, chunks, cache_root=root, shard=(2, 2), progress=False, **SETTINGS)
