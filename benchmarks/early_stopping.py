"""Early-stopping rules for the quick parsers, replayed on full dev curves: which rule stops late
enough that dev noise does not pick the epoch, at what cost in epochs.

Issue 43, item 3: patience 2 (``SHARED_TRAINING["quick"]``, notebook 03's rule until 2026-12-07) ended some notebook-03 parsers while
their dev UAS was still rising (minilm-l6 ``ola:3`` seed 5: 26.8 test UAS, its other seeds
41.9-43.9), so a re-run whose floats differ slightly can stop at another epoch. This benchmark
trains notebook 03's quick parsers (its data, sizes, adapter, learning rate and plateau schedule;
seeds ``--seeds``) for every epoch of the cap with no early stopping, recording the dev UAS after
each epoch, then replays each rule on those curves. The replay is exact: the plateau schedule's
rate depends only on the dev curve so far, so a run with patience *p* is the prefix of the
uncapped run up to where *p* stops it. The script checks that on the committed notebook-03 runs of
the same seeds, replayed with the rule they were trained with (``QUICK_PARSER_TRAINING``: patience 4
with a 0.5-point minimum gain since 2026-12-07, patience 2 before): their recorded dev curves must be
the replayed prefixes.

Rules (each with notebook 03's ``min_epochs`` 4; the kept epoch is the best dev UAS among the
epochs run, ties to the earlier, as :class:`olas_utils.toa.train.Selection` keeps it):

* ``patience p``: stop after *p* epochs without a new best;
* ``patience p, delta d``: only a gain of more than *d* (UAS fraction) counts as a new best;
* ``smoothed w, patience p``: new bests judged on the trailing mean of *w* epochs.

Per rule: epochs run (the cost), *regret* (the full curve's best dev UAS minus the kept epoch's,
in points) mean and max over runs, and the SD over seeds of the kept dev UAS per system. The rule
is chosen by a criterion fixed before the run: **the fewest mean epochs among rules whose mean
regret is at most 0.5 points and whose largest regret is at most 2 points**. Only dev data is read.

    python benchmarks/early_stopping.py [--seeds 0 1 ... 8] [--systems minilm-l6:ola:3 ...]

The default systems are the three of notebook 03's quick table whose runs stopped early (4 of 72
OLA runs at patience 2: minilm-l6 ola:2 seed 8, ola:3 seeds 5 and 7, smollm2-135m ola:2 seed 4),
every seed of each: the rule must fix those without making the others worse.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import machine_line, quiet, set_threads

#: The rules replayed: (name, patience, delta, smoothing window).
RULES = (
    ("patience 2 (quick until 2026-12-07)", 2, 0.0, 1),
    ("patience 3", 3, 0.0, 1),
    ("patience 4", 4, 0.0, 1),
    ("patience 6", 6, 0.0, 1),
    ("patience 8", 8, 0.0, 1),
    ("patience 2, delta 0.5 pt", 2, 0.005, 1),
    ("patience 4, delta 0.5 pt (quick now)", 4, 0.005, 1),
    ("smoothed 3, patience 2", 2, 0.0, 3),
    ("smoothed 3, patience 3", 3, 0.0, 3),
)


def replay(curve, patience: int, min_epochs: int, delta: float = 0.0, window: int = 1) -> tuple[int, int]:
    """Where a rule stops on a full dev curve: ``(epochs_run, kept_epoch)`` (1-based). A new best
    is a (trailing-``window``-mean) score above the best so far by more than ``delta``; training
    stops once ``patience`` epochs passed without one, not before ``min_epochs``; the kept epoch
    is the raw curve's best among the epochs run (ties: the earlier)."""
    best, last, run = None, 0, len(curve)
    for e in range(1, len(curve) + 1):
        v = float(np.mean(curve[max(0, e - window) : e]))
        if best is None or v > best + delta:
            best, last = v, e
        if e < len(curve) and e >= min_epochs and e - last >= patience:
            run = e
            break
    prefix = curve[:run]
    return run, int(np.argmax(prefix)) + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--systems",
        nargs="+",
        default=["minilm-l6:ola:2", "minilm-l6:ola:3", "smollm2-135m:ola:2"],
        help="MODEL:KEY (the model's maps) or MODEL:tokenizer-only (the family's uniform-attention control)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(9)))
    ap.add_argument("--committed", default="results/03_parser.csv", help="notebook 03's runs, for the replay check")
    ap.add_argument(
        "--threads",
        type=int,
        default=2,
        help="torch threads of this process, as the notebook's kernel (2): the task maps are extracted (or read "
        "from their cache, keyed by thread count) with them, and each of the profile's training workers gets "
        "threads // workers; another count gives other map bytes, so other runs than the committed ones",
    )
    args = ap.parse_args()
    quiet()
    threads = set_threads(args.threads)

    import pandas as pd

    from olas_utils.data.tasks import load_task
    from olas_utils.studies.adapters import MapStore, adapter_job, provenance, stopping, train_adapters
    from olas_utils.studies.syntax import PROFILES
    from olas_utils.toa.taskmaps import ModelPool
    from olas_utils.vocabulary import Control

    cfg = PROFILES["quick"]
    t = cfg.training
    uncapped = replace(t, patience=t.epochs, min_gain=0.0)  # never stops before the cap
    kw = dict(max_words=cfg.sizes.max_words, min_words=cfg.sizes.min_words, seed=0)
    train = load_task("dependency", "train", n=cfg.sizes.n_train, **kw)
    dev = load_task("dependency", "dev", n=cfg.sizes.n_dev, **kw)
    store = MapStore(ModelPool(seed=0), level=cfg.level, progress=False)
    print(machine_line())
    print(
        f"notebook 03 quick: EWT train {len(train)} / dev {len(dev)} sentences, adapter '{t.adapter}', lr {t.lr}, batch "
        f"{t.batch_size}, schedule {t.schedule}, cap {t.epochs} epochs, min {t.min_epochs}; seeds {args.seeds}; "
        f"maps at {threads} threads, {t.workers} runs at a time with {max(1, threads // t.workers)} thread each"
    )
    jobs = {}
    with tempfile.TemporaryDirectory() as folder:
        for system in args.systems:
            model, key = system.split(":", 1)
            inputs = Control.TOKENIZER_ONLY if key == "tokenizer-only" else Control.TRAINED
            keys = ["ola:1"] if inputs is not Control.TRAINED else [key]
            x = {s: store.examples(model, d, keys, inputs=inputs) for s, d in (("train", train), ("dev", dev))}
            for seed in args.seeds:
                jobs[system, seed] = adapter_job(
                    (x["train"], train),
                    (x["dev"], dev),
                    uncapped,
                    seed=seed,
                    provenance=provenance([model], keys, cfg.level, inputs=inputs),
                    checkpoint_dir=Path(folder),
                    desc=f"{system} seed {seed}",
                )
        store.release()
        trained = train_adapters(jobs, uncapped)
    curves = {k: np.asarray(info["curve"], dtype=float) for k, (_, info) in trained.items()}

    # the replay check against notebook 03's committed runs (their rule, the same seeds and data)
    committed = pd.read_csv(args.committed) if Path(args.committed).exists() else None
    checked = matched = 0
    if committed is not None:
        for (system, seed), curve in curves.items():
            model, key = system.split(":", 1)
            cond = "tokenizer-only" if key == "tokenizer-only" else "ola"
            sel = committed[(committed.model == model) & (committed.condition == cond) & (committed.seed == seed)]
            sel = sel[sel.key == ("ola:1" if cond == "tokenizer-only" else key)]
            if len(sel) != 1 or not isinstance(sel.dev_curve.iloc[0], str):
                continue
            recorded = [float(v) for v in sel.dev_curve.iloc[0].split()]
            run, kept = replay(curve, t.patience, t.min_epochs, t.min_gain)
            checked += 1
            matched += (
                run == len(recorded)
                and kept == int(sel.best_epoch.iloc[0])
                and [f"{v:.3f}" for v in curve[:run]] == [f"{v:.3f}" for v in recorded]
            )
        print(
            f"replay check: {matched} of {checked} committed notebook-03 runs ({stopping(t, 'dev UAS')}) are the replayed "
            "prefix of their uncapped run (same epochs run, kept epoch and dev curve to 3 decimals)"
        )

    rows = []
    for name, patience, delta, window in RULES:
        for (system, seed), curve in curves.items():
            run, kept = replay(curve, patience, t.min_epochs, delta, window)
            rows.append(
                {
                    "rule": name,
                    "system": system,
                    "seed": seed,
                    "epochs_run": run,
                    "kept_epoch": kept,
                    "kept_dev_uas": 100 * curve[kept - 1],
                    "regret": 100 * (curve.max() - curve[kept - 1]),
                }
            )
    runs = pd.DataFrame(rows)
    table = runs.groupby("rule", sort=False).agg(
        epochs_mean=("epochs_run", "mean"),
        regret_mean=("regret", "mean"),
        regret_max=("regret", "max"),
        runs_over_2pt=("regret", lambda r: int((r > 2).sum())),
    )
    table["seed_sd_mean"] = runs.groupby(["rule", "system"], sort=False).kept_dev_uas.std(ddof=1).groupby("rule").mean()
    ok = table[(table.regret_mean <= 0.5) & (table.regret_max <= 2.0)]
    print(
        f"{len(curves)} uncapped runs; full curves: best dev UAS at epoch {sorted(int(np.argmax(c)) + 1 for c in curves.values())}"
    )
    print(
        "per rule (regret: full-curve best dev UAS minus the kept epoch's, points; seed sd: of the kept dev UAS, per system):"
    )
    print(table.round(2).to_string())
    print(
        "chosen (fewest mean epochs with mean regret <= 0.5 and max regret <= 2 points): "
        + (ok.epochs_mean.idxmin() if len(ok) else "none of the rules")
    )
    print(runs.pivot_table(index=["system", "seed"], columns="rule", values="regret", sort=False).round(1).to_string())


if __name__ == "__main__":
    main()
