"""The notebook runner routes each profile to the notebooks that have it and keeps the
committed quick outputs apart from every other profile's (no notebook is executed here:
``run_notebook`` is replaced by a recorder)."""

import json
import re
from pathlib import Path

import pytest

from olas_utils.infra.settings import output_folder, project_root
from olas_utils.ui import reproduce as rp


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def record(path, out_path, *, profile, parameters=None, **options):
        seen.append((path.name, out_path, profile, dict(parameters or {})))
        return out_path

    monkeypatch.setattr(rp, "run_notebook", record)
    # the run's environment record goes into the results folder: recorded, never written here
    monkeypatch.setattr(rp, "run_environment", lambda **kw: {"kernel_torch_num_threads": 1, "versions": {"torch": "x"}})
    monkeypatch.setattr(
        rp, "record_environment", lambda folder, book, profile, env=None: Path(folder) / rp.ENVIRONMENT_FILE
    )
    # the README summary is rewritten after quick and wide runs: recorded, never written here
    monkeypatch.setattr("olas_utils.studies.summary.update_readme", lambda **kw: seen.append(("README", kw)) or False)
    return seen


def _study_profiles(book):
    """The PROFILES dict a notebook reads (``<module>.PROFILES[profile]`` in its code)."""
    import importlib

    src = "".join("".join(c["source"]) for c in json.loads(book.read_text())["cells"] if c["cell_type"] == "code")
    alias = re.search(r"(\w+)\.PROFILES\[profile\]", src).group(1)
    names = {}
    for line in re.findall(r"^from olas_utils\.studies import (.+)$", src, flags=re.M):
        for part in line.split(","):
            module, _, name = part.strip().partition(" as ")
            names[name or module] = module
    module = names[alias]
    return importlib.import_module(f"olas_utils.studies.{module}").PROFILES


def test_quick_refreshes_the_committed_folders_only_when_asked(calls):
    rp.reproduce("quick", refresh_committed=True)
    assert calls[-1] == ("README", {"results_dir": project_root() / "results"})
    calls.pop()
    assert [c[0][:2] for c in calls] == ["01", "02", "03", "04"]
    # read by the notebooks from the repository root (olas_utils.infra.settings.output_folder)
    assert all(c[3] == {"results_dir": "results", "figures_dir": "figures"} for c in calls)
    assert calls[0][1] == project_root() / "results" / "executed" / "01_ola_gallery.ipynb"
    calls.clear()
    rp.reproduce("quick")
    assert all(c[0] != "README" for c in calls)  # the README quotes the committed results: left alone
    assert all(c[3] == {"results_dir": "runs/quick/results", "figures_dir": "runs/quick/figures"} for c in calls)
    assert calls[0][1] == project_root() / "runs" / "quick" / "executed" / "01_ola_gallery.ipynb"


ONE_NOTEBOOK = {"wide": ["04_toa_transfer.ipynb"], "tagging": ["04_toa_transfer.ipynb"]}
ONE_NOTEBOOK |= {
    "gemma": ["02_cross_lm_similarity.ipynb"],
    "mixing": ["02_cross_lm_similarity.ipynb", "03_syntax.ipynb"],
    "flow": ["02_cross_lm_similarity.ipynb", "03_syntax.ipynb"],
    "paper-size": ["02_cross_lm_similarity.ipynb"],
}


@pytest.mark.parametrize("name", list(ONE_NOTEBOOK))
def test_profiles_of_some_notebooks_run_them_alone_into_their_own_folders(calls, name):
    rp.reproduce(name, refresh_committed=True)
    if name in rp.SUMMARISED:
        assert calls.pop() == (
            "README",
            {"results_dir": project_root() / "results"},
        )  # reads results/ and results/<name>/
    assert [c[0] for c in calls] == ONE_NOTEBOOK[name]
    for book, out, profile, params in calls:
        assert profile == name
        assert params == {"results_dir": f"results/{name}", "figures_dir": f"figures/{name}"}
        assert out == project_root() / "results" / name / "executed" / book
    # the relative folders resolve, from the repository root as the notebooks read them, inside the project
    assert output_folder(params["results_dir"], name, "results") == rp.output_dirs(name)[0]
    assert output_folder(params["figures_dir"], name, "figures") == rp.output_dirs(name)[1]


def test_the_profiles_whose_runs_rewrite_the_readme_are_those_the_summary_quotes():
    from olas_utils.studies.summary import CROSSLM_PROFILES, PAPER_SIZE, TRANSFER_PROFILES

    assert rp.SUMMARISED == ("quick", *TRANSFER_PROFILES, *CROSSLM_PROFILES, PAPER_SIZE)
    assert rp.NOTEBOOKS_OF[PAPER_SIZE] == ("02",)
    assert all(rp.NOTEBOOKS_OF.get(p) == ("04",) for p in TRANSFER_PROFILES)
    assert all(rp.NOTEBOOKS_OF.get(p) == ("02",) for p in CROSSLM_PROFILES)


def test_a_notebook_without_the_profile_is_refused_before_anything_runs(calls):
    with pytest.raises(ValueError, match=r"'wide' exists for notebooks \['04'\] only.*03_syntax"):
        rp.reproduce("wide", only=["03", "04"])
    assert calls == []
    with pytest.raises(ValueError, match="unknown profile"):
        rp.reproduce("big")


def test_every_notebook_has_every_profile_the_runner_sends_it():
    for book in rp.list_notebooks():
        have = set(_study_profiles(book))
        sent = {p for p in rp.PROFILES if p not in rp.NOTEBOOKS_OF or book.name.startswith(rp.NOTEBOOKS_OF[p])}
        assert sent <= have, f"{book.name} lacks profiles {sent - have}"
