"""The temperature augmentation keeps row sums and is the identity at temperature 1."""

from __future__ import annotations

import pytest
import torch

from olas_utils.maths.augment import apply_temperature


def test_temperature_keeps_row_sums_and_identity_at_one():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 4, 4)
    torch.testing.assert_close(apply_temperature(x, g, low=1.0, high=1.0), x)
    y = apply_temperature(x, torch.Generator().manual_seed(1), low=0.5, high=0.5)  # τ = 0.5: squares, rescaled
    ref = x**2 * x.sum(-1, keepdim=True) / (x**2).sum(-1, keepdim=True)
    torch.testing.assert_close(y, ref)
    with pytest.raises(ValueError, match="non-negative"):
        apply_temperature(-x, g)
