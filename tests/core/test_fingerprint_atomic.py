"""The core fingerprint and atomic-write helpers, against independent references: published
SHA-256 vectors, :mod:`hashlib` directly, JSON texts written by hand, and the file system."""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading

import pytest
import torch

from olas_utils.infra import atomic, fingerprint
from olas_utils.infra.atomic import save_atomic, write_atomic, write_bytes_atomic, write_json_atomic, write_text_atomic
from olas_utils.infra.fingerprint import (
    canonical_json,
    legacy_json,
    safe_name,
    seed_from,
    sha256_bytes,
    sha256_chunks,
    sha256_file,
    sha256_json,
    sha256_stream,
    sha256_text,
)

#: FIPS 180-2 / NIST test vectors.
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
TWO_BLOCKS = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"  # "abcdbcde...nopq"


# --- fingerprints -------------------------------------------------------------------------


def test_sha256_published_vectors():
    assert sha256_text("abc") == ABC
    assert sha256_bytes(b"abc") == ABC
    assert sha256_text("") == EMPTY
    assert sha256_text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") == TWO_BLOCKS


def test_sha256_of_text_is_utf8():
    assert sha256_text("é") == hashlib.sha256(b"\xc3\xa9").hexdigest()


def test_sha256_chunks_stream_and_file(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one 1 MiB read
    ref = hashlib.sha256(data).hexdigest()
    assert sha256_chunks([data[:5], b"", data[5:]]) == ref
    assert sha256_chunks([b"a", b"bc"]) == ABC
    out = io.BytesIO()
    assert sha256_stream(io.BytesIO(data), out) == ref
    assert out.getvalue() == data  # copied in the same pass
    (tmp_path / "f.bin").write_bytes(data)
    assert sha256_file(tmp_path / "f.bin") == ref
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "missing.bin")


def test_canonical_json_hand_case():
    obj = {"b": [1, 2.5, None, True], "a": {"z": "é", "y": "日本"}, "ä": "x"}
    expected = '{"a":{"y":"日本","z":"é"},"b":[1,2.5,null,true],"ä":"x"}'
    assert canonical_json(obj) == expected
    assert sha256_json(obj) == hashlib.sha256(expected.encode("utf-8")).hexdigest()
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1})
    with pytest.raises(TypeError):
        canonical_json({"a": {1, 2}})
    assert canonical_json({"a": (1, 2)}) == '{"a":[1,2]}'
    assert canonical_json({"p": object}, default=lambda o: "obj") == '{"p":"obj"}'


def test_legacy_json_is_json_dumps_default_text():
    obj = {"b": [1, "é"], "a": None}
    assert legacy_json(obj) == '{"a": null, "b": [1, "\\u00e9"]}'
    assert legacy_json(["é", "x"], ensure_ascii=False) == '["é", "x"]'
    assert legacy_json({"s": {3}}, default=list) == '{"s": [3]}'


def test_seed_from_reference_and_range():
    ref = int.from_bytes(hashlib.sha256(repr((0, "noise", 3)).encode()).digest()[:8], "little") >> 1
    assert seed_from(0, "noise", 3) == ref
    assert seed_from(0, "noise", 4) != ref
    assert 0 <= seed_from("x") < 2**63


def test_library_versions_and_safe_name():
    import transformers

    from olas_utils import __version__

    v = fingerprint.library_versions()
    assert v == {"olas": __version__, "torch": torch.__version__, "transformers": transformers.__version__}
    assert safe_name("Qwen/Qwen2.5-0.5B") == "Qwen_Qwen2.5-0.5B"
    assert safe_name("a b//c") == "a_b_c"
    assert safe_name("../..") == "model"
    assert safe_name("_x_") == "x"


# --- atomic writes ------------------------------------------------------------------------


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_writes_round_trip(tmp_path):
    assert write_bytes_atomic(tmp_path / "a" / "b.bin", b"\x00\x01") == tmp_path / "a" / "b.bin"
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"  # folder created
    write_text_atomic(tmp_path / "t.txt", "héllo\n")
    assert (tmp_path / "t.txt").read_bytes() == "héllo\n".encode("utf-8")
    write_json_atomic(tmp_path / "j.json", {"b": 1, "a": "é"}, indent=None)
    assert (tmp_path / "j.json").read_text(encoding="utf-8") == '{"a": "é", "b": 1}\n'
    write_json_atomic(tmp_path / "k.json", {"b": 1, "a": 2}, indent=None, sort_keys=False)
    assert (tmp_path / "k.json").read_text(encoding="utf-8") == '{"b": 1, "a": 2}\n'
    write_text_atomic(tmp_path / "t.txt", "new")
    assert (tmp_path / "t.txt").read_text() == "new"  # replaced
    assert _leftovers(tmp_path) == []


