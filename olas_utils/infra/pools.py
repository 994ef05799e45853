"""Worker process pools for CPU-bound fits (the one place their lifecycle is written): spawned,
not forked, and stopped at once when the caller fails or is interrupted."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["spawn_pool"]


@contextmanager
def spawn_pool(workers: int, initializer: Callable | None = None, initargs: tuple = ()) -> Iterator:
    """A ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` *spawned* processes (a fork
    after OpenMP start-up can deadlock the child), each running ``initializer(*initargs)`` first.

    Leaving the block normally waits for the pool to shut down. Leaving it by any exception
    (a failed job, an interrupt) terminates the worker processes at once, cancels the queued
    jobs and re-raises: no job keeps running behind the caller's back.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=initializer, initargs=initargs)
    try:
        yield pool
    except BaseException:
        for p in list((getattr(pool, "_processes", None) or {}).values()):
            p.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
