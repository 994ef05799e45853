"""Training and prediction of a :class:`~olas_utils.toa.heads.TOAModel`, resumable.

Batches hold one image size ``(L, W)`` (no padding); each step's batch order, noise and dropout
are seeded by ``(seed, epoch, step)``; checkpoints are atomic, keyed (:func:`checkpoint_key`) and
hashed (:data:`CHECKPOINT_HASH`), so a resumed run ends with bit-identical weights. Paper
settings, schedules (:data:`SCHEDULES`) and checkpoints: ``docs/method.md#training``.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from olas_utils.infra.atomic import check_writable
from olas_utils.infra.fingerprint import legacy_json, seed_from, sha256_chunks
from olas_utils.infra.progress import tqdm
from olas_utils.maths.augment import PAPER_ADAPTER, Augmentation, augment_batch
from olas_utils.toa.checkpoints import (
    CHECKPOINT_HASH,
    CheckpointMismatchError,
    checkpoint_intact,
    read_checkpoint,
    write_checkpoint,
)
from olas_utils.toa.features import Example
from olas_utils.toa.heads import TOAModel

__all__ = [
    "SCHEDULES",
    "TrainConfig",
    "Selection",
    "CheckpointMismatchError",
    "CHECKPOINT_HASH",
    "checkpoint_intact",
    "size_batches",
    "collate",
    "train_model",
    "predict",
    "predict_trees",
    "checkpoint_key",
    "examples_digest",
    "epochs_since_gain",
]


#: TrainConfig's augmentation arguments (and attributes) → their :class:`~olas_utils.maths.augment.Augmentation` fields.
_AUGMENTATION_ARGS = {
    "noise_p": "noise_p",
    "noise_std": "noise_std_ratio",
    "sink_p": "sink_p",
    "temperature_p": "temperature_p",
}


#: Learning-rate schedules of :class:`TrainConfig` (see the module docstring).
SCHEDULES = ("linear", "plateau")

#: Settings added after checkpoints were first written, with the value those checkpoints had: a
#: run with these values keeps its old checkpoint key.
_KEY_DEFAULTS = {"schedule": "linear", "lr_factor": 0.5}


def _from_augmentation(name: str) -> property:
    def get(self) -> float:
        return getattr(self.augmentation, name)

    get.__doc__ = f"``augmentation.{name}`` (read-only)."
    return property(get)


@dataclass(frozen=True, init=False)
class TrainConfig:
    """Optimisation settings.

    Attributes:
        epochs: passes over the training examples.
        batch_size: examples per step (at most; batches hold one image size).
        lr: AdamW peak learning rate.
        weight_decay: AdamW weight decay.
        grad_clip: max gradient norm (0 = off).
        seed: seeds initialisation, batch order, noise and dropout.
        checkpoint_every: steps between checkpoints (also written after the last step).
        augmentation: the training augmentations (default
            :data:`olas_utils.maths.augment.PAPER_ADAPTER`).
        schedule: ``"linear"`` (decay to 0 over ``epochs``) or ``"plateau"`` (``lr ·
            lr_factor^k``, k the epochs so far that did not improve on the best dev score;
            needs a :class:`Selection`).
        lr_factor: the plateau schedule's factor, in (0, 1].

    The arguments ``noise_p``, ``noise_std`` (a fraction of each channel's std), ``sink_p`` and
    ``temperature_p`` replace those settings of ``augmentation`` and read back as attributes
    (also through :func:`dataclasses.replace`).
    """

    epochs: int = 10
    batch_size: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    grad_clip: float = 5.0
    seed: int = 0
    checkpoint_every: int = 200
    augmentation: Augmentation = PAPER_ADAPTER
    schedule: str = "linear"
    lr_factor: float = 0.5

    def __init__(
        self,
        epochs: int = 10,
        batch_size: int = 8,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        noise_p: float | None = None,
        noise_std: float | None = None,
        grad_clip: float = 5.0,
        sink_p: float | None = None,
        temperature_p: float | None = None,
        seed: int = 0,
        checkpoint_every: int = 200,
        augmentation: Augmentation = PAPER_ADAPTER,
        schedule: str = "linear",
        lr_factor: float = 0.5,
    ) -> None:
        given = {"noise_p": noise_p, "noise_std": noise_std, "sink_p": sink_p, "temperature_p": temperature_p}
        for name, value in given.items():
            if value is not None and not (0 <= value <= 1 if name != "noise_std" else value >= 0):
                raise ValueError(f"{name} must be {'>= 0' if name == 'noise_std' else 'in [0, 1]'}, got {value}")
        if not isinstance(augmentation, Augmentation):
            raise TypeError(
                f"augmentation must be an olas_utils.maths.augment.Augmentation, got {type(augmentation).__name__}"
            )
        changes = {_AUGMENTATION_ARGS[k]: v for k, v in given.items() if v is not None}
        values = {
            "epochs": epochs,
            "batch_size": batch_size,
            "lr": lr,
            "weight_decay": weight_decay,
            "grad_clip": grad_clip,
            "seed": seed,
            "checkpoint_every": checkpoint_every,
            "augmentation": replace(augmentation, **changes) if changes else augmentation,
            "schedule": schedule,
            "lr_factor": float(lr_factor),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if self.epochs < 1 or self.batch_size < 1 or self.checkpoint_every < 1:
            raise ValueError("epochs, batch_size and checkpoint_every must be >= 1")
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError(
                "lr must be > 0 and weight_decay, grad_clip >= 0; got "
                f"lr={self.lr}, weight_decay={self.weight_decay}, grad_clip={self.grad_clip}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0 < self.lr_factor <= 1:
            raise ValueError(f"lr_factor must be in (0, 1], got {self.lr_factor}")

    noise_p = _from_augmentation("noise_p")
    noise_std = _from_augmentation("noise_std_ratio")
    sink_p = _from_augmentation("sink_p")
    temperature_p = _from_augmentation("temperature_p")


@dataclass(frozen=True)
class Selection:
    """Early stopping and model selection on held-out data (never the test split).

    The best epoch's weights are kept (ties: the earlier); training stops after ``patience``
    epochs without a gain (:func:`epochs_since_gain`: a score above the last gain's by more than
    ``min_gain``), not before ``min_epochs`` (``docs/method.md#training``).

    Attributes:
        score: model → float on the selection data.
        patience: epochs without a gain before stopping.
        min_epochs: never stop before this many epochs.
        identity: what identifies the selection data (mixed into the checkpoint key, e.g.
            :func:`examples_digest` of the dev examples).
        min_gain: the smallest rise of the score (in its units, e.g. a UAS fraction) that counts as a
            gain for stopping (0: any rise); the kept epoch is still the best score among those run.
            ``benchmarks/early_stopping.py`` chooses it on dev curves.
    """

    score: Callable[[TOAModel], float]
    patience: int = 2
    min_epochs: int = 1
    identity: str = ""
    min_gain: float = 0.0

    def __post_init__(self) -> None:
        if self.patience < 1 or self.min_epochs < 1:
            raise ValueError(f"patience and min_epochs must be >= 1, got {self.patience}, {self.min_epochs}")
        if not (math.isfinite(self.min_gain) and self.min_gain >= 0):
            raise ValueError(f"min_gain must be a finite number >= 0 (a score difference), got {self.min_gain!r}")


def epochs_since_gain(curve: Sequence[float], min_gain: float = 0.0) -> int:
    """Epochs run since the last *gain* on a selection curve (one score per epoch, first epoch
    first): the first epoch is a gain, and a later epoch is one when its score exceeds the score
    of the last gain by more than ``min_gain``. With ``min_gain`` 0 that is the last strict new best,
    so ``len(curve) - (that epoch)``. 0 for an empty curve."""
    last, ref = 0, None
    for e, v in enumerate(curve, start=1):
        if ref is None or v > ref + min_gain:
            last, ref = e, v
    return len(curve) - last if curve else 0


def size_batches(
    examples: Sequence[Example], batch_size: int, generator: torch.Generator | None = None
) -> list[list[int]]:
    """Group example indices into batches of equal image size ``(L, W)``.

    Args:
        examples: the examples.
        batch_size: maximum batch size.
        generator: if given, sizes and the examples within a size are shuffled with it and
            the batches are returned in a random order; else in size order.

    Returns:
        Lists of indices; every index appears exactly once.
    """
    groups: dict[tuple[int, int], list[int]] = {}
    for i, ex in enumerate(examples):
        groups.setdefault(ex.size, []).append(i)
    batches = []
    for size in sorted(groups):
        idx = groups[size]
        if generator is not None:
            idx = [idx[j] for j in torch.randperm(len(idx), generator=generator).tolist()]
        batches += [idx[k : k + batch_size] for k in range(0, len(idx), batch_size)]
    if generator is not None:
        batches = [batches[j] for j in torch.randperm(len(batches), generator=generator).tolist()]
    return batches


def collate(examples: Sequence[Example]) -> dict[str, torch.Tensor]:
    """Stack equal-size examples: ``images (batch, channel, query, key)``, ``positions (batch,
    word)``, ``labels (batch, word)`` or ``(batch,)``, and ``heads (batch, word)`` / ``spans
    (batch, entity, 2)`` when present.

    Raises:
        ValueError: examples of different sizes.
    """
    if len({ex.size for ex in examples}) != 1:
        raise ValueError(f"a batch must hold one image size, got {sorted({ex.size for ex in examples})}")
    out = {
        "images": torch.stack([e.image for e in examples]),
        "positions": torch.stack([e.positions for e in examples]),
        "labels": torch.stack([e.labels for e in examples]),
    }
    if examples[0].heads is not None:
        out["heads"] = torch.stack([e.heads for e in examples])
    if examples[0].spans is not None:
        out["spans"] = torch.stack([e.spans for e in examples])
    return out


def _example_bytes(examples: Sequence[Example]):
    for ex in examples:
        for t in (ex.image, ex.positions, ex.labels, ex.heads, ex.spans):
            if t is not None:
                yield t.contiguous().numpy().tobytes()


def examples_digest(examples: Sequence[Example]) -> str:
    """SHA-256 of the examples' bytes (images, positions and gold targets)."""
    return sha256_chunks(_example_bytes(examples))


def _config_identity(cfg: TrainConfig) -> dict:
    """``cfg`` in the key layout from before :class:`Augmentation` existed (its four settings beside the others),
    so checkpoints written then stay valid; settings that layout lacked (column range, draw order) are added
    under ``"augmentation"`` where they differ from :data:`~olas_utils.maths.augment.PAPER_ADAPTER`."""
    out = {
        f.name: getattr(cfg, f.name)
        for f in fields(cfg)
        if f.name != "augmentation" and not (f.name in _KEY_DEFAULTS and getattr(cfg, f.name) == _KEY_DEFAULTS[f.name])
    }
    if cfg.schedule == "linear":  # the factor does nothing there
        out.pop("lr_factor", None)
    aug = asdict(cfg.augmentation)
    out.update({arg: aug.pop(name) for arg, name in _AUGMENTATION_ARGS.items()})
    other = {k: v for k, v in aug.items() if v != getattr(PAPER_ADAPTER, k)}
    if other:
        out["augmentation"] = other
    return out


def checkpoint_key(
    model: TOAModel,
    cfg: TrainConfig,
    examples: Sequence[Example],
    extra: dict | None = None,
    selection: Selection | None = None,
) -> str:
    """SHA-256 identifying a training run: model architecture and size, optimisation
    settings, the training examples' bytes, ``extra`` (e.g. source model, task) and the
    selection rule and data, if any (``schedule`` / ``lr_factor`` only when not ``"linear"`` /
    0.5; ``docs/method.md#training``)."""
    arch = {
        "kind": model.kind,
        "adapter": model.adapter.config.to_dict(),
        "params": [(n, tuple(p.shape)) for n, p in model.named_parameters()],
    }
    sel = None if selection is None else [selection.patience, selection.min_epochs, selection.identity]
    if sel and selection.min_gain:  # only when set, so runs without it keep their checkpoints
        sel.append(float(selection.min_gain))
    parts = [arch, _config_identity(cfg), extra or {}] + ([sel] if sel else [])
    return sha256_chunks(itertools.chain([legacy_json(parts, default=str).encode("utf-8")], _example_bytes(examples)))


def train_model(
    model: TOAModel,
    examples: Sequence[Example],
    cfg: TrainConfig,
    *,
    checkpoint: str | os.PathLike | None = None,
    extra: dict | None = None,
    selection: Selection | None = None,
    device: str | torch.device = "cpu",
    progress: bool = True,
    desc: str = "train",
) -> dict:
    """Train ``model`` in place (its initial weights should come from ``torch.manualseed_from(cfg.seed)``).

    Args:
        model: a :class:`~olas_utils.toa.heads.TOAModel`.
        examples: training examples (:func:`olas_utils.toa.features.build_examples`).
        cfg: :class:`TrainConfig`.
        checkpoint: file for resumable checkpoints; if it holds a finished run with the same
            key, the weights are loaded and no step is run.
        extra: provenance mixed into the checkpoint key (source model, task, ...).
        selection: early stopping on held-out data (:class:`Selection`); the model ends
            with the weights of its best epoch. None: train all ``cfg.epochs``, keep the last.
        device: where to train.
        progress: tqdm bar over steps.
        desc: bar label.

    Returns:
        ``{"losses": mean loss per epoch run, "steps": steps run, "resumed_from": step or 0,
        "key": checkpoint key, "curve": selection score after each epoch run (empty without
        selection), "best_epoch": 1-based epoch whose weights the model holds, "epochs_run",
        "stopped_early": True when patience, not ``cfg.epochs``, ended training}``.

    Raises:
        CheckpointMismatchError: the checkpoint was written for another run (its key differs);
            delete it or choose another path.
        ValueError: no examples; a selection score that is NaN or infinite (names
            ``selection.identity``, the dev data: all-NaN dev data cannot choose an epoch).
        OSError: the checkpoint folder cannot be created or written (checked before any
            step, names the folder), or a checkpoint cannot be written (names the path).
    """
    if not examples:
        raise ValueError("no training examples")
    key = checkpoint_key(model, cfg, examples, extra, selection)
    model.to(device)
    # foreach: one multi-tensor kernel per update term instead of one op per parameter (bit-identical to the
    # per-parameter loop, measured; ``fused`` would be faster still but changes the weights)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    plan = [
        size_batches(examples, cfg.batch_size, torch.Generator().manual_seed(seed_from(cfg.seed, "order", e)))
        for e in range(cfg.epochs)
    ]
    total = sum(len(p) for p in plan)
    if cfg.schedule == "plateau" and selection is None:
        raise ValueError(
            "the plateau schedule lowers the rate when the dev score stops improving: pass a selection "
            "(dev data), or use schedule='linear'"
        )
    # linear: decay to 0 over every step; plateau: the rate of each epoch is set from the dev curve
    # (_plateau_lr), and the scheduler's own factor stays 1
    decay = (lambda s: max(0.0, 1.0 - s / total)) if cfg.schedule == "linear" else (lambda s: 1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, decay)
    step, losses_sum = 0, [0.0] * cfg.epochs
    curve: list[float] = []
    best: dict = {"epoch": 0, "score": None, "state": None}
    stopped = False
    path = Path(checkpoint) if checkpoint is not None else None
    resumed = 0
    state = read_checkpoint(path, key) if path is not None else None  # None: none, or damaged and set aside
    if state is not None:  # a checkpoint of this run, intact
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        for group in opt.param_groups:  # a checkpoint written before foreach would turn it off (same weights)
            group["foreach"] = True
        sched.load_state_dict(state["scheduler"])
        step, losses_sum = state["step"], state["losses_sum"]
        curve, stopped = list(state.get("curve", [])), bool(state.get("stopped", False))
        best = state.get("best", best)
        resumed = step
    if path is not None and step < total and not stopped:  # fail before training, not at the first save
        check_writable(path.parent, what="checkpoint folder")  # (a finished run is read, never written)
    flat = [(e, b) for e in range(cfg.epochs) for b in plan[e]]
    bar = tqdm(total=total, initial=step, desc=desc, disable=not progress, unit="step", leave=False)

    def save(done: bool) -> None:
        write_checkpoint(
            {
                "key": key,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(),
                "step": step,
                "losses_sum": losses_sum,
                "curve": curve,
                "best": best,
                "stopped": stopped,
                "done": done,
            },
            path,
        )

    model.train()
    try:
        while step < total and not stopped:
            epoch, idx = flat[step]
            if cfg.schedule == "plateau":
                for group in opt.param_groups:
                    group["lr"] = _plateau_lr(cfg, curve[:epoch])
            batch = {k: v.to(device) for k, v in collate([examples[i] for i in idx]).items()}
            gen = torch.Generator().manual_seed(seed_from(cfg.seed, "noise", step))
            images = augment_batch(batch["images"].cpu(), gen, cfg.augmentation).to(device)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_from(cfg.seed, "dropout", step))
                out = model(images, batch["positions"], batch.get("spans"))
                loss = model.loss(out, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"non-finite training loss ({float(loss.detach())}) at step {step} (epoch {epoch}, examples "
                    f"{idx}); check the inputs for NaN/inf or lower the learning rate ({cfg.lr})"
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=True)
            opt.step()
            sched.step()
            losses_sum[epoch] += float(loss.detach()) * len(idx)
            step += 1
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{float(loss.detach()):.3f}")
            epoch_end = step == total or flat[step][0] != epoch
            if selection is not None and epoch_end:
                model.eval()
                curve.append(float(selection.score(model)))
                model.train()
                if not math.isfinite(curve[-1]):
                    raise ValueError(
                        f"the selection score after epoch {epoch + 1} is {curve[-1]} on the dev data "
                        f"{selection.identity or '(no identity given)'}: it cannot choose an epoch. Check the dev "
                        "data (NaN or empty maps, no gold labels) or train without selection"
                    )
                if best["score"] is None or curve[-1] > best["score"]:
                    best = {
                        "epoch": epoch + 1,
                        "score": curve[-1],
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
                    }
                stopped = (
                    step < total
                    and epoch + 1 >= selection.min_epochs
                    and epochs_since_gain(curve, selection.min_gain) >= selection.patience
                )
                bar.set_postfix(epoch=epoch, dev=f"{curve[-1]:.3f}", best=best["epoch"])
            if path is not None and (
                step % cfg.checkpoint_every == 0 or step == total or stopped or (selection is not None and epoch_end)
            ):
                save(step == total or stopped)
    finally:
        bar.close()
        model.eval()
    epochs_run = flat[step - 1][0] + 1 if step else 0
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    losses = [s / len(examples) for s in losses_sum[:epochs_run]]
    return {
        "losses": losses,
        "steps": step,
        "resumed_from": resumed,
        "key": key,
        "curve": curve,
        "best_epoch": best["epoch"] if selection is not None else epochs_run,
        "epochs_run": epochs_run,
        "stopped_early": stopped,
    }


