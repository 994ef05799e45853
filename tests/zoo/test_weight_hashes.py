"""A prepared model folder is used only while its files match the SHA-256s its marker records:
a zeroed KiB inside the weights (same size) is refused by ``load_model``; with the file's time
restored the fast check cannot see it (documented), so ``olas models`` / ``python -m
olas_utils.zoo list``, :func:`~olas_utils.zoo.folders.verify_folder` and the sanity check
hash every file. A folder prepared by older code (marker format 1, no per-file hashes) is
prepared again by ``python -m olas_utils.zoo prepare``, and refused when passed as a path.

Every test prepares minilm-l6 (an ``hf_folder`` model: a copy of its installed package, under
a second) into ``tmp_path``; the OLAS cache is never touched. References: :mod:`hashlib`
directly, ``os.stat`` and the untouched package files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from olas_utils import zoo
from olas_utils.infra import fingerprint
from olas_utils.zoo import DamagedFolderError, UnverifiedFolderError
from olas_utils.zoo import cli as zoo_cli
from olas_utils.zoo import folders as zoo_folders

pytestmark = pytest.mark.real_model

NAME = "minilm-l6"


@pytest.fixture
def cache(tmp_path):
    c = tmp_path / "cache"
    zoo.prepare(NAME, cache_dir=c)
    return c


def _weights(cache):
    return cache / "models" / NAME / "model.safetensors"


def _zero_a_kib(path, keep_time: bool) -> None:
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(st.st_size // 2)
        fh.write(b"\0" * 1024)
    if keep_time:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _only_this_model(monkeypatch):
    """The command line sees one model (so `list` hashes one, `prepare` prepares one)."""
    monkeypatch.setattr(zoo_cli, "REGISTRY", {NAME: zoo.REGISTRY[NAME]})
    monkeypatch.setattr(zoo_cli, "DEFAULT_MODELS", (NAME,))


def test_marker_records_every_file_with_its_hash_size_and_time(cache):
    folder = cache / "models" / NAME
    marker = json.loads((folder / zoo.MARKER_NAME).read_text())
    assert marker["format"] == zoo.MARKER_FORMAT == 2
    on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert sorted(marker["files"]) == [p for p in on_disk if p != zoo.MARKER_NAME]
    for rel, rec in marker["files"].items():
        st = (folder / rel).stat()
        assert rec == {"sha256": _sha(folder / rel), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    assert marker["files"]["model.safetensors"]["sha256"] == zoo.REGISTRY[NAME].sha256  # the pinned file


def test_a_zeroed_kib_in_the_weights_is_refused_by_load_model(cache):
    w = _weights(cache)
    _zero_a_kib(w, keep_time=False)
    assert _sha(w) != zoo.REGISTRY[NAME].sha256
    with pytest.raises(DamagedFolderError, match="model.safetensors") as ei:
        zoo.load_model(NAME, device="cpu", cache_dir=cache)
    err = ei.value
    assert err.path == str(w) and err.actual == _sha(w) and err.expected == zoo.REGISTRY[NAME].sha256
    assert f"prepare {NAME} --force" in str(err)
    # the same folder passed as a path is refused too
    with pytest.raises(DamagedFolderError, match="model.safetensors"):
        zoo.load_model(w.parent, device="cpu")
    # and preparing again with --force repairs it
    assert zoo.main(["--cache-dir", str(cache), "prepare", NAME, "--force"]) == 0
    assert _sha(w) == zoo.REGISTRY[NAME].sha256
    zoo.load_model(NAME, device="cpu", cache_dir=cache)


def test_damage_with_the_time_restored_is_found_by_the_full_checks(cache, monkeypatch, capsys):
    w = _weights(cache)
    _zero_a_kib(w, keep_time=True)
    assert _sha(w) != zoo.REGISTRY[NAME].sha256
    # the fast check reads nothing whose size and time are unchanged: it cannot see this (documented)
    lm = zoo.load_model(NAME, device="cpu", cache_dir=cache)
    # the full checks hash every file
    with pytest.raises(DamagedFolderError, match="model.safetensors"):
        zoo.verify_folder(w.parent)
    with pytest.raises(DamagedFolderError, match="model.safetensors"):
        zoo.sanity_check(lm)
    _only_this_model(monkeypatch)
    assert zoo.main(["--cache-dir", str(cache), "list"]) == 1
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith(NAME))
    assert "DAMAGED" in row and "NO" in row
    assert str(w) in out.err and "--force" in out.err
    # `olas models` is that table
    from olas_utils.ui.cli import main as olas_main

    monkeypatch.setenv("OLAS_CACHE_DIR", str(cache))
    assert olas_main(["models"]) == 1
    assert "DAMAGED" in capsys.readouterr().out


def test_intact_folder_passes_every_check_and_loads_without_reading_its_files(cache, monkeypatch, capsys):
    calls = []
    real = zoo_folders.sha256_file
    monkeypatch.setattr(zoo_folders, "sha256_file", lambda p: calls.append(p) or real(p))
    monkeypatch.setattr(fingerprint, "sha256_file", lambda p: calls.append(p) or real(p))  # the fast path's
    lm = zoo.load_model(NAME, device="cpu", cache_dir=cache)
    assert calls == []  # fast check: stat only
    assert zoo.sanity_check(lm).passed
    assert len(calls) == len(zoo.read_marker(_weights(cache).parent)["files"])  # full check: every file
    _only_this_model(monkeypatch)
    assert zoo.main(["--cache-dir", str(cache), "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(NAME))
    assert row.split()[2:5] == ["yes", "yes", "yes"]


def test_a_touched_but_intact_file_is_hashed_once_per_process(cache, monkeypatch):
    w = _weights(cache)
    os.utime(w, ns=(w.stat().st_atime_ns, w.stat().st_mtime_ns + 10**9))  # a copy without -p, say
    calls = []
    real = fingerprint.sha256_file  # the fast path hashes through fingerprint.sha256_file_once
    monkeypatch.setattr(fingerprint, "sha256_file", lambda p: calls.append(p) or real(p))
    zoo.load_model(NAME, device="cpu", cache_dir=cache)
    zoo.load_model(NAME, device="cpu", cache_dir=cache)
    assert calls == [str(w)]  # the fast path hashes through fingerprint.sha256_file_once


def test_a_missing_file_is_refused(cache):
    tok = cache / "models" / NAME / "tokenizer.json"
    tok.unlink()
    with pytest.raises(DamagedFolderError, match="tokenizer.json.*missing"):
        zoo.load_model(NAME, device="cpu", cache_dir=cache)


def _make_old(folder) -> None:
    """The marker the previous code wrote: format 1, no per-file hashes."""
    m = json.loads((folder / zoo.MARKER_NAME).read_text())
    del m["files"]
    m["format"] = 1
    (folder / zoo.MARKER_NAME).write_text(json.dumps(m, indent=2))


def test_a_folder_prepared_by_older_code_is_upgraded_by_prepare(cache, monkeypatch, capsys):
    folder = cache / "models" / NAME
    _make_old(folder)
    _zero_a_kib(folder / "model.safetensors", keep_time=True)  # unknowable without per-file hashes
    assert not zoo.is_prepared(NAME, cache)
    _only_this_model(monkeypatch)
    assert zoo.main(["--cache-dir", str(cache), "list", "--no-verify"]) == 1
    out = capsys.readouterr()
    assert "old marker" in out.out and f"prepare {NAME}" in out.err
    assert zoo.main(["--cache-dir", str(cache), "prepare"]) == 0  # what `make models` runs
    marker = zoo.read_marker(folder)
    assert marker["format"] == 2 and zoo.is_prepared(NAME, cache)
    assert marker["files"]["model.safetensors"]["sha256"] == _sha(folder / "model.safetensors")
    assert _sha(folder / "model.safetensors") == zoo.REGISTRY[NAME].sha256
    zoo.verify_folder(folder)
    assert zoo.load_model(NAME, device="cpu", cache_dir=cache).weights_sha256 == zoo.REGISTRY[NAME].sha256


def test_load_model_by_name_prepares_an_old_folder_again(cache):
    folder = cache / "models" / NAME
    _make_old(folder)
    lm = zoo.load_model(NAME, device="cpu", cache_dir=cache)
    assert zoo.read_marker(folder)["format"] == 2 and lm.weights_sha256 == zoo.REGISTRY[NAME].sha256


def test_an_old_folder_passed_as_a_path_is_refused_with_the_fix(cache, tmp_path):
    elsewhere = tmp_path / "my-copy"
    shutil.copytree(cache / "models" / NAME, elsewhere)
    _make_old(elsewhere)
    with pytest.raises(UnverifiedFolderError, match="my-copy") as ei:
        zoo.load_model(elsewhere, device="cpu")
    assert f"python -m olas_utils.zoo prepare {NAME}" in str(ei.value) and ei.value.path == str(elsewhere)
