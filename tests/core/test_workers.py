"""How many worker processes OLAS starts: one per usable core, at most torch's thread count
(settings.cpu_workers, behind the adapters' and the logistic fits' pools), and the logistic
pool's own cap and checks (similarity.logistic.logistic_workers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from olas_utils.infra import settings
from olas_utils.similarity import logistic
from olas_utils.toa.parallel import default_workers


def test_cpu_workers_is_usable_cores_capped_by_torch_threads(monkeypatch):
    monkeypatch.setattr(settings.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 16)
    assert settings.cpu_workers() == 4 and default_workers("cpu") == 4
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # e.g. OMP_NUM_THREADS=1: one worker
    assert settings.cpu_workers() == 1 and default_workers("cpu") == 1
    assert default_workers("cuda") == 1


def test_logistic_workers_default_cap_jobs_and_bad_values(monkeypatch):
    monkeypatch.setattr(logistic, "MAX_LOGISTIC_WORKERS", 3)
    monkeypatch.setattr(settings, "cpu_workers", lambda: 64)
    assert logistic.logistic_workers(None, 100) == 3  # the memory cap, not 64 processes
    assert logistic.logistic_workers(None, 2) == 2  # never more than the jobs
    assert logistic.logistic_workers(5, 100) == 5 and logistic.logistic_workers(np.int64(2), 9) == 2
    assert logistic.logistic_workers(4, 0) == 1
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="workers must be a positive integer"):
            logistic.logistic_workers(bad, 10)


def test_spawn_pool_runs_jobs_and_stops_its_workers_at_once_on_an_error():
    import time

    from olas_utils.infra.pools import spawn_pool

    with spawn_pool(1) as pool:
        assert pool.submit(pow, 3, 4).result() == 81
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with spawn_pool(2) as pool:
            pool.submit(time.sleep, 60)
            pool.submit(pow, 2, 2).result()  # the other worker is running the 60 s job
            procs = list(pool._processes.values())
            raise KeyboardInterrupt

    def running(pid):  # a zombie has exited (the pool's own thread may not have reaped it yet)
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError):  # reaped before, or between open and read (ESRCH)
            return False

    while any(running(p.pid) for p in procs) and time.monotonic() - start < 30:
        time.sleep(0.1)
    assert not any(running(p.pid) for p in procs)
    assert time.monotonic() - start < 30  # not the 60 s of the job in flight
