"""Cross-model retrieval by image similarity: batched SSIM, Pearson, Hit@k.

The paper's retrieval test (Liang et al., NeurIPS 2025; ``../shared/paper.md`` §2): for
each of the 1,000 OLA images of a *target* model, rank the 1,000 images of a *source*
model by SSIM (Wang et al., "Image quality assessment: from error visibility to structural
similarity", IEEE TIP 13(4), 2004, as implemented by torchmetrics with its defaults:
Gaussian window, σ 1.5, k1 0.01, k2 0.03, data range taken per pair) and report Hit@1 /
Hit@5, the fraction of target images whose own sentence is ranked first / in the top 5.
The released script calls torchmetrics once per pair (10⁶ calls per model pair).
:func:`ssim_matrix` gives the same numbers for all pairs at once (see its docstring for
the algorithm); ``benchmarks/retrieval.py`` measures the two side by side.

Importing this module does no work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Union

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

__all__ = ["gaussian_window", "ssim_matrix", "pearson_matrix", "true_match_ranks", "hit_at_k", "retrieval_table"]

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


def _band(g: torch.Tensor, n_out: int) -> torch.Tensor:
    """``(n_out, n_out + len(g) - 1)`` matrix whose row ``a`` holds ``g`` at columns ``a … a+len(g)-1``:
    a valid (cross-)correlation with ``g`` as a matrix product."""
    m = torch.zeros(n_out, n_out + len(g) - 1, dtype=g.dtype, device=g.device)
    for a in range(n_out):
        m[a, a : a + len(g)] = g
    return m


def _prepare(x: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor, gv: torch.Tensor, gh: torch.Tensor,
             strips: list[tuple[int, int]], key_side: bool) -> list[tuple]:
    """Everything :func:`ssim_matrix` needs of one side, per (channel, column strip).

    For images ``x`` (N, C, H, W) with their own constants ``c1``, ``c2`` (N,), returns for
    each channel and strip of columns ``[c0, c1)`` (width w; pixels ordered row-major
    within the strip; images always last):

    * ``patch``: horizontal windows of the reflection-padded images, ``(Hp·w, kw, N)``;
      the query side's are multiplied by the horizontal weights;
    * ``mu``: filtered means, ``(H·w, N)``;
    * ``plain`` / ``own``: ``(H·w, 4, N)`` 4-vectors whose dot products give the SSIM
      denominator ``(μq² + μk² + C1)(σq² + σk² + C2)`` (see :func:`ssim_matrix`):
      ``(a·s, a, s, 1)`` with ``a = μ²``, ``s = σ²`` (``plain``), or with ``a + C1`` and
      ``s + C2`` of the image's own constants (``own``); reversed on the key side;
    * the strip width.
    """
    n, ch, h, w = x.shape
    wh, ww = len(gv), len(gh)
    ph, pw = (wh - 1) // 2, (ww - 1) // 2
    hp = h + 2 * ph
    xt = F.pad(x, (pw, pw, ph, ph), mode="reflect").permute(1, 2, 3, 0).contiguous()  # (C, Hp, Wp, N)
    both = torch.matmul(_band(gh, w), torch.stack([xt, xt * xt]))  # horizontal filter, (2, C, Hp, W, N)
    both = torch.matmul(_band(gv, h), both.reshape(2 * ch, hp, -1)).reshape(2, ch, h, w, n)  # vertical
    mu, e2 = both[0], both[1]
    a = mu * mu
    s = torch.clamp(e2 - a, min=0.0)
    a1, s1 = a + c1, s + c2
    win = xt.unfold(2, ww, 1).permute(0, 1, 2, 4, 3)  # (C, Hp, W, kw, N) view
    out = []
    for c in range(ch):
        for c0, c1_ in strips:
            sw = c1_ - c0
            patch = x.new_empty((hp * sw, ww, n))
            patch.view(hp, sw, ww, n).copy_(win[c, :, c0:c1_])  # the windows overlap: a copy
            if not key_side:
                patch.mul_(gh[:, None])
            vecs = []
            for aa, ss in ((a, s), (a1, s1)):
                aa, ss = aa[c, :, c0:c1_], ss[c, :, c0:c1_]  # (H, w, N)
                terms = [aa * ss, aa, ss, torch.ones_like(aa)]
                vecs.append(torch.stack(terms[::-1] if key_side else terms, 2).view(h * sw, 4, n))
            out.append((patch, mu[c, :, c0:c1_].reshape(h * sw, n), vecs[0], vecs[1], sw))
    return out


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
            return ssim_matrix(queries, keys, kernel_size=kernel_size, sigma=sigma, gaussian_kernel=gaussian_kernel,
                               data_range=data_range, k1=k1, k2=k2, dtype=dtype, device=device,
                               max_block_bytes=max_block_bytes, num_threads=None, progress=progress)
        finally:
            torch.set_num_threads(before)
    q = _as_images(queries, "queries", dtype, device)
    k = _as_images(keys, "keys", q.dtype, q.device)
    if q.shape[1:] != k.shape[1:]:
        raise ValueError(f"queries {tuple(q.shape)} and keys {tuple(k.shape)} differ in image shape")
    return _ssim_blocks(q, k, _axis_windows(gaussian_kernel, sigma, kernel_size, q.dtype, q.device),
                        data_range, k1, k2, max_block_bytes, progress)


def _ssim_blocks(q: torch.Tensor, k: torch.Tensor, windows: tuple[torch.Tensor, torch.Tensor], data_range,
                 k1: float, k2: float, max_block_bytes: int, progress: bool,
                 block: tuple[int, int, int | None, int] | None = None) -> torch.Tensor:
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
    band2 = 2 * _band(gv, h)  # the factor 2 of 2σ_qk (exact)
    bands = [(band2[a0:a1, a0 : a1 + wh - 1].contiguous(), a0) for a0, a1 in groups]
    size = cw * bq * bk
    scratch = {"flat": [torch.empty(n * size, dtype=q.dtype, device=q.device) for n in (hp, m, m, m, m, m)],
               "acc_rows": m * cw}
    npix = nch * h * w

    bar = tqdm(total=-(-nq // bq) * -(-nk // nks), desc="SSIM", disable=not progress, unit="block")
    for ks0 in range(0, nk, nks):
        ke0 = min(ks0 + nks, nk)
        side_k = _prepare(k[ks0:ke0], c1k[ks0:ke0], c2k[ks0:ke0], gv, gh, strips, key_side=True)
        views_k = [_block_views(side_k, slice(ks - ks0, min(ks + bk, ke0) - ks0), groups, True)
                   for ks in range(ks0, ke0, bk)]
        for qs0 in range(0, nq, nqc):
            qe0 = min(qs0 + nqc, nq)
            side_q = _prepare(q[qs0:qe0], c1q[qs0:qe0], c2q[qs0:qe0], gv, gh, strips, key_side=False)
            for qs in range(qs0, qe0, bq):
                qe = min(qs + bq, qe0)
                views_q = _block_views(side_q, slice(qs - qs0, qe - qs0), groups, False)
                for ks, vk in zip(range(ks0, ke0, bk), views_k):
                    ke = min(ks + bk, ke0)
                    # C from the queries (all their ranges >= the keys'), from the keys, or mixed
                    mode = "q" if rq_list[qs] >= rk_list[ke - 1] else ("k" if rq_list[qe - 1] <= rk_list[ks] else "mix")
                    rng = torch.maximum(rq[qs:qe, None], rk[None, ks:ke])
                    acc = _pair_block(views_q, vk, mode, torch.pow(k1 * rng, 2), torch.pow(k2 * rng, 2), bands, hp,
                                      scratch)
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


def _block_views(side: list[tuple], sl: slice, groups: list[tuple[int, int]], key_side: bool) -> list[tuple]:
    """Views of a block of images (columns ``sl`` of a :func:`_prepare` output), per strip:
    ``(patches, [per row group: (μ, plain, own, a, s)])``, each shaped to broadcast queries
    along dim 1 and keys along dim 2 of a ``(pixels, queries, keys)`` block."""
    out = []
    for patch, mu, plain, own, sw in side:
        per_group = []
        for a0, a1 in groups:
            px = slice(a0 * sw, a1 * sw)
            if key_side:
                pl = plain[px, :, sl]
                per_group.append((mu[px, None, sl], pl, own[px, :, sl], pl[:, None, 2], pl[:, None, 1]))
            else:
                pl = plain[px, :, sl]
                per_group.append((mu[px, sl, None], pl.transpose(1, 2), own[px, :, sl].transpose(1, 2),
                                  pl[:, 1, :, None], pl[:, 2, :, None]))
        out.append((patch[:, :, sl].transpose(1, 2) if not key_side else patch[:, :, sl], per_group))
    return out


def _pair_block(views_q: list[tuple], views_k: list[tuple], mode: str, c1: torch.Tensor, c2: torch.Tensor,
                bands: list[tuple[torch.Tensor, int]], hp: int, scratch: dict) -> torch.Tensor:
    """Sum over channels and pixels of the SSIM map of a block of pairs, ``(bq, bk)``.

    ``views_q``, ``views_k``: :func:`_block_views` of the block's queries and keys.
    ``mode``: where C1, C2 (``(bq, bk)``, passed either way) come from — ``"q"`` (every
    pair's data range is the query's), ``"k"`` (the key's) or ``"mix"``. ``bands``: per
    row group, (2 × vertical window as a banded matrix, first padded row). ``scratch``:
    ``{"flat": 6 flat buffers, "acc_rows": rows of the accumulator}``, plus views of them cached per shape.
    """
    b1, b2 = c1.shape
    flat = scratch["flat"]
    acc_all = flat[5][: scratch["acc_rows"] * b1 * b2].view(-1, b1, b2).zero_()
    for (pq, gq), (pk, gk) in zip(views_q, views_k):
        sw = pq.shape[0] // hp
        key = ("hx", sw, b1, b2)
        if key not in scratch:
            hx = flat[0][: hp * sw * b1 * b2].view(hp * sw, b1, b2)
            scratch[key] = (hx, hx.view(hp, sw * b1 * b2))
        hx, rows = scratch[key]
        torch.bmm(pq, pk, out=hx)  # horizontal window sums of q·k, every padded row and output column
        for (band, r0), (mq, plq, owq, aq, sq), (mk, plk, owk, ak, sk) in zip(bands, gq, gk):
            key = (band.shape[0], sw, b1, b2)
            if key not in scratch:
                shape = (band.shape[0] * sw, b1, b2)
                n_el = shape[0] * b1 * b2
                bb, num, den, sig, acc = (f[:n_el].view(shape) for f in flat[1:6])
                scratch[key] = (bb, bb.view(band.shape[0], -1), num, den, sig, acc)
            bb, bb2, num, den, sig, acc = scratch[key]
            # B = 2σ_qk + C2 = (C2 - 2μqμk) + (2·vertical window) @ (rows of hx)
            torch.addcmul(c2, mq, mk, value=-2, out=bb)
            torch.addmm(bb2, band, rows[r0 : r0 + band.shape[1]], out=bb2)
            torch.addcmul(c1, mq, mk, value=2, out=num).mul_(bb)  # (2μqμk + C1)·B
            if mode == "q":  # (μq² + μk² + C1)(σq² + σk² + C2) as a 4-term dot product per pixel
                torch.bmm(owq, plk, out=den)
            elif mode == "k":
                torch.bmm(plq, owk, out=den)
            else:  # elementwise
                torch.add(aq, ak, out=den).add_(c1)
                den.mul_(torch.add(sq, sk, out=sig).add_(c2))
            acc.addcdiv_(num, den)
    return acc_all.sum(0)


@torch.no_grad()
def pearson_matrix(queries: ArrayLike, keys: ArrayLike, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Pearson correlation of every (query, key) pair of flattened images.

    ``out[i, j] == numpy.corrcoef(queries[i].ravel(), keys[j].ravel())[0, 1]``. A constant
    image has no correlation: its row/column is NaN (numpy gives NaN too, with a warning).

    Args:
        queries: ``(Nq, ...)`` images (any trailing shape).
        keys: ``(Nk, ...)`` images with the same number of elements per image.
        dtype: computation and output dtype (default float64).

    Returns:
        ``(Nq, Nk)`` tensor.

    Raises:
        ValueError: if the images differ in size.
    """
    a = torch.as_tensor(np.array(queries, copy=True) if isinstance(queries, np.ndarray) else queries).to(dtype)
    b = torch.as_tensor(np.array(keys, copy=True) if isinstance(keys, np.ndarray) else keys).to(dtype=dtype, device=a.device)
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"queries have {a.shape[1]} values per image, keys {b.shape[1]}")
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    na, nb = a.norm(dim=1), b.norm(dim=1)
    a = a / torch.where(na > 0, na, torch.full_like(na, float("nan")))[:, None]
    b = b / torch.where(nb > 0, nb, torch.full_like(nb, float("nan")))[:, None]
    return (a @ b.t()).clamp_(-1.0, 1.0)


