"""Evaluation of a trained visual classifier on clean images: logits and top-1 / top-5 accuracy.

Images are never augmented here, only standardised per image and channel
(:func:`olas_utils.similarity.inputs.standardize`); :func:`evaluate` on the images of an
unseen target model is the paper's cross-model accuracy.

Importing this module does no work.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from olas_utils.similarity.inputs import as_images, standardize
from olas_utils.similarity.result import ClassifierResult

__all__ = ["Accuracy", "predict_logits", "evaluate", "batched_logits", "accuracy_and_loss"]


_EVAL_BATCH = 256


class Accuracy(NamedTuple):
    """Classification accuracy on one set of images (fractions in [0, 1]).

    Attributes:
        top1: fraction whose top-scoring class is the true chunk.
        top5: fraction whose true chunk is among the 5 top-scoring classes (among all
            classes when there are fewer than 5).
        n: number of images.
    """

    top1: float
    top5: float
    n: int


@torch.no_grad()
def batched_logits(
    net: nn.Module, x: torch.Tensor, device: torch.device, batch_size: int = _EVAL_BATCH
) -> torch.Tensor:
    """Logits of a network on clean images, ``batch_size`` at a time, in eval mode (its
    train/eval mode is restored afterwards).

    Args:
        net: the classifier, on ``device``.
        x: ``(n, C, S, S)`` images (standardised here, :func:`~olas_utils.similarity.inputs.standardize`).
        device: where ``net`` is.
        batch_size: images per forward pass.

    Returns:
        ``(n, n_classes)`` float32 CPU tensor.
    """
    was_training = net.training
    net.eval()
    out = [net(standardize(x[i : i + batch_size]).to(device)).float().cpu() for i in range(0, x.shape[0], batch_size)]
    net.train(was_training)
    return torch.cat(out)


def accuracy_and_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float, float]:
    """``(top1, top5, cross-entropy loss)`` of ``(n, n_classes)`` logits against ``(n,)``
    labels (top-5 among all classes when there are fewer than 5)."""
    top1 = (logits.argmax(1) == labels).float().mean().item()
    k = min(5, logits.shape[1])
    top5 = (logits.topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()
    loss = F.cross_entropy(logits, labels).item()
    return top1, top5, loss


def _check_eval_images(result: ClassifierResult, images: Any) -> torch.Tensor:
    x = as_images(images)
    if x.shape[1] != result.in_channels:
        raise ValueError(f"the classifier takes {result.in_channels} channel(s), the images have {x.shape[1]}")
    if tuple(x.shape[2:]) != tuple(result.image_size):
        raise ValueError(f"the classifier was trained on {tuple(result.image_size)} images, got {tuple(x.shape[2:])}")
    return x


def predict_logits(
    result: ClassifierResult,
    images: Any,
    *,
    device: str | torch.device | None = None,
    batch_size: int = _EVAL_BATCH,
) -> torch.Tensor:
    """Class scores of clean (never augmented) images.

    Args:
        result: a trained classifier.
        images: ``(n, C, S, S)`` or ``(n, S, S)``, the training C and S.
        device: where to run; default :func:`olas_utils.settings.resolve_device`.
        batch_size: images per forward pass.

    Returns:
        float32 CPU tensor ``(n, n_classes)`` of logits.

    Raises:
        ValueError: if the channels or image size differ from training, or on non-finite
            values.
    """
    from olas_utils.settings import resolve_device

    x = _check_eval_images(result, images)
    dev = resolve_device(device)
    net = result.build_model(dev)
    return batched_logits(net, x, dev, batch_size)


def evaluate(
    result: ClassifierResult,
    images: Any,
    labels: Any = None,
    *,
    device: str | torch.device | None = None,
    batch_size: int = _EVAL_BATCH,
) -> Accuracy:
    """Top-1 and top-5 accuracy of a trained classifier on one model's images.

    Args:
        result: a trained classifier.
        images: ``(n, C, S, S)`` or ``(n, S, S)`` images, e.g. of the unseen target model.
        labels: the true chunk of each image; default ``arange(n)`` (image i is chunk i).
        device: where to run; default :func:`olas_utils.settings.resolve_device`.
        batch_size: images per forward pass.

    Returns:
        :class:`Accuracy` ``(top1, top5, n)``.

    Raises:
        ValueError: on a shape mismatch (see :func:`predict_logits`), labels of another
            length, or labels outside ``0..n_classes-1``.
    """
    logits = predict_logits(result, images, device=device, batch_size=batch_size)
    n = logits.shape[0]
    y = torch.arange(n) if labels is None else torch.as_tensor(np.asarray(labels), dtype=torch.long).flatten()
    if y.numel() != n:
        raise ValueError(f"{y.numel()} labels for {n} images")
    if y.numel() and (y.min() < 0 or y.max() >= result.n_classes):
        raise ValueError(f"labels must be in 0..{result.n_classes - 1}")
    top1, top5, _ = accuracy_and_loss(logits, y)
    return Accuracy(top1=top1, top5=top5, n=n)
