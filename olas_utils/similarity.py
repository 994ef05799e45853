"""Cross-model retrieval by image similarity: batched SSIM, Pearson, Hit@k.

The paper's retrieval test (Liang et al., NeurIPS 2025; ``../shared/paper.md`` §2): for
each of the 1,000 OLA images of a *target* model, rank the 1,000 images of a *source*
model by SSIM (torchmetrics defaults: Gaussian window, σ 1.5, k1 0.01, k2 0.03, data
range taken per pair) and report Hit@1 / Hit@5, the fraction of target images whose own
sentence is ranked first / in the top 5. The released script calls torchmetrics once per
pair (10⁶ calls per model pair). :func:`ssim_matrix` gives the same numbers for all pairs
at once:

* each image's Gaussian-filtered mean ``μ`` and second moment ``E[x²]`` are computed once
  (reflection padding, as torchmetrics);
* the cross moment ``E[qk](p) = Σ_u w_u q(p+u) k(p+u)`` of every (query, key) pair at
  every pixel ``p`` is a batched matrix product: for each pixel, the ``(Nq, |w|)`` matrix
  of weighted query patches times the ``(|w|, Nk)`` matrix of key patches (exact: the same
  sum of products as torchmetrics' convolution of ``q·k``, in another summation order);
* the SSIM map and its mean follow elementwise, block by block over pairs, so memory stays
  bounded (``max_block_bytes``).

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
_SLAB_BYTES = 4 << 20  # elementwise work per pixel slab on the CPU (cache-sized)


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


def gaussian_window(sigma: float | Sequence[float] = 1.5, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """The 2-D Gaussian window torchmetrics' SSIM uses.

    Size per axis ``int(3.5·σ + 0.5)·2 + 1`` (11 for σ = 1.5), weights
    ``exp(-(d/σ)²/2)`` at offsets ``d = -(size-1)/2 … (size-1)/2``, normalised per axis to
    sum 1, and the 2-D window is the outer product of the two axes — exactly
    ``torchmetrics.functional.image.utils._gaussian_kernel_2d`` (torchmetrics 1.x).

    Returns:
        ``(size_h, size_w)`` tensor.
    """
    sig = [float(sigma)] * 2 if not isinstance(sigma, Sequence) else [float(s) for s in sigma]
    axes = []
    for s in sig:
        n = int(3.5 * s + 0.5) * 2 + 1
        d = torch.arange(start=(1 - n) / 2, end=(1 + n) / 2, step=1, dtype=dtype, device=device)
        g = torch.exp(-torch.pow(d / s, 2) / 2)
        axes.append((g / g.sum()).unsqueeze(0))
    return torch.matmul(axes[0].t(), axes[1])


def _window(gaussian_kernel: bool, sigma, kernel_size, dtype, device) -> torch.Tensor:
    ks = [kernel_size] * 2 if not isinstance(kernel_size, Sequence) else list(kernel_size)
    sig = [sigma] * 2 if not isinstance(sigma, Sequence) else list(sigma)
    if len(ks) != 2 or len(sig) != 2:
        raise ValueError(f"kernel_size and sigma must be scalars or pairs, got {kernel_size!r}, {sigma!r}")
    if any(not isinstance(k, int) or k % 2 == 0 or k <= 0 for k in ks):
        raise ValueError(f"kernel_size must be odd positive integers, got {kernel_size!r}")
    if any(s <= 0 for s in sig):
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    if gaussian_kernel:
        return gaussian_window(sig, dtype=dtype, device=device)
    return torch.ones(ks, dtype=dtype, device=device) / torch.prod(torch.tensor(ks, dtype=dtype, device=device))


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
    (reduction ``elementwise_mean``) up to float rounding (tested: ≤ 1e-5). What that
    means, read from torchmetrics 1.9 ``functional/image/ssim.py``:

    * window: with ``gaussian_kernel`` (default) a Gaussian of size
      ``int(3.5σ + 0.5)·2 + 1`` per axis (:func:`gaussian_window`; ``kernel_size`` is then
      only validated, as in torchmetrics); else a uniform ``kernel_size`` window;
    * borders: each image is reflection-padded by half the window on each side
      (``F.pad(mode="reflect")``), so the SSIM map has the image's size, and the score is
      the mean of the *whole* map over channels and pixels (no cropping);
    * ``data_range=None``: per pair, ``L = max(q.max() - q.min(), k.max() - k.min())``
      (over all channels of the two images); a float is used as is; a tuple ``(lo, hi)``
      clamps both images to it and uses ``hi - lo``. ``C1 = (k1·L)²``, ``C2 = (k2·L)²``;
    * ``σ_q² = max(E[q²] - μ_q², 0)`` (likewise for k), ``σ_qk = E[qk] - μ_q μ_k``;
      ``SSIM = (2μ_qμ_k + C1)(2σ_qk + C2) / ((μ_q² + μ_k² + C1)(σ_q² + σ_k² + C2))``.

    Two constant images with equal values have ``L = 0`` and SSIM NaN (0/0), as in
    torchmetrics.

    Args:
        queries: ``(Nq, H, W)`` or ``(Nq, C, H, W)`` images (numpy or torch).
        keys: ``(Nk, ...)`` images of the same shape.
        kernel_size, sigma, gaussian_kernel, data_range, k1, k2: as torchmetrics.
        dtype: computation dtype (default: the input's floating dtype, float32 for ints).
            torchmetrics computes in the input dtype.
        device: where to compute (default: the queries' device).
        max_block_bytes: memory budget for one block of pairs (the window patches of a
            block of queries and keys); the result does not depend on it beyond float rounding.
        num_threads: CPU threads for this call (``torch.set_num_threads``, restored
            afterwards); None keeps torch's setting. On a CPU shared with other jobs, 1 can
            be several times faster than 2 (the threads wait for each other on every
            elementwise step). Cost: 121 multiply-adds per pixel and pair (3·10⁵ per pair of
            50 × 50 images) plus ~12 elementwise steps; measured ~35 s for 1,000 × 1,000
            pairs of 50 × 50 images on one CPU core.
        progress: show a progress bar over query blocks.

    Returns:
        ``(Nq, Nk)`` tensor on the computation device, in the computation dtype.

    Raises:
        ValueError: on mismatched or wrong shapes, images smaller than the window's
            reflection padding allows, or invalid window parameters.
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
    nq, c, h, w = q.shape
    nk = k.shape[0]
    win = _window(gaussian_kernel, sigma, kernel_size, q.dtype, q.device)  # (wh, ww)
    wh, ww = win.shape
    ph, pw = (wh - 1) // 2, (ww - 1) // 2
    if ph >= h or pw >= w:
        raise ValueError(f"images of {h}x{w} are too small for a {wh}x{ww} window (reflection padding)")
    out = torch.empty((nq, nk), dtype=q.dtype, device=q.device)
    if nq == 0 or nk == 0:
        return out

    # per-pair data range and constants
    if data_range is None:
        rq = q.flatten(1).amax(1) - q.flatten(1).amin(1)
        rk = k.flatten(1).amax(1) - k.flatten(1).amin(1)
        rng = torch.maximum(rq[:, None], rk[None, :])  # (Nq, Nk)
        c1_all = torch.pow(k1 * rng, 2)
        c2_all = torch.pow(k2 * rng, 2)
    else:
        if isinstance(data_range, tuple):
            lo, hi = data_range
            q, k = q.clamp(lo, hi), k.clamp(lo, hi)
            data_range = hi - lo
        c1_all = torch.full((nq, nk), pow(k1 * data_range, 2), dtype=q.dtype, device=q.device)
        c2_all = torch.full((nq, nk), pow(k2 * data_range, 2), dtype=q.dtype, device=q.device)

    kern = win.expand(c, 1, wh, ww)
    npix = c * h * w
    nwin = wh * ww
    flat_w = win.reshape(1, 1, nwin)

    def moments(x: torch.Tensor):
        """Filtered mean and second moment, ``(P, N)`` each (P = C·H·W pixels)."""
        xp = F.pad(x, (pw, pw, ph, ph), mode="reflect")
        n = x.shape[0]
        mu = F.conv2d(xp, kern, groups=c).reshape(n, npix).t()
        e2 = F.conv2d(xp * xp, kern, groups=c).reshape(n, npix).t()
        return mu, e2

    def patches(x: torch.Tensor) -> torch.Tensor:
        """``(P, N, nwin)`` contiguous window patches of the padded images."""
        xp = F.pad(x, (pw, pw, ph, ph), mode="reflect")
        v = xp.unfold(2, wh, 1).unfold(3, ww, 1)  # (N, C, H, W, wh, ww) view
        return v.permute(1, 2, 3, 0, 4, 5).reshape(npix, x.shape[0], nwin).contiguous()

    mu_q_all, e2_q_all = moments(q)
    mu_k_all, e2_k_all = moments(k)
    sig_q_all = torch.clamp(e2_q_all - mu_q_all * mu_q_all, min=0.0)
    sig_k_all = torch.clamp(e2_k_all - mu_k_all * mu_k_all, min=0.0)

    # blocks of b x b pairs: their window patches, (P, b, nwin) for queries and keys, fit
    # in max_block_bytes; on the CPU the SSIM map is then computed over slabs of pixels small
    # enough for the elementwise work to stay in cache (_SLAB_BYTES per temporary).
    item = q.element_size()
    b = max(1, int(max_block_bytes // (2 * npix * nwin * item)))
    bq, bk = min(b, nq), min(b, nk)
    slab = npix if q.device.type != "cpu" else max(1, min(npix, _SLAB_BYTES // (item * bq * bk)))

    k_blocks = [(s, min(s + bk, nk)) for s in range(0, nk, bk)]
    for qs in tqdm(range(0, nq, bq), desc="SSIM", disable=not progress, unit="block"):
        qe = min(qs + bq, nq)
        pq = patches(q[qs:qe]).mul_(flat_w)  # (P, bq, nwin), window-weighted
        mu_q, sig_q = mu_q_all[:, qs:qe, None], sig_q_all[:, qs:qe, None]  # (P, bq, 1)
        mu_q2 = mu_q * mu_q
        for ks, ke in k_blocks:
            pk_t = patches(k[ks:ke]).transpose(1, 2)  # (P, nwin, bk)
            mu_k, sig_k = mu_k_all[:, None, ks:ke], sig_k_all[:, None, ks:ke]  # (P, 1, bk)
            mu_k2 = mu_k * mu_k
            c1 = c1_all[qs:qe, ks:ke]
            c2 = c2_all[qs:qe, ks:ke]
            acc = torch.zeros((qe - qs, ke - ks), dtype=q.dtype, device=q.device)
            for ps in range(0, npix, slab):
                pe = min(ps + slab, npix)
                mu_qk = mu_q[ps:pe] * mu_k[ps:pe]  # (p, bq, bk)
                # 2σ_qk = 2E[qk] - 2μqμk with E[qk] = (p, bq, nwin) @ (p, nwin, bk); the factor
                # 2 is exact in floating point, so this equals 2·(E[qk] - μqμk) bit for bit
                upper = torch.baddbmm(mu_qk, pq[ps:pe], pk_t[ps:pe], beta=-2, alpha=2).add_(c2)
                num = torch.add(c1, mu_qk, alpha=2).mul_(upper)  # (2μqμk + C1)(2σqk + C2)
                del upper, mu_qk
                den = (mu_q2[ps:pe] + mu_k2[ps:pe]).add_(c1)
                den.mul_((sig_q[ps:pe] + sig_k[ps:pe]).add_(c2))
                acc += num.div_(den).sum(0)
                del num, den
            out[qs:qe, ks:ke] = acc / npix
    return out


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
