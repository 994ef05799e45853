"""Cached, resumable OLA image extraction: formats, pre-processing, resume after an
exception and after SIGKILL (bit-identical), refusal of mismatched caches, write errors.

Tiny randomly initialised models (seeded) with real zoo tokenizers keep this fast; one
test uses the real minilm-l6."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from olas_utils.data.corpus import build_chunks, corpus_hash
from olas_utils.similarity.imagecache import (
    CacheBusyError,
    CachedImages,
    CacheMismatchError,
    extract_to_cache,
    key_filename,
    open_cache,
)
from olas_utils.similarity.images import to_image

KEYS = ["ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1"]


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


@pytest.fixture(scope="module")
def llama(tiny_lm):
    return tiny_lm("llama")


@pytest.fixture(scope="module")
def chunks():
    return build_chunks(n_chunks=20)


def _arrays(root):
    c = open_cache(root)
    return {k: np.array(c.images(k)) for k in c.keys}, np.array(c.lengths())


def _assert_identical(a, b):
    (ia, la), (ib, lb) = _arrays(a), _arrays(b)
    assert ia.keys() == ib.keys()
    for k in ia:
        assert np.array_equal(ia[k], ib[k]), k
    assert np.array_equal(la, lb)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, bert, chunks):
    """An uninterrupted run (tiny BERT, paper protocol, batch 4: 5 batches)."""
    root = tmp_path_factory.mktemp("ref") / "c"
    extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False)
    return root


def test_layout_manifest_and_images(reference, bert, chunks):
    from olas_utils.extract import extract_ola

    c = open_cache(reference)
    assert isinstance(c, CachedImages) and c.complete and c.done.all()
    assert c.keys == KEYS
    m = c.manifest
    assert m["model"] == "tiny-bert" and m["protocol"] == "paper" and m["level"] == "subword"
    assert m["weights_sha256"].startswith("state_dict:")
    assert m["corpus_sha256"] == corpus_hash(chunks) and m["n_chunks"] == 20
    assert m["orders"] == [1, 2, 3] and m["image_size"] == 50 and m["is_causal"] is False
    assert m["tokenizer"]["class"] and m["tokenizer"]["vocab_size"] == len(bert.tokenizer)
    assert m["tokenizer"]["special_tokens_added"] == ["[CLS]", "<text>", "[SEP]"]
    assert m["versions"]["olas"] and m["versions"]["torch"] == torch.__version__
    for f in ["manifest.json", "progress.json", "plan.json", "lengths.npy"] + [key_filename(k) for k in KEYS]:
        assert (reference / f).is_file(), f
    plan = json.loads((reference / "plan.json").read_text())
    assert sorted(i for b in plan for i in b) == list(range(20)) and len(plan) == 5
    # memory-mappable .npy, (n, S, S) float32
    raw = np.load(reference / "ola_2.npy", mmap_mode="r")
    assert isinstance(raw, np.memmap) and raw.shape == (20, 50, 50) and raw.dtype == np.float32
    im = c.images("ola:2")
    assert isinstance(im, np.memmap) and not im.flags.writeable
    assert c.stack(["ola:1", "rollout"]).shape == (20, 2, 50, 50)
    # images equal the documented pipeline: extract_ola (subword) -> to_image
    res = extract_ola(bert.model, bert.tokenizer, chunks[:3], orders=(1, 2, 3), layers=(0, -1), progress=False)
    for key in KEYS:
        for i in range(3):
            np.testing.assert_allclose(
                c.images(key)[i], to_image(res[key][i], causal=False, image_size=50).numpy(), atol=1e-6
            )
    lengths = c.lengths()
    assert all(lengths[i] == res["ola:1"][i].shape[0] for i in range(3))
    assert (lengths > 50).all()  # subword maps of 50 words are resized down
    with pytest.raises(KeyError, match="stored keys"):
        c.images("ola:4")


def test_to_image_preprocessing():
    torch.manual_seed(1)
    a = torch.softmax(torch.randn(7, 7), -1)
    a[:, 0] += 3.0  # a sink column
    img = to_image(a, causal=False, image_size=7)  # no resize
    assert torch.allclose(img.sum(1), torch.ones(7), atol=1e-6)
    assert (img[:, 0] == 0).all()  # the sink (each row's argmax) is removed
    c = torch.tril(torch.softmax(torch.randn(9, 9), -1))
    ci = to_image(c, causal=True, image_size=9)
    assert torch.equal(ci, ci.T)  # causal maps are symmetrised
    big = to_image(torch.softmax(torch.randn(64, 64), -1), causal=False, image_size=50)
    assert big.shape == (50, 50) and big.dtype == torch.float32
    # antialiased bilinear shrinking keeps the mean: rows sum to ~ S/T
    assert abs(float(big.sum(1).mean()) - 50 / 64) < 0.02
    with pytest.raises(ValueError):
        to_image(torch.zeros(3, 4), causal=False)


def test_word_protocol_causal(tmp_path, llama, chunks):
    c = extract_to_cache(
        llama,
        chunks[:6],
        cache_root=tmp_path / "w",
        protocol="word",
        orders=(1, 2),
        baselines=("rollout",),
        batch_size=3,
        progress=False,
    )
    assert c.keys == ["ola:1", "ola:2", "rollout"] and c.manifest["level"] == "word"
    assert c.manifest["is_causal"] is True
    assert (c.lengths() == 50).all()  # 50-word chunks: W = S, no resize
    for k in c.keys:
        im = np.asarray(c.images(k))
        assert np.array_equal(im, im.transpose(0, 2, 1)), k  # symmetrised
        assert np.isfinite(im).all() and (im >= 0).all()


def test_resume_after_exception_is_bit_identical(tmp_path, reference, bert, chunks):
    root = tmp_path / "c"

    class Stop(Exception):
        pass

    def stop_after_2(done, total):
        assert total == 5
        if done == 2:
            raise Stop

    with pytest.raises(Stop):
        extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False, on_batch=stop_after_2)
    c = open_cache(root)
    p = c.progress
    assert p["batches_done"] == 2 and not p["complete"] and not c.complete
    assert c.done.sum() == p["chunks_done"] == sum(len(b) for b in c.plan[:2])
    with pytest.raises(RuntimeError, match="incomplete"):
        c.images("ola:1")
    part = c.images("ola:1", allow_partial=True)
    assert (np.asarray(part)[~c.done] == 0).all()

    calls = []
    c2 = extract_to_cache(
        bert, chunks, cache_root=root, batch_size=4, progress=False, on_batch=lambda d, t: calls.append(d)
    )
    assert calls == [3, 4, 5]  # resumed after the 2 committed batches
    assert c2.complete
    _assert_identical(root, reference)


def test_complete_cache_is_reused_without_work(reference, bert, chunks, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("extract_ola must not run on a complete cache")

    monkeypatch.setattr("olas_utils.extract.extract_ola", boom)
    c = extract_to_cache(bert, chunks, cache_root=reference, batch_size=4, progress=False)
    assert c.complete


_CHILD = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {tests!r})
    from conftest import build_tiny_lm as tiny_lm
    from olas_utils.similarity.imagecache import write as cache
    from olas_utils.data.corpus import build_chunks
    mode, root = sys.argv[1], sys.argv[2]
    orig, calls = cache.to_image, [0]
    def patched(*a, **k):
        calls[0] += 1
        if mode == "self" and calls[0] == {kill_at}:  # mid-batch 3, rows already written
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "slow":
            time.sleep(0.01)
        return orig(*a, **k)
    cache.to_image = patched
    cache.extract_to_cache(tiny_lm("bert"), build_chunks(n_chunks=20), cache_root=root, batch_size=4, progress=False)
    print("finished")
""")


