"""Adapter inputs: OLA maps of a task's sentences → stacked, pre-processed image channels
with the position of every word on the image axis and the gold targets.

Channels (``docs/method.md#adapter``): for each requested map (e.g. ``"ola:1"``, ``"ola:2"``) the raw map
and the map with its attention-sink outliers removed (:func:`olas_utils.maths.sinks.preprocess`
with ``keep_raw=True``), rows renormalised to sum 1 and then multiplied by the image side L
so that every row sums to L whatever the sentence length (a uniform encoder row is all
ones; a causal row i spreads L over its i+1 visible positions). Causal maps are *not*
symmetrised here (the adapter sees the lower triangle as it is).

Input normalisation (``normalize``, a transfer remedy, issue #11): ``"none"`` keeps the
scaled rows; ``"rank"`` replaces every row's visible entries by their ranks (ties
averaged), scaled so the largest is 1 — a map's ordering survives, its model-specific
scale and contrast (how peaked rows are, how heavy a sink is) do not.

Controls for trained adapters (``source``): ``"ola"`` (the maps), ``"position"`` (the
**position-only** control: the OLA channels replaced by relative-position channels of the
same count — alternately ``1/(1+|i−j|)`` on and left of the diagonal, and on and right of
it (for causal models the causal mask instead of the right half, which they cannot see) —
through the same scaling, so the adapter learns what word order alone gives). The
*tokenizer-only* control is the ``"ola"`` source on uniform-attention maps
(:func:`olas_utils.toa.taskmaps.task_maps` with ``Control.TOKENIZER_ONLY``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from olas_utils.data.tasks import TaskData
from olas_utils.extract import OLAMaps
from olas_utils.maths.sinks import preprocess

__all__ = [
    "Example",
    "word_positions",
    "adapter_image",
    "position_image",
    "rank_rows",
    "build_examples",
    "check_examples",
    "n_channels",
    "NORMALIZATIONS",
    "SOURCES",
]

#: Input normalisations of :func:`adapter_image` and inputs of :func:`build_examples`.
NORMALIZATIONS = ("none", "rank")
SOURCES = ("ola", "position")


@dataclass
class Example:
    """One sentence for the adapter.

    Attributes:
        image: ``(C, L, L)`` float32 channels.
        positions: ``(W,)`` long, each word's index on the image axis.
        labels: ``(W,)`` long class ids (token, dependency kinds) or a 0-d long (relation).
        heads: ``(W,)`` long gold heads, 0 = root (dependency kind), else None.
        spans: ``(2, 2)`` long entity spans ``[start, end)`` (relation kind), else None.
    """

    image: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    heads: torch.Tensor | None = None
    spans: torch.Tensor | None = None

    @property
    def size(self) -> tuple[int, int]:
        """``(L, W)``: examples of equal size can be batched without padding."""
        return int(self.image.shape[-1]), int(self.positions.shape[0])


def n_channels(keys: Sequence[str], *, remove_sinks: bool = True, keep_raw: bool = True) -> int:
    """Number of image channels :func:`adapter_image` produces for ``keys``."""
    return len(keys) * (2 if (remove_sinks and keep_raw) else 1)


def word_positions(maps: OLAMaps, i: int) -> torch.Tensor:
    """``(W_i,)`` index of each word of sentence ``i`` on its map's axis: ``arange(W)`` at
    word level, the word's first subword at subword level.

    Raises:
        ValueError: a word without subword (cannot happen with
            :func:`olas_utils.align.tokenize_words`, which refuses such words).
    """
    n_words = len(maps.words[i])
    if maps.level == "word":
        return torch.arange(n_words)
    wid = maps.word_ids[i]
    pos = torch.full((n_words,), -1, dtype=torch.long)
    for t in range(len(wid) - 1, -1, -1):
        if wid[t] >= 0:
            pos[wid[t]] = t
    if (pos < 0).any():
        raise ValueError(f"sentence {i}: words {(pos < 0).nonzero().flatten().tolist()} have no subword")
    return pos


def rank_rows(x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Row-wise ranks of ``(C, L, L)`` channels over each row's visible entries (all of
    them; for causal maps columns ``j <= i``), ties averaged, divided by the row's number of
    visible entries (so the largest entry gets 1); invisible entries stay 0.

    Example: the row ``[0.5, 0.2, 0.2, 0.1]`` → ``[1.0, 0.625, 0.625, 0.25]``.
    """
    L = x.shape[-1]
    vis = torch.ones(L, L, dtype=torch.bool)
    if causal:
        vis = torch.tril(vis)
    v = x.double().masked_fill(~vis, float("-inf"))
    less = (v[..., None, :] < v[..., :, None]).sum(-1).double()  # entries strictly below each entry
    equal = (v[..., None, :] == v[..., :, None]).sum(-1).double()
    ranks = less + (equal + 1) / 2  # 1-based average rank among visible + invisible (-inf rank lowest)
    n_vis = vis.sum(-1).double()  # (L,)
    ranks = ranks - (L - n_vis)[:, None]  # the invisible entries sit below every visible one
    return (ranks / n_vis[:, None]).masked_fill(~vis, 0.0).to(x.dtype)


def position_image(length: int, n_channels: int, *, causal: bool) -> torch.Tensor:
    """``(n_channels, L, L)`` relative-position channels of the position-only control (see
    the module docstring), before scaling."""
    i = torch.arange(length)
    decay = 1.0 / (1.0 + (i[:, None] - i[None, :]).abs().double())
    left = torch.tril(decay)
    right = torch.tril(torch.ones(length, length, dtype=torch.float64)) if causal else torch.triu(decay)
    return torch.stack([left if c % 2 == 0 else right for c in range(n_channels)])


