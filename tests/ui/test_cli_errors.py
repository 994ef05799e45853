"""The command line's errors: input files (Latin-1, folders) and 1-based line numbers, no
``.tmp`` left in an output folder, exit code 2 for bad usage in every subcommand."""

from __future__ import annotations

import pytest

from olas_utils.ui.cli import main, read_sentences


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
    with pytest.raises(SystemExit) as e:  # refused before the model is loaded
        main(["extract", "-m", "minilm-l6", "-i", str(f), "-o", str(out), "-q"])
    assert e.value.code == 2 and "outdir is a folder" in capsys.readouterr().err
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
