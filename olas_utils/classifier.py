"""The paper's visual classifier: which chunk does an OLA image come from? (paper §2)

A ResNet-18 is trained to tell which text chunk (class = chunk index, e.g. 1,000 classes
in the paper, about 200 in the quick profile) an OLA image comes from, on the images of
one or more SOURCE language models, and is then tested on the images of an unseen
TARGET model. High target accuracy means the target's OLA of a chunk looks like the
sources' OLA of the same chunk: the cross-model commonality.

Inputs are plain arrays: per model, a float array ``(n_chunks, C, S, S)`` (one channel
per OLA order, or per key; ``(n_chunks, S, S)`` is taken as ``C = 1``), image ``i`` of
every model being chunk ``i`` — the layout that the cached extraction produces per model
and key (combine keys into channels with :func:`stack_channels`).

Network
    ``torchvision.models.resnet18(weights=None, num_classes=n_chunks)`` with its first
    convolution replaced to take ``C`` channels. ``stem="imagenet"`` (default) keeps
    torchvision's 7×7 stride-2 convolution and max-pool (fast on CPU: a 50×50 image is
    13×13 after the stem); ``stem="cifar"`` is the released code's variant (3×3 stride-1
    convolution, no max-pool: about 15× the compute, closer to the paper).

Training (paper hyper-parameters)
    SGD, lr 0.007, momentum 0.9, weight decay 5e-4, batch 20, cross-entropy, a fixed
    number of epochs; no learning-rate schedule.

Augmentation (training images only, see :class:`Augmentation`)
    * highlighted sink columns, p 0.3 per image: 1–3 distinct columns (uniform count, the
      same columns in every channel) get, in every row r and channel, the value
      ``m1 + (u − ½)(m1 − m2)`` added, where ``m1``/``m2`` are the row's largest and
      second-largest values and ``u ~ U(0, 1)`` is drawn per column — the released code's
      sink magnitude (``RandomHightlightColumns``). Unlike the released code, rows are
      *not* renormalised afterwards (the released code augments raw OLA before
      preprocessing; our images are already preprocessed and are standardised next), so
      exactly the chosen columns change. Zero rows (padding) stay zero.
    * Gaussian noise, p 0.15 per image: i.i.d. ``N(0, σ²)`` added to every pixel, with
      ``σ = 0.13 ×`` the standard deviation of that channel of the image *before* any
      augmentation (so a highlighted column does not inflate it). No clipping or
      renormalisation (the released code applies ReLU and renormalises rows, and computes
      σ per row over non-outlier entries).

Input normalisation
    After augmentation, every image is standardised per channel: ``(x − mean) / std``
    over its S×S pixels (a constant channel becomes zeros). This removes the scale
    differences between orders and between models (e.g. causal vs bidirectional).

Model selection — never on the target (the released script selected its weights on the
test set, and even reloaded the best test weights during training; we do not)
    The classes are the chunks, so every chunk has to be seen in training and no chunk
    can be held out. Selection therefore holds out *models* or uses perturbed copies:

    * ``select_on=<source name>`` (default with ≥ 2 sources: the last one in the dict):
      leave-one-source-out. Train on the other sources, evaluate the held-out source's
      (clean) images after every epoch, keep the epoch with the highest top-1 (ties: lower
      loss, then earlier epoch). With ``refit=True`` a fresh network (same seed) is then
      trained on *all* sources for the chosen number of epochs.
    * ``select_on=SELECT_AUGMENTED`` (default with 1 source): train on all sources and
      select on one fixed, seeded, always-augmented copy of their images (sink columns and
      noise both applied, probability 1). A weak criterion — it measures robustness to
      the augmentations, not transfer to another model — and said so in the result.
    * ``select_on=SELECT_LAST``: no selection, the last epoch is kept.

    Target images are never an input of the selection: :func:`train_classifier` only
    takes them through ``monitor=``, which records per-epoch accuracy for plots (e.g. to
    show what test-set selection would have reported) and is tested to leave the chosen
    epoch and weights unchanged.

Determinism
    For a given seed, on CPU, results are bit-identical: the network is initialised under
    ``torch.manual_seed(seed)`` inside a forked RNG (the global RNG is untouched), and
    batch shuffling and augmentation use private ``torch.Generator`` objects seeded from
    ``numpy.random.SeedSequence(seed)``. On CUDA, cuDNN may be non-deterministic.

Example::

    from olas_utils.classifier import train_classifier, evaluate
    res = train_classifier({"qwen": q, "gemma": g}, select_on="gemma", epochs=10)
    evaluate(res, smollm_images)           # Accuracy(top1=..., top5=..., n=...)
    res.save("clf.pt"); res2 = ClassifierResult.load("clf.pt")

Importing this module does no work (``torchvision`` is imported when a network is built).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

__all__ = [
    "SELECT_AUGMENTED",
    "SELECT_LAST",
    "STEMS",
    "Augmentation",
    "NO_AUGMENTATION",
    "Accuracy",
    "ClassifierResult",
    "as_images",
    "stack_channels",
    "standardize",
    "highlight_sink_columns",
    "add_gaussian_noise",
    "augment_batch",
    "build_resnet18",
    "train_classifier",
    "predict_logits",
    "evaluate",
]

#: ``select_on`` value: select on a fixed augmented copy of the source images.
SELECT_AUGMENTED = ":augmented"
#: ``select_on`` value: no selection, keep the last epoch.
SELECT_LAST = ":last"
#: Supported first-layer variants of :func:`build_resnet18`.
STEMS = ("imagenet", "cifar")

_CHECKPOINT_FORMAT = 1
_EVAL_BATCH = 256


# --------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------


def as_images(images: Any, *, name: str = "images") -> torch.Tensor:
    """Convert one model's images to a float32 CPU tensor ``(n, C, S1, S2)``.

    Args:
        images: numpy array or tensor, ``(n, C, S1, S2)``, or ``(n, S1, S2)`` (taken as
            ``C = 1``).
        name: used in error messages.

    Returns:
        A contiguous float32 CPU tensor (a copy when a conversion was needed).

    Raises:
        ValueError: on another number of dimensions, an empty array, or a non-finite value.
    """
    if isinstance(images, torch.Tensor):
        t = images.detach().to("cpu", torch.float32)
    else:
        arr = np.asarray(images, dtype=np.float32)
        if not arr.flags.writeable:  # e.g. a read-only memory map from a cache
            arr = arr.copy()
        t = torch.from_numpy(arr)
    if t.ndim == 3:
        t = t[:, None]
    if t.ndim != 4:
        raise ValueError(f"{name}: expected (n, C, S, S) or (n, S, S) images, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name}: empty image array of shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: images contain NaN or infinite values")
    return t.contiguous()


def stack_channels(arrays: Sequence[Any]) -> np.ndarray:
    """Stack several per-key image arrays of one model into channels.

    Args:
        arrays: C arrays of shape ``(n, S, S)`` (e.g. ``"ola:1"``, ``"ola:2"`` of one
            model from the cache), all the same shape.

    Returns:
        float32 array ``(n, C, S, S)``.

    Raises:
        ValueError: if ``arrays`` is empty or the shapes differ or are not 3-D.
    """
    arrs = [np.asarray(a, dtype=np.float32) for a in arrays]
    if not arrs:
        raise ValueError("stack_channels needs at least one array")
    shapes = {a.shape for a in arrs}
    if len(shapes) != 1 or arrs[0].ndim != 3:
        raise ValueError(f"stack_channels needs arrays of one (n, S, S) shape, got {sorted(shapes)}")
    return np.stack(arrs, axis=1)


def standardize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Per-image, per-channel standardisation (the classifier's input normalisation).

    Args:
        x: ``(B, C, H, W)`` float tensor.
        eps: a channel whose standard deviation is at most ``eps`` becomes zeros.

    Returns:
        ``(x − mean) / std`` over each image's H×W pixels, per channel (population std).
    """
    mean = x.mean(dim=(-2, -1), keepdim=True)
    std = x.std(dim=(-2, -1), keepdim=True, unbiased=False)
    centred = x - mean
    return torch.where(std > eps, centred / std.clamp_min(eps), torch.zeros_like(centred))


