"""Many adapter trainings at once on a CPU: one worker process per core.

A small adapter step is too small for two threads to share well, so on a CPU it is faster
to train two adapters side by side, one thread each, than one after the other with two
threads: 1.18× the throughput for 2,000-sentence runs on 2 cores, but 0.70× for runs of a
few seconds, where starting the workers (importing torch) dominates
(``benchmarks/parallel_training.py``). :func:`fit_many` takes
the arguments of several :func:`olas_utils.toa.fit.fit_adapter` runs, trains every distinct
run once (runs with the same checkpoint file are the same run, e.g. a control whose inputs
do not depend on the model) in worker processes, then loads each result from its finished
checkpoint. A run therefore gives the same weights whether it was trained by a worker or
in the calling process at the same thread count, and an interrupted batch resumes where
each run stopped.
"""

from __future__ import annotations

from typing import Hashable, Mapping

import torch

from olas_utils.infra.progress import tqdm

__all__ = ["fit_many", "default_workers"]


def default_workers(device="cpu") -> int:
    """Workers :func:`fit_many` uses by default: :func:`olas_utils.infra.settings.cpu_workers` on the
    CPU (each with one thread), 1 on an accelerator."""
    from olas_utils.infra.settings import cpu_workers

    return 1 if str(device) != "cpu" else cpu_workers()


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def _pack(job: dict) -> bytes:
    """A job as bytes (``torch.save``): tensors copied into the message, not shared through
    one file descriptor each as multiprocessing's own pickling of tensors would do, which
    runs out of descriptors with thousands of examples."""
    import io

    buf = io.BytesIO()
    torch.save(job, buf)
    return buf.getvalue()


def _fit_in_worker(packed: bytes) -> str:
    import io

    from olas_utils.toa.fit import fit_adapter

    job = torch.load(io.BytesIO(packed), weights_only=False)
    try:
        fit_adapter(**job, progress=False)
    except Exception as e:  # noqa: BLE001 - re-raised in the parent with the run named
        raise RuntimeError(
            f"training '{job.get('desc', 'adapter')}' failed in a worker process: {type(e).__name__}: {e}"
        ) from None
    return job.get("desc", "adapter")


def _finished(path) -> bool:
    if not path.exists():
        return False
    from olas_utils.toa.checkpoints import checkpoint_intact

    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - fit_adapter reports a damaged checkpoint itself
        return False
    # a damaged checkpoint is trained again (fit_adapter sets it aside, saying so), in a worker like any other
    return isinstance(state, dict) and bool(state.get("done")) and checkpoint_intact(state)


