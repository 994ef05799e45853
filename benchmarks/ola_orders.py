"""OLA by the recurrence vs. brute-force enumeration of layer combinations.

The enumeration is our faithful re-implementation of the released code's approach: for each
order k, loop over ``itertools.combinations(range(N), k)``, multiply the k layers' maps
(higher layer on the left) and average. Both run side by side in one process on the same
random row-stochastic matrices (float32, batch 1, T = 64); the script prints the speed-up
and the maximum absolute difference.

    python benchmarks/ola_orders.py [--layers 6 12 24 32 42] [--orders 1 2 3 4] [--tokens 64]
"""

from __future__ import annotations

import argparse
import time
from itertools import combinations
from math import comb

import torch

from olas_utils.maths.ola import ola_from_layers


def enumerate_orders(layers: torch.Tensor, max_order: int) -> dict[int, torch.Tensor]:
    """The released approach: every combination of k layers, product, mean over C(N, k)."""
    n = layers.shape[0]
    out = {}
    for k in range(1, max_order + 1):
        total = torch.zeros_like(layers[0])
        for combo in combinations(range(n), k):
            prod = layers[combo[0]]
            for i in combo[1:]:
                prod = layers[i] @ prod
            total += prod
        out[k] = total / comb(n, k)
    return out


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[6, 12, 24, 32, 42])
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is the stable choice on a busy 2-core machine)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, T={args.tokens}, float32, batch 1")
    print(
        f"{'N':>3} {'K':>2} {'products':>9} {'enumeration s':>14} {'recurrence s':>13} {'speed-up':>9} {'max abs diff':>13}"
    )
    for n in args.layers:
        a = torch.rand(n, 1, args.tokens, args.tokens) ** 3
        a = a / a.sum(-1, keepdim=True)
        for k in args.orders:
            if k > n:
                continue
            ref = enumerate_orders(a, k)
            got = ola_from_layers(a, range(1, k + 1))
            diff = max((ref[j] - got[j]).abs().max().item() for j in range(1, k + 1))
            # interleaved repeats: enumeration, recurrence, enumeration, ... (the machine is noisy)
            reps = 1 if comb(n, k) > 20000 else args.repeats
            t_enum, t_rec = float("inf"), float("inf")
            for _ in range(reps):
                t_enum = min(t_enum, best_time(lambda: enumerate_orders(a, k), 1))
                t_rec = min(t_rec, best_time(lambda: ola_from_layers(a, range(1, k + 1)), 5))
            n_prod = sum(comb(n, j) for j in range(1, k + 1))
            print(
                f"{n:>3} {k:>2} {n_prod:>9} {t_enum:>14.4f} {t_rec:>13.5f} {t_enum / t_rec:>8.0f}x {diff:>13.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
