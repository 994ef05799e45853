"""Batched SSIM of every (query, key) pair of two image sets, as torchmetrics defines it.

SSIM is Wang et al., "Image quality assessment: from error visibility to structural
similarity", IEEE TIP 13(4), 2004, as implemented by torchmetrics with its defaults:
Gaussian window, σ 1.5, k1 0.01, k2 0.03, data range taken per pair.
The released script calls torchmetrics once per pair (10⁶ calls per model pair).
:func:`ssim_matrix` gives the same numbers for all pairs at once (see its docstring for
the algorithm; the per-block kernels are in :mod:`olas_utils.similarity.ssim_kernels`);
``benchmarks/retrieval.py`` measures the two side by side.

Importing this module does no work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np
import torch

from olas_utils.infra.progress import tqdm
from olas_utils.similarity.ssim_kernels import (
    band_matrix,
    block_views,
    pair_block,
    prepare_side,
)

__all__ = ["gaussian_window", "ssim_matrix"]


ArrayLike = Union[np.ndarray, torch.Tensor]


# Block shape of the pair loop on the CPU, tuned on a 2-core AMD EPYC (Zen 4) with one
# thread for 50 × 50 images: 64 queries × 128 keys per block, vertical strips 2 columns
# wide, 10 output rows per vertical-filter product. Other devices process whole rows.
_CPU_BLOCK = (64, 128, 2, 10)


_OTHER_BLOCK = (128, 256, None, 10)


def _as_images(x: ArrayLike, name: str, dtype: torch.dtype | None, device) -> torch.Tensor:
    """``(N, C, H, W)`` floating tensor from ``(N, H, W)`` or ``(N, C, H, W)`` input."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.array(x, copy=True))  # memmaps are read-only: copy
    elif not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(x).__name__}")
    if x.dim() == 3:
        x = x.unsqueeze(1)
    if x.dim() != 4:
        raise ValueError(f"{name} must be (N, H, W) or (N, C, H, W), got shape {tuple(x.shape)}")
    if dtype is None:
        dtype = x.dtype if x.is_floating_point() else torch.float32
    return x.to(device=device if device is not None else x.device, dtype=dtype)


def _gaussian_1d(n: int, s: float, dtype, device) -> torch.Tensor:
    """torchmetrics' ``_gaussian``: ``n`` weights ``exp(-(d/s)²/2)``, normalised to sum 1."""
    d = torch.arange(start=(1 - n) / 2, end=(1 + n) / 2, step=1, dtype=dtype, device=device)
    g = torch.exp(-torch.pow(d / s, 2) / 2)
    return g / g.sum()


