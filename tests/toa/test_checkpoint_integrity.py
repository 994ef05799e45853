"""Every training checkpoint records the SHA-256 of its content and is checked when read back:
a damaged one (bytes flipped inside its largest tensor, or a tensor changed in the saved
object) or one without a hash is set aside with a warning and trained again, never resumed as
good; the parallel runner does not take a damaged finished checkpoint for finished."""

from __future__ import annotations

import warnings
import zipfile

import pytest
import torch

from olas_utils.toa.heads import TOAModel
from olas_utils.toa.parallel import _finished
from olas_utils.toa.train import CHECKPOINT_HASH, CheckpointMismatchError, TrainConfig, checkpoint_intact, train_model

CFG = TrainConfig(epochs=2, batch_size=3, lr=1e-2, checkpoint_every=2)


def _train(tiny_adapter, examples, path, seed=0):
    torch.manual_seed(seed)
    m = TOAModel(tiny_adapter, "token", 3)
    info = train_model(m, examples, CFG, checkpoint=path, progress=False)
    return m, info


def _flip_in_largest_tensor(path, n=64):
    """Flip ``n`` bytes in the middle of the largest tensor record of a ``torch.save`` zip file
    (in place, nothing else touched)."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    start = info.header_offset
    name_len = int.from_bytes(raw[start + 26 : start + 28], "little")
    extra_len = int.from_bytes(raw[start + 28 : start + 30], "little")
    data = start + 30 + name_len + extra_len
    mid = data + info.file_size // 2 - n // 2
    for i in range(mid, mid + n):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_a_checkpoint_records_its_content_hash(tiny_adapter, toa_examples, tmp_path):
    _train(tiny_adapter, toa_examples("token"), tmp_path / "c.pt")
    state = torch.load(tmp_path / "c.pt", weights_only=False)
    assert isinstance(state[CHECKPOINT_HASH], str) and len(state[CHECKPOINT_HASH]) == 64
    assert checkpoint_intact(state) and _finished(tmp_path / "c.pt")


def test_flipped_bytes_in_a_finished_checkpoint_are_not_resumed_as_good(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("token")
    path = tmp_path / "c.pt"
    good, _ = _train(tiny_adapter, ex, path)
    _flip_in_largest_tensor(path)
    assert not _finished(path)  # fit_many trains it again rather than skipping it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            again, info = _train(tiny_adapter, ex, path)
        except CheckpointMismatchError:  # refused (torch could not even read it) is fine too
            return
    msgs = [str(w.message) for w in caught]
    assert any("is damaged" in m and "trained again" in m for m in msgs), msgs
    assert info["resumed_from"] == 0 and (tmp_path / "c.pt.bad").exists()  # kept for inspection
    for k, v in again.state_dict().items():  # trained afresh: the weights of the first run, not the damaged ones
        assert torch.equal(v, good.state_dict()[k]), k
    assert checkpoint_intact(torch.load(path, weights_only=False))


def test_a_tensor_changed_in_the_saved_checkpoint_is_set_aside_and_retrained(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("token")
    path = tmp_path / "c.pt"
    good, _ = _train(tiny_adapter, ex, path)
    state = torch.load(path, weights_only=False)
    name = max(state["model"], key=lambda k: state["model"][k].numel())
    state["model"][name] = state["model"][name] + 1e28  # damaged, the recorded hash kept
    torch.save(state, path)
    with pytest.warns(UserWarning, match=r"c\.pt is damaged: its content differs from the SHA-256"):
        again, info = _train(tiny_adapter, ex, path)  # same seed: retraining gives the same weights
    assert info["resumed_from"] == 0
    for k, v in again.state_dict().items():
        assert torch.equal(v, good.state_dict()[k]), k
    _, info = _train(tiny_adapter, ex, path)  # the checkpoint written afresh resumes
    assert info["resumed_from"] == info["steps"]


def test_a_checkpoint_without_a_hash_is_trained_again_saying_why(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("token")
    path = tmp_path / "c.pt"
    _train(tiny_adapter, ex, path)
    state = torch.load(path, weights_only=False)
    del state[CHECKPOINT_HASH]
    torch.save(state, path)
    assert not _finished(path)
    with pytest.warns(UserWarning, match="records no content hash"):
        _, info = _train(tiny_adapter, ex, path)
    assert info["resumed_from"] == 0


def test_checkpoint_intact_on_odd_inputs():
    assert not checkpoint_intact(None) and not checkpoint_intact({"key": "x"})
    assert not checkpoint_intact({"key": "x", CHECKPOINT_HASH: "0" * 64})


def test_a_saved_toa_model_is_checked_against_its_recorded_hash(tiny_adapter, tmp_path):
    torch.manual_seed(0)
    TOAModel(tiny_adapter, "token", 3).save(tmp_path / "m.pt", source="toy")
    TOAModel.load(tmp_path / "m.pt")  # intact
    data = torch.load(tmp_path / "m.pt", weights_only=False)
    name = next(iter(data["state"]))
    data["state"][name] = data["state"][name] + 1.0
    torch.save(data, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="is damaged: its content differs"):
        TOAModel.load(tmp_path / "m.pt")
    with pytest.warns(UserWarning, match="read anyway"):
        TOAModel.load(tmp_path / "m.pt", verify=False)
    del data["content_sha256"]
    torch.save(data, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="records no content hash"):
        TOAModel.load(tmp_path / "m.pt")
