"""Evaluation of a trained visual classifier on clean images: logits, the rank of each image's
true class, and top-1 / top-5 accuracy (a reduction of those ranks).

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
from olas_utils.similarity.logistic import LogisticResult
from olas_utils.similarity.result import ClassifierResult

__all__ = [
    "Accuracy",
    "class_ranks",
    "predict_logits",
    "predict_ranks",
    "evaluate",
    "batched_logits",
    "accuracy_and_loss",
]


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


def class_ranks(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """0-based rank of each image's true class among its logits: the classes scoring higher,
    plus those scoring the same with a lower index (the first index wins a tie, as
    ``argmax`` does), so ``rank == 0`` exactly when ``argmax`` is the true class. A NaN
    logit counts as −∞ (a NaN true score is never a hit).

    Args:
        logits: ``(n, n_classes)``.
        labels: ``(n,)`` true classes.

    Returns:
        ``(n,)`` int64 tensor in ``0..n_classes-1``.
    """
    logits = torch.nan_to_num(logits.float(), nan=float("-inf"))
    labels = labels.to(logits.device).long()
    true = logits.gather(1, labels[:, None])
    earlier = torch.arange(logits.shape[1], device=logits.device)[None, :] < labels[:, None]
    return ((logits > true).sum(1) + ((logits == true) & earlier).sum(1)).long()


def accuracy_and_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float, float]:
    """``(top1, top5, cross-entropy loss)`` of ``(n, n_classes)`` logits against ``(n,)``
    labels: top-k is the fraction of :func:`class_ranks` below k (top-5 among all classes
    when there are fewer than 5)."""
    ranks = class_ranks(logits, labels)
    top1 = (ranks < 1).float().mean().item()
    top5 = (ranks < 5).float().mean().item()
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
        result: a trained classifier: a :class:`~olas_utils.similarity.result.ClassifierResult` or a
            :class:`~olas_utils.similarity.logistic.LogisticResult` (its decision scores).
        images: ``(n, C, S, S)`` or ``(n, S, S)``, the training C and S.
        device: where to run; default :func:`olas_utils.infra.settings.resolve_device`.
        batch_size: images per forward pass.

    Returns:
        float32 CPU tensor ``(n, n_classes)`` of logits.

    Raises:
        ValueError: if the channels or image size differ from training, or on non-finite
            values.
    """
    from olas_utils.infra.settings import resolve_device

    x = _check_eval_images(result, images)
    if isinstance(result, LogisticResult):  # a linear model on pooled features: no network, no device
        return result.logits(x)
    dev = resolve_device(device)
    net = result.build_model(dev)
    return batched_logits(net, x, dev, batch_size)


def _labels(labels: Any, n: int, n_classes: int) -> torch.Tensor:
    y = torch.arange(n) if labels is None else torch.as_tensor(np.asarray(labels), dtype=torch.long).flatten()
    if y.numel() != n:
        raise ValueError(f"{y.numel()} labels for {n} images")
    if y.numel() and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"labels must be in 0..{n_classes - 1}")
    return y


def predict_ranks(
    result: ClassifierResult,
    images: Any,
    labels: Any = None,
    *,
    device: str | torch.device | None = None,
    batch_size: int = _EVAL_BATCH,
) -> np.ndarray:
    """The rank of each image's true chunk among the classifier's scores (:func:`class_ranks`;
    0 = top-1 hit): the per-image outcomes that :func:`evaluate` reduces to accuracy.

    Args:
        result, images, labels, device, batch_size: as in :func:`evaluate`.

    Returns:
        ``(n,)`` int64 array.

    Raises:
        ValueError: as :func:`evaluate`.
    """
    logits = predict_logits(result, images, device=device, batch_size=batch_size)
    y = _labels(labels, logits.shape[0], result.n_classes)
    return class_ranks(logits, y).numpy()


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
        device: where to run; default :func:`olas_utils.infra.settings.resolve_device`.
        batch_size: images per forward pass.

    Returns:
        :class:`Accuracy` ``(top1, top5, n)``: the fractions of :func:`predict_ranks` below
        1 and 5.

    Raises:
        ValueError: on a shape mismatch (see :func:`predict_logits`), labels of another
            length, or labels outside ``0..n_classes-1``.
    """
    ranks = predict_ranks(result, images, labels, device=device, batch_size=batch_size)
    n = int(ranks.shape[0])
    return Accuracy(top1=float((ranks < 1).mean()), top5=float((ranks < 5).mean()), n=n)