def _plateau_lr(cfg: TrainConfig, curve: Sequence[float]) -> float:
    """The plateau schedule's rate after the dev scores ``curve`` of the epochs run so far: ``cfg.lr``
    times ``cfg.lr_factor`` to the number of those epochs that did not improve on the best before
    them (a tie does not improve, as in :class:`Selection`)."""
    misses, best = 0, None
    for v in curve:
        if best is None or v > best:
            best = v
        else:
            misses += 1
    return cfg.lr * cfg.lr_factor**misses


def predict(
    model: TOAModel,
    examples: Sequence[Example],
    *,
    batch_size: int = 32,
    device: str | torch.device = "cpu",
    tree: str = "mst",
) -> list:
    """Predictions per example, in input order.

    Args:
        model: a trained :class:`~olas_utils.toa.heads.TOAModel`.
        examples: examples to label (their gold labels are not used).
        batch_size: examples per forward pass (equal sizes only, so results do not depend on it).
        device: where to run.
        tree: dependency kind: ``"mst"`` (Chu–Liu/Edmonds) or ``"eisner"`` (projective),
            single root, or ``"greedy"`` (each word's best head), see
            :func:`olas_utils.toa.decoding.decode_tree`.

    Returns:
        token kind: a list of W class ids per example; relation kind: a class id per
        example; dependency kind: ``(heads, label_ids)`` per example, heads 1-based (0 = root).
    """
    return predict_trees(model, examples, (tree,), batch_size=batch_size, device=device)[tree]


