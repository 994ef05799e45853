"""A full disk is an error, not a crash: the memory-mapped image cache checks the free space
before it creates its arrays and allocates their blocks (a page written into a sparse file on a
full disk is a SIGBUS), and every writer that runs out of space (``OLAMaps.save``, training
checkpoints, torch's zip writer swallowing the cause) raises ``OSError(ENOSPC)`` saying "no
space left on device: <path>, needs about N MB". The full disk is simulated: a patched
``shutil.disk_usage``, a write or an allocation that raises ENOSPC."""

from __future__ import annotations

import errno
import os
import shutil
from collections import namedtuple

import pytest
import torch

from olas_utils.infra import atomic
from olas_utils.infra.atomic import check_free_space, reserve_file, save_atomic, write_atomic

Usage = namedtuple("Usage", "total used free")


@pytest.fixture
def disk_full(monkeypatch):
    """``shutil.disk_usage`` reports 1000 bytes free everywhere."""
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**9, 10**9 - 1000, 1000))


def _no_space(e, path, mb=None):
    assert e.errno == errno.ENOSPC, e
    msg = str(e)
    assert f"no space left on device: {path}" in msg, msg
    if mb is not None:
        assert f"needs about {mb} MB" in msg, msg


def test_check_free_space_refuses_what_cannot_fit(tmp_path, disk_full):
    check_free_space(tmp_path / "a", 500)
    with pytest.raises(OSError) as e:
        check_free_space(tmp_path / "sub" / "a", 12_300_000, what="image cache")
    _no_space(e.value, tmp_path / "sub" / "a", 13)


def test_image_cache_refuses_a_full_disk_before_creating_its_arrays(tmp_path, tiny_lm, disk_full, monkeypatch):
    from olas_utils.data.corpus import build_chunks
    from olas_utils.similarity.imagecache import extract_to_cache

    def no_extraction(*a, **k):
        raise AssertionError("extraction started")

    monkeypatch.setattr("olas_utils.extract.extract_ola", no_extraction)
    root = tmp_path / "cache"
    with pytest.raises(OSError) as e:
        extract_to_cache(tiny_lm("bert"), build_chunks(n_chunks=8), cache_root=root, batch_size=4, progress=False)
    assert e.value.errno == errno.ENOSPC and "no space left on device" in str(e.value)
    assert "needs about" in str(e.value) and str(root) in str(e.value)
    assert not list(root.rglob("*.npy"))  # no sparse array left to be written into later


def test_memory_mapped_arrays_are_allocated_or_refused(tmp_path, monkeypatch):
    f = tmp_path / "a.npy"
    with open(f, "wb") as fh:
        fh.truncate(5_000_000)  # sparse, as open_memmap makes it
    if not hasattr(os, "posix_fallocate"):
        pytest.skip("no posix_fallocate here")

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError) as e:
        reserve_file(f, what="image cache")
    _no_space(e.value, f)
    monkeypatch.undo()
    reserve_file(f)
    assert f.stat().st_blocks * 512 >= 5_000_000  # every block is there: no SIGBUS on a full disk


def test_olamaps_save_on_a_full_disk_says_so(tmp_path, disk_full):
    from olas_utils.maps import OLAMaps

    maps = OLAMaps(
        maps={"ola:1": [torch.rand(300, 300)]},
        tokens=[["a"]],
        words=[["a"]],
        word_ids=[torch.zeros(1, dtype=torch.long)],
        model_name="m",
        num_layers=1,
        is_causal=False,
        level="subword",
        capture_path="eager",
        dtype="float32",
    )
    with pytest.raises(OSError) as e:
        maps.save(tmp_path / "maps.pt")
    _no_space(e.value, tmp_path / "maps.pt")
    assert not list(tmp_path.iterdir())


def test_a_writer_that_runs_out_of_space_says_no_space_left(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(OSError) as e:
        save_atomic({"w": torch.zeros(1000)}, tmp_path / "ck.pt")
    _no_space(e.value, tmp_path / "ck.pt", 1)
    assert not list(tmp_path.iterdir())


def test_torchs_zip_writer_on_a_full_disk_is_reported_as_a_full_disk(tmp_path, monkeypatch):
    """torch turns a failed write into its own RuntimeError ("unexpected pos"), without the cause."""
    real_open = open

    class Full:
        def __init__(self, fh):
            self.fh, self.n = fh, 0

        def write(self, data):
            self.n += len(data)
            if self.n > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(atomic, "open", lambda *a, **k: Full(real_open(*a, **k)), raising=False)
    with pytest.raises(OSError) as e:
        save_atomic({"w": torch.rand(200_000)}, tmp_path / "ck.pt")
    _no_space(e.value, tmp_path / "ck.pt", 1)
    assert not [p for p in tmp_path.iterdir() if p.name != "ck.pt"]


def test_a_training_checkpoint_on_a_full_disk_says_so(tmp_path, tiny_adapter, toa_examples, disk_full):
    from olas_utils.toa.heads import TOAModel
    from olas_utils.toa.train import TrainConfig, train_model

    torch.manual_seed(0)
    with pytest.raises(OSError) as e:
        train_model(
            TOAModel(tiny_adapter, "token", 3),
            toa_examples("token", n=4),
            TrainConfig(epochs=1, checkpoint_every=1),
            checkpoint=tmp_path / "ck" / "run.pt",
            progress=False,
        )
    _no_space(e.value, tmp_path / "ck" / "run.pt")


def test_a_parent_that_is_a_file_is_named(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"f is a file, not a folder"):
        write_atomic(tmp_path / "f" / "maps.pt", lambda fh: fh.write(b"x"), what="OLA maps file")
