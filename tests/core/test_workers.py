"""How many worker processes OLAS starts: one per usable core, at most torch's thread count
(settings.cpu_workers, behind the adapters' and the logistic fits' pools), and the logistic
pool's own cap and checks (similarity.logistic.logistic_workers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from olas_utils import settings
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
