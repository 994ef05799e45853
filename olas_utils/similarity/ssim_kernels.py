"""The inner kernels of :func:`olas_utils.similarity.ssim.ssim_matrix`: per-image filtering
and the summed SSIM map of one block of (query, key) pairs.

:func:`band_matrix` writes a valid 1-D correlation as a banded matrix, :func:`prepare_side`
filters each image once (means, variances, horizontal windows), :func:`block_views` cuts one
block of images out of that, and :func:`pair_block` sums the SSIM map of every pair of a
block (the algorithm is described in ``ssim_matrix``'s docstring).

Importing this module does no work.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["band_matrix", "prepare_side", "block_views", "pair_block"]


def band_matrix(g: torch.Tensor, n_out: int) -> torch.Tensor:
    """``(n_out, n_out + len(g) - 1)`` matrix whose row ``a`` holds ``g`` at columns ``a … a+len(g)-1``:
    a valid (cross-)correlation with ``g`` as a matrix product."""
    m = torch.zeros(n_out, n_out + len(g) - 1, dtype=g.dtype, device=g.device)
    for a in range(n_out):
        m[a, a : a + len(g)] = g
    return m


def prepare_side(
    x: torch.Tensor,
    c1: torch.Tensor,
    c2: torch.Tensor,
    gv: torch.Tensor,
    gh: torch.Tensor,
    strips: list[tuple[int, int]],
    key_side: bool,
) -> list[tuple]:
    """Everything :func:`~olas_utils.similarity.ssim.ssim_matrix` needs of one side, per (channel, column strip).

    For images ``x`` (N, C, H, W) with their own constants ``c1``, ``c2`` (N,), returns for
    each channel and strip of columns ``[c0, c1)`` (width w; pixels ordered row-major
    within the strip; images always last):

    * ``patch``: horizontal windows of the reflection-padded images, ``(Hp·w, kw, N)``;
      the query side's are multiplied by the horizontal weights;
    * ``mu``: filtered means, ``(H·w, N)``;
    * ``plain`` / ``own``: ``(H·w, 4, N)`` 4-vectors whose dot products give the SSIM
      denominator ``(μq² + μk² + C1)(σq² + σk² + C2)`` (see :func:`~olas_utils.similarity.ssim.ssim_matrix`):
      ``(a·s, a, s, 1)`` with ``a = μ²``, ``s = σ²`` (``plain``), or with ``a + C1`` and
      ``s + C2`` of the image's own constants (``own``); reversed on the key side;
    * the strip width.
    """
    n, ch, h, w = x.shape
    wh, ww = len(gv), len(gh)
    ph, pw = (wh - 1) // 2, (ww - 1) // 2
    hp = h + 2 * ph
    xt = F.pad(x, (pw, pw, ph, ph), mode="reflect").permute(1, 2, 3, 0).contiguous()  # (C, Hp, Wp, N)
    both = torch.matmul(band_matrix(gh, w), torch.stack([xt, xt * xt]))  # horizontal filter, (2, C, Hp, W, N)
    both = torch.matmul(band_matrix(gv, h), both.reshape(2 * ch, hp, -1)).reshape(2, ch, h, w, n)  # vertical
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


def block_views(side: list[tuple], sl: slice, groups: list[tuple[int, int]], key_side: bool) -> list[tuple]:
    """Views of a block of images (columns ``sl`` of a :func:`prepare_side` output), per strip:
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
                per_group.append(
                    (
                        mu[px, sl, None],
                        pl.transpose(1, 2),
                        own[px, :, sl].transpose(1, 2),
                        pl[:, 1, :, None],
                        pl[:, 2, :, None],
                    )
                )
        out.append((patch[:, :, sl].transpose(1, 2) if not key_side else patch[:, :, sl], per_group))
    return out


def pair_block(
    views_q: list[tuple],
    views_k: list[tuple],
    mode: str,
    c1: torch.Tensor,
    c2: torch.Tensor,
    bands: list[tuple[torch.Tensor, int]],
    hp: int,
    scratch: dict,
) -> torch.Tensor:
    """Sum over channels and pixels of the SSIM map of a block of pairs, ``(bq, bk)``.

    ``views_q``, ``views_k``: :func:`block_views` of the block's queries and keys.
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