def _child(tmp_path, mode):
    script = tmp_path / "child.py"
    # batches of 4 chunks x 6 keys = 24 images per batch: call 60 is in batch 3
    script.write_text(_CHILD.format(tests=str(Path(__file__).resolve().parents[1]), kill_at=60))
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(tmp_path / "c")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_batch_then_resume_is_bit_identical(tmp_path, reference, bert, chunks):
    proc = _child(tmp_path, "self")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    root = tmp_path / "c"
    c = open_cache(root)
    assert c.progress["batches_done"] == 2  # batch 3 was half written, never committed
    # uncommitted rows of batch 3 were already in the memmaps when the process died
    third = c.plan[2]
    assert np.asarray(c.images("ola:1", allow_partial=True))[third[0]].any()
    extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False)  # lock released by the kill
    _assert_identical(root, reference)


def test_sigkill_from_outside_then_resume_is_bit_identical(tmp_path, reference, bert, chunks):
    proc = _child(tmp_path, "slow")
    progress = tmp_path / "c" / "progress.json"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads(progress.read_text())["batches_done"] >= 1:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    time.sleep(0.05)  # land somewhere inside a later batch
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]  # killed, not finished
    c = open_cache(tmp_path / "c")
    assert 1 <= c.progress["batches_done"] < 5 and not c.complete
    extract_to_cache(bert, chunks, cache_root=tmp_path / "c", batch_size=4, progress=False)
    _assert_identical(tmp_path / "c", reference)


