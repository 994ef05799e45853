"""The visual classifier's input images: one model's images as a float tensor, several keys
stacked into channels, and the standardisation applied to every image the network sees.

Input normalisation
    After augmentation, every image is standardised per channel: ``(x − mean) / std``
    over its S×S pixels (a constant channel becomes zeros). This removes the scale
    differences between orders and between models (e.g. causal vs bidirectional).

Importing this module does no work.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

__all__ = ["as_images", "source_images", "stack_channels", "standardize"]


def as_images(images: Any, *, name: str = "images") -> torch.Tensor:
    """Convert one model's images to a float32 CPU tensor ``(n, C, S1, S2)``.

    Args:
        images: numpy array or tensor, ``(n, C, S1, S2)``, or ``(n, S1, S2)`` (taken as
            ``C = 1``).
        name: used in error messages.

    Returns:
        A contiguous float32 CPU tensor (a copy when a conversion was needed).

    Raises:
        ValueError: on another number of dimensions, an empty array, or a non-finite value.
    """
    if isinstance(images, torch.Tensor):
        t = images.detach().to("cpu", torch.float32)
    else:
        arr = np.asarray(images, dtype=np.float32)
        if not arr.flags.writeable:  # e.g. a read-only memory map from a cache
            arr = arr.copy()
        t = torch.from_numpy(arr)
    if t.ndim == 3:
        t = t[:, None]
    if t.ndim != 4:
        raise ValueError(f"{name}: expected (n, C, S, S) or (n, S, S) images, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name}: empty image array of shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: images contain NaN or infinite values")
    return t.contiguous()


def source_images(train_images: Any) -> tuple[dict[str, torch.Tensor], tuple[int, int, int, int]]:
    """A classifier's source images, checked: name → ``(n, C, S, S)`` float tensor
    (:func:`as_images` of each), and their common shape ``(n, C, H, W)``.

    Raises:
        ValueError: no source model, NaN or infinite values, sources of different shapes,
            or fewer than 2 classes (chunks).
    """
    if not train_images:
        raise ValueError("train_images is empty: give at least one source model")
    data = {str(k): as_images(v, name=f"train_images[{k!r}]") for k, v in train_images.items()}
    shapes = {k: tuple(v.shape) for k, v in data.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"all source models need images of one shape (n, C, S, S), got {shapes}")
    shape = next(iter(shapes.values()))
    if shape[0] < 2:
        raise ValueError(f"need at least 2 classes (chunks), got {shape[0]}")
    return data, shape


def stack_channels(arrays: Sequence[Any]) -> np.ndarray:
    """Stack several per-key image arrays of one model into channels.

    Args:
        arrays: C arrays of shape ``(n, S, S)`` (e.g. ``"ola:1"``, ``"ola:2"`` of one
            model from the cache), all the same shape.

    Returns:
        float32 array ``(n, C, S, S)``.

    Raises:
        ValueError: if ``arrays`` is empty or the shapes differ or are not 3-D.
    """
    arrs = [np.asarray(a, dtype=np.float32) for a in arrays]
    if not arrs:
        raise ValueError("stack_channels needs at least one array")
    shapes = {a.shape for a in arrs}
    if len(shapes) != 1 or arrs[0].ndim != 3:
        raise ValueError(f"stack_channels needs arrays of one (n, S, S) shape, got {sorted(shapes)}")
    return np.stack(arrs, axis=1)


def standardize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Per-image, per-channel standardisation (the classifier's input normalisation).

    Args:
        x: ``(B, C, H, W)`` float tensor.
        eps: a channel whose standard deviation is at most ``eps`` becomes zeros.

    Returns:
        ``(x − mean) / std`` over each image's H×W pixels, per channel (population std).
    """
    mean = x.mean(dim=(-2, -1), keepdim=True)
    std = x.std(dim=(-2, -1), keepdim=True, unbiased=False)
    centred = x - mean
    return torch.where(std > eps, centred / std.clamp_min(eps), torch.zeros_like(centred))
