"""What the paper profile would cost on one GPU, from measured per-item costs, before anyone
starts it: the adapter trainings of notebooks 03 and 04 (the heaviest step by orders of
magnitude) counted from the profiles and the real datasets, each training step's FLOPs counted
by ``torch.utils.flop_counter`` on the real paper adapter (on the meta device: no weights, no
time), and a GPU throughput that is either *assumed* (``--tflops``, stated in the output) or
*measured* by ``benchmarks/gpu_check.sh`` (``--step-seconds``: its seconds per paper-adapter
training step at ``--step-length`` subwords).

    python benchmarks/paper_estimate.py [--tflops 25] [--step-seconds S --step-length T]

What is counted:

* sentences per task and split: the datasets of ``../shared/data`` with the paper profile's
  sizes (every sentence); subwords per sentence: each default zoo model's own tokenizer on
  500 training sentences of each task (subwords per word), plus its special tokens;
* adapters per (task, model): notebook 04 trains each single-source variant, the multi-source
  adapter and one per trained input control, per seed; notebook 03 one parser per key and per
  input control, per seed (``olas_utils.studies.transfer`` / ``syntax`` docstrings);
* a training step (batch 2, padded to the longer sentence): 4 × the forward FLOPs (backward
  about 2 ×, the reversible blocks' recomputation 1 ×); the forward is a·T² (measured at T = 16,
  32, 64: the 3 × 3 feed-forward convolutions dominate); each epoch also runs the dev split
  forward once. The epoch cap is the worst case; ``--epoch-share`` is the share of it early
  stopping is expected to run;
* memory: the adapter's parameters with their gradients and AdamW state (16 bytes each); the
  reversible blocks keep no activations for backward (counted with saved-tensor hooks).

Extraction (forward passes of the zoo models) is left out: it is under 1 % of the FLOPs here.
"""

from __future__ import annotations

import argparse
import math
import random

import common  # noqa: F401  (puts the repository on sys.path)
import torch
from torch.utils.flop_counter import FlopCounterMode

from olas_utils.data.tasks import TASKS, load_task
from olas_utils.studies import syntax, transfer
from olas_utils.toa.adapter import OLAAdapter
from olas_utils.toa.features import n_channels
from olas_utils.toa.fit import adapter_config
from olas_utils.zoo import DEFAULT_MODELS, prepare


def forward_flops(size: str, channels: int, lengths=(16, 32, 64)) -> tuple[float, float]:
    """``(a, worst relative misfit)`` of forward FLOPs = a·T² for a batch of 2 T×T images."""
    with torch.device("meta"):
        model = OLAAdapter(adapter_config(size, channels)).eval()
    per = []
    for t in lengths:
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            model(torch.empty(2, channels, t, t, device="meta"))
        per.append(counter.get_total_flops() / t**2)
    a = per[-1]
    return a, max(abs(p - a) / a for p in per)


def parameters(size: str, channels: int) -> tuple[int, int]:
    """``(parameters, bytes saved for backward at T = 64)`` of the adapter (meta device)."""
    with torch.device("meta"):
        model = OLAAdapter(adapter_config(size, channels))
    saved = [0]

    def pack(t):
        saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(torch.empty(2, channels, 64, 64, device="meta"))
    return sum(p.numel() for p in model.parameters()), saved[0]


