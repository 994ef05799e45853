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
        ff_kernel: kernel size of the two convolutions in each feed-forward block (the paper's
            axial transformer: 3). 1 makes them pointwise: about a ninth of their FLOPs (the
            feed-forward blocks are ~90 % of the adapter's FLOPs at ``dim`` 32), leaving every
            spatial mixing to the row and column attention.
    """

    in_channels: int = 4
    dim: int = 64
    depth: int = 2
    heads: int = 4
    reversible: bool = True
    ff_kernel: int = 3

    def __post_init__(self) -> None:
        for name in ("in_channels", "dim", "depth", "heads"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"AdapterConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        if self.ff_kernel not in (1, 3):
            raise ValueError(f"ff_kernel must be 1 or 3, got {self.ff_kernel}")

    def to_dict(self) -> dict:
        """Plain dict (checkpoints, manifests); ``ff_kernel`` only when it is not 3, so the keys of
        checkpoints written before it existed stay valid."""
        out = asdict(self)
        if out["ff_kernel"] == 3:
            del out["ff_kernel"]
        return out


#: Named sizes: ``"paper"`` (768-dim, depth 5, 8 heads, reversible: 448 M parameters with 8 input
#: channels, about 7 GB with its AdamW state; for a GPU), ``"paper-narrow"`` (the paper's blocks at
#: width 32: what :func:`olas_utils.studies.profiles.dry_run` trains on a CPU), ``"small"`` (CPU), ``"small-pointwise"``
#: (``"small"`` with pointwise feed-forward convolutions: the CPU speed candidate,
#: ``benchmarks/adapter_variants.py``) and ``"tiny"`` (tests).
ADAPTER_SIZES: dict[str, dict] = {
    "paper": {"dim": 768, "depth": 5, "heads": 8, "reversible": True},
    "paper-narrow": {"dim": 32, "depth": 5, "heads": 8, "reversible": True},
    "small": {"dim": 32, "depth": 2, "heads": 4, "reversible": False},
    "small-pointwise": {"dim": 32, "depth": 2, "heads": 4, "reversible": False, "ff_kernel": 1},
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
        if config.ff_kernel != 3:
            _pointwise_feed_forward(self.body)

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


def _pointwise_feed_forward(body: nn.Module) -> None:
    """Replace the 3×3 convolutions of every feed-forward block of an
    ``axial_attention.AxialImageTransformer`` (``ChanLayerNorm → Conv2d(d, 4d, 3) → LeakyReLU →
    Conv2d(4d, d, 3)``) by 1×1 convolutions of the same widths, freshly initialised (PyTorch's default
    ``Conv2d`` initialisation, drawn in module order, as the library draws its own)."""
    blocks = [m for m in body.modules() if isinstance(m, nn.Sequential) and any(isinstance(c, nn.Conv2d) for c in m)]
    if not blocks:
        raise RuntimeError("no feed-forward blocks found in the axial transformer (axial_attention changed?)")
    for block in blocks:
        for i, layer in enumerate(block):
            if isinstance(layer, nn.Conv2d):
                if layer.kernel_size != (3, 3):
                    raise RuntimeError(f"unexpected feed-forward convolution {layer} (axial_attention changed?)")
                block[i] = nn.Conv2d(layer.in_channels, layer.out_channels, kernel_size=1)