def adapter_image(
    maps: OLAMaps,
    i: int,
    keys: Sequence[str],
    *,
    remove_sinks: bool = True,
    keep_raw: bool = True,
    normalize: str = "none",
    source: str = "ola",
) -> torch.Tensor:
    """``(C, L, L)`` adapter input of sentence ``i`` (see the module docstring).

    Raises:
        KeyError: a key that was not extracted.
        ValueError: unknown ``normalize`` or ``source``.
    """
    if normalize not in NORMALIZATIONS or source not in SOURCES:
        raise ValueError(
            f"normalize must be one of {NORMALIZATIONS} and source one of {SOURCES}, got {normalize!r}, {source!r}"
        )
    if source == "position":
        length = maps[keys[0]][i].shape[-1]
        x = position_image(
            length, n_channels(keys, remove_sinks=remove_sinks, keep_raw=keep_raw), causal=maps.is_causal
        )
        x = x / x.sum(-1, keepdim=True)
    else:
        x = preprocess(
            maps.stack(i, keys),
            causal=maps.is_causal,
            remove_sinks=remove_sinks,
            keep_raw=keep_raw,
            renormalize=True,
            symmetrize=False,
        )
    if normalize == "rank":
        return rank_rows(x, maps.is_causal).float().contiguous()
    return (x * x.shape[-1]).float().contiguous()


def build_examples(
    maps: OLAMaps,
    data: TaskData,
    keys: Sequence[str],
    *,
    remove_sinks: bool = True,
    keep_raw: bool = True,
    normalize: str = "none",
    source: str = "ola",
) -> list[Example]:
    """Adapter examples of a task split from its OLA maps (either level).

    Args:
        maps: :class:`~olas_utils.extract.OLAMaps` of exactly ``data.words`` (same order).
        data: the task split (:func:`olas_utils.data.tasks.load_task`).
        keys: maps to stack, e.g. ``["ola:1", "ola:2"]``.
        remove_sinks, keep_raw: see :func:`olas_utils.maths.sinks.preprocess`.
        normalize, source: see the module docstring (``"rank"``; ``"position"`` control).

    Returns:
        One :class:`Example` per sentence.

    Raises:
        ValueError: no keys, or the maps were extracted from other sentences.
    """
    if not keys:
        raise ValueError("keys must name at least one map, e.g. ['ola:1', 'ola:2']")
    if len(maps) != len(data) or any(list(a) != list(b) for a, b in zip(maps.words, data.words)):
        raise ValueError(
            f"the maps ({len(maps)} sentences) were not extracted from this {data.task}/"
            f"{data.split} data ({len(data)} sentences); extract them from data.words"
        )
    out = []
    for i in range(len(data)):
        lab = data.label_ids(i)
        ex = Example(
            image=adapter_image(
                maps, i, keys, remove_sinks=remove_sinks, keep_raw=keep_raw, normalize=normalize, source=source
            ),
            positions=word_positions(maps, i),
            labels=torch.as_tensor(lab, dtype=torch.long),
        )
        if data.heads is not None:
            ex.heads = torch.as_tensor(data.heads[i], dtype=torch.long)
        if data.spans is not None:
            ex.spans = torch.as_tensor(data.spans[i], dtype=torch.long)
        out.append(ex)
    return out


def check_examples(
    examples: Sequence[Example], data: TaskData, *, names: tuple[str, str] = ("examples", "data"), finite: bool = True
) -> None:
    """Check that ``examples`` are those of ``data`` (as :func:`build_examples` makes them):
    one per sentence, of the data's kind (entity spans and one label for relations, gold heads
    for dependencies, one label and one position per word otherwise), and (``finite``) with
    finite images — NaN or inf inputs would train or score silently wrong.

    Args:
        examples: the adapter examples.
        data: their task split.
        names: how the error calls the two arguments (e.g. ``("dev examples", "dev data")``).
        finite: also refuse non-finite images.

    Raises:
        ValueError: naming both arguments, the task split, the first example that does not fit
            and what to do.
    """
    what, of = names
    where = f"{of} ({data.task}/{data.split}, a {data.kind} task with {len(data)} sentences)"
    fix = f"build them from the same split: features.build_examples(maps, {of}, keys)"
    if len(examples) != len(data):
        raise ValueError(f"{len(examples)} {what} for {where}: one example per sentence is needed; {fix}")
    bad: list[int] = []
    for i, ex in enumerate(examples):
        n_words = len(data.words[i])
        if data.kind == "relation":
            why = None if ex.spans is not None and ex.labels.dim() == 0 else "has no entity spans and one label"
        elif ex.spans is not None or ex.labels.dim() != 1:
            why = "is a relation example (entity spans, one label per sentence)"
        elif data.kind == "dependency" and ex.heads is None:
            why = "has no gold heads (not a dependency example)"
        elif int(ex.positions.shape[0]) != n_words or int(ex.labels.shape[0]) != n_words:
            why = f"has {int(ex.positions.shape[0])} word positions for a sentence of {n_words} words"
        else:
            why = None
        if why is not None:
            raise ValueError(f"{what} do not match {where}: example {i} {why}; {fix}")
        if finite and not bool(torch.isfinite(ex.image).all()):
            bad.append(i)
    if bad:
        raise ValueError(
            f"{len(bad)} of the {len(examples)} {what} for {where} have NaN or infinite images (first: "
            f"{bad[:5]}){'; all of them' if len(bad) == len(examples) else ''}: scores on them are meaningless. "
            "Rebuild the maps (a float16 model that overflowed? use float32 or bfloat16) and the examples"
        )
