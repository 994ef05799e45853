"""The ``olas`` command line: help, exit codes, a real extraction."""

import subprocess
import sys

import pytest
import torch

from olas_utils.extract import OLAMaps
from olas_utils.ui.cli import main, read_sentences


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "olas_utils.ui.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_help_lists_subcommands():
    r = run("--help")
    assert r.returncode == 0
    for cmd in ("models", "extract", "reproduce"):
        assert cmd in r.stdout


def test_bad_usage_exits_2():
    assert run("extract").returncode == 2


def test_missing_input_is_a_clear_error_with_exit_1(tmp_path, capsys):
    code = main(["extract", "-m", "minilm-l6", "-i", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o.pt")])
    assert code == 1
    assert "nope.txt does not exist" in capsys.readouterr().err


def test_read_sentences(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\n\n  A  dog  \n", encoding="utf-8")
    assert read_sentences(f) == [["The", "cat", "sat", "."], ["A", "dog"]]
    (tmp_path / "e.txt").write_text("\n \n")
    with pytest.raises(ValueError, match="no sentence"):
        read_sentences(tmp_path / "e.txt")


@pytest.mark.real_model
def test_extract_writes_loadable_maps(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat on the mat .\nHello world\n", encoding="utf-8")
    out = tmp_path / "maps.pt"
    r = run("extract", "-m", "minilm-l6", "-i", str(f), "-o", str(out), "--orders", "1", "2", "--level", "word", "-q")
    assert r.returncode == 0, r.stderr
    maps = OLAMaps.load(out)
    assert maps.level == "word" and maps.keys() == ["ola:1", "ola:2", "rollout", "layer:0", "layer:-1"]
    assert maps["ola:2"][0].shape == (7, 7) and maps["ola:2"][1].shape == (2, 2)
    assert torch.isfinite(maps["ola:1"][0]).all()


@pytest.mark.real_model
def test_extract_truncation_option(tmp_path, capsys):
    f = tmp_path / "long.txt"
    words = ("the quick brown fox jumps over the lazy dog .".split()) * 70  # 700 words, > 512 tokens
    f.write_text("Short one .\n" + " ".join(words) + "\n", encoding="utf-8")
    out = tmp_path / "maps.pt"
    args = ["extract", "-m", "minilm-l6", "-i", str(f), "-o", str(out), "--orders", "1", "--no-rollout", "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "line 2 of" in err and "(sentence 1) has" in err and "maximum of 512" in err and "truncation='warn'" in err
    with pytest.warns(UserWarning, match="sentence 1: .* words, .* tokens cut"):
        assert main(args + ["--truncation", "warn"]) == 0
    maps = OLAMaps.load(out)
    assert maps.words[0] == ["Short", "one", "."] and maps.words[1] == words[: len(maps.words[1])]
    assert 400 < len(maps.words[1]) < 700 and len(maps.tokens[1]) <= 512


@pytest.mark.real_model
def test_extract_mixing_keys_and_npz_beside_pt(tmp_path):
    import numpy as np

    f = tmp_path / "s.txt"
    f.write_text("The cat sat on the mat .\nHello world\n", encoding="utf-8")
    out = tmp_path / "maps.pt"
    r = run(
        "extract",
        "-m",
        "minilm-l6",
        "-i",
        str(f),
        "-o",
        str(out),
        "--orders",
        "1",
        "--mixing",
        "alti",
        "valuenorm:2",
        "--npz",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    maps = OLAMaps.load(out)
    assert maps.keys() == ["ola:1", "rollout", "layer:0", "layer:-1", "alti", "valuenorm:2"]
    alti = maps["alti"][0]
    assert torch.allclose(alti.sum(-1), torch.ones(len(alti)), atol=1e-4)  # row-stochastic contributions
    with np.load(tmp_path / "maps.npz", allow_pickle=False) as z:
        assert set(maps.keys()) <= set(z.files)
        for key in maps.keys():
            for i, m in enumerate(maps[key]):
                n = m.shape[-1]
                np.testing.assert_array_equal(z[key][i, :n, :n], m.numpy())
                assert not z[key][i, n:].any() and not z[key][i, :, n:].any()
        assert z["mask"].sum(1).tolist() == [len(t) for t in maps.tokens]
        assert z["labels"][1, : len(maps.tokens[1])].tolist() == maps.tokens[1]
    assert "maps.npz" in r.stdout
    # an existing .npz is not overwritten without --overwrite (exit 2, before any model is loaded)
    run("extract", "-m", "minilm-l6", "-i", str(f), "-o", str(tmp_path / "y.pt"), "--orders", "1", "--npz", "-q")
    (tmp_path / "y.pt").unlink()
    r2 = run("extract", "-m", "minilm-l6", "-i", str(f), "-o", str(tmp_path / "y.pt"), "--npz", "-q")
    assert r2.returncode == 2 and "y.npz already exists" in r2.stderr


@pytest.mark.parametrize("key", ["rollout", "alti:x", "nope"])
def test_extract_refuses_a_bad_mixing_key_as_usage(tmp_path, key):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\n", encoding="utf-8")
    r = run("extract", "-m", "minilm-l6", "-i", str(f), "-o", str(tmp_path / "o.pt"), "--mixing", "alti", key)
    assert r.returncode == 2 and f"--mixing {key!r} is not a context-mixing key" in r.stderr, r.stderr
    assert not (tmp_path / "o.pt").exists()
