"""Training and prediction of a :class:`~olas_utils.toa.heads.TOAModel`, resumable.

* **Batches without padding.** Examples are grouped by image size ``(L, W)``; a batch holds
  examples of one size only, so the axial transformer (which has no mask) never sees
  padding and every prediction is independent of its batch.
* **Deterministic and resumable.** Each step's batch order, noise and dropout come from
  generators seeded by ``(seed, epoch, step)``, not from state carried across steps. A
  checkpoint (model, optimiser, scheduler, step) is written atomically every
  ``checkpoint_every`` steps and at the end; a run killed at any point and started again
  with the same arguments resumes from the last checkpoint and ends with bit-identical
  weights (at the same thread count). A checkpoint written with other settings or data is
  refused (:class:`CheckpointMismatchError`), never silently reused.
* **Paper settings** (``docs/method.md#training``): AdamW, linear decay, Gaussian-noise augmentation with
  probability 0.3 per image. The paper gives the noise std as 0.2 without a scale; here it
  is 0.2 × the channel's standard deviation (as :func:`olas_utils.augment.add_gaussian_noise`).
  The paper's other augmentations (a transfer remedy, off by default): highlighted sink
  columns (``sink_p``, 1–3 columns, :func:`olas_utils.augment.highlight_sink_columns`) and a
  random temperature (``temperature_p``, :func:`olas_utils.augment.apply_temperature`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm.auto import tqdm

from olas_utils.toa.features import Example
from olas_utils.atomic import save_atomic
from olas_utils.toa.heads import TOAModel

__all__ = ["TrainConfig", "Selection", "CheckpointMismatchError", "size_batches", "collate", "train_model", "predict",
           "checkpoint_key", "examples_digest"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings.

    Attributes:
        epochs: passes over the training examples.
        batch_size: examples per step (at most; batches hold one image size).
        lr: AdamW peak learning rate, decayed linearly to 0 over all steps.
        weight_decay: AdamW weight decay.
        noise_p: probability per image of Gaussian-noise augmentation (paper 0.3).
        noise_std: noise std as a fraction of each channel's std (paper 0.2).
        grad_clip: max gradient norm (0 = off).
        sink_p: probability per image of highlighted sink columns (paper 0.3; default off).
        temperature_p: probability per image of a random temperature τ ~ U(0.5, 2) (default off).
        seed: seeds initialisation, batch order, noise and dropout.
        checkpoint_every: steps between checkpoints (also written after the last step).
    """

    epochs: int = 10
    batch_size: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    noise_p: float = 0.3
    noise_std: float = 0.2
    grad_clip: float = 5.0
    sink_p: float = 0.0
    temperature_p: float = 0.0
    seed: int = 0
    checkpoint_every: int = 200

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.checkpoint_every < 1:
            raise ValueError("epochs, batch_size and checkpoint_every must be >= 1")
        for name in ("noise_p", "sink_p", "temperature_p"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.lr <= 0 or self.noise_std < 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("lr must be > 0 and noise_std, weight_decay, grad_clip >= 0; got "
                             f"lr={self.lr}, noise_std={self.noise_std}, weight_decay={self.weight_decay}, "
                             f"grad_clip={self.grad_clip}")


@dataclass(frozen=True)
class Selection:
    """Early stopping and model selection on held-out data (never the test split).

    After every epoch ``score(model)`` (higher is better, e.g. dev UAS) is computed with the
    model in eval mode; the weights of the best epoch are kept (ties keep the earlier
    epoch) and training stops once ``patience`` epochs in a row have not improved on it
    (not before ``min_epochs``). The learning-rate schedule still spans ``cfg.epochs``.

    Attributes:
        score: model → float on the selection data.
        patience: epochs without improvement before stopping.
        min_epochs: never stop before this many epochs.
        identity: what identifies the selection data (mixed into the checkpoint key, e.g.
            :func:`examples_digest` of the dev examples).
    """

    score: Callable[[TOAModel], float]
    patience: int = 2
    min_epochs: int = 1
    identity: str = ""

    def __post_init__(self) -> None:
        if self.patience < 1 or self.min_epochs < 1:
            raise ValueError(f"patience and min_epochs must be >= 1, got {self.patience}, {self.min_epochs}")


class CheckpointMismatchError(ValueError):
    """A checkpoint exists at the path but was written for other settings or data."""


def size_batches(examples: Sequence[Example], batch_size: int, generator: torch.Generator | None = None) -> list[list[int]]:
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
        batches += [idx[k:k + batch_size] for k in range(0, len(idx), batch_size)]
    if generator is not None:
        batches = [batches[j] for j in torch.randperm(len(batches), generator=generator).tolist()]
    return batches


def collate(examples: Sequence[Example]) -> dict[str, torch.Tensor]:
    """Stack equal-size examples: ``images (B, C, L, L)``, ``positions (B, W)``,
    ``labels (B, W)`` or ``(B,)``, and ``heads (B, W)`` / ``spans (B, 2, 2)`` when present.

    Raises:
        ValueError: examples of different sizes.
    """
    if len({ex.size for ex in examples}) != 1:
        raise ValueError(f"a batch must hold one image size, got {sorted({ex.size for ex in examples})}")
    out = {"images": torch.stack([e.image for e in examples]),
           "positions": torch.stack([e.positions for e in examples]),
           "labels": torch.stack([e.labels for e in examples])}
    if examples[0].heads is not None:
        out["heads"] = torch.stack([e.heads for e in examples])
    if examples[0].spans is not None:
        out["spans"] = torch.stack([e.spans for e in examples])
    return out


def _seed(*parts) -> int:
    """A 63-bit seed from ``parts`` that does not depend on Python's hash randomisation."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1


def _augment(images: torch.Tensor, cfg: TrainConfig, gen: torch.Generator) -> torch.Tensor:
    from olas_utils.augment import apply_temperature, highlight_sink_columns

    b = images.shape[0]
    if cfg.temperature_p > 0 or cfg.sink_p > 0:
        images = images.clone()
        for i in range(b):
            if cfg.temperature_p > 0 and float(torch.rand(1, generator=gen)) < cfg.temperature_p:
                images[i] = apply_temperature(images[i].clamp_min(0), gen)
            if cfg.sink_p > 0 and images.shape[-1] >= 2 and float(torch.rand(1, generator=gen)) < cfg.sink_p:
                images[i] = highlight_sink_columns(images[i], gen)[0]
    if cfg.noise_p <= 0 or cfg.noise_std <= 0:
        return images
    pick = torch.rand(b, generator=gen) < cfg.noise_p
    noise = torch.randn(images.shape, generator=gen)
    std = images.flatten(2).std(-1, correction=0)[..., None, None]  # (B, C, 1, 1); 0 for a 1×1 image
    return images + pick[:, None, None, None].to(images.dtype) * noise * (cfg.noise_std * std)


def _update_examples(h, examples: Sequence[Example]) -> None:
    for ex in examples:
        for t in (ex.image, ex.positions, ex.labels, ex.heads, ex.spans):
            if t is not None:
                h.update(t.contiguous().numpy().tobytes())


def examples_digest(examples: Sequence[Example]) -> str:
    """SHA-256 of the examples' bytes (images, positions and gold targets)."""
    h = hashlib.sha256()
    _update_examples(h, examples)
    return h.hexdigest()


def checkpoint_key(model: TOAModel, cfg: TrainConfig, examples: Sequence[Example], extra: dict | None = None,
                   selection: Selection | None = None) -> str:
    """SHA-256 identifying a training run: model architecture and size, optimisation
    settings, the training examples' bytes, ``extra`` (e.g. source model, task) and the
    selection rule and data, if any."""
    h = hashlib.sha256()
    arch = {"kind": model.kind, "adapter": model.adapter.config.to_dict(),
            "params": [(n, tuple(p.shape)) for n, p in model.named_parameters()]}
    sel = None if selection is None else [selection.patience, selection.min_epochs, selection.identity]
    parts = [arch, asdict(cfg), extra or {}] + ([sel] if sel else [])
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    _update_examples(h, examples)
    return h.hexdigest()


def train_model(model: TOAModel, examples: Sequence[Example], cfg: TrainConfig, *, checkpoint: str | os.PathLike | None = None,
                extra: dict | None = None, selection: Selection | None = None, device: str | torch.device = "cpu",
                progress: bool = True, desc: str = "train") -> dict:
    """Train ``model`` in place (its initial weights should come from ``torch.manual_seed(cfg.seed)``).

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
        ValueError: no examples.
        OSError: the checkpoint cannot be written (message names the path).
    """
    if not examples:
        raise ValueError("no training examples")
    key = checkpoint_key(model, cfg, examples, extra, selection)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    plan = [size_batches(examples, cfg.batch_size, torch.Generator().manual_seed(_seed(cfg.seed, "order", e)))
            for e in range(cfg.epochs)]
    total = sum(len(p) for p in plan)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    step, losses_sum = 0, [0.0] * cfg.epochs
    curve: list[float] = []
    best: dict = {"epoch": 0, "score": None, "state": None}
    stopped = False
    path = Path(checkpoint) if checkpoint is not None else None
    resumed = 0
    if path is not None and path.exists():
        try:
            state = torch.load(path, weights_only=False, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - a truncated file is reported, not reused
            raise CheckpointMismatchError(f"{path} is not a readable checkpoint ({e}); delete it to start over") from e
        if not isinstance(state, dict) or state.get("key") != key:
            raise CheckpointMismatchError(
                f"{path} was written for another training run (other data, settings or model size); "
                "delete it or pass another checkpoint path")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step, losses_sum = state["step"], state["losses_sum"]
        curve, stopped = list(state.get("curve", [])), bool(state.get("stopped", False))
        best = state.get("best", best)
        resumed = step
    if path is not None and not path.exists():
        try:  # fail before training, not after the first steps, if the folder cannot be written
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(e.errno, f"cannot create the checkpoint folder {path.parent}: {e.strerror}; "
                          "pass another checkpoint path or none") from e
    flat = [(e, b) for e in range(cfg.epochs) for b in plan[e]]
    bar = tqdm(total=total, initial=step, desc=desc, disable=not progress, unit="step", leave=False)

    def save(done: bool) -> None:
        save_atomic({"key": key, "model": model.state_dict(), "optimizer": opt.state_dict(),
                      "scheduler": sched.state_dict(), "step": step, "losses_sum": losses_sum, "curve": curve,
                      "best": best, "stopped": stopped, "done": done}, path)

    model.train()
    try:
        while step < total and not stopped:
            epoch, idx = flat[step]
            batch = {k: v.to(device) for k, v in collate([examples[i] for i in idx]).items()}
            gen = torch.Generator().manual_seed(_seed(cfg.seed, "noise", step))
            images = _augment(batch["images"].cpu(), cfg, gen).to(device)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(_seed(cfg.seed, "dropout", step))
                out = model(images, batch["positions"], batch.get("spans"))
                loss = model.loss(out, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"non-finite training loss ({float(loss.detach())}) at step {step} (epoch {epoch}, examples "
                    f"{idx}); check the inputs for NaN/inf or lower the learning rate ({cfg.lr})")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
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
                if best["score"] is None or curve[-1] > best["score"]:
                    best = {"epoch": epoch + 1, "score": curve[-1],
                            "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
                stopped = step < total and epoch + 1 >= selection.min_epochs and \
                    epoch + 1 - best["epoch"] >= selection.patience
                bar.set_postfix(epoch=epoch, dev=f"{curve[-1]:.3f}", best=best["epoch"])
            if path is not None and (step % cfg.checkpoint_every == 0 or step == total or stopped or
                                     (selection is not None and epoch_end)):
                save(step == total or stopped)
    finally:
        bar.close()
        model.eval()
    epochs_run = flat[step - 1][0] + 1 if step else 0
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    losses = [s / len(examples) for s in losses_sum[:epochs_run]]
    return {"losses": losses, "steps": step, "resumed_from": resumed, "key": key, "curve": curve,
            "best_epoch": best["epoch"] if selection is not None else epochs_run, "epochs_run": epochs_run,
            "stopped_early": stopped}


@torch.no_grad()
def predict(model: TOAModel, examples: Sequence[Example], *, batch_size: int = 32, device: str | torch.device = "cpu",
            tree: str = "mst") -> list:
    """Predictions per example, in input order.

    Args:
        model: a trained :class:`~olas_utils.toa.heads.TOAModel`.
        examples: examples to label (their gold labels are not used).
        batch_size: examples per forward pass (equal sizes only, so results do not depend on it).
        device: where to run.
        tree: dependency kind: ``"mst"`` (Chu–Liu/Edmonds) or ``"eisner"`` (projective),
            single root, see :func:`olas_utils.toa.decoding.decode_tree`.

    Returns:
        token kind: a list of W class ids per example; relation kind: a class id per
        example; dependency kind: ``(heads, label_ids)`` per example, heads 1-based (0 = root).
    """
    from olas_utils.toa.decoding import decode_tree

    if examples and model.kind == "relation" and examples[0].spans is None:
        raise ValueError("a relation model needs examples with entity spans (relation task data)")
    if examples and model.kind == "dependency" and examples[0].heads is None:
        raise ValueError("a dependency model needs dependency examples (the 'dependency' task)")
    model.to(device).eval()
    out: list = [None] * len(examples)
    for idx in size_batches(examples, batch_size):
        batch = collate([examples[i] for i in idx])
        res = model(batch["images"].to(device), batch["positions"].to(device),
                    None if "spans" not in batch else batch["spans"].to(device))
        if model.kind == "token":
            pred = res.argmax(-1).cpu()
            for r, i in enumerate(idx):
                out[i] = pred[r].tolist()
        elif model.kind == "relation":
            pred = res.argmax(-1).cpu()
            for r, i in enumerate(idx):
                out[i] = int(pred[r])
        else:
            arcs, labels = (t.float().cpu() for t in res)
            for r, i in enumerate(idx):
                heads = decode_tree(arcs[r].double().numpy(), algorithm=tree, single_root=True)
                w = len(heads)
                lab = labels[r, torch.arange(1, w + 1), torch.as_tensor(heads)].argmax(-1)
                out[i] = (list(heads), lab.tolist())
    return out
