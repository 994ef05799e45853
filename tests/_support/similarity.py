"""Synthetic "models" for the chunk classifier tests."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def synth(
    n_classes: int = 32,
    size: int = 16,
    channels: int = 1,
    models=("a", "b", "c", "target"),
    seed: int = 0,
    noise: float = 0.1,
    offset: float = 0.15,
) -> dict[str, np.ndarray]:
    """Each class (chunk) a fixed smooth random pattern (a 4×4 grid of uniform values, bilinearly
    upsampled); each model sees it with its own gain, smooth additive offset and pixel noise."""
    g = torch.Generator().manual_seed(seed)
    base = F.interpolate(
        torch.rand(n_classes, channels, 4, 4, generator=g), size=(size, size), mode="bilinear", align_corners=False
    )
    out = {}
    for m in models:
        gain = 0.8 + 0.4 * torch.rand(1, generator=g)
        shift = (
            F.interpolate(
                torch.rand(1, channels, 2, 2, generator=g), size=(size, size), mode="bilinear", align_corners=False
            )
            * offset
        )
        out[m] = (base * gain + shift + noise * torch.randn(base.shape, generator=g)).numpy()
    return out
