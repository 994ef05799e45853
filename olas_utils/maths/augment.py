"""Training augmentations of OLA images (``docs/method.md#visual-classifier``,
``docs/method.md#training``), defined once for the visual
classifier (:mod:`olas_utils.similarity.classifier`) and the adapters
(:mod:`olas_utils.toa.train`): highlighted sink columns, Gaussian noise and a random
temperature, drawn per image from a private ``torch.Generator``.

:class:`Augmentation` holds the settings, :func:`augment_batch` applies them; presets
:data:`PAPER_CLASSIFIER`, :data:`PAPER_ADAPTER`, :data:`PAPER_ADAPTER_AUGMENTED`. The rules, the
two draw orders (``Augmentation.mode``) and where they differ from the released code:
``docs/method.md#visual-classifier``.

Importing this module does no work.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "Augmentation",
    "MODES",
    "PAPER_CLASSIFIER",
    "PAPER_ADAPTER",
    "PAPER_ADAPTER_AUGMENTED",
    "NO_AUGMENTATION",
    "highlight_sink_columns",
    "add_gaussian_noise",
    "apply_temperature",
    "augment_batch",
]

#: The draw orders :class:`Augmentation` knows (module doc, "Two modes").
MODES = ("classifier", "adapter")


@dataclass(frozen=True)
class Augmentation:
    """The training augmentations (the defaults are :data:`PAPER_CLASSIFIER`).

    Attributes:
        sink_p: probability, per image, of highlighting sink columns.
        min_columns, max_columns: how many columns (uniform, inclusive).
        noise_p: probability, per image, of adding Gaussian noise.
        noise_std_ratio: noise std as a fraction of a channel's std.
        temperature_p: probability, per image, of a random temperature (``"adapter"`` mode only).
        mode: the draw order, ``"classifier"`` or ``"adapter"`` (``docs/method.md#visual-classifier``).

    Raises:
        ValueError: a probability outside [0, 1], a bad column range, a negative std ratio,
            an unknown mode, or a temperature in ``"classifier"`` mode.
    """

    sink_p: float = 0.3
    min_columns: int = 1
    max_columns: int = 3
    noise_p: float = 0.15
    noise_std_ratio: float = 0.13
    temperature_p: float = 0.0
    mode: str = "classifier"

    def __post_init__(self) -> None:
        for n in ("sink_p", "noise_p", "temperature_p"):
            v = getattr(self, n)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{n} must be in [0, 1], got {v}")
        if not 1 <= self.min_columns <= self.max_columns:
            raise ValueError(f"need 1 <= min_columns <= max_columns, got {self.min_columns}, {self.max_columns}")
        if self.noise_std_ratio < 0:
            raise ValueError(f"noise_std_ratio must be >= 0, got {self.noise_std_ratio}")
        if self.mode not in MODES:
            raise ValueError(f"unknown augmentation mode {self.mode!r}; available: {MODES}")
        if self.mode == "classifier" and self.temperature_p > 0:
            raise ValueError("the 'classifier' draw order has no temperature; use mode='adapter' for temperature_p > 0")


#: The visual classifier's augmentations (paper §2): sink columns p 0.3 (1–3 columns), noise p 0.15, std ratio 0.13.
PAPER_CLASSIFIER = Augmentation()

#: The adapters' augmentation (paper §4): noise p 0.3, std ratio 0.2; no sink columns, no temperature.
PAPER_ADAPTER = Augmentation(sink_p=0.0, noise_p=0.3, noise_std_ratio=0.2, mode="adapter")

#: The adapters' transfer remedy: :data:`PAPER_ADAPTER` plus sink columns (p 0.3) and a temperature (p 0.3).
PAPER_ADAPTER_AUGMENTED = Augmentation(sink_p=0.3, noise_p=0.3, noise_std_ratio=0.2, temperature_p=0.3, mode="adapter")

#: No augmentation at all.
NO_AUGMENTATION = Augmentation(sink_p=0.0, noise_p=0.0)


def highlight_sink_columns(
    image: torch.Tensor,
    generator: torch.Generator,
    *,
    min_columns: int = 1,
    max_columns: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Add artificial attention-sink columns to one image: ``k ~ U{min_columns..max_columns}``
    columns (capped at the non-zero ones), each row r of column j plus
    ``m1_r + (u_j − ½)(m1_r − m2_r)``, ``u_j ~ U(0, 1)`` (the released code's
    ``RandomHightlightColumns``; ``docs/method.md#visual-classifier``).

    Args:
        image: ``(channel, query, key)`` float tensor (not modified), at least 2 keys.
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
        image: ``(channel, query, key)`` float tensor (not modified).
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


def apply_temperature(
    image: torch.Tensor, generator: torch.Generator, *, low: float = 0.5, high: float = 2.0
) -> torch.Tensor:
    """Sharpen or flatten every row: ``τ ~ U(low, high)`` once per image, each entry raised to
    ``1/τ`` and each row rescaled to its original sum; zero rows stay zero.

    Args:
        image: ``(channel, query, key)`` float tensor with non-negative entries (not modified).
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


def augment_batch(x: torch.Tensor, generator: torch.Generator, aug: Augmentation = PAPER_CLASSIFIER) -> torch.Tensor:
    """Apply :class:`Augmentation` to a batch, drawing in ``aug.mode``'s order
    (``docs/method.md#visual-classifier``).

    Args:
        x: ``(batch, channel, query, key)`` float CPU tensor (not modified).
        generator: a CPU ``torch.Generator`` (all randomness comes from it).
        aug: the augmentation settings.

    Returns:
        The augmented batch (a new tensor, or ``x`` itself when ``"adapter"`` mode has
        nothing to apply).
    """
    if aug.mode == "adapter":
        return _adapter_order(x, generator, aug)
    return _classifier_order(x, generator, aug)


def _classifier_order(x: torch.Tensor, generator: torch.Generator, aug: Augmentation) -> torch.Tensor:
    out = x.clone()
    b = x.shape[0]
    do_sink = torch.rand(b, generator=generator) < aug.sink_p
    do_noise = torch.rand(b, generator=generator) < aug.noise_p
    for i in range(b):
        if do_sink[i]:
            out[i], _ = highlight_sink_columns(
                out[i], generator, min_columns=aug.min_columns, max_columns=aug.max_columns
            )
        if do_noise[i]:
            out[i] = add_gaussian_noise(out[i], generator, std_ratio=aug.noise_std_ratio, reference=x[i])
    return out


def _adapter_order(images: torch.Tensor, gen: torch.Generator, aug: Augmentation) -> torch.Tensor:
    b = images.shape[0]
    if aug.temperature_p > 0 or aug.sink_p > 0:
        images = images.clone()
        for i in range(b):
            if aug.temperature_p > 0 and float(torch.rand(1, generator=gen)) < aug.temperature_p:
                images[i] = apply_temperature(images[i].clamp_min(0), gen)
            if aug.sink_p > 0 and images.shape[-1] >= 2 and float(torch.rand(1, generator=gen)) < aug.sink_p:
                images[i] = highlight_sink_columns(
                    images[i], gen, min_columns=aug.min_columns, max_columns=aug.max_columns
                )[0]
    if aug.noise_p <= 0 or aug.noise_std_ratio <= 0:
        return images
    pick = torch.rand(b, generator=gen) < aug.noise_p
    noise = torch.randn(images.shape, generator=gen)
    std = images.flatten(2).std(-1, correction=0)[..., None, None]  # (B, C, 1, 1); 0 for a 1×1 image
    return images + pick[:, None, None, None].to(images.dtype) * noise * (aug.noise_std_ratio * std)
