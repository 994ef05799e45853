"""An ``OLAMaps`` file is read back only as it was written: a flipped byte inside a tensor, an
edited ``is_causal`` or word list, or a file without a content hash (older code) is refused
with a ValueError naming the file. References: the untouched file, ``torch.load`` directly and
the documented hash computed with :mod:`hashlib` by hand."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from olas_utils.maps import OLAMaps


def _maps(**kw) -> OLAMaps:
    g = torch.Generator().manual_seed(0)
    base = dict(
        maps={
            "ola:1": [torch.rand(5, 5, generator=g) + 1.0, torch.rand(3, 3, generator=g) + 1.0],
            "rollout": [torch.rand(5, 5, generator=g) + 1.0, torch.rand(3, 3, generator=g) + 1.0],
        },
        tokens=[["[CLS]", "the", "cat", "sat", "[SEP]"], ["[CLS]", "hi", "[SEP]"]],
        words=[["the", "cat", "sat"], ["hi"]],
        word_ids=[torch.tensor([-1, 0, 1, 2, -1]), torch.tensor([-1, 0, -1])],
        model_name="some-model",
        num_layers=2,
        is_causal=False,
        level="subword",
        capture_path="interface",
        dtype="float32",
    )
    base.update(kw)
    return OLAMaps(**base)


def _assert_equal(a: OLAMaps, b: OLAMaps) -> None:
    assert a.words == b.words and a.tokens == b.tokens and a.is_causal == b.is_causal
    assert a.model_name == b.model_name and a.keys() == b.keys()
    for k in a.keys():
        for x, y in zip(a[k], b[k]):
            assert torch.equal(x, y)


def test_round_trip_is_exact(tmp_path):
    m = _maps()
    p = m.save(tmp_path / "maps.pt")
    _assert_equal(OLAMaps.load(p), m)
    assert "content_sha256" in torch.load(p, weights_only=True)


def test_content_hash_is_the_documented_sha256(tmp_path):
    """Recompute the format by hand: canonical JSON of the metadata (tensors described by dtype
    and shape), a newline, then every tensor's bytes (maps and special by sorted name, then
    word ids)."""
    m = _maps(windows=(None, 4))
    p = m.save(tmp_path / "maps.pt")
    data = torch.load(p, weights_only=True)

    def desc(t):
        return [str(t.dtype).removeprefix("torch."), list(t.shape)]

    meta = {k: v for k, v in data.items() if k not in ("maps", "special", "word_ids", "content_sha256")}
    meta["windows"] = list(meta["windows"])
    meta["maps"] = {k: [desc(t) for t in v] for k, v in data["maps"].items()}
    meta["special"] = {k: [desc(t) for t in v] for k, v in data["special"].items()}
    meta["word_ids"] = [desc(t) for t in data["word_ids"]]
    h = hashlib.sha256()
    h.update(json.dumps(meta, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    for k in sorted(data["maps"]):
        for t in data["maps"][k]:
            h.update(t.contiguous().numpy().tobytes())
    for t in data["word_ids"]:
        h.update(t.contiguous().numpy().tobytes())
    assert data["content_sha256"] == h.hexdigest() == m.content_sha256()


def test_a_flipped_byte_inside_a_tensor_is_refused(tmp_path):
    m = _maps()
    p = m.save(tmp_path / "maps.pt")
    raw = bytearray(p.read_bytes())
    target = m["ola:1"][0].contiguous().numpy().tobytes()
    at = raw.find(target)
    assert at > 0 and raw.find(target, at + 1) == -1  # the tensor's bytes are stored as they are
    raw[at + 4 * 7 + 3] ^= 0x40  # the exponent byte of entry (1, 2)
    p.write_bytes(bytes(raw))
    # the damage is real and silent for torch: the file loads, one value changed
    damaged = torch.load(p, weights_only=True)["maps"]["ola:1"][0]
    assert int((damaged != m["ola:1"][0]).sum()) == 1
    with pytest.raises(ValueError, match="maps.pt") as ei:
        OLAMaps.load(p)
    msg = str(ei.value)
    assert "SHA-256" in msg and ("extract" in msg or "delete" in msg)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(is_causal=not d["is_causal"]),
        lambda d: d["words"][0].__setitem__(1, "dog"),
        lambda d: d.update(model_name="another-model"),
        lambda d: d["tokens"][1].reverse(),
    ],
    ids=["is_causal", "words", "model_name", "tokens"],
)
def test_edited_metadata_is_refused(tmp_path, edit):
    p = _maps().save(tmp_path / "maps.pt")
    data = torch.load(p, weights_only=True)
    edit(data)
    torch.save(data, p)
    with pytest.raises(ValueError, match="maps.pt"):
        OLAMaps.load(p)


def test_a_file_without_content_hash_is_refused_with_the_fix(tmp_path):
    import dataclasses

    m = _maps()
    p = tmp_path / "old.pt"
    torch.save(dataclasses.asdict(m), p)  # what OLAMaps.save wrote before content hashes
    with pytest.raises(ValueError, match="old.pt") as ei:
        OLAMaps.load(p)
    assert "extract" in str(ei.value) and "verify=False" in str(ei.value)
    with pytest.warns(UserWarning, match="old.pt"):
        _assert_equal(OLAMaps.load(p, verify=False), m)


def test_integrity_error_is_a_value_error_with_the_path(tmp_path):
    from olas_utils.maps import MapsIntegrityError

    p = _maps().save(tmp_path / "maps.pt")
    data = torch.load(p, weights_only=True)
    data["content_sha256"] = "0" * 64
    torch.save(data, p)
    with pytest.raises(MapsIntegrityError) as ei:
        OLAMaps.load(p)
    assert isinstance(ei.value, ValueError) and ei.value.path == p
    assert ei.value.expected == "0" * 64 and ei.value.actual == _maps().content_sha256()
