"""Adapter variants for the CPU profiles: training throughput side by side, and dev UAS at convergence.

Real inputs, the notebooks' quick recipe: UD English-EWT training and dev sentences (3-30 words),
minilm-l6's word-level OLA (``--key``, raw + sink-removed), biaffine head arc 128 / label 64, one
thread. A variant is ``SIZE[:BATCH[:LR]]``: an adapter size of ``olas_utils.toa.adapter.ADAPTER_SIZES``
with its batch size and peak learning rate (default ``--batch-size`` / ``--lr``), e.g.
``small-pointwise:16:6e-3``; ``--variants`` default ``small`` (the quick profile's) and
``small-pointwise``. Two measurements per variant:

1. **throughput**: one epoch (no dev selection) per variant and round, the variants in rotating
   order in each round, from the same seed; the median steps/s and examples/s per CPU second (the
   process's CPU time: steadier than wall-clock time on a shared machine), and each variant's ratio
   to the first;
2. **convergence**: ``fit_adapter`` with early stopping on EWT dev (``--schedule``, ``--epochs`` cap,
   ``--patience``, ``--min-epochs``) for every seed of ``--seeds``; per variant the dev UAS of the
   kept epoch (mean, sd over seeds and a 95 % bootstrap interval over seeds and dev sentences), the
   paired dev-UAS difference to the first variant (same seeds, same sentences) with its interval,
   epochs run, how many runs the cap ended, and CPU seconds per run. Only dev data is read: the
   choice of a variant must not look at test.

    python benchmarks/adapter_variants.py [--sentences 1200] [--dev 300] [--rounds 3] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import machine_line, median, quiet, set_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["small", "small-pointwise"])
    ap.add_argument("--model", default="minilm-l6")
    ap.add_argument("--key", default="ola:1")
    ap.add_argument("--sentences", type=int, default=1200, help="EWT training sentences (quick: 1200)")
    ap.add_argument("--dev", type=int, default=300, help="EWT dev sentences (quick: 300)")
    ap.add_argument("--max-words", type=int, default=30, help="longest sentence kept, in words (quick: 30)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (one epoch per variant each)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="convergence runs per variant")
    ap.add_argument("--schedule", default="plateau", choices=["linear", "plateau"])
    ap.add_argument("--epochs", type=int, default=30, help="epoch cap of the convergence runs")
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--min-epochs", type=int, default=5)
    ap.add_argument("--skip-convergence", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)

    from tqdm.auto import tqdm

    from olas_utils.data.tasks import load_task
    from olas_utils.studies.adapters import MapStore
    from olas_utils.studies.outcomes import item_rows, rate, task_metric, versus
    from olas_utils.toa.adapter import ADAPTER_SIZES
    from olas_utils.toa.fit import adapter_config, evaluate_outcomes, fit_adapter
    from olas_utils.toa.heads import TOAModel
    from olas_utils.toa.taskmaps import ModelPool
    from olas_utils.toa.train import TrainConfig, size_batches, train_model

    spec = {}
    for v in args.variants:
        size, *rest = v.split(":")
        if size not in ADAPTER_SIZES or len(rest) > 2:
            raise SystemExit(f"variant {v!r}: SIZE[:BATCH[:LR]] with SIZE one of {sorted(ADAPTER_SIZES)}")
        batch = int(rest[0]) if rest else args.batch_size
        spec[v] = (size, batch, float(rest[1]) if len(rest) > 1 else args.lr)
    train = load_task("dependency", "train", n=args.sentences, min_words=3, max_words=args.max_words, seed=0)
    dev = load_task("dependency", "dev", n=args.dev, min_words=3, max_words=args.max_words, seed=0)
    store = MapStore(ModelPool(seed=0), level="word", orders=(1, 2, 3), progress=False)
    x, xd = store.examples(args.model, train, [args.key]), store.examples(args.model, dev, [args.key])
    channels = int(x[0].image.shape[0])
    heads = {"arc_dim": 128, "label_dim": 64}
    print(machine_line())
    print(
        f"{len(x)} EWT train / {len(xd)} dev sentences (3-{args.max_words} words), {args.model} {args.key} word level, biaffine "
        f"128/64, {torch.get_num_threads()} thread(s); variants (size, batch, lr): "
        + ", ".join(f"{v} = {spec[v]} {ADAPTER_SIZES[spec[v][0]]}" for v in args.variants)
    )

    def model_of(variant: str, seed: int) -> TOAModel:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return TOAModel(adapter_config(spec[variant][0], channels), "dependency", len(train.label_names), **heads)

    # 1. throughput, in examples per CPU second (variants may differ in batch size)
    rates: dict[str, list[float]] = {v: [] for v in args.variants}
    for r in range(args.rounds):
        order = args.variants[r % len(args.variants) :] + args.variants[: r % len(args.variants)]
        for v in order:
            _, batch, lr = spec[v]
            model = model_of(v, 0)
            c = time.process_time()
            train_model(model, x, TrainConfig(epochs=1, batch_size=batch, lr=lr, seed=0), progress=False)
            rates[v].append(len(x) / (time.process_time() - c))
            steps = len(size_batches(x, batch))
            print(f"  round {r + 1} {v}: {rates[v][-1]:.1f} examples/s ({rates[v][-1] * steps / len(x):.2f} steps/s)")
    base = median(rates[args.variants[0]])
    for v in args.variants:
        m = median(rates[v])
        print(f"{v}: {m:.1f} examples/s CPU time (median of {args.rounds}); {m / base:.2f}x {args.variants[0]}")
    if args.skip_convergence:
        return

    # 2. convergence on dev
    import pandas as pd

    items, runs = [], []
    with tempfile.TemporaryDirectory() as folder:
        jobs = [(v, s) for v in args.variants for s in args.seeds]
        for v, s in tqdm(jobs, desc="convergence runs", unit="run"):
            size, batch, lr = spec[v]
            cfg = TrainConfig(epochs=args.epochs, batch_size=batch, lr=lr, seed=s, schedule=args.schedule)
            c = time.process_time()
            model, info = fit_adapter(
                x,
                train,
                adapter_config(size, channels),
                cfg,
                checkpoint_dir=Path(folder),
                provenance={"benchmark": "adapter_variants", "variant": v},
                head_kwargs=heads,
                dev=(xd, dev),
                patience=args.patience,
                min_epochs=args.min_epochs,
                progress=False,
            )
            cpu = time.process_time() - c
            scores, out = evaluate_outcomes(model, xd, dev)
            run = {"variant": v, "seed": s}
            runs.append({**run, "dev_uas": scores["uas"], **{k: info[k] for k in ("best_epoch", "epochs_run")}})
            runs[-1].update(capped=not info["stopped_early"], cpu_s=cpu)
            items += item_rows(run, out)
    runs, items = pd.DataFrame(runs), pd.DataFrame(items)
    make = task_metric("dependency", "dependency", "uas")
    first = items[items.variant == args.variants[0]]
    print(
        f"convergence: schedule {args.schedule}, cap {args.epochs} epochs, patience {args.patience}, min "
        f"{args.min_epochs} epochs, seeds {args.seeds}; dev UAS of the kept epoch (95 % CI over seeds and dev sentences)"
    )
    for v in args.variants:
        r, it = runs[runs.variant == v], items[items.variant == v]
        line = (
            f"{v}: dev UAS {rate(it, make).format(100, 1)} (sd over seeds {100 * r.dev_uas.std(ddof=1):.1f}); epochs "
            f"run {list(r.epochs_run)}, best {list(r.best_epoch)}, capped {int(r.capped.sum())}/{len(r)}; "
            f"{r.cpu_s.mean():.0f} CPU s per run"
        )
        if v != args.variants[0]:
            line += f"; minus {args.variants[0]}: {versus(it, first, make).format(100, 1)} points"
            line += f"; time per run {r.cpu_s.mean() / runs[runs.variant == args.variants[0]].cpu_s.mean():.2f}x"
        print(line)
    print(np.round(runs.set_index(["variant", "seed"]), 4).to_string())


if __name__ == "__main__":
    main()
