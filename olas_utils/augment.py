"""Training augmentations of OLA images (``docs/method.md#visual-classifier``, ``docs/method.md#training``): highlighted sink columns,
Gaussian noise and a random temperature, drawn per image from a private ``torch.Generator``.
Used by the visual classifier (:mod:`olas_utils.similarity.classifier`) and the adapters
(:mod:`olas_utils.toa.train`).

Augmentation (training images only, see :class:`Augmentation`)
    * highlighted sink columns, p 0.3 per image: 1–3 distinct columns (uniform count, the
      same columns in every channel) get, in every row r and channel, the value
      ``m1 + (u − ½)(m1 − m2)`` added, where ``m1``/``m2`` are the row's largest and
      second-largest values and ``u ~ U(0, 1)`` is drawn per column — the released code's
      sink magnitude (``RandomHightlightColumns``). Unlike the released code, rows are
      *not* renormalised afterwards (the released code augments raw OLA before
      preprocessing; our images are already preprocessed and are standardised next), so
      exactly the chosen columns change. Zero rows (padding) stay zero.
    * Gaussian noise, p 0.15 per image: i.i.d. ``N(0, σ²)`` added to every pixel, with
      ``σ = 0.13 ×`` the standard deviation of that channel of the image *before* any
      augmentation (so a highlighted column does not inflate it). No clipping or
      renormalisation (the released code applies ReLU and renormalises rows, and computes
      σ per row over non-outlier entries).

Importing this module does no work.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Augmentation", "NO_AUGMENTATION", "highlight_sink_columns", "add_gaussian_noise",
           "apply_temperature", "augment_batch"]


@dataclass(frozen=True)
class Augmentation:
    """The training augmentations (the paper's classifier values by default, ``docs/method.md#visual-classifier``).

    Attributes:
        sink_p: probability, per image, of highlighting sink columns.
        min_columns, max_columns: how many columns (uniform, inclusive).
        noise_p: probability, per image, of adding Gaussian noise.
        noise_std_ratio: noise std as a fraction of the clean image's std (per channel).
    """

    sink_p: float = 0.3
    min_columns: int = 1
    max_columns: int = 3
    noise_p: float = 0.15
    noise_std_ratio: float = 0.13

    def __post_init__(self) -> None:
        for n in ("sink_p", "noise_p"):
            v = getattr(self, n)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{n} must be in [0, 1], got {v}")
        if not 1 <= self.min_columns <= self.max_columns:
            raise ValueError(f"need 1 <= min_columns <= max_columns, got {self.min_columns}, {self.max_columns}")
        if self.noise_std_ratio < 0:
            raise ValueError(f"noise_std_ratio must be >= 0, got {self.noise_std_ratio}")


#: No augmentation at all.
NO_AUGMENTATION = Augmentation(sink_p=0.0, noise_p=0.0)


def highlight_sink_columns(
    image: torch.Tensor,
    generator: torch.Generator,
    *,
    min_columns: int = 1,
    max_columns: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Add artificial attention-sink columns to one image (the rule in the module doc).

    ``k ~ U{min_columns..max_columns}`` distinct columns are drawn (uniformly among the
    columns that are non-zero in some channel; all columns if none is), ``u ~ U(0, 1)``
    per column; in every channel and row r, column j gets
    ``m1_r + (u_j − ½)(m1_r − m2_r)`` added (``m1_r ≥ m2_r`` the row's two largest
    values). ``k`` is capped at the number of candidate columns.

    Args:
        image: ``(C, H, W)`` float tensor (not modified), ``W >= 2``.
        generator: a CPU ``torch.Generator`` (all randomness comes from it).
        min_columns, max_columns: range of the number of columns.

    Returns:
        ``(new image, chosen column indices)``.

    Raises:
        ValueError: if the image is not 3-D or narrower than 2 columns.
    """
    if image.ndim != 3 or image.shape[-1] < 2:
        raise ValueError(f"expected a (C, H, W) image with W >= 2, got {tuple(image.shape)}")
    k = int(torch.randint(min_columns, max_columns + 1, (1,), generator=generator))
    nonzero = (image != 0).any(dim=0).any(dim=0)  # (W,)
    cands = torch.nonzero(nonzero).flatten()
    if cands.numel() == 0:
        cands = torch.arange(image.shape[-1])
    k = min(k, cands.numel())
    cols = cands[torch.randperm(cands.numel(), generator=generator)[:k]]
    u = torch.rand(k, generator=generator)
    top2 = torch.topk(image, k=2, dim=-1).values  # (C, H, 2)
    m1, m2 = top2[..., 0:1], top2[..., 1:2]
    bias = m1 + (u.to(image.dtype) - 0.5) * (m1 - m2)  # (C, H, k)
    out = image.clone()
    out[..., cols] = out[..., cols] + bias.to(out.device)
    return out, cols


def add_gaussian_noise(
    image: torch.Tensor,
    generator: torch.Generator,
    *,
    std_ratio: float = 0.13,
    reference: torch.Tensor | None = None,
) -> torch.Tensor:
    """Add i.i.d. Gaussian noise of std ``std_ratio × std(reference)`` per channel.

    Args:
        image: ``(C, H, W)`` float tensor (not modified).
        generator: a CPU ``torch.Generator``.
        std_ratio: noise std as a fraction of the reference channel's std.
        reference: the image whose per-channel std sets the scale (default ``image``);
            :func:`augment_batch` passes the clean image.

    Returns:
        The noisy image, same shape and dtype.
    """
    ref = image if reference is None else reference
    std = ref.std(dim=(-2, -1), keepdim=True, unbiased=False)
    noise = torch.randn(image.shape, generator=generator, dtype=image.dtype)
    return image + noise.to(image.device) * (std_ratio * std)


def apply_temperature(image: torch.Tensor, generator: torch.Generator, *, low: float = 0.5,
                      high: float = 2.0) -> torch.Tensor:
    """Sharpen or flatten every row: ``τ ~ U(low, high)`` drawn once per image, each
    non-negative entry raised to ``1/τ`` and each row rescaled to its original sum (so a
    row-normalised map stays row-normalised; ``τ < 1`` sharpens, ``τ > 1`` flattens, as a
    softmax temperature would). Zero entries and zero rows stay zero.

    Args:
        image: ``(C, H, W)`` float tensor with non-negative entries (not modified).
        generator: a CPU ``torch.Generator``.
        low, high: range of τ (``0 < low <= high``).

    Returns:
        The new image.

    Raises:
        ValueError: a bad range or negative entries.
    """
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got {low}, {high}")
    if (image < 0).any():
        raise ValueError("apply_temperature needs non-negative maps (attention, OLA)")
    tau = low + (high - low) * float(torch.rand(1, generator=generator))
    out = image.double() ** (1.0 / tau)
    total, new = image.double().sum(-1, keepdim=True), out.sum(-1, keepdim=True)
    out = torch.where(new > 0, out * total / new.clamp_min(1e-300), out)
    return out.to(image.dtype)


def augment_batch(x: torch.Tensor, generator: torch.Generator, aug: Augmentation = Augmentation()) -> torch.Tensor:
    """Apply :class:`Augmentation` to a batch (sink columns, then noise; each per image).

    Args:
        x: ``(B, C, H, W)`` float CPU tensor (not modified).
        generator: a CPU ``torch.Generator`` (all randomness comes from it).
        aug: the augmentation settings.

    Returns:
        The augmented batch (a new tensor).
    """
    out = x.clone()
    b = x.shape[0]
    do_sink = torch.rand(b, generator=generator) < aug.sink_p
    do_noise = torch.rand(b, generator=generator) < aug.noise_p
    for i in range(b):
        if do_sink[i]:
            out[i], _ = highlight_sink_columns(out[i], generator, min_columns=aug.min_columns,
                                               max_columns=aug.max_columns)
        if do_noise[i]:
            out[i] = add_gaussian_noise(out[i], generator, std_ratio=aug.noise_std_ratio, reference=x[i])
    return out