def test_failed_callback_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")

    def broken(fh):
        fh.write(b"half of the new cont")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_atomic(target, broken)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
    with pytest.raises(TypeError):
        write_json_atomic(target, {"a": {1}})
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_keyboard_interrupt_leaves_no_temporary(tmp_path):
    def interrupted(fh):
        fh.write(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "f.txt", interrupted)
    assert list(tmp_path.iterdir()) == []


def test_read_only_folder_keeps_the_old_file_and_names_the_path(tmp_path, monkeypatch):
    import errno

    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "f.json"
    target.write_text("old")
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root ignores the mode: refuse new files in the folder as the kernel would
        real_open = open

        def read_only_open(file, mode="r", *a, **k):
            if os.path.dirname(os.fspath(file)) == str(folder) and any(c in mode for c in "wax+"):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
            return real_open(file, mode, *a, **k)

        monkeypatch.setattr(atomic, "open", read_only_open, raising=False)
    try:
        with pytest.raises(PermissionError) as ei:
            write_json_atomic(target, {"a": 1}, what="marker file")
        assert str(target) in str(ei.value) and "marker file" in str(ei.value)
        assert ei.value.errno == errno.EACCES
        assert target.read_text() == "old"
        assert sorted(p.name for p in folder.iterdir()) == ["f.json"]
    finally:
        folder.chmod(0o755)


def test_oserror_in_the_callback_names_the_path(tmp_path):
    import errno

    def full(fh):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as ei:
        write_atomic(tmp_path / "ck.pt", full, what="training checkpoint")
    assert ei.value.errno == errno.ENOSPC
    assert str(tmp_path / "ck.pt") in str(ei.value) and "training checkpoint" in str(ei.value)
    assert list(tmp_path.iterdir()) == []


def test_fsync_is_called_on_the_file_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", os.fstat(fd).st_size))
        real_fsync(fd)

    def replace(a, b):
        calls.append(("replace", os.path.basename(b)))
        real_replace(a, b)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    write_bytes_atomic(tmp_path / "f.bin", b"12345")
    assert calls[0] == ("fsync", 5)  # the file, with all its bytes, before it is renamed
    assert calls[1] == ("replace", "f.bin")


def test_two_writes_in_flight_use_different_temporary_names(tmp_path):
    target = tmp_path / "same.txt"
    seen: list[str] = []
    both_open = threading.Barrier(2, timeout=10)

    def writer(text):
        def write(fh):
            seen.append(os.path.basename(fh.name))
            both_open.wait()  # both temporary files exist at once
            fh.write(text.encode())

        write_atomic(target, write)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 2 and seen[0] != seen[1]
    assert all(name != "same.txt" and name.endswith(".tmp") for name in seen)
    assert target.read_text() in ("first", "second")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.txt"]


def test_long_names_still_get_a_temporary_file(tmp_path):
    name = "x" * 240 + ".pt"
    write_bytes_atomic(tmp_path / name, b"ok")
    assert (tmp_path / name).read_bytes() == b"ok"


def test_save_atomic_round_trips_a_tensor_dict(tmp_path):
    obj = {
        "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "b": torch.tensor([1, -2], dtype=torch.int64),
        "meta": {"name": "é"},
    }
    path = save_atomic(obj, tmp_path / "sub" / "ck.pt")
    back = torch.load(path, weights_only=False)
    assert set(back) == {"w", "b", "meta"} and back["meta"] == {"name": "é"}
    assert torch.equal(back["w"], obj["w"]) and back["w"].dtype == torch.float32
    assert torch.equal(back["b"], obj["b"]) and back["b"].dtype == torch.int64
    assert _leftovers(tmp_path / "sub") == []


def test_json_written_by_write_json_atomic_parses(tmp_path):
    write_json_atomic(tmp_path / "m.json", {"sentences": ["a", "é"]})
    assert json.loads((tmp_path / "m.json").read_text(encoding="utf-8")) == {"sentences": ["a", "é"]}
