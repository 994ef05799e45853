"""The visual classifier's network: a torchvision ResNet-18 taking C input channels.

Network
    ``torchvision.models.resnet18(weights=None, num_classes=n_chunks)`` with its first
    convolution replaced to take ``C`` channels. ``stem="imagenet"`` (default) keeps
    torchvision's 7×7 stride-2 convolution and max-pool (fast on CPU: a 50×50 image is
    13×13 after the stem); ``stem="cifar"`` is the released code's variant (3×3 stride-1
    convolution, no max-pool: about 15× the compute, closer to the paper).

Importing this module does no work (``torchvision`` is imported when a network is built).
"""

from __future__ import annotations

from torch import nn

__all__ = ["STEMS", "build_resnet18"]


#: Supported first-layer variants of :func:`build_resnet18`.
STEMS = ("imagenet", "cifar")


def build_resnet18(n_classes: int, in_channels: int, *, stem: str = "imagenet") -> nn.Module:
    """``torchvision.models.resnet18(weights=None, num_classes=n_classes)`` taking C channels.

    Args:
        n_classes: number of classes (chunks), >= 2.
        in_channels: C, input channels (orders), >= 1.
        stem: ``"imagenet"``: ``conv1`` becomes ``Conv2d(C, 64, 7, stride 2, padding 3)``
            (torchvision's, max-pool kept); ``"cifar"``: ``Conv2d(C, 64, 3, stride 1,
            padding 1)`` and no max-pool (the released code's variant).

    Returns:
        The network (randomly initialised by torchvision under the current torch RNG).

    Raises:
        ValueError: on a bad ``n_classes``, ``in_channels`` or ``stem``.
    """
    from torchvision.models import resnet18

    if n_classes < 2:
        raise ValueError(f"need at least 2 classes, got {n_classes}")
    if in_channels < 1:
        raise ValueError(f"need at least 1 input channel, got {in_channels}")
    if stem not in STEMS:
        raise ValueError(f"stem must be one of {STEMS}, got {stem!r}")
    net = resnet18(weights=None, num_classes=n_classes)
    if stem == "imagenet":
        net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    else:
        net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")  # torchvision's init
    return net
