"""Notebook 02's logistic visual classifier: one fit after the other (BLAS at its default thread
count, the code before ``train_logistic_many``) against one BLAS thread per fit, in this process
and in worker processes side by side.

Cells: the quick profile's images of the trained models (notebook 02's cache, read as
``benchmarks/classifier_designs.py`` reads them), paper protocol, the last model of each family
as the target, every key of the quick classifier (``--keys``); each cell is one
``train_logistic`` call with the notebook's settings (leave-one-source-out choice of ``C`` over
:data:`olas_utils.similarity.logistic.LOGISTIC_CS`, then the refit on every source).

Each round runs the three ways on the same cells, in rotated order, and the script prints the
median time per way, the ratios, and how far the results of the ways are apart: the chosen
``C`` and lbfgs iterations per cell, the target's ranks, the largest weight difference.

    OMP_NUM_THREADS=2 python benchmarks/logistic_speed.py [--rounds 2] [--keys ola:1 ...] [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from classifier_designs import load_images  # benchmarks/classifier_designs.py
from common import machine_line, median, quiet, rotated

from olas_utils.similarity.evaluation import predict_ranks
from olas_utils.similarity.logistic import train_logistic, train_logistic_many
from olas_utils.studies import crosslm
from olas_utils.vocabulary import FAMILIES, Control


def cells(images, keys: list[str]) -> list[tuple[str, dict, np.ndarray]]:
    """(label, sources' images, target images) per (family, key), the family's last model the target."""
    out = []
    for family in FAMILIES:
        fam = images.family_models(family)
        if len(fam) < 2:
            continue
        target = fam[-1]
        for key in keys:
            have = images.with_key(key, fam, "paper")
            sources = [m for m in have if m != target]
            if target not in have or len(sources) < 2:
                continue
            imgs = images.images(Control.TRAINED.ident, "paper", key, have)
            out.append((f"{family} {key} → {target}", {m: imgs[m] for m in sources}, imgs[target]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--keys", nargs="+", default=list(crosslm.PROFILES["quick"].classifier.keys))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--chunks", type=int, default=128, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.models, args.protocol, args.allow_extract = None, "paper", False
    quiet()
    print(machine_line())
    images, _ = load_images(args)
    todo = cells(images, args.keys)
    print(f"{len(todo)} cells: {', '.join(c[0] for c in todo)}")
    jobs = [{"train_images": src, "refit": True} for _, src, _ in todo]

    ways = {
        "one after the other, default BLAS threads": lambda: [train_logistic(**j) for j in jobs],
        "one after the other, 1 BLAS thread": lambda: train_logistic_many(jobs, workers=1, progress=False),
        f"side by side, {args.workers} workers × 1 thread": lambda: train_logistic_many(
            jobs, workers=args.workers, progress=False
        ),
    }
    times: dict[str, list[float]] = {w: [] for w in ways}
    results: dict[str, list] = {}
    for r in range(args.rounds):
        for w in rotated(list(ways), r):
            t0 = time.perf_counter()
            results[w] = ways[w]()
            times[w].append(time.perf_counter() - t0)
            print(f"round {r + 1}: {w}: {times[w][-1]:.1f} s", flush=True)

    base = list(ways)[0]
    print(f"\n| way ({len(jobs)} cells, {args.rounds} rounds) | median s | × the first |")
    print("|---|---:|---:|")
    for w in ways:
        print(f"| {w} | {median(times[w]):.1f} | {median(times[base]) / median(times[w]):.2f} |")
    ref = results[base]
    for w in list(ways)[1:]:
        got = results[w]
        same_c = sum(a.c == b.c for a, b in zip(ref, got))
        same_it = sum(a.n_iter == b.n_iter for a, b in zip(ref, got))
        same_ranks = sum(
            bool(np.array_equal(predict_ranks(a, t), predict_ranks(b, t))) for a, b, (_, _, t) in zip(ref, got, todo)
        )
        dw = max(float(np.abs(a.model.coef_ - b.model.coef_).max()) for a, b in zip(ref, got))
        dtop = max(
            abs(float((predict_ranks(a, t) < 1).mean()) - float((predict_ranks(b, t) < 1).mean()))
            for a, b, (_, _, t) in zip(ref, got, todo)
        )
        print(
            f"{w} vs the first: same C {same_c}/{len(jobs)}, same iterations {same_it}/{len(jobs)}, "
            f"same target ranks {same_ranks}/{len(jobs)}, largest target top-1 difference {100 * dtop:.1f} points, "
            f"largest weight difference {dw:.1e}"
        )


if __name__ == "__main__":
    main()
