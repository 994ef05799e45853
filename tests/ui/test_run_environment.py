"""``reproduce`` records, beside each run's results, the thread count and versions its notebooks
ran with (``run_environment.json``): the thread count a fresh kernel starts with under the run's
environment, read back against what the environment variable asks for, and the versions
against the installed distributions' metadata. No notebook is executed (``run_notebook`` is
replaced by a recorder); each run starts one small Python process (the kernel probe)."""

import json
import platform
from importlib.metadata import version

import pytest

from olas_utils.ui import reproduce as rp


@pytest.fixture
def ran(monkeypatch):
    seen = []

    def record(path, out_path, *, profile, parameters=None, **options):
        seen.append(path.name)
        return out_path

    monkeypatch.setattr(rp, "run_notebook", record)
    return seen


def _folders(tmp_path):
    return {
        "results_dir": tmp_path / "results",
        "figures_dir": tmp_path / "figures",
        "executed_dir": tmp_path / "executed",
    }


@pytest.mark.parametrize("threads", [1, 2])
def test_each_notebook_records_the_thread_count_and_versions_it_ran_with(ran, tmp_path, monkeypatch, threads):
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    rp.reproduce("smoke", only=["01", "02"], **_folders(tmp_path))
    assert ran == ["01_ola_gallery.ipynb", "02_cross_lm_similarity.ipynb"]
    record = json.loads((tmp_path / "results" / "run_environment.json").read_text())
    assert sorted(record["notebooks"]) == ["01_ola_gallery", "02_cross_lm_similarity"]
    entry = record["notebooks"]["02_cross_lm_similarity"]
    assert entry["profile"] == "smoke"
    assert entry["kernel_torch_num_threads"] == threads  # what OMP_NUM_THREADS gives a fresh process
    assert entry["environment"]["OMP_NUM_THREADS"] == str(threads)
    assert entry["environment"]["MKL_NUM_THREADS"] is None
    assert entry["versions"]["torch"].split("+")[0] == version("torch").split("+")[0]  # torch.__version__ adds +cu…
    assert entry["versions"]["transformers"] == version("transformers")
    assert entry["versions"]["numpy"] == version("numpy")
    assert entry["versions"]["python"] == platform.python_version()
    assert entry["platform"]["machine"] == platform.machine()
    assert entry["platform"]["cpu_count"] >= entry["platform"]["cpus_usable"] >= 1
    assert entry["seconds"] >= 0 and entry["finished_utc"] >= entry["started_utc"]
    assert not [p.name for p in (tmp_path / "results").iterdir() if p.name != "run_environment.json"]  # no temp left


def test_a_run_of_one_notebook_keeps_the_others_records(ran, tmp_path, monkeypatch):
    folders = _folders(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rp.reproduce("smoke", only=["01", "03"], **folders)
    path = tmp_path / "results" / "run_environment.json"
    first = json.loads(path.read_text())["notebooks"]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    rp.reproduce("smoke", only=["03"], **folders)
    second = json.loads(path.read_text())["notebooks"]
    assert second["01_ola_gallery"] == first["01_ola_gallery"]  # not re-run: its record stands
    assert first["03_syntax"]["kernel_torch_num_threads"] == 1
    assert second["03_syntax"]["kernel_torch_num_threads"] == 2


def test_an_unreadable_record_is_replaced_not_fatal(ran, tmp_path, monkeypatch):
    folders = _folders(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run_environment.json").write_text("{ half a fil")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rp.reproduce("smoke", only=["01"], **folders)
    record = json.loads((tmp_path / "results" / "run_environment.json").read_text())
    assert list(record["notebooks"]) == ["01_ola_gallery"]


def test_without_notebooks_to_run_nothing_is_recorded(ran, tmp_path):
    with pytest.raises(ValueError, match="no notebook matches"):
        rp.reproduce("smoke", only=["99"], **_folders(tmp_path))
    assert not (tmp_path / "results").exists()