def test_mismatched_settings_are_refused(tiny_lm, reference, bert, llama, chunks):
    cases = [
        (dict(image_size=32), {"image_size"}),
        (dict(protocol="word"), {"protocol", "level"}),
        (dict(orders=(1, 2)), {"orders", "keys"}),
        (dict(baselines=("rollout",)), {"keys"}),
        (dict(batch_size=5), {"batch_size", "plan_sha256"}),
        (dict(seed=1), {"seed"}),
    ]
    for kw, fields in cases:
        args = dict(cache_root=reference, batch_size=4, progress=False) | kw
        with pytest.raises(CacheMismatchError) as ei:
            extract_to_cache(bert, chunks, **args)
        assert fields <= set(ei.value.fields), (kw, ei.value.fields)
        msg = str(ei.value)
        assert all(f in msg for f in fields) and "overwrite=True" in msg and "cache_root" in msg
    with pytest.raises(CacheMismatchError) as ei:
        extract_to_cache(bert, chunks[::-1], cache_root=reference, batch_size=4, progress=False)
    assert "corpus_sha256" in ei.value.fields
    with pytest.raises(CacheMismatchError) as ei:
        extract_to_cache(llama, chunks, cache_root=reference, batch_size=4, progress=False)
    assert {"weights_sha256", "model", "tokenizer.class", "is_causal"} <= set(ei.value.fields)
    # modified weights (weights_sha256=None -> state-dict hash) are a different model
    import dataclasses

    other = dataclasses.replace(bert, model=tiny_lm("bert").model)
    with torch.no_grad():
        next(other.model.parameters()).add_(1e-3)
    with pytest.raises(CacheMismatchError) as ei:
        extract_to_cache(other, chunks, cache_root=reference, batch_size=4, progress=False)
    assert set(ei.value.fields) == {"weights_sha256"}
    assert open_cache(reference).complete  # untouched


def test_overwrite_rebuilds(tmp_path, bert, chunks):
    root = tmp_path / "c"
    extract_to_cache(
        bert, chunks[:4], cache_root=root, image_size=16, orders=(1,), baselines=(), batch_size=4, progress=False
    )
    c = extract_to_cache(
        bert,
        chunks[:4],
        cache_root=root,
        image_size=8,
        orders=(2,),
        baselines=("layer:0",),
        batch_size=4,
        progress=False,
        overwrite=True,
    )
    assert c.manifest["image_size"] == 8 and c.keys == ["ola:2", "layer:0"]
    assert c.images("ola:2").shape == (4, 8, 8)
    assert not (root / "ola_1.npy").exists()