def true_match_ranks(sim: ArrayLike, *, ties: str = "pessimistic") -> np.ndarray:
    """0-based rank of each query's own key (key ``i`` for query ``i``) in its row.

    Tie rule: with ``ties="pessimistic"`` (default) every other key scoring *at least* as
    high as the true key ranks above it (``rank_i = #{j ≠ i : s_ij ≥ s_ii}``), so a tie
    always counts against the model — a constant row scores no hit. With
    ``"optimistic"``, only strictly higher keys count (``#{j : s_ij > s_ii}``). NaN
    similarities count as −∞ (a NaN true score is beaten or tied by every key).

    Args:
        sim: ``(Nq, Nk)`` similarities, ``Nq ≤ Nk``; higher = more similar.
        ties: ``"pessimistic"`` or ``"optimistic"``.

    Returns:
        ``(Nq,)`` int64 array of ranks in ``0..Nk-1``.

    Raises:
        ValueError: if ``sim`` is not 2-D, has more rows than columns, or ``ties`` is unknown.
    """
    s = sim.detach().cpu().double().numpy() if isinstance(sim, torch.Tensor) else np.asarray(sim, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] > s.shape[1]:
        raise ValueError(f"sim must be (Nq, Nk) with Nq <= Nk (query i matches key i), got {s.shape}")
    if ties not in ("pessimistic", "optimistic"):
        raise ValueError(f"ties must be 'pessimistic' or 'optimistic', got {ties!r}")
    s = np.where(np.isnan(s), -np.inf, s)
    n = s.shape[0]
    true = s[np.arange(n), np.arange(n)][:, None]
    if ties == "optimistic":
        return (s > true).sum(1).astype(np.int64)
    return ((s >= true).sum(1) - 1).astype(np.int64)  # minus the true key itself