def subword_ratio(words: list[list[str]], models, n: int = 500) -> dict[str, tuple[float, int]]:
    """Per model: (subwords per word, special tokens per sentence) on ``n`` sentences."""
    out = {}
    sample = words[:n]
    for name, tok in models.items():
        pieces = sum(len(tok(w, is_split_into_words=True, add_special_tokens=False)["input_ids"]) for w in sample)
        special = len(tok(["a"], is_split_into_words=True)["input_ids"]) - len(
            tok(["a"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
        )
        out[name] = (pieces / sum(len(w) for w in sample), special)
    return out


def padded_squares(lengths: list[float], batch: int = 2, seed: int = 0) -> float:
    """Σ over batches (shuffled, ``batch`` sentences each) of the longest length squared."""
    order = list(lengths)
    random.Random(seed).shuffle(order)
    return sum(max(order[i : i + batch]) ** 2 for i in range(0, len(order), batch))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tflops", type=float, default=25.0, help="assumed sustained fp32 TFLOP/s of the GPU")
    ap.add_argument("--step-seconds", type=float, default=None, help="measured s per training step (gpu_check)")
    ap.add_argument("--step-length", type=int, default=64, help="subwords of the measured step")
    ap.add_argument("--epoch-share", type=float, default=1.0, help="share of the epoch cap early stopping runs")
    args = ap.parse_args()
    common.quiet()

    p03, p04 = syntax.PROFILES["paper"], transfer.PROFILES["paper"]
    tasks = list(p04.tasks or TASKS)
    models = list(p04.models or DEFAULT_MODELS)
    from transformers import AutoTokenizer

    tokenizers = {m: AutoTokenizer.from_pretrained(str(prepare(m))) for m in models}
    channels = n_channels(p04.keys)
    a, misfit = forward_flops(p04.training.adapter, channels)
    n_params, saved = parameters(p04.training.adapter, channels)
    print(common.machine_line())
    print(
        f"paper adapter '{p04.training.adapter}': {n_params / 1e6:.0f} M parameters ({channels} input channels); "
        f"forward of 2 sentences of T subwords = {a / 1e9:.2f} GFLOP × T² (fit at T = 16, 32, 64 within "
        f"{100 * misfit:.1f} %); a training step ≈ 4 × forward"
    )
    print(
        f"memory per adapter: {16 * n_params / 2**30:.1f} GiB (fp32 weights, gradients, AdamW state) + "
        f"{saved / 2**20:.1f} MiB kept for backward at T = 64 (reversible blocks); one block's activations "
        "during backward on top"
    )
    if args.step_seconds:
        rate = 4 * a * args.step_length**2 / args.step_seconds
        print(
            f"GPU throughput: measured, {rate / 1e12:.1f} TFLOP/s ({args.step_seconds} s a step at T = {args.step_length})"
        )
    else:
        rate = args.tflops * 1e12
        print(f"GPU throughput: ASSUMED {args.tflops:g} TFLOP/s sustained fp32 (not measured; pass --step-seconds)")

    adapters04 = (len(p04.variants) + 1 + len(p04.input_controls)) * len(p04.training.seeds)
    adapters03 = (len(p03.keys) + len(p03.input_controls)) * len(p03.training.seeds)
    total, rows = 0.0, []
    for task in tasks + ["dependency (notebook 03)"]:
        t = task.split(" ")[0]
        is03 = task.endswith("(notebook 03)")
        cfg = p03 if is03 else p04
        train = load_task(t, "train", n=cfg.sizes.n_train, max_words=cfg.sizes.max_words, min_words=cfg.sizes.min_words)
        dev = load_task(t, "dev", n=cfg.sizes.n_dev, max_words=cfg.sizes.max_words, min_words=cfg.sizes.min_words)
        ratios = subword_ratio(train.words, tokenizers)
        flops = 0.0
        for r, special in ratios.values():
            tr = [r * len(w) + special for w in train.words]
            dv = [r * len(w) + special for w in dev.words]
            epochs = cfg.training.epochs * args.epoch_share
            per_adapter = epochs * (4 * a * padded_squares(tr) + a * padded_squares(dv))
            flops += per_adapter * (adapters03 if is03 else adapters04)
        hours = flops / rate / 3600
        total += hours
        n_adapters = (adapters03 if is03 else adapters04) * len(models)
        steps = math.ceil(len(train) / 2)
        rows.append((task, len(train), len(dev), n_adapters, steps, flops, hours))
    print(
        f"\n{len(models)} models; per (task, model) {adapters04} adapters in 04 "
        f"({len(p04.variants)} variants + multi-source + {len(p04.input_controls)} input controls, × "
        f"{len(p04.training.seeds)} seeds), {adapters03} parsers in 03; epoch cap {p04.training.epochs} "
        f"× share {args.epoch_share:g}; batch {p04.training.batch_size}"
    )
    print(f"{'task':26} {'train':>7} {'dev':>6} {'adapters':>8} {'steps/epoch':>11} {'PFLOP':>10} {'GPU hours':>10}")
    for task, ntr, ndv, nad, steps, flops, hours in rows:
        print(f"{task:26} {ntr:7d} {ndv:6d} {nad:8d} {steps:11d} {flops / 1e15:10.0f} {hours:10.0f}")
    print(f"total: {total:,.0f} GPU hours = {total / 24:,.1f} days on one GPU at that throughput")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