def test_default_root_per_settings(tmp_path, bert, chunks, monkeypatch):
    monkeypatch.setenv("OLAS_CACHE_DIR", str(tmp_path))
    a = extract_to_cache(bert, chunks[:4], orders=(1,), baselines=(), batch_size=4, progress=False)
    b = extract_to_cache(bert, chunks[:4], orders=(1,), baselines=(), image_size=20, batch_size=4, progress=False)
    assert a.root.parent == tmp_path / "ola" / "tiny-bert" and a.root.name.startswith("paper-")
    assert a.root != b.root and a.root.parent == b.root.parent
    assert extract_to_cache(bert, chunks[:4], orders=(1,), baselines=(), batch_size=4, progress=False).root == a.root


def test_write_errors_name_the_path(tmp_path, bert, chunks, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np.lib.format, "open_memmap", full)
    with pytest.raises(OSError) as ei:
        extract_to_cache(bert, chunks[:4], cache_root=tmp_path / "c", batch_size=4, progress=False)
    assert ei.value.errno == errno.ENOSPC and "ola_1.npy" in str(ei.value) and str(tmp_path) in str(ei.value)
    monkeypatch.undo()

    real_replace = os.replace

    def deny(src, dst):
        if str(dst).endswith("progress.json") and 'batches_done": 1' in Path(src).read_text():
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", deny)
    with pytest.raises(PermissionError) as ei:
        extract_to_cache(bert, chunks[:8], cache_root=tmp_path / "d", batch_size=4, progress=False)
    assert "progress.json" in str(ei.value) and ei.value.errno == errno.EACCES
    monkeypatch.undo()
    c = extract_to_cache(bert, chunks[:8], cache_root=tmp_path / "d", batch_size=4, progress=False)
    assert c.complete and c.progress["batches_done"] == 2


def test_busy_foreign_and_bad_arguments(tmp_path, bert, chunks):
    import fcntl

    root = tmp_path / "c"
    root.mkdir()
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(CacheBusyError, match="another process"):
            extract_to_cache(bert, chunks[:4], cache_root=root, progress=False)
    finally:
        os.close(fd)
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        extract_to_cache(bert, chunks[:4], cache_root=tmp_path / "f", progress=False)
    assert (tmp_path / "f" / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="protocol"):
        extract_to_cache(bert, chunks[:4], cache_root=tmp_path / "x", protocol="pixels")
    with pytest.raises(ValueError, match="baseline"):
        extract_to_cache(bert, chunks[:4], cache_root=tmp_path / "x", baselines=("ola:2",))
    with pytest.raises(ValueError, match="order 4"):
        extract_to_cache(bert, chunks[:4], cache_root=tmp_path / "x", orders=(4,))
    with pytest.raises(ValueError, match="empty"):
        extract_to_cache(bert, [], cache_root=tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="not an OLAS image cache"):
        open_cache(tmp_path / "f")


@pytest.mark.real_model
def test_real_minilm(tmp_path, zoo_model, chunks):
    lm = zoo_model("minilm-l6")
    c = extract_to_cache(
        lm, chunks[:4], cache_root=tmp_path / "m", orders=(1, 2), baselines=("rollout",), batch_size=4, progress=False
    )
    assert c.manifest["weights_sha256"] == lm.weights_sha256 and c.manifest["num_layers"] == 6
    assert c.manifest["tokenizer"]["name_or_path"] == "minilm-l6"
    im = np.asarray(c.images("ola:1"))
    assert im.shape == (4, 50, 50) and np.isfinite(im).all() and (im >= 0).all()
    # different chunks give different images; the same chunk across keys is correlated
    assert not np.allclose(im[0], im[1])
