"""Adapter inputs: OLA maps of a task's sentences → stacked, pre-processed image channels
with the position of every word on the image axis and the gold targets.

Channels (paper.md §4): for each requested map (e.g. ``"ola:1"``, ``"ola:2"``) the raw map
and the map with its attention-sink outliers removed (:func:`olas_utils.sinks.preprocess`
with ``keep_raw=True``), rows renormalised to sum 1 and then multiplied by the image side L
so that every row sums to L whatever the sentence length (a uniform encoder row is all
ones; a causal row i spreads L over its i+1 visible positions). Causal maps are *not*
symmetrised here (the adapter sees the lower triangle as it is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from olas_utils.extract import OLAMaps
from olas_utils.sinks import preprocess
from olas_utils.data.tasks import TaskData

__all__ = ["Example", "word_positions", "adapter_image", "build_examples", "n_channels"]


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


def adapter_image(maps: OLAMaps, i: int, keys: Sequence[str], *, remove_sinks: bool = True,
                  keep_raw: bool = True) -> torch.Tensor:
    """``(C, L, L)`` adapter input of sentence ``i`` (see the module docstring).

    Raises:
        KeyError: a key that was not extracted.
    """
    x = preprocess(maps.stack(i, keys), causal=maps.is_causal, remove_sinks=remove_sinks, keep_raw=keep_raw,
                   renormalize=True, symmetrize=False)
    return (x * x.shape[-1]).float().contiguous()


def build_examples(maps: OLAMaps, data: TaskData, keys: Sequence[str], *, remove_sinks: bool = True,
                   keep_raw: bool = True) -> list[Example]:
    """Adapter examples of a task split from its OLA maps (either level).

    Args:
        maps: :class:`~olas_utils.extract.OLAMaps` of exactly ``data.words`` (same order).
        data: the task split (:func:`olas_utils.data.tasks.load_task`).
        keys: maps to stack, e.g. ``["ola:1", "ola:2"]``.
        remove_sinks, keep_raw: see :func:`olas_utils.sinks.preprocess`.

    Returns:
        One :class:`Example` per sentence.

    Raises:
        ValueError: no keys, or the maps were extracted from other sentences.
    """
    if not keys:
        raise ValueError("keys must name at least one map, e.g. ['ola:1', 'ola:2']")
    if len(maps) != len(data) or any(list(a) != list(b) for a, b in zip(maps.words, data.words)):
        raise ValueError(f"the maps ({len(maps)} sentences) were not extracted from this {data.task}/"
                         f"{data.split} data ({len(data)} sentences); extract them from data.words")
    out = []
    for i in range(len(data)):
        lab = data.label_ids(i)
        ex = Example(image=adapter_image(maps, i, keys, remove_sinks=remove_sinks, keep_raw=keep_raw),
                     positions=word_positions(maps, i), labels=torch.as_tensor(lab, dtype=torch.long))
        if data.heads is not None:
            ex.heads = torch.as_tensor(data.heads[i], dtype=torch.long)
        if data.spans is not None:
            ex.spans = torch.as_tensor(data.spans[i], dtype=torch.long)
        out.append(ex)
    return out
