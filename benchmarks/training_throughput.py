"""Adapter training throughput: the training loop of an earlier commit (``--old-rev``, read
from git history) against the current ``olas_utils.toa.train.train_model``, side by side.

Real inputs: UD English-EWT training sentences (3-30 words) and minilm-l6's word-level OLA
(ola:1, raw + sink-removed), the notebooks' quick recipe (``small`` adapter, biaffine head
arc 128 / label 64, batch 8, lr 3e-3), one thread, one epoch per run with a checkpoint file
(as ``fit_adapter`` trains), no dev selection. Each round trains the same seeds with both
loops, in alternating order, from the same initial weights; the median steps/s of each is
reported with the ratio, per CPU second (the
process's CPU time: on a shared machine it is steadier than wall-clock time, which counts
the time another process held the core) and per wall-clock second. The final weights of the two loops are compared (max abs
difference; ``bit-identical`` when it is 0) and each is scored on EWT dev sentences (UAS).

Also printed: the convolutions' share of the work (FLOPs of the adapter's 3x3 convolutions
per epoch against a measured single-thread matrix-product rate), a bound on what any change
of the training loop alone can gain.

    python benchmarks/training_throughput.py [--sentences 300] [--dev 200] [--seeds 1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import machine_line, median, quiet, set_threads

#: The commit before the training loop's speed changes.
OLD_REV = "5d71db3e7fc436236010848eed5f82831d915f89"


def old_train_module(rev: str):
    """``olas_utils/toa/train.py`` as of ``rev``, imported as a private module."""
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(
        ["git", "-C", str(root), "show", f"{rev}:olas_utils/toa/train.py"], check=True, capture_output=True, text=True
    ).stdout
    spec = importlib.util.spec_from_loader("_old_train", loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_old_train"] = mod  # dataclasses look their module up while the source runs
    exec(compile(src, f"{rev[:8]}:olas_utils/toa/train.py", "exec"), mod.__dict__)
    return mod


def matmul_gflops(n: int = 512, repeats: int = 20) -> float:
    """Single-process float32 matrix-product rate (GFLOP/s) at the current thread count."""
    a = torch.randn(n, n)
    a @ a
    t = time.perf_counter()
    for _ in range(repeats):
        a @ a
    return 2 * n**3 * repeats / (time.perf_counter() - t) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--dev", type=int, default=200, help="EWT dev sentences scored per run")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--old-rev", default=OLD_REV)
    args = ap.parse_args()
    quiet()
    set_threads(1)

    from olas_utils.data.tasks import load_task
    from olas_utils.studies.adapters import MapStore
    from olas_utils.toa import train as new_train
    from olas_utils.toa.adapter import ADAPTER_SIZES, AdapterConfig
    from olas_utils.toa.fit import evaluate
    from olas_utils.toa.heads import TOAModel
    from olas_utils.toa.taskmaps import ModelPool

    old_train = old_train_module(args.old_rev)
    train = load_task("dependency", "train", n=args.sentences, min_words=3, max_words=30, seed=0)
    dev = load_task("dependency", "dev", n=args.dev, min_words=3, max_words=30, seed=0)
    store = MapStore(ModelPool(seed=0), level="word", orders=(1,), progress=False)
    x = store.examples("minilm-l6", train, ["ola:1"])
    xd = store.examples("minilm-l6", dev, ["ola:1"])
    print(machine_line())
    print(
        f"{len(x)} EWT sentences, minilm-l6 ola:1 word level, adapter 'small', biaffine 128/64, batch 8, lr 3e-3, "
        f"1 epoch per run, seeds 0..{args.seeds - 1}, {args.rounds} rounds; old = {args.old_rev[:8]}, new = working tree"
    )
    adapter = AdapterConfig(in_channels=int(x[0].image.shape[0]), **ADAPTER_SIZES["small"])

    def run(mod, seed: int, folder: str) -> tuple[float, int, dict]:
        cfg = mod.TrainConfig(epochs=1, batch_size=8, lr=3e-3, seed=seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TOAModel(adapter, "dependency", len(train.label_names), arc_dim=128, label_dim=64)
        t, c = time.perf_counter(), time.process_time()
        info = mod.train_model(model, x, cfg, checkpoint=Path(folder) / f"{seed}.pt", progress=False)
        return time.perf_counter() - t, time.process_time() - c, info["steps"], model

    ways = {"old": old_train, "new": new_train}
    rates: dict[str, list[float]] = {w: [] for w in ways}  # steps per CPU second
    walls: dict[str, list[float]] = {w: [] for w in ways}  # steps per wall-clock second
    final: dict[str, dict] = {}
    for r in range(args.rounds):
        order = list(ways) if r % 2 == 0 else list(ways)[::-1]
        for w in order:
            with tempfile.TemporaryDirectory() as folder:
                wall, cpu, steps = 0.0, 0.0, 0
                for s in range(args.seeds):
                    dt, dc, n, model = run(ways[w], s, folder)
                    wall, cpu, steps = wall + dt, cpu + dc, steps + n
                    final[(w, s)] = model
            rates[w].append(steps / cpu)
            walls[w].append(steps / wall)
            print(
                f"  round {r + 1} {w}: {steps} steps, {cpu:.2f} s CPU = {steps / cpu:.2f} steps/s "
                f"({wall:.2f} s wall = {steps / wall:.2f} steps/s)"
            )
    old, new = median(rates["old"]), median(rates["new"])
    print(f"old loop: {old:.2f} steps/s CPU time, {median(walls['old']):.2f} wall (median of {args.rounds})")
    print(f"new loop: {new:.2f} steps/s CPU time, {median(walls['new']):.2f} wall (median of {args.rounds})")
    print(f"ratio new/old: {new / old:.2f}x CPU time, {median(walls['new']) / median(walls['old']):.2f}x wall")
    for s in range(args.seeds):
        a, b = final[("old", s)].state_dict(), final[("new", s)].state_dict()
        diff = max((a[k] - b[k]).abs().max().item() for k in a)
        uas = {w: evaluate(final[(w, s)], xd, dev)["uas"] for w in ways}
        same = "bit-identical" if diff == 0 else f"max abs diff {diff:.3g}"
        print(f"seed {s}: final weights {same}; dev UAS old {uas['old']:.4f}, new {uas['new']:.4f}")
    pixels = sum(int(e.image.shape[-1]) ** 2 for e in x)
    d = ADAPTER_SIZES["small"]["dim"]
    ffs = 2 * ADAPTER_SIZES["small"]["depth"]  # two feed-forward blocks per depth, two 3x3 convs each (d <-> 4d)
    flops = pixels * ffs * 2 * (d * 4 * d * 9) * 2 * 3  # MACs -> FLOPs, x3 for forward + both gradients
    peak, steps = matmul_gflops(), len(new_train.size_batches(x, 8))
    floor = flops / 1e9 / peak
    print(
        f"3x3 convolutions: {flops / 1e9:.0f} GFLOP per epoch (forward + backward); at the measured matmul rate "
        f"({peak:.0f} GFLOP/s) they alone take {floor:.2f} s = {floor / steps * 1e3:.0f} ms of each of the {steps} "
        f"steps; the new loop takes {1e3 / new:.0f} ms a step"
    )


if __name__ == "__main__":
    main()
