"""Attention sinks ("outliers") and the paper's pre-processing of OLA images.

Source: Liang et al. (NeurIPS 2025), §3 and released code, as summarised in
``docs/method.md#sinks-and-pre-processing``:

* **outliers** — in each row, over the valid positions (and for causal models only the
  lower triangle, ``key <= query``), the entries above ``mean + 3σ`` of that row's valid
  entries, plus the row's argmax;
* **pre-processing** — stack orders as channels, optionally add a copy with the outliers
  zeroed, renormalise each row to sum 1, and for causal models copy the transposed lower
  triangle into the upper triangle (a symmetric image).

All functions work on ``(..., T, T)`` tensors (one sentence, any leading dims) and never
modify their input.
"""

from __future__ import annotations

import torch

__all__ = ["valid_positions", "outlier_mask", "remove_outliers", "renormalize_rows", "symmetrize_causal", "preprocess"]


def valid_positions(t: int, *, causal: bool, length: int | None = None, device=None) -> torch.Tensor:
    """``(T, T)`` bool mask of the positions a row's statistics run over.

    Args:
        t: T, the map size.
        causal: restrict to ``key <= query``.
        length: number of real tokens (rows/columns at or after it are padding); default T.
    """
    n = t if length is None else length
    idx = torch.arange(t, device=device)
    ok = (idx[:, None] < n) & (idx[None, :] < n)
    if causal:
        ok &= idx[None, :] <= idx[:, None]
    return ok


def outlier_mask(
    maps: torch.Tensor,
    *,
    causal: bool,
    length: int | None = None,
    n_sigma: float = 3.0,
    unbiased: bool = True,
) -> torch.Tensor:
    """Attention-sink (outlier) positions of each row.

    An entry is an outlier if it is valid and (a) greater than ``mean + n_sigma·std`` of
    its row's valid entries, or (b) its row's argmax over valid entries (the first one on
    ties). ``std`` is the sample standard deviation (``unbiased=True``, torch's default); a
    row with a single valid entry has no std and only its argmax is marked.

    Args:
        maps: ``(..., T, T)`` attention-like maps.
        causal: only ``key <= query`` is valid.
        length: real tokens (default T).
        n_sigma: threshold in standard deviations (paper: 3).
        unbiased: sample (True) or population (False) standard deviation.

    Returns:
        ``(..., T, T)`` bool tensor, False outside the valid positions.
    """
    t = maps.shape[-1]
    ok = valid_positions(t, causal=causal, length=length, device=maps.device)
    x = maps.to(torch.float64)
    cnt = ok.sum(-1).clamp(min=1).to(x.dtype)  # (T,)
    xm = torch.where(ok, x, torch.zeros((), dtype=x.dtype, device=x.device))
    mean = xm.sum(-1) / cnt
    dev = torch.where(ok, x - mean[..., None], torch.zeros((), dtype=x.dtype, device=x.device))
    denom = (cnt - 1) if unbiased else cnt
    var = (dev**2).sum(-1) / denom.clamp(min=1)
    std = var.sqrt()
    single = ok.sum(-1) <= (1 if unbiased else 0)
    thresh = torch.where(single, torch.full_like(mean, float("inf")), mean + n_sigma * std)
    above = (x > thresh[..., None]) & ok
    neg_inf = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    am = torch.where(ok, x, neg_inf).argmax(-1, keepdim=True)
    is_max = torch.zeros_like(above).scatter_(-1, am, True) & ok
    return above | is_max


def remove_outliers(maps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``maps`` with the ``mask`` positions set to zero (a new tensor)."""
    return maps.masked_fill(mask, 0.0)


def renormalize_rows(maps: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Divide each row by its sum; rows summing to 0 (padding, fully removed) stay 0."""
    s = maps.sum(-1, keepdim=True)
    return torch.where(s > eps, maps / torch.where(s > eps, s, torch.ones_like(s)), torch.zeros_like(maps))


def symmetrize_causal(maps: torch.Tensor) -> torch.Tensor:
    """Copy the transposed strict lower triangle into the upper triangle: ``M[i, j] = M[j, i]``
    for ``j > i``; the lower triangle and diagonal are kept."""
    lower = torch.tril(maps)
    return lower + torch.tril(maps, diagonal=-1).transpose(-1, -2)


def preprocess(
    maps: torch.Tensor,
    *,
    causal: bool,
    length: int | None = None,
    remove_sinks: bool = True,
    keep_raw: bool = False,
    renormalize: bool = True,
    symmetrize: bool = True,
) -> torch.Tensor:
    """The paper's pre-processing of stacked OLA channels.

    Args:
        maps: ``(C, T, T)`` channels (e.g. orders 1, 2, 3) of one sentence.
        causal: the model is causal (outlier search on the lower triangle; symmetrise).
        length: real tokens (default T).
        remove_sinks: zero the outliers of each channel.
        keep_raw: with ``remove_sinks``, output the raw channels followed by the
            sink-removed ones (``2C`` channels), as the adapter's input.
        renormalize: divide each row by its sum.
        symmetrize: for causal models, mirror the lower triangle.

    Returns:
        ``(C', T, T)`` float tensor, ``C' = 2C`` if ``keep_raw and remove_sinks`` else C.
    """
    if maps.dim() != 3:
        raise ValueError(f"maps must be (channels, T, T), got {tuple(maps.shape)}")
    chans = [maps]
    if remove_sinks:
        cleaned = remove_outliers(maps, outlier_mask(maps, causal=causal, length=length))
        chans = [maps, cleaned] if keep_raw else [cleaned]
    x = torch.cat(chans, dim=0)
    if renormalize:
        x = renormalize_rows(x)
    if causal and symmetrize:
        x = symmetrize_causal(x)
    return x
