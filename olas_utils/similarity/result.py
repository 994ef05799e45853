"""A trained visual classifier as a value: the selected weights, how they were chosen, and
saving / loading them (:class:`ClassifierResult`, returned by
:func:`olas_utils.similarity.classifier.train_classifier`).

Importing this module does no work.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from olas_utils.similarity.resnet import build_resnet18

__all__ = ["ClassifierResult"]


_CHECKPOINT_FORMAT = 1


@dataclass
class ClassifierResult:
    """A trained chunk classifier and how it was chosen.

    Attributes:
        state_dict: the selected network's weights (CPU tensors).
        n_classes: number of classes (chunks).
        in_channels: C, input channels.
        image_size: ``(H, W)`` of the training images.
        stem: network stem (``"imagenet"`` or ``"cifar"``).
        seed: the seed.
        epochs: epochs trained (before any refit).
        chosen_epoch: the selected epoch (1-based); with a refit, the refit network was
            trained for this many epochs.
        selection: how it was selected: ``"source:<name>"`` (leave-one-source-out),
            ``"augmented"`` or ``"last"``.
        train_models: source models whose images trained the returned weights.
        selection_top1, selection_loss: per-epoch top-1 accuracy and mean cross-entropy
            (nats) on the selection set (empty for ``"last"``).
        train_loss: per-epoch mean training cross-entropy (nats, augmented images).
        monitor_top1: per-epoch top-1 on each ``monitor`` set; never used for selection.
        refit: whether the returned weights come from a refit on all sources.
        hparams: optimiser and augmentation settings.
    """

    state_dict: dict[str, torch.Tensor] = field(repr=False)
    n_classes: int
    in_channels: int
    image_size: tuple[int, int]
    stem: str
    seed: int
    epochs: int
    chosen_epoch: int
    selection: str
    train_models: tuple[str, ...]
    selection_top1: list[float] = field(default_factory=list)
    selection_loss: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    monitor_top1: dict[str, list[float]] = field(default_factory=dict)
    refit: bool = False
    hparams: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """Everything but the weights, as plain Python types (JSON-serialisable)."""
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "state_dict"}
        d["image_size"] = [int(v) for v in self.image_size]
        d["train_models"] = list(self.train_models)
        return d

    def build_model(self, device: str | torch.device | None = "cpu") -> nn.Module:
        """The network with the selected weights, in eval mode, on ``device``."""
        net = build_resnet18(self.n_classes, self.in_channels, stem=self.stem)
        net.load_state_dict(self.state_dict)
        return net.eval().to(device or "cpu")

    def save(self, path: str | Path) -> Path:
        """Save weights and metadata (classes, channels, seed, chosen epoch, histories, ...)
        with ``torch.save``, atomically (:func:`olas_utils.infra.atomic.save_atomic`); returns the
        path. Parent folders are created.

        Raises:
            OSError: the path cannot be written (a folder, no permission, no space); the
                message names it. Nothing is left behind.
        """
        from olas_utils.infra.atomic import save_atomic

        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder; give the classifier a file name, e.g. {path / 'clf.pt'}")
        from olas_utils.infra.fingerprint import sha256_tree

        content = {
            "format": _CHECKPOINT_FORMAT,
            "kind": "olas.classifier",
            "state_dict": self.state_dict,
            "meta": self.metadata(),
        }
        save_atomic({**content, "content_sha256": sha256_tree(content)}, path, what="classifier checkpoint")
        return path

    @classmethod
    def load(cls, path: str | Path, *, verify: bool = True) -> "ClassifierResult":
        """Load a checkpoint written by :meth:`save` (``torch.load(weights_only=True)``), checking
        the SHA-256 of its content that :meth:`save` recorded.

        Args:
            path: the file.
            verify: refuse a checkpoint whose content differs from its recorded hash, or that
                records none (written by OLAS before these hashes). False reads it with a warning.

        Raises:
            ValueError: if the file is not an OLAS classifier checkpoint of a known format, or
                (``verify``) it is damaged or records no content hash.
        """
        from olas_utils.infra.fingerprint import check_recorded_sha256

        ck = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(ck, dict) or ck.get("kind") != "olas.classifier" or ck.get("format") != _CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not an OLAS classifier checkpoint (format {_CHECKPOINT_FORMAT})")
        check_recorded_sha256(ck, what=f"the classifier checkpoint {path}", verify=verify)
        meta = dict(ck["meta"])
        meta["image_size"] = tuple(meta["image_size"])
        meta["train_models"] = tuple(meta["train_models"])
        return cls(state_dict=ck["state_dict"], **meta)
