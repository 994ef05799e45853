"""Independent references for the capture: the head mean written out by hand."""

from __future__ import annotations

import torch


def hand_head_mean(weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The mean over heads of ``(batch, head, query, key)`` attention, with padded query rows and
    key columns set to zero, written out as a sum of heads divided by their
    number (no ``mean``, no call into ``olas_utils``), so that the test reference cannot share a
    mistake with :func:`olas_utils.capture.attention.head_average`.

    Returns:
        ``(batch, query, key)`` float32 tensor (summed in float64).
    """
    h = weights.shape[1]
    w = weights.detach().to(torch.float64)
    total = torch.zeros_like(w[:, 0])
    for j in range(h):  # head by head, so that taking one head, or the wrong axis, differs
        total = total + torch.nan_to_num(w[:, j], nan=0.0)
    real = valid.to(torch.float64)
    return (total / h * real[:, :, None] * real[:, None, :]).to(torch.float32)