def hit_at_k(sim: ArrayLike, k: int, *, ties: str = "pessimistic") -> float:
    """Hit@k: the fraction of queries whose own key (index i) is among the top k of row i.

    Args:
        sim: ``(Nq, Nk)`` similarities, query i's match is key i.
        k: cut-off (>= 1).
        ties: tie rule of :func:`true_match_ranks` (default pessimistic: ties count against).

    Returns:
        A fraction in [0, 1].

    Raises:
        ValueError: on ``k < 1`` or an invalid ``sim`` (see :func:`true_match_ranks`).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    ranks = true_match_ranks(sim, ties=ties)
    return float((ranks < k).mean()) if len(ranks) else float("nan")


def retrieval_table(
    images_by_model: Mapping[str, ArrayLike],
    metric: str = "ssim",
    ks: Sequence[int] = (1, 5),
    *,
    ties: str = "pessimistic",
    progress: bool = True,
    **ssim_kwargs,
) -> list[dict]:
    """Hit@k retrieval between every ordered pair of models.

    For target T and source S, each image i of T queries all images of S; a hit is image
    i of S (the same chunk) in the top k. Both metrics are symmetric, so each unordered pair
    is computed once and its transpose serves the other direction.

    Args:
        images_by_model: ``{model: (n, H, W) or (n, C, H, W) images}``, the same chunks in
            the same order for every model (e.g. ``CachedImages.images("ola:1")``).
        metric: ``"ssim"`` (:func:`ssim_matrix`, paper) or ``"pearson"``
            (:func:`pearson_matrix`).
        ks: cut-offs.
        ties: tie rule (see :func:`true_match_ranks`).
        progress: progress bar over model pairs.
        **ssim_kwargs: passed to :func:`ssim_matrix`.

    Returns:
        One dict per ordered pair (target ≠ source), in the order of the mapping:
        ``{"target", "source", "metric", "n", "hit@1", "hit@5", ...}`` (fractions).

    Raises:
        ValueError: fewer than two models, different numbers of images or image shapes,
            or an unknown metric.
    """
    if metric not in ("ssim", "pearson"):
        raise ValueError(f"metric must be 'ssim' or 'pearson', got {metric!r}")
    names = list(images_by_model)
    if len(names) < 2:
        raise ValueError(f"need at least two models, got {names}")
    shapes = {n: tuple(np.shape(images_by_model[n])) for n in names}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"all models need the same number and shape of images, got {shapes}")
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    sims: dict[tuple[str, str], torch.Tensor] = {}
    for a, b in tqdm(pairs, desc=f"retrieval ({metric})", disable=not progress, unit="pair"):
        if metric == "ssim":
            sims[a, b] = ssim_matrix(images_by_model[a], images_by_model[b], **ssim_kwargs).cpu()
        else:
            sims[a, b] = pearson_matrix(images_by_model[a], images_by_model[b]).cpu()
    rows = []
    for t in names:
        for s in names:
            if s == t:
                continue
            sim = sims[t, s] if (t, s) in sims else sims[s, t].t()
            row = {"target": t, "source": s, "metric": metric, "n": int(sim.shape[0])}
            for k in ks:
                row[f"hit@{k}"] = hit_at_k(sim, k, ties=ties)
            rows.append(row)
    return rows
