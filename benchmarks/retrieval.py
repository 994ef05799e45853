"""Batched SSIM retrieval vs. torchmetrics called one pair at a time (the released code's way).

Both score the same ``N × N`` pairs of 50 × 50 OLA-like images: row-stochastic, with a
diagonal and symmetric structure; the second "model" sees the same chunks perturbed and
mixed with unrelated maps (``--mix``), so that retrieval is not trivial. The batched
:func:`olas_utils.similarity.ssim_matrix` runs on all pairs; the per-pair loop runs on the
first ``--slice`` queries against all N keys (half of them before the batched run, half
after, so that a change of machine load hits both) and is scaled to N queries. Printed:
the speed-up, the largest deviation from torchmetrics on the slice, and whether the
true-match ranks (hence Hit@k for every k) of *all* N queries are those torchmetrics gives:
torchmetrics is rerun on the N true pairs and on every pair scoring within ``--margin`` of
its query's true pair (the only ones whose order could change with a deviation that small).

    python benchmarks/retrieval.py [--n 1000] [--slice 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import set_threads  # benchmarks/common.py; puts the repository on sys.path
from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

from olas_utils.similarity import ssim_matrix, true_match_ranks


def ola_like(n: int, s: int, seed: int, mix: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Two "models'" images of the same ``n`` chunks, ``(n, s, s)`` float32 each."""
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(n, s, s, generator=g) ** 4
    base = base + base.transpose(1, 2) + 3 * torch.eye(s)
    a = base / base.sum(-1, keepdim=True)
    noise = torch.rand(n, s, s, generator=g) ** 4
    b = base * (1 + 0.8 * (noise + noise.transpose(1, 2)))
    b = b / b.sum(-1, keepdim=True)
    if mix:
        other = torch.rand(n, s, s, generator=g) ** 4
        other = other + other.transpose(1, 2) + 3 * torch.eye(s)
        b = (1 - mix) * b + mix * other / other.sum(-1, keepdim=True)
    return a.numpy(), b.numpy()


def per_pair(qt: torch.Tensor, kt: torch.Tensor, pairs) -> np.ndarray:
    """torchmetrics on each ``(i, j)`` pair, one call per pair."""
    return np.array([tm_ssim(qt[i : i + 1, None], kt[j : j + 1, None]).item() for i, j in pairs], dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=50)
    ap.add_argument("--slice", type=int, default=8, help="queries timed with the per-pair loop (even)")
    ap.add_argument("--mix", type=float, default=0.9, help="share of unrelated maps in the second model's images")
    ap.add_argument("--margin", type=float, default=1e-4, help="pairs this close to their true pair are rechecked")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both (0: torch's default; 1 is fastest on a busy 2-core box)",
    )
    args = ap.parse_args()
    threads = set_threads(args.threads)
    n, sl = args.n, args.slice
    q, k = ola_like(n, args.size, seed=0, mix=args.mix)
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    print(
        f"torch {torch.__version__}, {threads} thread(s), {n} x {n} images of {args.size}x{args.size}, mix {args.mix}"
    )
    ssim_matrix(q[:8], k[:8])  # warm-up of both
    per_pair(qt, kt, [(0, 0)] * 20)

    first = [(i, j) for i in range(sl // 2) for j in range(n)]
    second = [(i, j) for i in range(sl // 2, sl) for j in range(n)]
    t0 = time.perf_counter()
    ref_a = per_pair(qt, kt, first)
    t1 = time.perf_counter()
    sim = ssim_matrix(q, k)
    t2 = time.perf_counter()
    ref_b = per_pair(qt, kt, second)
    t3 = time.perf_counter()
    t_batched, t_slice = t2 - t1, (t1 - t0) + (t3 - t2)
    t_loop = t_slice / sl * n
    ref = np.concatenate([ref_a, ref_b]).reshape(sl, n)

    s = sim.double().numpy()
    part = s[:sl]
    diff = np.abs(part - ref).max()
    same_slice = bool((true_match_ranks(part) == true_match_ranks(ref)).all())
    print(f"batched ssim_matrix, all {n * n:,} pairs: {t_batched:8.1f} s")
    print(
        f"torchmetrics per pair, {sl} x {n} pairs: {t_slice:8.1f} s ({t_slice / (sl * n) * 1e3:.2f} ms/call) "
        f"-> {t_loop:,.0f} s for all (scaled)"
    )
    print(f"speed-up: {t_loop / t_batched:,.0f}x")
    print(f"max abs diff on the timed slice: {diff:.2e}; same true-match ranks on the slice: {same_slice}")

    # all queries: torchmetrics on the true pairs and on the pairs within the margin of them
    true = np.diag(s)
    near = np.abs(s - true[:, None]) <= args.margin
    np.fill_diagonal(near, False)
    pairs = [(i, i) for i in range(n)] + [tuple(p) for p in np.argwhere(near)]
    t0 = time.perf_counter()
    tm = per_pair(qt, kt, pairs)
    t_check = time.perf_counter() - t0
    tm_true = tm[:n]
    ranks_tm = ((s >= true[:, None] + args.margin).sum(1)).astype(np.int64)  # clearly above
    for (i, _j), v in zip(pairs[n:], tm[n:]):
        ranks_tm[i] += v >= tm_true[i]
    ranks_b = true_match_ranks(s)
    print(
        f"all {n} queries: torchmetrics on the {n} true pairs (max abs diff {np.abs(true - tm_true).max():.2e}) and "
        f"the {len(pairs) - n} pairs within {args.margin:g} of them ({t_check:.1f} s); same true-match ranks: "
        f"{bool((ranks_b == ranks_tm).all())}"
    )
    for kk in (1, 5):
        print(
            f"Hit@{kk}: slice batched {np.mean(ranks_b[:sl] < kk):.3f} vs per pair "
            f"{np.mean(true_match_ranks(ref) < kk):.3f}; all {n} queries batched {np.mean(ranks_b < kk):.3f} "
            f"vs torchmetrics {np.mean(ranks_tm < kk):.3f}"
        )


if __name__ == "__main__":
    main()
