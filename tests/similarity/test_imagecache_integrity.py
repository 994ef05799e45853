"""No silent wrong answers from the image cache: sizes and checksums checked on open,
corrupt JSON named, ``overwrite=True`` recovers, read-only reuse, no ``.tmp`` left behind."""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest

from olas_utils.data.corpus import build_chunks
from olas_utils.similarity.imagecache import extract_to_cache, open_cache
from olas_utils.similarity.imagecache import folder as cache_folder


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


@pytest.fixture(scope="module")
def chunks():
    return build_chunks(n_chunks=12)


@pytest.fixture()
def built(tmp_path, bert, chunks):
    root = tmp_path / "c"
    extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False)
    return root


def _same(a, b):
    ca, cb = open_cache(a), open_cache(b)
    return all(np.array_equal(ca.images(k), cb.images(k)) for k in ca.keys)


@pytest.mark.parametrize("damage", ["truncate", "zero", "delete"])
def test_damaged_arrays_are_detected_and_overwrite_recovers(tmp_path, built, bert, chunks, damage):
    ref = tmp_path / "ref"
    shutil.copytree(built, ref)
    f = built / "rollout.npy"
    if damage == "truncate":
        with open(f, "r+b") as fh:
            fh.truncate(f.stat().st_size // 2)
    elif damage == "zero":
        a = np.load(f, mmap_mode="r+")
        a[:] = 0
        a.flush()
        del a
    else:
        f.unlink()
    with pytest.raises((ValueError, OSError), match="rollout.npy"):
        open_cache(built).images("rollout")
    with pytest.raises((ValueError, OSError), match="rollout.npy"):
        extract_to_cache(bert, chunks, cache_root=built, batch_size=4, progress=False)
    extract_to_cache(bert, chunks, cache_root=built, batch_size=4, progress=False, overwrite=True)
    assert _same(built, ref)


def test_damaged_array_of_an_incomplete_cache_is_refused_not_resumed(tmp_path, built, bert, chunks):
    root = tmp_path / "partial"

    def stop(done, total):
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False, on_batch=stop)
    with open(root / "ola_2.npy", "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(ValueError, match="ola_2.npy"):
        extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False)
    extract_to_cache(bert, chunks, cache_root=root, batch_size=4, progress=False, overwrite=True)
    assert _same(root, built)


@pytest.mark.parametrize("name", ["manifest.json", "progress.json"])
def test_corrupt_json_is_named_and_overwrite_recovers(tmp_path, built, bert, chunks, name):
    ref = tmp_path / "ref"
    shutil.copytree(built, ref)
    (built / name).write_text('{"format": 1, "ke', encoding="utf-8")
    with pytest.raises(ValueError, match=name):
        extract_to_cache(bert, chunks, cache_root=built, batch_size=4, progress=False)
    extract_to_cache(bert, chunks, cache_root=built, batch_size=4, progress=False, overwrite=True)
    assert _same(built, ref)


def test_complete_cache_on_a_read_only_filesystem_is_reused(built, bert, chunks, monkeypatch):
    real_open = os.open

    def ro_open(path, flags, *a, **k):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *a, **k)

    (built / ".lock").unlink()
    monkeypatch.setattr(cache_folder.os, "open", ro_open)
    c = extract_to_cache(bert, chunks, cache_root=built, batch_size=4, progress=False)
    assert c.complete and c.images("ola:1").shape[0] == len(chunks)