# --------------------------------------------------------------------------------------
# Augmentation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Augmentation:
    """The training augmentations (paper §2 values by default).

    Attributes:
        sink_p: probability, per image, of highlighting sink columns.
        min_columns, max_columns: how many columns (uniform, inclusive).
        noise_p: probability, per image, of adding Gaussian noise.
        noise_std_ratio: noise std as a fraction of the clean image's std (per channel).
    """

    sink_p: float = 0.3
    min_columns: int = 1
    max_columns: int = 3
    noise_p: float = 0.15
    noise_std_ratio: float = 0.13

    def __post_init__(self) -> None:
        for n in ("sink_p", "noise_p"):
            v = getattr(self, n)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{n} must be in [0, 1], got {v}")
        if not 1 <= self.min_columns <= self.max_columns:
            raise ValueError(f"need 1 <= min_columns <= max_columns, got {self.min_columns}, {self.max_columns}")
        if self.noise_std_ratio < 0:
            raise ValueError(f"noise_std_ratio must be >= 0, got {self.noise_std_ratio}")


#: No augmentation at all.
NO_AUGMENTATION = Augmentation(sink_p=0.0, noise_p=0.0)


def highlight_sink_columns(
    image: torch.Tensor,
    generator: torch.Generator,
    *,
    min_columns: int = 1,
    max_columns: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Add artificial attention-sink columns to one image (the rule in the module doc).

    ``k ~ U{min_columns..max_columns}`` distinct columns are drawn (uniformly among the
    columns that are non-zero in some channel; all columns if none is), ``u ~ U(0, 1)``
    per column; in every channel and row r, column j gets
    ``m1_r + (u_j − ½)(m1_r − m2_r)`` added (``m1_r ≥ m2_r`` the row's two largest
    values). ``k`` is capped at the number of candidate columns.

    Args:
        image: ``(C, H, W)`` float tensor (not modified), ``W >= 2``.
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
        image: ``(C, H, W)`` float tensor (not modified).
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


def augment_batch(x: torch.Tensor, generator: torch.Generator, aug: Augmentation = Augmentation()) -> torch.Tensor:
    """Apply :class:`Augmentation` to a batch (sink columns, then noise; each per image).

    Args:
        x: ``(B, C, H, W)`` float CPU tensor (not modified).
        generator: a CPU ``torch.Generator`` (all randomness comes from it).
        aug: the augmentation settings.

    Returns:
        The augmented batch (a new tensor).
    """
    out = x.clone()
    b = x.shape[0]
    do_sink = torch.rand(b, generator=generator) < aug.sink_p
    do_noise = torch.rand(b, generator=generator) < aug.noise_p
    for i in range(b):
        if do_sink[i]:
            out[i], _ = highlight_sink_columns(out[i], generator, min_columns=aug.min_columns,
                                               max_columns=aug.max_columns)
        if do_noise[i]:
            out[i] = add_gaussian_noise(out[i], generator, std_ratio=aug.noise_std_ratio, reference=x[i])
    return out


# --------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------


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
        with ``torch.save``; returns the path. Parent folders are created."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": _CHECKPOINT_FORMAT, "kind": "olas.classifier",
                    "state_dict": self.state_dict, "meta": self.metadata()}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "ClassifierResult":
        """Load a checkpoint written by :meth:`save` (``torch.load(weights_only=True)``).

        Raises:
            ValueError: if the file is not an OLAS classifier checkpoint of a known format.
        """
        ck = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(ck, dict) or ck.get("kind") != "olas.classifier" or ck.get("format") != _CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not an OLAS classifier checkpoint (format {_CHECKPOINT_FORMAT})")
        meta = dict(ck["meta"])
        meta["image_size"] = tuple(meta["image_size"])
        meta["train_models"] = tuple(meta["train_models"])
        return cls(state_dict=ck["state_dict"], **meta)


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------


