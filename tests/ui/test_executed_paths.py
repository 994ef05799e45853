"""Executed notebooks carry no machine's absolute paths: papermill records the input and output
paths in the metadata as given, and olas_utils.ui.reproduce.relative_papermill_paths rewrites
them relative to the repository (issue 40, item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from olas_utils.infra.settings import project_root
from olas_utils.ui.reproduce import relative_papermill_paths

ROOT = project_root()
EXECUTED = sorted(ROOT.glob("results/**/executed/*.ipynb"))


def _notebook(path: Path, input_path: str, output_path: str) -> list:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1  # /keep/this/absolute/path in a cell")]
    nb.metadata["papermill"] = {"input_path": input_path, "output_path": output_path, "duration": 1.5}
    nbformat.write(nb, str(path))
    return json.loads(path.read_text())["cells"]


def test_paths_inside_the_repository_and_from_another_clone_become_relative(tmp_path):
    inside = tmp_path / "a.ipynb"
    cells = _notebook(inside, str(ROOT / "notebooks" / "02_cross_lm_similarity.ipynb"), str(inside))
    assert relative_papermill_paths(inside) is True
    meta = json.loads(inside.read_text())["metadata"]["papermill"]
    assert meta["input_path"] == "notebooks/02_cross_lm_similarity.ipynb"
    assert meta["output_path"] == str(inside)  # outside the repository: shown as given
    assert meta["duration"] == 1.5 and json.loads(inside.read_text())["cells"] == cells

    other = tmp_path / "b.ipynb"
    _notebook(other, "/elsewhere/clone/notebooks/04_toa_transfer.ipynb", "/elsewhere/clone/results/x.ipynb")
    assert relative_papermill_paths(other) is True
    meta = json.loads(other.read_text())["metadata"]["papermill"]
    assert meta["input_path"] == "notebooks/04_toa_transfer.ipynb"
    assert meta["output_path"] == str(other)
    assert relative_papermill_paths(other) is False  # nothing left to rewrite: the file is not touched


@pytest.mark.parametrize("path", EXECUTED, ids=[str(p.relative_to(ROOT)) for p in EXECUTED])
def test_committed_executed_notebooks_record_no_absolute_path(path):
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]["papermill"]
    for key in ("input_path", "output_path"):
        assert not meta[key].startswith("/"), f"{path}: {key} {meta[key]!r} is absolute (relative_papermill_paths)"
    assert meta["output_path"] == str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", sorted(ROOT.glob("results/executed/*.ipynb")), ids=lambda p: p.name)
def test_the_quick_profiles_executed_notebooks_show_no_path_of_this_machine(path):
    """The quick profile's copies, regenerated with the current code, show no absolute path
    anywhere, outputs included. (Older profiles' copies still show warnings with the venv's path
    until they are re-run: docs/profiles.md.)"""
    text = path.read_text(encoding="utf-8")
    assert str(ROOT) not in text, f"{path} holds this machine's repository path"