def fit_many(
    jobs: Mapping[Hashable, dict], *, workers: int | None = None, progress: bool = True, desc: str = "adapters"
) -> dict:
    """Train several adapters, ``workers`` at a time, and return each ``(model, info)``.

    Args:
        jobs: name → keyword arguments of :func:`olas_utils.toa.fit.fit_adapter` (without
            ``progress``). Jobs with the same checkpoint file
            (:func:`~olas_utils.toa.fit.checkpoint_file`) are trained once.
        workers: processes training at the same time, each with
            ``torch.get_num_threads() // workers`` threads (at least 1); 1 trains in this
            process, one run after the other. Default :func:`default_workers`.
        progress: a bar over runs (``workers > 1``) or over each run's steps.
        desc: the bar's label.

    Returns:
        name → ``(model, info)`` as :func:`~olas_utils.toa.fit.fit_adapter` returns them, in
        the order of ``jobs``.

    Raises:
        ValueError: a job that lacks one of fit_adapter's required arguments; ``workers`` not a whole number >= 1 (e.g. the string ``"2"``), or ``workers > 1`` with a job that has no
            ``checkpoint_dir`` (workers hand their weights back through checkpoints) or that
            trains on an accelerator.
        RuntimeError: a run failed in a worker (the message names it); the other runs keep
            their checkpoints. A worker process that died (killed, out of memory) gives a
            ``RuntimeError`` naming the runs in flight and those not finished, not a bare
            ``BrokenProcessPool``: running the same call again resumes from the checkpoints.
    """
    from olas_utils.toa.fit import checkpoint_file, fit_adapter

    jobs = dict(jobs)
    if workers is None:
        workers = min(default_workers(next((j.get("device", "cpu") for j in jobs.values()), "cpu")), len(jobs) or 1)
    import numbers

    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(
            f"workers must be a whole number >= 1 (processes training at once) or None (automatic), got "
            f"{type(workers).__name__} {workers!r}"
        )
    workers = int(workers)
    _check_jobs(jobs, fit_adapter)
    if workers > 1:
        for name, job in jobs.items():
            if job.get("checkpoint_dir") is None:
                raise ValueError(
                    f"job {name!r} has no checkpoint_dir: parallel training hands the weights back "
                    "through checkpoints; pass one or use workers=1"
                )
            if str(job.get("device", "cpu")) != "cpu":
                raise ValueError(
                    f"job {name!r} trains on {job['device']}: parallel workers are for the CPU; "
                    "use workers=1 on an accelerator"
                )
        distinct: dict = {}
        for job in jobs.values():
            distinct.setdefault(checkpoint_file(**job), job)
        pending = [job for path, job in distinct.items() if not _finished(path)]
        if pending:
            _run_pool(pending, min(int(workers), len(pending)), progress, desc)
    return {name: fit_adapter(**job, progress=progress and workers == 1) for name, job in jobs.items()}


def _check_jobs(jobs: dict, fit_adapter) -> None:
    """Each job is a dict holding at least the required keyword arguments of ``fit_adapter``."""
    import inspect

    params = inspect.signature(fit_adapter).parameters
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
    for name, job in jobs.items():
        if not isinstance(job, dict):
            raise TypeError(f"job {name!r} must be a dict of fit_adapter's keyword arguments, got {type(job).__name__}")
        missing = [n for n in required if n not in job]
        if missing:
            raise ValueError(
                f"job {name!r} lacks {', '.join(missing)}: a job holds fit_adapter's keyword arguments "
                f"({', '.join(required)}, and optional checkpoint_dir, dev, ...), e.g. from "
                "olas_utils.studies.adapters.adapter_job"
            )


def _run_pool(pending: list, workers: int, progress: bool, desc: str) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    from olas_utils.infra.pools import spawn_pool

    threads = max(1, torch.get_num_threads() // workers)
    bar = tqdm(
        total=len(pending),
        desc=f"{desc} ({workers} workers × {threads} thread{'s' * (threads > 1)})",
        disable=not progress,
        unit="run",
    )
    names: dict = {}
    running: list[str] = []
    # an interrupt or a failed run stops every worker at once: checkpoints are written
    # atomically, so killed runs resume from their last one next time
    try:
        with spawn_pool(workers, initializer=_init_worker, initargs=(threads,)) as pool:
            for job in pending:
                names[pool.submit(_fit_in_worker, _pack(job))] = str(job.get("desc", "adapter"))
            left = set(names)
            while left:
                running = [names[f] for f in names if f in left and f.running()]
                done, left = wait(left, return_when=FIRST_COMPLETED)
                for f in done:
                    try:
                        bar.set_postfix_str(f.result()[-60:])  # re-raises a worker's error here
                    except BrokenProcessPool as e:
                        unfinished = [names[f] for f in names if f in left or f in done and f.exception() is not None]
                        raise RuntimeError(
                            f"a worker process died while training (killed: out of memory, a signal, or a crash in "
                            f"native code): in flight (running or queued) {', '.join(running) or ', '.join(unfinished)}; not finished "
                            f"{', '.join(unfinished)}. Finished runs and the last checkpoint of each killed run are "
                            "kept: run the same call again to resume from the checkpoints (with fewer workers if memory "
                            "ran out)"
                        ) from e
                    bar.update(1)
    finally:
        bar.close()