@torch.no_grad()
def predict_trees(
    model: TOAModel,
    examples: Sequence[Example],
    trees: Sequence[str],
    *,
    batch_size: int = 32,
    device: str | torch.device = "cpu",
) -> dict[str, list]:
    """:func:`predict` under several tree decoders from one forward pass per batch: ``{tree:
    predictions}``, each list equal to ``predict(..., tree=tree)``. Token and relation models have
    no tree: every entry holds the same predictions.

    Raises:
        ValueError: no ``trees``, or repeated names; examples of another kind than the model's.
    """
    from olas_utils.toa.decoding import decode_tree

    trees = tuple(trees)
    if not trees or len(set(trees)) != len(trees):
        raise ValueError(f"trees must name at least one distinct decoder ('mst', 'eisner', 'greedy'), got {trees}")
    if examples and model.kind == "relation" and examples[0].spans is None:
        raise ValueError("a relation model needs examples with entity spans (relation task data)")
    if examples and model.kind == "dependency" and examples[0].heads is None:
        raise ValueError("a dependency model needs dependency examples (the 'dependency' task)")
    model.to(device).eval()
    out: dict[str, list] = {t: [None] * len(examples) for t in trees}
    for idx in size_batches(examples, batch_size):
        batch = collate([examples[i] for i in idx])
        res = model(
            batch["images"].to(device),
            batch["positions"].to(device),
            None if "spans" not in batch else batch["spans"].to(device),
        )
        if model.kind in ("token", "relation"):
            pred = res.argmax(-1).cpu()
            for r, i in enumerate(idx):
                for t in trees:  # a fresh list per tree: callers may edit one
                    out[t][i] = pred[r].tolist() if model.kind == "token" else int(pred[r])
        else:
            arcs, labels = (t.float().cpu() for t in res)
            for r, i in enumerate(idx):
                for t in trees:
                    heads = decode_tree(arcs[r].double().numpy(), algorithm=t, single_root=True)
                    w = len(heads)
                    lab = labels[r, torch.arange(1, w + 1), torch.as_tensor(heads)].argmax(-1)
                    out[t][i] = (list(heads), lab.tolist())
    return out
