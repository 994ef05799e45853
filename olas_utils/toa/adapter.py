"""The Transferable OLA Adapter (TOA, ``docs/method.md#adapter``): an image model over stacked OLA maps
whose diagonal gives one feature vector per token.

``(B, C, L, L)`` OLA channels → 1×1 convolution to ``dim`` channels → axial-attention image
transformer (``axial_attention.AxialImageTransformer``, Ho et al. 2019, as in the paper's
released code) → the diagonal ``h[:, :, i, i]`` → ``(B, L, dim)`` features, one per position.

The axial transformer has no attention mask, so a padded image would let real positions
attend to padding. :mod:`olas_utils.toa.train` therefore batches only images of the same size
(no padding at all), which keeps every prediction independent of its batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

__all__ = ["AdapterConfig", "ADAPTER_SIZES", "OLAAdapter"]


@dataclass(frozen=True)
class AdapterConfig:
    """Size of the adapter.

    Attributes:
        in_channels: input OLA channels (e.g. 4 = orders 1, 2 × raw, sink-removed).
        dim: width after the 1×1 convolution (paper: 768).
        depth: axial transformer blocks (paper: 5).
        heads: attention heads (paper: 8); must divide ``dim``.
        reversible: reversible residual blocks (paper: yes; saves activation memory).
    """

    in_channels: int = 4
    dim: int = 64
    depth: int = 2
    heads: int = 4
    reversible: bool = True

    def __post_init__(self) -> None:
        for name in ("in_channels", "dim", "depth", "heads"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"AdapterConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")

    def to_dict(self) -> dict:
        """Plain dict (checkpoints, manifests)."""
        return asdict(self)


#: Named sizes: ``"paper"`` (768-dim, depth 5, 8 heads; for a GPU) and ``"small"`` (CPU).
ADAPTER_SIZES: dict[str, dict] = {
    "paper": {"dim": 768, "depth": 5, "heads": 8, "reversible": True},
    "small": {"dim": 32, "depth": 2, "heads": 4, "reversible": False},
    "tiny": {"dim": 16, "depth": 1, "heads": 2, "reversible": False},
}


class OLAAdapter(nn.Module):
    """OLA image → per-position features.

    Args:
        config: an :class:`AdapterConfig`.

    Shapes:
        input ``(B, C, L, L)`` float; output ``(B, L, dim)``.
    """

    def __init__(self, config: AdapterConfig) -> None:
        super().__init__()
        from axial_attention import AxialImageTransformer

        self.config = config
        self.proj = nn.Conv2d(config.in_channels, config.dim, kernel_size=1)
        self.body = AxialImageTransformer(
            dim=config.dim, depth=config.depth, heads=config.heads, dim_index=1, reversible=config.reversible
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Features read off the diagonal of the transformed image.

        Args:
            images: ``(B, C, L, L)``.

        Returns:
            ``(B, L, dim)``.

        Raises:
            ValueError: wrong rank, non-square images or a channel count other than
                ``config.in_channels``.
        """
        if images.dim() != 4 or images.shape[-1] != images.shape[-2]:
            raise ValueError(f"images must be (batch, channels, L, L), got {tuple(images.shape)}")
        if images.shape[1] != self.config.in_channels:
            raise ValueError(
                f"the adapter expects {self.config.in_channels} channels, got {images.shape[1]} "
                "(the channel list must match the one it was trained with)"
            )
        h = self.body(self.proj(images))
        idx = torch.arange(images.shape[-1], device=images.device)
        return h[:, :, idx, idx].transpose(1, 2)
