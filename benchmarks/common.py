"""Shared helpers for the benchmark scripts (not part of the library).

Every benchmark here measures the variants it compares side by side, interleaved, in one
run, and prints ratios: the machines these run on are shared and absolute timings drift.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

# `python benchmarks/<name>.py` from the repository root works without installing OLAS.
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import torch  # noqa: E402

__all__ = [
    "quiet",
    "set_threads",
    "machine_line",
    "ewt_sentences",
    "make_batches",
    "corpus_order_groups",
    "median",
    "timed",
    "rotated",
    "run_ola_batch",
    "model_inputs",
]


def quiet() -> None:
    """Silence ``transformers`` warnings and its weight-loading progress bars."""
    import warnings

    warnings.filterwarnings("ignore")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - older/newer transformers
        pass


def set_threads(n: int | None) -> int:
    """Set PyTorch's intra-op threads (``None`` or 0: leave the default); return the count.

    On a shared 2-core machine, 1 thread is the stable choice: with 2 OpenMP threads and
    other processes running, threads spin at barriers waiting for a descheduled peer
    (measured 5-7x slower than 1 thread on smollm2-135m under a load average of 7).
    """
    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def machine_line() -> str:
    """One line: date, CPU, core count, load, torch/transformers versions, threads."""
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = "load avg {:.1f}".format(os.getloadavg()[0])
    except OSError:
        load = "load avg n/a"
    return (
        f"{datetime.date.today().isoformat()}, {cpu}, {os.cpu_count()} CPU cores, {load}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} torch thread(s)"
    )


def ewt_sentences(n: int, split: str = "dev") -> list[list[str]]:
    """The first ``n`` sentences (word lists) of UD English-EWT ``split``, in corpus order."""
    from olas_utils.data import load_ud_ewt

    words = load_ud_ewt(split)["words"]
    if n > len(words):
        raise ValueError(f"EWT {split} has {len(words)} sentences, {n} asked for")
    return [list(w) for w in words[:n]]


def corpus_order_groups(n: int, batch_size: int) -> list[list[int]]:
    """Batches of consecutive sentences in corpus order (no length bucketing)."""
    return [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]


def make_batches(tokenized, groups: Sequence[Sequence[int]]) -> list[dict]:
    """Model inputs per group of sentence indices, each cropped to its longest sentence
    (right padding, as :func:`olas_utils.extract.extract_ola` builds them).

    Returns:
        ``[{"input_ids", "attention_mask", "idx", "lengths"}]``; pass
        ``{k: b[k] for k in ("input_ids", "attention_mask")}`` to the model.
    """
    lengths = tokenized.lengths
    out = []
    for idx in groups:
        idx = list(idx)
        t = max(lengths[i] for i in idx)
        out.append(
            {
                "input_ids": tokenized.input_ids[idx, :t].contiguous(),
                "attention_mask": tokenized.attention_mask[idx, :t].contiguous(),
                "idx": idx,
                "lengths": [lengths[i] for i in idx],
            }
        )
    return out


def model_inputs(batch: dict) -> dict:
    """The ``input_ids``/``attention_mask`` of a :func:`make_batches` entry."""
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


def run_ola_batch(
    cap,
    batch: dict,
    orders: Sequence[int],
    rollout: bool,
    layers: Sequence[int],
    layer_idx: Sequence[int],
    **forward_kwargs,
) -> tuple[float, float]:
    """What :func:`~olas_utils.extract.extract_ola` does per batch at subword level:
    the capture forward, then the maps to float32 CPU tensors cropped per sentence.

    Returns:
        ``(forward seconds, post-processing seconds)``.
    """
    t0 = time.perf_counter()
    acc = cap.forward(**model_inputs(batch), **forward_kwargs)
    t1 = time.perf_counter()
    results = {f"ola:{k}": acc.ola(k) for k in orders}
    if rollout:
        results["rollout"] = acc.rollout_map()
    for i_req, i_abs in zip(layers, layer_idx):
        results[f"layer:{i_req}"] = acc.layers[i_abs]
    kept = []
    for val in results.values():
        val = val.float().cpu()
        for row, n in enumerate(batch["lengths"]):
            kept.append(val[row, :n, :n].contiguous())
    del acc, results, kept
    return t1 - t0, time.perf_counter() - t1


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rotated(items: Sequence, shift: int) -> list:
    """``items`` rotated left by ``shift`` (to alternate which variant runs first)."""
    if not items:
        return []
    s = shift % len(items)
    return list(items[s:]) + list(items[:s])


def median(xs: Sequence[float]) -> float:
    """The median of ``xs``."""
    return statistics.median(xs)
