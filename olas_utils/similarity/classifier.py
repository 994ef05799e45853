"""Training the paper's visual classifier: which chunk does an OLA image come from? (``docs/method.md#visual-classifier``)

A ResNet-18 is trained on the images of SOURCE models (class = chunk index) and tested on an
unseen TARGET model. Inputs: per model a float array ``(chunk, channel, query, key)`` (or
``(chunk, query, key)``, one channel), image ``i`` of every model being chunk ``i``. Paper
settings: SGD, lr 0.007, momentum 0.9, weight decay 5e-4, batch 20, cross-entropy, no schedule.
The epoch is never selected on the target (:data:`SELECT_AUGMENTED`, :data:`SELECT_LAST` or a
held-out source); why, and determinism: ``docs/method.md#visual-classifier``; usage:
``docs/guide.md#train-the-visual-classifier-on-your-own-images``.

Importing this module does no work (``torchvision`` is imported when a network is built).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from olas_utils.maths.augment import PAPER_CLASSIFIER, Augmentation, augment_batch
from olas_utils.similarity.evaluation import accuracy_and_loss, batched_logits
from olas_utils.similarity.inputs import as_images, source_images, standardize
from olas_utils.similarity.resnet import build_resnet18
from olas_utils.similarity.result import ClassifierResult

__all__ = ["SELECT_AUGMENTED", "SELECT_LAST", "train_classifier"]


#: ``select_on`` value: select on a fixed augmented copy of the source images.
SELECT_AUGMENTED = ":augmented"


#: ``select_on`` value: no selection, keep the last epoch.
SELECT_LAST = ":last"


def _seeds(seed: int) -> list[int]:
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(int(seed)).spawn(3)]


def _batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    order = torch.randperm(n, generator=generator)
    chunks = list(order.split(batch_size))
    if len(chunks) > 1 and chunks[-1].numel() == 1:  # BatchNorm cannot train on one image
        chunks[-2] = torch.cat([chunks[-2], chunks[-1]])
        chunks.pop()
    return chunks


def _fit(
    x,
    y,
    *,
    epochs,
    n_classes,
    in_channels,
    stem,
    batch_size,
    lr,
    momentum,
    weight_decay,
    seed,
    device,
    aug,
    progress,
    desc,
    on_epoch=None,
):
    """Train from scratch; call ``on_epoch(epoch, net, train_loss)`` after every epoch."""
    s_shuffle, s_aug, _ = _seeds(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_resnet18(n_classes, in_channels, stem=stem)
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    g_shuffle = torch.Generator().manual_seed(s_shuffle)
    g_aug = torch.Generator().manual_seed(s_aug)
    from olas_utils.infra.progress import tqdm

    bar = tqdm(range(1, epochs + 1), desc=desc, unit="epoch", disable=not progress)
    for epoch in bar:
        net.train()
        total, count = 0.0, 0
        for idx in _batches(x.shape[0], batch_size, g_shuffle):
            xb = standardize(augment_batch(x[idx], g_aug, aug)).to(device)
            yb = y[idx].to(device)
            loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
            count += idx.numel()
        train_loss = total / count
        postfix = {"loss": f"{train_loss:.3f}"}
        stop = False
        if on_epoch is not None:
            extra = on_epoch(epoch, net, train_loss)
            if extra:
                stop = bool(extra.pop("stop", False))
                postfix.update(extra)
        bar.set_postfix(postfix)
        if stop:
            break
    return net


def _state(net: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in net.state_dict().items()}


def train_classifier(
    train_images: Mapping[str, Any],
    *,
    select_on: str | None = None,
    epochs: int,
    batch_size: int = 20,
    lr: float = 0.007,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    seed: int = 0,
    device: str | torch.device | None = None,
    progress: bool = True,
    augmentation: Augmentation = PAPER_CLASSIFIER,
    stem: str = "imagenet",
    refit: bool = False,
    monitor: Mapping[str, Any] | None = None,
    patience: int | None = None,
    min_epochs: int = 1,
) -> ClassifierResult:
    """Train the chunk classifier on SOURCE models' OLA images, selecting the epoch without
    ever looking at the target (``docs/method.md#visual-classifier``).

    Args:
        train_images: source model name → images ``(chunk, channel, query, key)`` (or
            ``(chunk, query, key)``);
            image i of every model is chunk i (class i). Only source models belong here.
        select_on: the source model to hold out for epoch selection (leave-one-source-out);
            :data:`SELECT_AUGMENTED` to select on a fixed augmented copy of the sources;
            :data:`SELECT_LAST` for no selection. Default: the last source model when there
            are at least 2, else :data:`SELECT_AUGMENTED`.
        epochs: number of training epochs (>= 1).
        batch_size: images per SGD step (paper: 20). A trailing batch of one image is merged
            into the previous one (BatchNorm).
        lr, momentum, weight_decay: SGD settings (paper: 0.007, 0.9, 5e-4).
        seed: seeds the initialisation, the batch order and the augmentation.
        device: ``"cpu"``, ``"cuda"``, ...; default :func:`olas_utils.infra.settings.resolve_device`.
        progress: show a tqdm progress bar over epochs.
        augmentation: training augmentation (default: the paper's, :data:`olas_utils.maths.augment.PAPER_CLASSIFIER`).
        stem: ``"imagenet"`` or ``"cifar"`` (see :func:`build_resnet18`).
        refit: with leave-one-source-out selection, retrain a fresh network on all sources
            for the chosen number of epochs and return it (otherwise ignored).
        monitor: optional name → images (e.g. the target model) whose top-1 accuracy is
            recorded per epoch in ``monitor_top1``. Monitoring never influences training or
            selection; it costs one evaluation per epoch.
        patience: early stopping: stop once the selection set's accuracy has not improved
            for this many epochs (``epochs`` is then the maximum); None trains all
            ``epochs``. Needs a selection set (not :data:`SELECT_LAST`).
        min_epochs: with ``patience``, never stop before this many epochs (the chosen epoch
            is still the best of all epochs run). Ignored without ``patience``.

    Returns:
        A :class:`ClassifierResult` holding the selected weights.

    Raises:
        ValueError: on no source model, arrays of different shapes, fewer than 2 classes,
            non-finite values, ``epochs < 1``, ``batch_size < 2``, ``min_epochs`` outside
            ``1..epochs``, a ``select_on`` that is
            not a source model (or is the only one), or monitor images of another shape.
    """
    from olas_utils.infra.settings import resolve_device

    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 (BatchNorm), got {batch_size}")
    if patience is not None and (not isinstance(patience, int) or patience < 1):
        raise ValueError(f"patience must be a positive number of epochs or None, got {patience!r}")
    if not isinstance(min_epochs, int) or not 1 <= min_epochs <= epochs:
        raise ValueError(f"min_epochs must be an integer in 1..epochs ({epochs}), got {min_epochs!r}")
    data, (n, c, h, w) = source_images(train_images)
    names = list(data)
    if select_on is None:
        select_on = names[-1] if len(names) >= 2 else SELECT_AUGMENTED
    mon = {str(k): as_images(v, name=f"monitor[{k!r}]") for k, v in (monitor or {}).items()}
    for k, v in mon.items():
        if tuple(v.shape) != (n, c, h, w):
            raise ValueError(f"monitor[{k!r}] has shape {tuple(v.shape)}, the sources {(n, c, h, w)}")
    labels = torch.arange(n)
    _, _, s_select = _seeds(seed)

    if select_on == SELECT_AUGMENTED:
        fit_names = names
        sel_x = torch.cat(
            [
                augment_batch(
                    data[k], torch.Generator().manual_seed(s_select + i), replace(augmentation, sink_p=1.0, noise_p=1.0)
                )
                for i, k in enumerate(names)
            ]
        )
        sel_y = labels.repeat(len(names))
        selection = "augmented"
    elif select_on == SELECT_LAST:
        fit_names, sel_x, sel_y, selection = names, None, None, "last"
    elif select_on in data:
        if len(names) < 2:
            raise ValueError(
                f"cannot hold out {select_on!r}: it is the only source model (use select_on={SELECT_AUGMENTED!r})"
            )
        fit_names = [k for k in names if k != select_on]
        sel_x, sel_y = data[select_on], labels
        selection = f"source:{select_on}"
    else:
        raise ValueError(
            f"select_on={select_on!r} is neither a source model ({names}) nor "
            f"{SELECT_AUGMENTED!r} / {SELECT_LAST!r}; selection never uses the target"
        )

    if patience is not None and sel_x is None:
        raise ValueError("patience (early stopping) needs a selection set; select_on=SELECT_LAST has none")
    dev = resolve_device(device)
    common = dict(
        n_classes=n,
        in_channels=c,
        stem=stem,
        batch_size=batch_size,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        seed=seed,
        device=dev,
        aug=augmentation,
        progress=progress,
    )
    x = torch.cat([data[k] for k in fit_names])
    y = labels.repeat(len(fit_names))

    sel_top1: list[float] = []
    sel_loss: list[float] = []
    mon_top1: dict[str, list[float]] = {k: [] for k in mon}
    best: dict[str, Any] = {"key": None, "epoch": 0, "state": None}
    train_loss: list[float] = []

    def on_epoch(epoch, net, tl):
        train_loss.append(tl)
        post = {}
        if sel_x is not None:
            t1, _, ls = accuracy_and_loss(batched_logits(net, sel_x, dev), sel_y)
            sel_top1.append(t1)
            sel_loss.append(ls)
            key = (t1, -ls)
            if best["key"] is None or key > best["key"]:
                best.update(key=key, epoch=epoch, state=_state(net))
            post["sel_top1"] = f"{t1:.3f}"
            if patience is not None and epoch >= min_epochs and epoch - best["epoch"] >= patience:
                post["stop"] = True
        for k, v in mon.items():
            mon_top1[k].append(accuracy_and_loss(batched_logits(net, v, dev), labels)[0])
        return post

    desc = f"chunk classifier ({'+'.join(fit_names)}; select {selection})"
    net = _fit(x, y, epochs=epochs, desc=desc, on_epoch=on_epoch, **common)
    if sel_x is None:
        chosen, state = epochs, _state(net)
    else:
        chosen, state = best["epoch"], best["state"]
    del net

    did_refit = False
    if refit and selection.startswith("source:"):
        xa = torch.cat([data[k] for k in names])
        ya = labels.repeat(len(names))
        net = _fit(xa, ya, epochs=chosen, desc=f"refit on {'+'.join(names)}", **common)
        state, fit_names, did_refit = _state(net), names, True
        del net

    hparams = {
        "batch_size": batch_size,
        "lr": lr,
        "momentum": momentum,
        "weight_decay": weight_decay,
        "augmentation": asdict(augmentation),
        "optimizer": "SGD",
        "normalisation": "per-image per-channel standardisation",
    }
    return ClassifierResult(
        state_dict=state,
        n_classes=n,
        in_channels=c,
        image_size=(h, w),
        stem=stem,
        seed=seed,
        epochs=epochs,
        chosen_epoch=chosen,
        selection=selection,
        train_models=tuple(fit_names),
        selection_top1=sel_top1,
        selection_loss=sel_loss,
        train_loss=train_loss,
        monitor_top1=mon_top1,
        refit=did_refit,
        hparams=hparams,
    )
