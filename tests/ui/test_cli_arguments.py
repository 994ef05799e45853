"""No command-line argument is silently ignored or silently meaningless: ``--only`` without a
value, a UTF-8 byte-order mark in an input file, ``--pooling`` at subword level, an image
size without variance, and the Makefile's ``LAB_PORT``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from olas_utils.ui import cli, reproduce

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_notebook_runs(monkeypatch):
    """Running a notebook (into the committed results/ and figures/) fails the test."""
    calls = []

    def refuse(*a, **k):
        calls.append((a, k))
        raise AssertionError("a notebook would have run")

    monkeypatch.setattr(reproduce, "run_notebook", refuse)
    return calls


def test_olas_reproduce_only_without_a_value_is_a_usage_error(no_notebook_runs, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["reproduce", "--only"])
    assert e.value.code == 2 and "--only" in capsys.readouterr().err
    assert not no_notebook_runs


def test_python_m_reproduce_only_without_a_value_is_a_usage_error(no_notebook_runs, capsys):
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--only"])
    assert e.value.code == 2 and "--only" in capsys.readouterr().err
    assert not no_notebook_runs


def test_reproduce_with_an_empty_only_list_is_refused(no_notebook_runs):
    with pytest.raises(ValueError, match="only"):
        reproduce.reproduce("smoke", [])
    assert not no_notebook_runs


def test_read_sentences_strips_a_utf8_bom(tmp_path):
    f = tmp_path / "bom.txt"
    f.write_bytes("\ufeffThe cat sat .\nA dog ran .\n".encode("utf-8"))
    sents = cli.read_sentences(f)
    assert sents[0] == ["The", "cat", "sat", "."] and sents[1][0] == "A"


def test_read_sentences_bom_only_line_is_blank(tmp_path):
    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbf\nThe cat .\n")
    sents = cli.read_sentences(f)
    assert list(sents) == [["The", "cat", "."]] and sents.lines == [2]


@pytest.mark.parametrize("size", ["1"])
def test_similarity_pearson_size_without_variance_is_a_usage_error(size, capsys):
    argv = ["similarity", "-m", "minilm-l6", "mpnet-base", "--dataset", "ewt", "--metric", "pearson", "--size", size]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--size" in err and "pearson" in err.lower()


@pytest.mark.parametrize("cmd", ["extract", "similarity"])
def test_pooling_at_subword_level_is_a_usage_error(cmd, tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\nA dog ran .\n")
    if cmd == "extract":
        argv = ["extract", "-m", "minilm-l6", "-i", str(f), "-o", str(tmp_path / "m.pt"), "--pooling", "clark"]
    else:
        argv = ["similarity", "-m", "minilm-l6", "mpnet-base", "-i", str(f), "--pooling", "clark"]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--pooling" in err and "--level word" in err


def _lab_prerequisites() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^lab:(.*)$", text, re.M)
    assert m, "the Makefile has no lab target"
    return m.group(1).split()


def test_make_lab_checks_lab_port_before_anything_else():
    assert _lab_prerequisites()[:1] == ["check-lab-port"]


@pytest.mark.parametrize("port", ["99999", "0", "-1", "abc", "80x", ""])
def test_make_check_lab_port_refuses_bad_ports(port):
    r = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "check-lab-port", f"LAB_PORT={port}"], capture_output=True, text=True
    )
    assert r.returncode != 0 and "LAB_PORT" in r.stderr and "1" in r.stderr and "65535" in r.stderr


@pytest.mark.parametrize("port", ["1", "8888", "65535"])
def test_make_check_lab_port_accepts_good_ports(port):
    r = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "check-lab-port", f"LAB_PORT={port}"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.real_model
def test_similarity_with_five_sentences_says_hit_at_5_cannot_miss(tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\nA dog ran home .\nBirds sing .\nIt rains today .\nWe left early .\n")
    out = tmp_path / "hit.csv"
    argv = ["similarity", "-m", "minilm-l6", "paraphrase-minilm-l3", "-i", str(f), "--order", "1", "--size", "16"]
    assert cli.main([*argv, "--metric", "pearson", "-q", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "hit@5 is NaN" in err and "more than 5 sentences" in err
    import pandas as pd

    table = pd.read_csv(out)
    assert table["hit@5"].isna().all() and table["hit@1"].notna().all()
