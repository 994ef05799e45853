"""Batched SSIM retrieval vs. torchmetrics called one pair at a time (the released code's way).

Both score the same ``N × N`` pairs of 50 × 50 OLA-like images (row-stochastic, sinks
removed, symmetric; a second "model" sees the same chunks with perturbations). The batched
:func:`olas_utils.similarity.ssim_matrix` runs on all pairs; the per-pair loop runs on the
first ``--slice`` queries against all N keys and is scaled to N queries. The script prints
the speed-up and checks that the per-pair scores, and the Hit@1/Hit@5 of those queries, are
identical.

    python benchmarks/retrieval.py [--n 1000] [--slice 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

from olas_utils.similarity import ssim_matrix, true_match_ranks


def ola_like(n: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(n, s, s, generator=g) ** 4
    base = base + base.transpose(1, 2) + 3 * torch.eye(s)
    a = base / base.sum(-1, keepdim=True)
    noise = torch.rand(n, s, s, generator=g) ** 4
    b = base * (1 + 0.8 * (noise + noise.transpose(1, 2)))
    b = b / b.sum(-1, keepdim=True)
    return a.numpy(), b.numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=50)
    ap.add_argument("--slice", type=int, default=4, help="queries timed with the per-pair loop")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both (1 is fastest on a busy 2-core box)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    q, k = ola_like(args.n, args.size, seed=0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.n} x {args.n} images of {args.size}x{args.size}")

    t0 = time.perf_counter()
    sim = ssim_matrix(q, k)
    t_batched = time.perf_counter() - t0

    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    ref = np.empty((args.slice, args.n), dtype=np.float64)
    t0 = time.perf_counter()
    for i in range(args.slice):
        for j in range(args.n):
            ref[i, j] = tm_ssim(qt[i : i + 1, None], kt[j : j + 1, None]).item()
    t_slice = time.perf_counter() - t0
    t_loop = t_slice / args.slice * args.n

    part = sim[: args.slice].double().numpy()
    diff = np.abs(part - ref).max()
    ranks_b = true_match_ranks(part)
    ranks_r = true_match_ranks(ref)
    full = true_match_ranks(sim.numpy())
    print(f"batched ssim_matrix, all {args.n * args.n:,} pairs: {t_batched:8.1f} s")
    print(f"torchmetrics per pair, {args.slice} x {args.n} pairs: {t_slice:8.1f} s -> {t_loop:,.0f} s for all (scaled)")
    print(f"speed-up: {t_loop / t_batched:,.0f}x")
    print(f"max abs diff on the timed slice: {diff:.2e}; same true-match ranks on the slice: {bool((ranks_b == ranks_r).all())}")
    for kk in (1, 5):
        print(f"Hit@{kk}: slice batched {np.mean(ranks_b < kk):.3f} vs per pair {np.mean(ranks_r < kk):.3f}; all {args.n} queries (batched) {np.mean(full < kk):.3f}")


if __name__ == "__main__":
    main()
