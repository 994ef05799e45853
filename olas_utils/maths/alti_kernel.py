"""ALTI's contributions of one layer fused into one compiled loop (numba): the per-(query, key)
vectors ``T_i(x_j)`` are built one key at a time in a ``(T, d)`` buffer that stays in cache and
reduced to their L1 distance at once, so the ``(B, T, T, d)`` tensor (or a block of it) is never
written to memory.

The formula is :func:`olas_utils.maths.mixing.layer_mixing`'s (Ferrando et al. 2022, eq. 10, with
the norms folded into the head outputs; the narrative is in ``docs/method.md#context-mixing``):
for sentence ``b`` and key ``j``, ``V_ij = Σ_h α^h_ij G^h_j + 1[i=j]·r_i`` is one matrix product
``W_j · G_j`` of the ``(rows × H)`` weights that reach ``j`` by its ``(H × d)`` head matrix (BLAS
through numba's ``np.dot``), then per row ``c_ij = max(0, ‖y_i‖₁ − κ_i·‖y_i/κ_i − V_ij‖₁)``.
Multiply-adds: ``H·d`` per reached (query, key) pair for the product, ``d`` for the distance.

:func:`olas_utils.maths.mixing.layer_mixing` calls :func:`alti_contributions` on CPU tensors
(``fused=None``); its blocked torch path stays as the reference the tests compare with.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["alti_contributions"]

_KERNEL = None


def _compile():
    """The numba kernel, compiled on first use (numba imported lazily: importing the maths
    costs nothing when no ALTI is asked; ``cache=True`` keeps the machine code between runs)."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import numba

    # reassociation lets LLVM vectorise the L1 sum over d; no finite-math flags (NaN stays NaN)
    fast = {"reassoc", "contract", "nsz", "arcp"}

    @numba.njit(cache=True, nogil=True, fastmath=fast)
    def kernel(w, g, r, ys, ynorm, kappa, out):  # pragma: no cover - compiled
        nb, nt, _, nh = w.shape
        nd = g.shape[3]
        buf = np.empty((nt, nd), dtype=g.dtype)
        for b in range(nb):
            for j in range(nt):
                wj = w[b, j]  # (T_i, H): the weights of every query on key j
                lo, hi = j, j + 1  # rows reached by key j (the diagonal always is)
                for i in range(nt):
                    for h in range(nh):
                        if wj[i, h] > 0:
                            lo = min(lo, i)
                            hi = max(hi, i + 1)
                            break
                for i in range(lo):
                    out[b, i, j] = 0
                for i in range(hi, nt):
                    out[b, i, j] = 0
                v = buf[: hi - lo]
                np.dot(wj[lo:hi], g[b, j], v)  # V_ij = Σ_h α^h_ij G^h_j for the reached rows
                vj = v[j - lo]
                rj = r[b, j]
                for k in range(nd):
                    vj[k] += rj[k]
                for i in range(lo, hi):
                    reached = i == j
                    for h in range(nh):
                        if wj[i, h] > 0:
                            reached = True
                            break
                    if not reached:
                        out[b, i, j] = 0
                        continue
                    vi = v[i - lo]
                    ysi = ys[b, i]
                    s = ysi[0] * 0
                    for k in range(nd):
                        s += abs(ysi[k] - vi[k])
                    c = ynorm[b, i] - kappa[b, i] * s
                    out[b, i, j] = c if c > 0 else 0

    _KERNEL = kernel
    return kernel


def alti_contributions(
    weights: torch.Tensor,
    heads: torch.Tensor,
    diagonal: torch.Tensor,
    scaled_outputs: torch.Tensor,
    output_norms: torch.Tensor,
    kappa: torch.Tensor,
) -> torch.Tensor:
    """ALTI's raw contributions ``c_ij = max(0, ‖y_i‖₁ − κ_i·‖y_i/κ_i − V_ij‖₁)`` with
    ``V_ij = Σ_h α^h_ij G^h_j + 1[i=j]·r_i``, without materialising ``V``.

    Args:
        weights: ``(B, H, T, T)`` attention ``α`` (query, key), zero where a query may not look.
        heads: ``(B, T, H, d)`` head outputs with the norms' gain and centring applied, ``G``.
        diagonal: ``(B, T, d)`` the residual term ``r_i`` added on the diagonal.
        scaled_outputs: ``(B, T, d)`` ``y_i / κ_i``.
        output_norms: ``(B, T)`` ``‖y_i‖₁``.
        kappa: ``(B, T)`` ``κ_i``, the product of the norms' per-position scales.

    Returns:
        ``(B, T, T)`` (query, key), non-negative, in units of the hidden state's L1 norm; zero
        where ``i ≠ j`` and no head of query ``i`` attends to ``j``. Same dtype as ``heads``
        (float32 or float64); cost ``H·d + d`` multiply-adds per reached pair.

    Raises:
        ValueError: tensors not on the CPU, or not all of one floating dtype (float32/float64).
    """
    tensors = (weights, heads, diagonal, scaled_outputs, output_norms, kappa)
    dtype = heads.dtype
    if any(t.device.type != "cpu" for t in tensors):
        raise ValueError("alti_contributions runs on CPU tensors; use layer_mixing(fused=False) on other devices")
    if dtype not in (torch.float32, torch.float64) or any(t.dtype != dtype for t in tensors):
        raise ValueError(f"alti_contributions needs one dtype, float32 or float64; got {[t.dtype for t in tensors]}")
    b, _, t, _ = weights.shape
    w = weights.permute(0, 3, 2, 1).contiguous()  # (B, key, query, H): W_j contiguous
    out = torch.empty(b, t, t, dtype=dtype)
    arrays = [x.detach().contiguous().numpy() for x in (w, heads, diagonal, scaled_outputs, output_norms, kappa)]
    _compile()(*arrays, out.numpy())
    return out
