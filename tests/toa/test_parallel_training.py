"""Adapters trained in worker processes (olas_utils.toa.parallel) against the same runs
trained in this process, on real EWT sentences and minilm-l6's word-level OLA."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from olas_utils.data.tasks import load_task
from olas_utils.studies.adapters import MapStore, adapter_job, provenance
from olas_utils.toa.fit import AdapterSettings, fit_adapter
from olas_utils.toa.parallel import fit_many
from olas_utils.toa.taskmaps import ModelPool

CFG = AdapterSettings(adapter="tiny", epochs=2, patience=1, batch_size=8, lr=2e-3, arc_dim=16, label_dim=8)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three jobs (OLA, position-only, and the OLA run again under another name) and the
    data they were built from."""
    cache = tmp_path_factory.mktemp("maps")
    kw = {"n": 20, "min_words": 3, "max_words": 10, "seed": 0}
    train, dev = (
        load_task("dependency", "train", **kw),
        load_task("dependency", "dev", n=8, min_words=3, max_words=10, seed=0),
    )
    import os

    old = os.environ.get("OLAS_CACHE_DIR")
    os.environ["OLAS_CACHE_DIR"] = str(cache)
    try:
        store = MapStore(ModelPool(seed=0), level="word", orders=(1,), progress=False)

        def job(inputs, ckpt):
            x_tr, x_dv = (store.examples("minilm-l6", d, ["ola:1"], inputs=inputs) for d in (train, dev))
            return adapter_job(
                (x_tr, train),
                (x_dv, dev),
                CFG,
                provenance=provenance(["minilm-l6"], ["ola:1"], "word", inputs=inputs),
                checkpoint_dir=ckpt,
                desc=inputs,
            )

        yield job
    finally:
        if old is None:
            os.environ.pop("OLAS_CACHE_DIR", None)
        else:
            os.environ["OLAS_CACHE_DIR"] = old


@pytest.mark.slow  # 7 s measured alone at 1 thread (docs/testing.md)
def test_workers_give_the_weights_of_the_same_runs_trained_here_and_train_a_shared_run_once(runs, tmp_path):
    par, ref = tmp_path / "par", tmp_path / "ref"
    jobs = {"ola": runs("ola", par), "position": runs("position-only", par), "ola again": runs("ola", par)}
    got = fit_many(jobs, workers=2, progress=False)
    assert len(list(par.glob("*.pt"))) == 2  # the repeated run was trained once
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers' thread count: the reference is the same computation
    try:
        want = {
            k: fit_adapter(**runs(k.split()[0].replace("position", "position-only"), ref), progress=False)
            for k in ("ola", "position")
        }
    finally:
        torch.set_num_threads(threads)
    for k in ("ola", "position"):
        for (n, a), b in zip(got[k][0].state_dict().items(), want[k][0].state_dict().values()):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"{k}: {n}")
        assert got[k][1]["curve"] == want[k][1]["curve"] and got[k][1]["best_epoch"] == want[k][1]["best_epoch"]
    for a, b in zip(got["ola"][0].state_dict().values(), got["ola again"][0].state_dict().values()):
        assert torch.equal(a, b)
    assert not all(
        torch.equal(a, b) for a, b in zip(got["ola"][0].state_dict().values(), got["position"][0].state_dict().values())
    )


def test_parallel_training_refuses_jobs_it_cannot_hand_back(runs, tmp_path):
    job = runs("ola", tmp_path)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        fit_many({"a": {**job, "checkpoint_dir": None}, "b": job}, workers=2, progress=False)
    with pytest.raises(ValueError, match="accelerator"):
        fit_many({"a": {**job, "device": "cuda"}}, workers=2, progress=False)
    with pytest.raises(ValueError, match="workers"):
        fit_many({"a": job}, workers=0, progress=False)
    assert not list(tmp_path.glob("*.pt"))  # nothing was trained


def test_a_failing_run_is_named_and_the_error_reaches_the_caller(runs, tmp_path):
    job = runs("ola", tmp_path)
    from dataclasses import replace

    nan = [replace(e, image=torch.full_like(e.image, float("nan"))) for e in job["examples"]]
    bad = {**job, "examples": nan, "desc": "broken run"}  # fails at its first step, in the worker
    with pytest.raises(RuntimeError, match="broken run.*non-finite"):
        fit_many({"bad": bad, "other": runs("position-only", tmp_path)}, workers=2, progress=False)


@pytest.mark.slow  # 5 s measured alone at 1 thread (docs/testing.md)
def test_thousands_of_examples_reach_the_workers(runs, tmp_path):
    # each tensor shared through its own file descriptor would exceed the open-file limit
    import resource

    job = runs("ola", tmp_path)
    many = [
        replace(e, image=e.image.clone(), positions=e.positions.clone(), labels=e.labels.clone(), heads=e.heads.clone())
        for e in job["examples"] * 60
    ]  # 4 distinct tensors each
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = min(1024, soft)  # a common default (Jupyter kernels often have it)
    assert 4 * len(many) > limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        ((model, info),) = fit_many(
            {"many": {**job, "examples": many, "data": _repeat(job["data"], 60), "cfg": replace(job["cfg"], epochs=1)}},
            workers=2,
            progress=False,
        ).values()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert info["steps"] > 0 and len(list(tmp_path.glob("*.pt"))) == 1


def _repeat(data, times):
    return replace(
        data,
        words=data.words * times,
        labels=data.labels * times,
        heads=data.heads * times,
        rows=data.rows * times,
        upos=None if data.upos is None else data.upos * times,
    )


def test_multi_source_examples_take_sentence_i_from_source_i_mod_k():
    from olas_utils.studies.transfer import _interleave

    a, b, c = ([f"{s}{i}" for i in range(5)] for s in "abc")
    assert _interleave([a, b, c]) == ["a0", "b1", "c2", "a3", "b4"]
    assert _interleave([a]) == a


def test_a_profiles_workers_setting_is_for_the_cpu_only():
    from olas_utils.studies.adapters import _workers, resources

    two = replace(CFG, workers=2)
    assert _workers(two, "cpu") == 2 and _workers(two, "cuda") == 1
    assert "at a time" not in resources(two, "cuda")
