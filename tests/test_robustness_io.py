"""No silent wrong answers from files and arguments (issue 14): cache integrity (sizes and
checksums checked on open, corrupt JSON named, ``overwrite=True`` recovers, read-only
reuse, no ``.tmp`` left behind) and argument/CLI errors that name what to fix."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from test_cache import tiny

from olas_utils.data.corpus import build_chunks
from olas_utils.extract import OLAMaps, extract_ola
from olas_utils.similarity.imagecache import extract_to_cache, open_cache
from olas_utils.similarity.imagecache import folder as cache_folder
from olas_utils.ui.cli import main, read_sentences

SENTS = [["The", "cat", "sat", "."], ["A", "dog", "barked", "loudly", "."]]


@pytest.fixture(scope="module")
def bert():
    return tiny("bert")


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


# -- 3. cache integrity ---------------------------------------------------------------------------


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


def test_failed_save_leaves_no_tmp(tmp_path):
    maps = OLAMaps(
        maps={"ola:1": [torch.eye(2)]},
        tokens=[["a", "b"]],
        words=[["a", "b"]],
        word_ids=[torch.tensor([0, 1])],
        model_name="m",
        num_layers=1,
        is_causal=False,
        level="subword",
        capture_path="interface",
        dtype="float32",
    )
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(OSError, match="out"):
        maps.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not list(target.iterdir())


# -- 6. argument errors ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_tok(bert):
    return bert.model, bert.tokenizer


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"sentences": None}, "sentences"),
        ({"sentences": 5}, "sentences"),
        ({"orders": 2}, "orders"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"batch_size": "8"}, "batch_size"),
    ],
)
def test_bad_arguments_name_the_argument(model_tok, kwargs, match):
    m, tok = model_tok
    args = {"sentences": SENTS, **kwargs}
    with pytest.raises((TypeError, ValueError), match=match) as e:
        extract_ola(m, tok, args.pop("sentences"), progress=False, **args)
    assert "\n" not in str(e.value)


def test_maps_load_on_something_else_names_the_path(tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello\n")
    with pytest.raises(ValueError, match="notes.txt.*OLAMaps.save"):
        OLAMaps.load(txt)
    with pytest.raises((ValueError, OSError), match=str(tmp_path.name)):
        OLAMaps.load(tmp_path)


def _copy_model(tmp_path, name="minilm-l6"):
    from olas_utils import zoo

    src = zoo.prepare(name)
    dst = tmp_path / "model"
    dst.mkdir()
    for p in src.iterdir():
        if p.is_file() and p.name != "olas_prepared.json":
            (dst / p.name).symlink_to(p)
    return dst


def test_truncated_safetensors_names_the_file(tmp_path):
    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    w = dst / "model.safetensors"
    data = w.read_bytes()
    w.unlink()
    w.write_bytes(data[: len(data) // 3])
    with pytest.raises((OSError, ValueError), match="model.safetensors.*(truncated|damaged|corrupt)") as e:
        load_model(dst, device="cpu")
    assert "\n" not in str(e.value)


def test_folder_without_config_names_it(tmp_path):
    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    (dst / "config.json").unlink()
    with pytest.raises((OSError, ValueError), match="has no config.json") as e:
        load_model(dst, device="cpu")
    assert str(dst) in str(e.value) and "\n" not in str(e.value)


def test_latin1_and_directory_inputs(tmp_path):
    f = tmp_path / "latin.txt"
    f.write_bytes("fine line\nsecond\nun caf\xe9 cr\xe8me\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.txt.*line 3.*UTF-8"):
        read_sentences(f)
    with pytest.raises((ValueError, IsADirectoryError), match="is a directory"):
        read_sentences(tmp_path)


@pytest.mark.real_model
def test_cli_errors_give_1_based_line_numbers(tmp_path, capsys):
    f = tmp_path / "s.txt"
    long = " ".join(["word"] * 700)
    f.write_text("\nThe cat sat .\n\n" + long + "\n", encoding="utf-8")
    assert main(["extract", "-m", "minilm-l6", "-i", str(f), "-o", str(tmp_path / "o.pt"), "-q"]) == 1
    assert "line 4" in capsys.readouterr().err


@pytest.mark.real_model
def test_cli_output_directory_leaves_no_tmp(tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\n", encoding="utf-8")
    out = tmp_path / "outdir"
    out.mkdir()
    assert main(["extract", "-m", "minilm-l6", "-i", str(f), "-o", str(out), "-q"]) == 1
    assert "outdir" in capsys.readouterr().err
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


@pytest.mark.parametrize(
    "argv",
    [
        ["models", "--bogus"],
        ["extract", "-m", "minilm-l6", "-i", "x.txt", "-o", "o.pt", "--batch-size", "0"],
        ["extract", "-m", "minilm-l6", "-i", "x.txt", "-o", "o.pt", "--orders", "-1"],
        ["similarity", "-m", "a", "b", "-i", "x.txt", "--batch-size", "0"],
        ["reproduce", "--profile", "nope"],
        ["reproduce", "--only", "99"],
    ],
)
def test_bad_usage_exits_2_in_every_subcommand(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


@pytest.mark.parametrize("offline_env", [True, False])
def test_unknown_model_id_fails_fast_offline(tmp_path, offline_env):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    if offline_env:
        env["HF_HUB_OFFLINE"] = "1"
    (tmp_path / "s.txt").write_text("a b\n")
    t0 = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "olas_utils.ui.cli",
            "extract",
            "-m",
            "no-such-org/no-such-model",
            "-i",
            str(tmp_path / "s.txt"),
            "-o",
            str(tmp_path / "o.pt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 1 and "no-such-org/no-such-model" in r.stderr
    assert time.monotonic() - t0 < 20