def _seeds(seed: int) -> list[int]:
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(int(seed)).spawn(3)]


def _batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    order = torch.randperm(n, generator=generator)
    chunks = list(order.split(batch_size))
    if len(chunks) > 1 and chunks[-1].numel() == 1:  # BatchNorm cannot train on one image
        chunks[-2] = torch.cat([chunks[-2], chunks[-1]])
        chunks.pop()
    return chunks


@torch.no_grad()
def _logits(net: nn.Module, x: torch.Tensor, device: torch.device, batch_size: int = _EVAL_BATCH) -> torch.Tensor:
    was_training = net.training
    net.eval()
    out = [net(standardize(x[i:i + batch_size]).to(device)).float().cpu() for i in range(0, x.shape[0], batch_size)]
    net.train(was_training)
    return torch.cat(out)


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float, float]:
    top1 = (logits.argmax(1) == labels).float().mean().item()
    k = min(5, logits.shape[1])
    top5 = (logits.topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()
    loss = F.cross_entropy(logits, labels).item()
    return top1, top5, loss


def _fit(x, y, *, epochs, n_classes, in_channels, stem, batch_size, lr, momentum, weight_decay,
         seed, device, aug, progress, desc, on_epoch=None):
    """Train from scratch; call ``on_epoch(epoch, net, train_loss)`` after every epoch."""
    s_shuffle, s_aug, _ = _seeds(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_resnet18(n_classes, in_channels, stem=stem)
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    g_shuffle = torch.Generator().manual_seed(s_shuffle)
    g_aug = torch.Generator().manual_seed(s_aug)
    from tqdm.auto import tqdm

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
        if on_epoch is not None:
            extra = on_epoch(epoch, net, train_loss)
            if extra:
                postfix.update(extra)
        bar.set_postfix(postfix)
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
    augmentation: Augmentation = Augmentation(),
    stem: str = "imagenet",
    refit: bool = False,
    monitor: Mapping[str, Any] | None = None,
) -> ClassifierResult:
    """Train the chunk classifier on SOURCE models' OLA images, selecting the epoch without
    ever looking at the target (see the module doc, "Model selection").

    Args:
        train_images: source model name → images ``(n, C, S, S)`` (or ``(n, S, S)``);
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
        device: ``"cpu"``, ``"cuda"``, ...; default :func:`olas_utils.settings.resolve_device`.
        progress: show a tqdm progress bar over epochs.
        augmentation: training augmentation (default: the paper's).
        stem: ``"imagenet"`` or ``"cifar"`` (see :func:`build_resnet18`).
        refit: with leave-one-source-out selection, retrain a fresh network on all sources
            for the chosen number of epochs and return it (otherwise ignored).
        monitor: optional name → images (e.g. the target model) whose top-1 accuracy is
            recorded per epoch in ``monitor_top1``. Monitoring never influences training or
            selection; it costs one evaluation per epoch.

    Returns:
        A :class:`ClassifierResult` holding the selected weights.

    Raises:
        ValueError: on no source model, arrays of different shapes, fewer than 2 classes,
            non-finite values, ``epochs < 1``, ``batch_size < 2``, a ``select_on`` that is
            not a source model (or is the only one), or monitor images of another shape.
    """
    from .settings import resolve_device

    if not train_images:
        raise ValueError("train_images is empty: give at least one source model")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 (BatchNorm), got {batch_size}")
    data = {str(k): as_images(v, name=f"train_images[{k!r}]") for k, v in train_images.items()}
    shapes = {k: tuple(v.shape) for k, v in data.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"all source models need images of one shape (n, C, S, S), got {shapes}")
    n, c, h, w = next(iter(shapes.values()))
    if n < 2:
        raise ValueError(f"need at least 2 classes (chunks), got {n}")
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
        sel_x = torch.cat([augment_batch(data[k], torch.Generator().manual_seed(s_select + i),
                                         Augmentation(sink_p=1.0, noise_p=1.0,
                                                      min_columns=augmentation.min_columns,
                                                      max_columns=augmentation.max_columns,
                                                      noise_std_ratio=augmentation.noise_std_ratio))
                           for i, k in enumerate(names)])
        sel_y = labels.repeat(len(names))
        selection = "augmented"
    elif select_on == SELECT_LAST:
        fit_names, sel_x, sel_y, selection = names, None, None, "last"
    elif select_on in data:
        if len(names) < 2:
            raise ValueError(f"cannot hold out {select_on!r}: it is the only source model "
                             f"(use select_on={SELECT_AUGMENTED!r})")
        fit_names = [k for k in names if k != select_on]
        sel_x, sel_y = data[select_on], labels
        selection = f"source:{select_on}"
    else:
        raise ValueError(f"select_on={select_on!r} is neither a source model ({names}) nor "
                         f"{SELECT_AUGMENTED!r} / {SELECT_LAST!r}; selection never uses the target")

    dev = resolve_device(device)
    common = dict(n_classes=n, in_channels=c, stem=stem, batch_size=batch_size, lr=lr, momentum=momentum,
                  weight_decay=weight_decay, seed=seed, device=dev, aug=augmentation, progress=progress)
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
            t1, _, ls = _accuracy(_logits(net, sel_x, dev), sel_y)
            sel_top1.append(t1)
            sel_loss.append(ls)
            key = (t1, -ls)
            if best["key"] is None or key > best["key"]:
                best.update(key=key, epoch=epoch, state=_state(net))
            post["sel_top1"] = f"{t1:.3f}"
        for k, v in mon.items():
            mon_top1[k].append(_accuracy(_logits(net, v, dev), labels)[0])
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

    hparams = {"batch_size": batch_size, "lr": lr, "momentum": momentum, "weight_decay": weight_decay,
               "augmentation": asdict(augmentation), "optimizer": "SGD", "normalisation": "per-image per-channel standardisation"}
    return ClassifierResult(
        state_dict=state, n_classes=n, in_channels=c, image_size=(h, w), stem=stem, seed=seed,
        epochs=epochs, chosen_epoch=chosen, selection=selection, train_models=tuple(fit_names),
        selection_top1=sel_top1, selection_loss=sel_loss, train_loss=train_loss,
        monitor_top1=mon_top1, refit=did_refit, hparams=hparams,
    )


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


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
    from .settings import resolve_device

    x = _check_eval_images(result, images)
    dev = resolve_device(device)
    net = result.build_model(dev)
    return _logits(net, x, dev, batch_size)


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
    top1, top5, _ = _accuracy(logits, y)
    return Accuracy(top1=top1, top5=top5, n=n)
