"""Nothing the user owns is overwritten: an output that is an input, an existing file without
``--overwrite``, a folder or a path below a file as output, a source notebook as executed copy
and the committed ``results/`` and ``figures/`` without ``--refresh-committed`` are refused
before any work; notebooks write to the git-ignored ``runs/<profile>/`` unless told otherwise,
reading relative folders from the repository root (no notebook or model is run here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from olas_utils.infra.settings import RUNS, output_folder, project_root
from olas_utils.ui import cli
from olas_utils.ui import reproduce as rp


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the command with a marker: the work started."""

    def refuse(*a, **k):
        raise RuntimeError("WORK STARTED")

    monkeypatch.setattr("olas_utils.zoo.load_model", refuse)


@pytest.fixture
def sentences(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("The cat sat .\nA dog ran .\n", encoding="utf-8")
    return f


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


def test_extract_refuses_its_input_as_output_before_any_work(no_model, sentences, capsys):
    before = sentences.read_bytes()
    err = _usage_error(["extract", "-m", "minilm-l6", "-i", str(sentences), "-o", str(sentences)], capsys)
    assert "is the input file" in err and "overwrite its sentences" in err
    assert sentences.read_bytes() == before
    # the same file by another spelling (relative, through ..)
    other = sentences.parent / "x" / ".." / sentences.name
    assert "is the input file" in _usage_error(["extract", "-m", "m", "-i", str(sentences), "-o", str(other)], capsys)
    assert sentences.read_bytes() == before


def test_extract_refuses_an_existing_output_unless_overwrite_is_given(no_model, sentences, tmp_path, capsys):
    out = tmp_path / "maps.pt"
    out.write_bytes(b"the user's file")
    err = _usage_error(["extract", "-m", "minilm-l6", "-i", str(sentences), "-o", str(out)], capsys)
    assert "already exists" in err and "--overwrite" in err
    assert out.read_bytes() == b"the user's file"
    # with --overwrite the checks pass and the work starts (stopped here by the fake model loader)
    assert cli.main(["extract", "-m", "minilm-l6", "-i", str(sentences), "-o", str(out), "--overwrite"]) == 1
    assert "WORK STARTED" in capsys.readouterr().err


def test_extract_refuses_a_folder_or_a_path_below_a_file_before_the_run(no_model, sentences, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    assert "is a folder" in _usage_error(["extract", "-m", "m", "-i", str(sentences), "-o", str(folder)], capsys)
    below = sentences / "maps.pt"
    err = _usage_error(["extract", "-m", "m", "-i", str(sentences), "-o", str(below)], capsys)
    assert "which is a file" in err
    assert "-o/--output is empty" in _usage_error(["extract", "-m", "m", "-i", str(sentences), "-o", ""], capsys)


def test_similarity_refuses_its_input_or_an_existing_file_as_out(no_model, sentences, tmp_path, capsys):
    base = ["similarity", "-m", "a", "b", "-i", str(sentences), "-q"]
    assert "is the input file" in _usage_error([*base, "--out", str(sentences)], capsys)
    out = tmp_path / "hits.csv"
    out.write_text("keep me")
    assert "already exists" in _usage_error([*base, "--out", str(out)], capsys)
    assert out.read_text() == "keep me"


@pytest.fixture
def runs(monkeypatch):
    seen = []

    def record(path, out_path, *, profile, parameters=None, **options):
        seen.append((path.name, out_path, profile, dict(parameters or {})))
        return out_path

    monkeypatch.setattr(rp, "run_notebook", record)
    monkeypatch.setattr("olas_utils.studies.summary.update_readme", lambda **kw: seen.append(("README", kw)) or False)
    # the run's environment record would go into the (committed) results folder: recorded, never written
    monkeypatch.setattr(rp, "run_environment", lambda **kw: {"kernel_torch_num_threads": 1, "versions": {"torch": "x"}})
    monkeypatch.setattr(
        rp, "record_environment", lambda folder, book, profile, env=None: Path(folder) / rp.ENVIRONMENT_FILE
    )
    return seen


def test_reproduce_refuses_to_write_executed_copies_over_the_source_notebooks(runs, capsys, monkeypatch):
    before = {p: p.read_bytes() for p in rp.list_notebooks()}
    with pytest.raises(ValueError, match="would overwrite the source notebook .*01_ola_gallery"):
        rp.reproduce("smoke", ["01"], executed_dir=project_root() / "notebooks")
    # the brief's command, from the repository root where "notebooks" is the source folder
    monkeypatch.chdir(project_root())
    assert rp.main(["--only", "01", "--profile", "smoke", "--executed-dir", "notebooks"]) == 1
    assert "would overwrite the source notebook" in capsys.readouterr().err
    assert runs == [] and {p: p.read_bytes() for p in rp.list_notebooks()} == before


@pytest.mark.parametrize("only", [[""], ["  "], ["01", ""]])
def test_reproduce_refuses_an_empty_notebook_name(runs, only, capsys):
    with pytest.raises(ValueError, match="empty name"):
        rp.reproduce("smoke", only)
    assert rp.main(["--only", *only]) == 1
    with pytest.raises(SystemExit) as e:
        cli.main(["reproduce", "--only", *only])
    assert e.value.code == 2 and "empty name" in capsys.readouterr().err
    assert runs == []


def test_reproduce_says_clearly_when_a_folder_is_a_file(runs, tmp_path):
    f = tmp_path / "executed"
    f.write_text("a file")
    for kw, flag in (
        ("executed_dir", "--executed-dir"),
        ("results_dir", "--results-dir"),
        ("figures_dir", "--figures-dir"),
    ):
        with pytest.raises(NotADirectoryError, match=f"{flag} .*executed is a file, not a folder"):
            rp.reproduce("smoke", ["01"], **{kw: f})
        with pytest.raises(NotADirectoryError, match="which is a file"):
            rp.reproduce("smoke", ["01"], **{kw: f / "below"})
    with pytest.raises(ValueError, match="--results-dir is empty"):
        rp.reproduce("smoke", ["01"], results_dir="")
    assert runs == [] and f.read_text() == "a file"


def test_reproduce_writes_the_run_folder_by_default(runs):
    rp.reproduce("quick", ["01"])
    assert [r[0] for r in runs] == ["01_ola_gallery.ipynb"]  # no README rewrite without --refresh-committed
    _, out, _, params = runs[0]
    assert out == project_root() / RUNS / "quick" / "executed" / "01_ola_gallery.ipynb"
    assert params == {"results_dir": f"{RUNS}/quick/results", "figures_dir": f"{RUNS}/quick/figures"}
    assert output_folder(params["figures_dir"], "quick", "figures") == project_root() / RUNS / "quick" / "figures"


def test_reproduce_refuses_the_committed_folders_without_the_refresh_flag(runs):
    root = project_root()
    for kw, folder in (
        ("results_dir", root / "results"),
        ("figures_dir", root / "figures" / "wide"),
        ("executed_dir", root / "results" / "executed"),
    ):
        with pytest.raises(ValueError, match="committed .*--refresh-committed"):
            rp.reproduce("quick", ["01"], **{kw: folder})
    with pytest.raises(ValueError, match="drop --results-dir"):
        rp.reproduce("quick", ["01"], results_dir="elsewhere", refresh_committed=True)
    assert runs == []


def test_reproduce_takes_results_and_figures_folders(runs, tmp_path):
    rp.reproduce("wide", results_dir=tmp_path / "r", figures_dir=tmp_path / "f", executed_dir=tmp_path / "e")
    assert runs == [
        (
            "04_toa_transfer.ipynb",
            tmp_path / "e" / "04_toa_transfer.ipynb",
            "wide",
            {"results_dir": str(tmp_path / "r"), "figures_dir": str(tmp_path / "f")},
        )
    ]


def test_refresh_committed_writes_the_committed_folders_and_the_readme(runs):
    rp.reproduce("quick", ["01"], refresh_committed=True)
    assert runs[-1] == ("README", {"results_dir": project_root() / "results"})
    _, out, _, params = runs[0]
    assert params == {"results_dir": "results", "figures_dir": "figures"}
    assert out == project_root() / "results" / "executed" / "01_ola_gallery.ipynb"


def test_output_folder_reads_relative_folders_from_the_repository_not_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = project_root()
    assert output_folder(None, "smoke", "figures") == root / RUNS / "smoke" / "figures"
    assert output_folder("figures/wide", "wide", "figures") == root / "figures" / "wide"
    assert output_folder(tmp_path / "x", "quick", "results") == tmp_path / "x"
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="is a file"):
        output_folder(tmp_path / "file" / "sub", "quick", "results")
    with pytest.raises(ValueError, match="results_dir is empty"):
        output_folder("", "quick", "results")


def test_every_notebook_writes_the_run_folder_unless_told_otherwise():
    """The notebooks' own defaults (a run in the lab, or papermill without parameters) are the
    run folder, never the committed results/ and figures/ nor a path read from the kernel's cwd."""
    for book in rp.list_notebooks():
        cells = [c for c in json.loads(book.read_text())["cells"] if c["cell_type"] == "code"]
        params = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
        src = "".join(params["source"])
        code = "".join("".join(c["source"]) for c in cells)
        for name in ("figures_dir", "results_dir"):
            if f"{name} =" in src:
                assert f"{name} = None" in src, (book.name, name)
                assert f'{name} = output_folder({name}, profile, "{name[:-4]}")' in code, (book.name, name)
        assert "figures_dir = None" in src, book.name
        assert "../" not in src, book.name


def test_runs_are_git_ignored():
    assert f"{RUNS}/" in (project_root() / ".gitignore").read_text().splitlines()


def test_an_empty_model_name_is_refused_not_read_as_the_current_folder(no_model, sentences, capsys):
    assert "-m/--model is empty" in _usage_error(["extract", "-m", "", "-i", str(sentences), "-o", "o.pt"], capsys)
    err = _usage_error(["similarity", "-m", "minilm-l6", " ", "-i", str(sentences)], capsys)
    assert "empty name" in err


def test_dev_null_as_input_says_it_is_empty(no_model, tmp_path, capsys):
    if not os.path.exists(os.devnull):
        pytest.skip("no null device")
    assert cli.main(["extract", "-m", "minilm-l6", "-i", os.devnull, "-o", str(tmp_path / "o.pt")]) == 1
    err = capsys.readouterr().err
    assert f"input {os.devnull} is empty" in err and "does not exist" not in err


def test_version(capsys):
    from olas_utils import __version__

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"olas {__version__}"


def test_run_notebook_refuses_to_overwrite_its_source(tmp_path):
    src = tmp_path / "01_x.ipynb"
    src.write_text("{}")
    with pytest.raises(ValueError, match="would overwrite the source notebook"):
        rp.run_notebook(src, src, profile="smoke")
    book = rp.list_notebooks()[0]
    with pytest.raises(ValueError, match="would overwrite the source notebook"):
        rp.run_notebook(book, book.parent / ".." / "notebooks" / book.name, profile="smoke")
    assert src.read_text() == "{}"


def test_shown_paths_are_relative_inside_the_repository(tmp_path):
    from olas_utils.infra.settings import project_root, shown_path

    root = project_root()
    assert (root / "olas_utils" / "__init__.py").is_file()
    assert shown_path(root / "runs" / "quick" / "figures") == "runs/quick/figures"
    assert shown_path(tmp_path / "x") == str(tmp_path / "x")  # outside: as given


def test_a_batch_run_draws_progress_as_text_and_can_stream_it(tmp_path, capfd, monkeypatch):
    """The kernel of a papermill run gets OLAS_PROGRESS=text: the executed copy holds a plain
    text bar (no widget placeholder), and ``log_output`` streams it here while it runs."""
    import json

    import nbformat

    from olas_utils.ui import reproduce as rp

    monkeypatch.delenv("OLAS_PROGRESS", raising=False)
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell("profile = 'smoke'", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import os\nfrom olas_utils.infra.progress import tqdm\n"
            "print('mode', os.environ.get('OLAS_PROGRESS'))\n"
            "for _ in tqdm(range(5), desc='steps'):\n    pass"
        ),
    ]
    src = tmp_path / "probe.ipynb"
    nbformat.write(nb, src)
    out = rp.run_notebook(src, tmp_path / "out" / "probe.ipynb", profile="smoke", progress=False, log_output=True)
    outputs = json.loads(out.read_text())["cells"][-1]["outputs"]
    text = "".join("".join(o.get("text", "")) for o in outputs)
    assert "mode text" in text and "steps: 100%" in text and "5/5" in text
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    streamed = capfd.readouterr()
    assert "steps: 100%" in streamed.err and "mode text" in streamed.out
    assert "OLAS_PROGRESS" not in __import__("os").environ  # restored
