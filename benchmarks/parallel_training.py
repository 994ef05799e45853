"""Adapter training throughput: runs one after the other with all threads, against runs side
by side in worker processes with one thread each (``olas_utils.toa.parallel.fit_many``).

Real inputs: UD English-EWT training sentences (3-30 words) and minilm-l6's word-level OLA
(ola:1, raw + sink-removed), the notebooks' quick recipe (``small`` adapter, biaffine head
arc 128 / label 64, batch 8, lr 3e-3), one epoch per run, no dev selection. Each round
trains the same ``--runs`` adapters (different seeds) both ways, in alternating order, into
fresh checkpoint folders; the median time per round is reported with the ratio, and the
weights of the two ways are compared (they differ only by the thread count of the
sequential runs, so they are not expected to be identical).

    python benchmarks/parallel_training.py [--sentences 400] [--runs 2] [--workers 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch  # noqa: E402
from common import machine_line, median, quiet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=400)
    ap.add_argument("--runs", type=int, default=2, help="adapters per round")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    quiet()

    from olas_utils.data.tasks import load_task
    from olas_utils.studies.adapters import MapStore, adapter_job
    from olas_utils.toa.fit import fit_adapter
    from olas_utils.toa.parallel import fit_many
    from olas_utils.toa.taskmaps import ModelPool

    cfg = {"adapter": "small", "epochs": 1, "batch_size": 8, "lr": 3e-3, "arc_dim": 128, "label_dim": 64}
    train = load_task("dependency", "train", n=args.sentences, min_words=3, max_words=30, seed=0)
    x = MapStore(ModelPool(seed=0), level="word", orders=(1,), progress=False).examples("minilm-l6", train, ["ola:1"])
    print(machine_line(), f"| {torch.get_num_threads()} threads in the parent")
    print(
        f"{len(x)} EWT sentences, minilm-l6 ola:1, adapter 'small', 1 epoch per run, {args.runs} runs per round, "
        f"{args.workers} workers"
    )

    def jobs(folder):
        return {
            s: adapter_job((x, train), None, cfg, seed=s, checkpoint_dir=folder, desc=f"seed {s}")
            for s in range(args.runs)
        }

    times: dict[str, list[float]] = {"one after the other": [], "side by side": []}
    for r in range(args.rounds):
        order = list(times) if r % 2 == 0 else list(times)[::-1]
        got = {}
        for way in order:
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                if way == "side by side":
                    got[way] = fit_many(jobs(d), workers=args.workers, progress=False)
                else:
                    got[way] = {k: fit_adapter(**j, progress=False) for k, j in jobs(d).items()}
                times[way].append(time.perf_counter() - t)
        diff = max(
            float((a - b).abs().max())
            for k in got["side by side"]
            for a, b in zip(
                got["side by side"][k][0].state_dict().values(), got["one after the other"][k][0].state_dict().values()
            )
        )
        print(
            f"round {r + 1}: "
            + ", ".join(f"{w} {times[w][-1]:.1f} s" for w in order)
            + f"; largest weight difference {diff:.2e}"
        )
    seq, par = median(times["one after the other"]), median(times["side by side"])
    print(
        f"median per round: one after the other {seq:.1f} s, side by side {par:.1f} s: {seq / par:.2f}x the throughput"
    )


if __name__ == "__main__":
    main()