def gaussian_window(sigma: float | Sequence[float] = 1.5, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """The 2-D Gaussian window torchmetrics' SSIM uses.

    Size per axis ``int(3.5·σ + 0.5)·2 + 1`` (11 for σ = 1.5), weights
    ``exp(-(d/σ)²/2)`` at offsets ``d = -(size-1)/2 … (size-1)/2``, normalised per axis to
    sum 1, and the 2-D window is the outer product of the two axes — exactly
    ``torchmetrics.functional.image.utils._gaussian_kernel_2d`` (torchmetrics 1.x).

    Args:
        sigma: standard deviation in pixels, one value or ``(σ_rows, σ_columns)``.
        dtype, device: of the result.

    Returns:
        ``(size_h, size_w)`` tensor whose entries sum to 1 (up to rounding).
    """
    sig = [float(sigma)] * 2 if not isinstance(sigma, Sequence) else [float(s) for s in sigma]
    axes = [_gaussian_1d(int(3.5 * s + 0.5) * 2 + 1, s, dtype, device).unsqueeze(0) for s in sig]
    return torch.matmul(axes[0].t(), axes[1])


def _axis_windows(gaussian_kernel: bool, sigma, kernel_size, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The SSIM window as its two 1-D factors ``(rows, columns)``, validated as torchmetrics does."""
    ks = [kernel_size] * 2 if not isinstance(kernel_size, Sequence) else list(kernel_size)
    sig = [sigma] * 2 if not isinstance(sigma, Sequence) else list(sigma)
    if len(ks) != 2 or len(sig) != 2:
        raise ValueError(f"kernel_size and sigma must be scalars or pairs, got {kernel_size!r}, {sigma!r}")
    if any(not isinstance(k, int) or k % 2 == 0 or k <= 0 for k in ks):
        raise ValueError(f"kernel_size must be odd positive integers, got {kernel_size!r}")
    if any(s <= 0 for s in sig):
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    if gaussian_kernel:
        return tuple(_gaussian_1d(int(3.5 * float(s) + 0.5) * 2 + 1, float(s), dtype, device) for s in sig)
    return tuple(torch.full((k,), 1.0 / k, dtype=dtype, device=device) for k in ks)


@torch.no_grad()
def ssim_matrix(
    queries: ArrayLike,
    keys: ArrayLike,
    *,
    kernel_size: int | Sequence[int] = 11,
    sigma: float | Sequence[float] = 1.5,
    gaussian_kernel: bool = True,
    data_range: float | tuple[float, float] | None = None,
    k1: float = 0.01,
    k2: float = 0.03,
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    max_block_bytes: int = 256 * 2**20,
    num_threads: int | None = None,
    progress: bool = False,
) -> torch.Tensor:
    """SSIM of every (query, key) pair, equal to torchmetrics called on one pair at a time.

    ``out[i, j] == structural_similarity_index_measure(queries[i:i+1], keys[j:j+1],
    gaussian_kernel=..., sigma=..., kernel_size=..., data_range=..., k1=..., k2=...)``
    (reduction ``elementwise_mean``) up to float rounding (tested: ≤ 1e-5 in float32,
    ≤ 1e-10 in float64). SSIM is Wang et al. (IEEE TIP 2004); what torchmetrics 1.9
    (``functional/image/ssim.py``) computes, and so this function:

    * window: with ``gaussian_kernel`` (default) a Gaussian of size ``int(3.5σ + 0.5)·2 + 1``
      per axis (:func:`gaussian_window`; ``kernel_size`` is then only validated, as in
      torchmetrics); else a uniform ``kernel_size`` window;
    * borders: each image is reflection-padded by half the window on each side
      (``F.pad(mode="reflect")``) and filtered without padding ("valid"), so the SSIM map
      has the image's size, and the score is the mean of the *whole* map over channels and
      pixels (torchmetrics crops the border only of its contrast-sensitivity output, which
      SSIM does not use);
    * ``data_range=None``: per pair, ``L = max(q.max() - q.min(), k.max() - k.min())``
      (over all channels of the two images); a float is used as is; a tuple ``(lo, hi)``
      clamps both images to it and uses ``hi - lo``. ``C1 = (k1·L)²``, ``C2 = (k2·L)²``;
    * ``σ_q² = max(E[q²] - μ_q², 0)`` (likewise for k), ``σ_qk = E[qk] - μ_q μ_k``;
      ``SSIM = (2μ_qμ_k + C1)(2σ_qk + C2) / ((μ_q² + μ_k² + C1)(σ_q² + σ_k² + C2))``.

    How (the same sums, in another order):

    * everything but the cross moment ``E[qk]`` depends on one image: ``μ``, ``μ²`` and
      ``σ²`` are filtered once per image (the window is separable, so as two banded matrix
      products);
    * ``E[qk]`` is the window-weighted sum of ``q·k`` around each pixel, for every pair.
      Separably: for each padded row and output column, the horizontal sums of all pairs of
      a block are one small matrix product, ``(queries × kw) @ (kw × keys)`` (a batched
      matmul over positions); the vertical sums are a banded matrix (10 output rows × 20
      input rows) times those rows for all pairs at once. About 11 + 20 multiply-adds per
      pixel and pair instead of the window's 121;
    * the denominator ``(a_q + a_k + C1)(s_q + s_k + C2)`` (``a = μ²``, ``s = σ²``) is, when
      C1 and C2 are those of one image of the pair, a dot product of two 4-vectors, one per
      image (``(a_q'·s_q', a_q', s_q', 1)·(1, s_k, a_k, a_k·s_k)`` with ``a_q' = a_q + C1``,
      ``s_q' = s_q + C2``): a batched matmul. Queries and keys are sorted by data range, so
      that in most blocks of pairs ``L`` is the queries' range for every pair, or the keys';
      the other blocks use the elementwise form (with ``data_range`` given, C1 and C2 are
      the same for all pairs and every block is of the first kind);
    * the SSIM map is formed and summed in a few elementwise steps, on blocks of 64 × 128
      pairs and strips of 2 columns (CPU), small enough to stay in cache.

    Cost (``benchmarks/retrieval.py``, 2-core AMD EPYC Zen 4, one thread): 1,000 × 1,000
    pairs of 50 × 50 images in ~6 s, about 2.4 ns per pixel and pair, ~125× the
    torchmetrics call per pair (0.77 ms). Peak memory is about 1.3 × ``max_block_bytes``
    above the inputs and the result (measured: 340 MiB at the default 256 MiB, 1,000 ×
    1,000 images of 50 × 50).

    A pair whose images are both constant has ``L = 0`` and SSIM 0/0: NaN, as torchmetrics
    gives for two equal constant images (``data_range=None``).

    Args:
        queries: ``(Nq, H, W)`` or ``(Nq, C, H, W)`` images (numpy or torch), any values
            (units of the images; the window is in pixels).
        keys: ``(Nk, ...)`` images of the same shape.
        kernel_size, sigma, gaussian_kernel, data_range, k1, k2: as torchmetrics (above).
        dtype: computation dtype (default: the input's floating dtype, float32 for ints).
            torchmetrics computes in the input dtype too.
        device: where to compute (default: the queries' device). Tuned for the CPU; other
            devices run the same operations on larger blocks.
        max_block_bytes: memory budget (bytes) for the per-image tensors held at once (all
            the keys that fit, a chunk of queries; ~0.22 MB per 50 × 50 image) plus one
            block's working buffers; more keys than fit are processed in groups, and blocks
            shrink if even one block does not fit. Results do not depend on it beyond float
            rounding.
        num_threads: CPU threads for this call (``torch.set_num_threads``, restored
            afterwards); None keeps torch's setting. On a CPU shared with other jobs, 1 can
            be much faster than 2 (OpenMP threads wait for each other at every step).
        progress: show a progress bar over query blocks.

    Returns:
        ``(Nq, Nk)`` tensor of SSIM values (dimensionless, ≤ 1) on the computation device,
        in the computation dtype.

    Raises:
        TypeError: if an input is neither a numpy array nor a torch tensor.
        ValueError: on mismatched or wrong shapes, images smaller than the window's
            reflection padding allows (padding must be < the image side), or invalid
            window parameters (even/non-positive ``kernel_size``, non-positive ``sigma``).
    """
    if num_threads is not None:
        before = torch.get_num_threads()
        torch.set_num_threads(int(num_threads))
        try:
            return ssim_matrix(
                queries,
                keys,
                kernel_size=kernel_size,
                sigma=sigma,
                gaussian_kernel=gaussian_kernel,
                data_range=data_range,
                k1=k1,
                k2=k2,
                dtype=dtype,
                device=device,
                max_block_bytes=max_block_bytes,
                num_threads=None,
                progress=progress,
            )
        finally:
            torch.set_num_threads(before)
    q = _as_images(queries, "queries", dtype, device)
    k = _as_images(keys, "keys", q.dtype, q.device)
    if q.shape[1:] != k.shape[1:]:
        raise ValueError(f"queries {tuple(q.shape)} and keys {tuple(k.shape)} differ in image shape")
    return _ssim_blocks(
        q,
        k,
        _axis_windows(gaussian_kernel, sigma, kernel_size, q.dtype, q.device),
        data_range,
        k1,
        k2,
        max_block_bytes,
        progress,
    )


def _ssim_blocks(
    q: torch.Tensor,
    k: torch.Tensor,
    windows: tuple[torch.Tensor, torch.Tensor],
    data_range,
    k1: float,
    k2: float,
    max_block_bytes: int,
    progress: bool,
    block: tuple[int, int, int | None, int] | None = None,
) -> torch.Tensor:
    """:func:`ssim_matrix` on validated ``(N, C, H, W)`` tensors; ``block`` overrides the
    block shape ``(queries, keys, strip width, rows per vertical product)`` (tests)."""
    nq, nch, h, w = q.shape
    nk = k.shape[0]
    gv, gh = windows
    wh, ww = len(gv), len(gh)
    ph, pw = (wh - 1) // 2, (ww - 1) // 2
    if ph >= h or pw >= w:
        raise ValueError(f"images of {h}x{w} are too small for a {wh}x{ww} window (reflection padding)")
    out = torch.empty((nq, nk), dtype=q.dtype, device=q.device)
    if nq == 0 or nk == 0:
        return out
    hp = h + 2 * ph

    # data range per image; C of a pair comes from L = max(range_q, range_k)
    if data_range is None:
        rq = q.flatten(1).amax(1) - q.flatten(1).amin(1)
        rk = k.flatten(1).amax(1) - k.flatten(1).amin(1)
    else:
        if isinstance(data_range, tuple):
            lo, hi = data_range
            q, k = q.clamp(lo, hi), k.clamp(lo, hi)
            data_range = hi - lo
        rq = torch.full((nq,), float(data_range), dtype=q.dtype, device=q.device)
        rk = torch.full((nk,), float(data_range), dtype=q.dtype, device=q.device)
    # sorted by range, blocks of pairs mostly take L from one side only (see the docstring)
    oq, ok = torch.argsort(rq, stable=True), torch.argsort(rk, stable=True)
    q, rq, k, rk = q[oq], rq[oq], k[ok], rk[ok]
    rq_list, rk_list = rq.tolist(), rk.tolist()
    c1q, c2q = torch.pow(k1 * rq, 2), torch.pow(k2 * rq, 2)
    c1k, c2k = torch.pow(k1 * rk, 2), torch.pow(k2 * rk, 2)

    bq, bk, cw, m = block or (_CPU_BLOCK if q.device.type == "cpu" else _OTHER_BLOCK)
    cw = min(cw or w, w)
    m = min(m, h)
    item = q.element_size()
    per_image = item * nch * (hp * w * ww + 9 * h * w)  # patches, μ, two 4-vectors

    def buffers(bq_, bk_):
        return item * (hp + 5 * m) * cw * bq_ * bk_

    bq, bk = min(bq, nq), min(bk, nk)
    while bq * bk > 1 and buffers(bq, bk) + per_image * (bq + bk) > max_block_bytes:
        if bk >= bq:
            bk = max(1, bk // 2)
        else:
            bq = max(1, bq // 2)
    # per-image tensors held at once: a chunk of queries (a few blocks: long contiguous runs
    # when preparing them) and as many keys as the rest of the budget allows
    avail = max(0, (max_block_bytes - buffers(bq, bk)) // per_image)
    nqc = min(nq, max(bq, min(2 * bq, avail - bk) // bq * bq))
    nks = min(nk, max(bk, (avail - nqc) // bk * bk))

    strips = [(c0, min(c0 + cw, w)) for c0 in range(0, w, cw)]
    groups = [(a0, min(a0 + m, h)) for a0 in range(0, h, m)]
    band2 = 2 * band_matrix(gv, h)  # the factor 2 of 2σ_qk (exact)
    bands = [(band2[a0:a1, a0 : a1 + wh - 1].contiguous(), a0) for a0, a1 in groups]
    size = cw * bq * bk
    scratch = {
        "flat": [torch.empty(n * size, dtype=q.dtype, device=q.device) for n in (hp, m, m, m, m, m)],
        "acc_rows": m * cw,
    }
    npix = nch * h * w

    bar = tqdm(total=-(-nq // bq) * -(-nk // nks), desc="SSIM", disable=not progress, unit="block")
    for ks0 in range(0, nk, nks):
        ke0 = min(ks0 + nks, nk)
        side_k = prepare_side(k[ks0:ke0], c1k[ks0:ke0], c2k[ks0:ke0], gv, gh, strips, key_side=True)
        views_k = [
            block_views(side_k, slice(ks - ks0, min(ks + bk, ke0) - ks0), groups, True) for ks in range(ks0, ke0, bk)
        ]
        for qs0 in range(0, nq, nqc):
            qe0 = min(qs0 + nqc, nq)
            side_q = prepare_side(q[qs0:qe0], c1q[qs0:qe0], c2q[qs0:qe0], gv, gh, strips, key_side=False)
            for qs in range(qs0, qe0, bq):
                qe = min(qs + bq, qe0)
                views_q = block_views(side_q, slice(qs - qs0, qe - qs0), groups, False)
                for ks, vk in zip(range(ks0, ke0, bk), views_k):
                    ke = min(ks + bk, ke0)
                    # C from the queries (all their ranges >= the keys'), from the keys, or mixed
                    mode = "q" if rq_list[qs] >= rk_list[ke - 1] else ("k" if rq_list[qe - 1] <= rk_list[ks] else "mix")
                    rng = torch.maximum(rq[qs:qe, None], rk[None, ks:ke])
                    acc = pair_block(
                        views_q, vk, mode, torch.pow(k1 * rng, 2), torch.pow(k2 * rng, 2), bands, hp, scratch
                    )
                    out[qs:qe, ks:ke] = acc / npix
                bar.update(1)
    bar.close()
    if data_range is None:
        # both images constant: 0/0 (rounding could otherwise leave a huge finite value)
        out[(rq[:, None] == 0) & (rk[None, :] == 0)] = float("nan")
    inv_q, inv_k = torch.empty_like(oq), torch.empty_like(ok)
    inv_q[oq] = torch.arange(nq, device=oq.device)
    inv_k[ok] = torch.arange(nk, device=ok.device)
    return out[inv_q][:, inv_k]
