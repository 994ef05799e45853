"""Interoperability with the attention tools researchers already use: any OLAS map in the
attention format of bertviz's ``head_view`` / ``model_view``, and OLA computed from attention
patterns recorded elsewhere (a TransformerLens ``ActivationCache``, nnsight-saved patterns,
Hugging Face ``output_attentions``) through the same recurrence as :func:`~olas_utils.extract.extract_ola`
(``docs/interop.md``).

No interop package is imported here: the functions read tensors and mappings only.
Importing this module does no work.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import torch

from olas_utils.maths.ola import ola_from_layers, rollout_from_layers

__all__ = ["bertviz_attention", "ola_from_patterns", "transformer_lens_patterns"]


def bertviz_attention(
    res, sentence: int = 0, keys: Iterable[str] | None = None, *, normalize: bool = True
) -> tuple[tuple[torch.Tensor, ...], list[str]]:
    """One sentence's maps as bertviz's attention argument: ``head_view(*bertviz_attention(res))``.

    Each key becomes one "layer" of the view with one head (bertviz's layer menu picks the
    key, in the order given), so ``model_view`` shows the keys as rows.

    Args:
        res: an :class:`~olas_utils.maps.OLAMaps`.
        sentence: which sentence.
        keys: map names (default: every key of ``res``, in its order).
        normalize: scale each row to sum 1 (bertviz draws a weight as a line's opacity,
            meant for 0..1): a no-op for OLA orders, single layers and the mixing keys at
            subword level (rows already sum to 1), a rescaling of rollout (rows sum to 2^N) and
            of word-level maps; all-zero rows stay zero. False exports the values as they are.

    Returns:
        ``(attention, labels)``: a tuple of ``(1, 1, T, T)`` float32 tensors, one per key
        (T: tokens at subword level, words at word level), and the T axis labels.

    Raises:
        KeyError: a key that was not extracted; IndexError: a sentence out of range.
    """
    if not -len(res) <= sentence < len(res):
        raise IndexError(f"sentence {sentence} out of range: these maps hold {len(res)} sentences")
    out = []
    for key in list(res.keys() if keys is None else keys):
        m = res[key][sentence].detach().float().cpu()
        if normalize:
            s = m.sum(-1, keepdim=True)
            m = torch.where(s > 0, m / s.clamp_min(torch.finfo(m.dtype).tiny), m)
        out.append(m[None, None].contiguous())
    return tuple(out), list(res.labels(sentence))


def transformer_lens_patterns(cache: Mapping, n_layers: int | None = None) -> list[torch.Tensor]:
    """The per-layer attention patterns of a TransformerLens ``ActivationCache`` (or any mapping
    with the keys ``"blocks.{l}.attn.hook_pattern"``), lowest layer first.

    Args:
        cache: from ``model.run_with_cache(...)``; each pattern ``(batch, heads, query, key)``.
        n_layers: how many layers (default: every consecutive ``blocks.{l}`` from 0 present).

    Returns:
        N tensors ``(batch, heads, query, key)``.

    Raises:
        KeyError: a layer's pattern is missing (names the key), or the cache has none.
    """
    if n_layers is None:
        n_layers = 0
        while f"blocks.{n_layers}.attn.hook_pattern" in cache:
            n_layers += 1
    if n_layers == 0:
        raise KeyError("the cache holds no 'blocks.0.attn.hook_pattern': run run_with_cache without names_filter")
    out = []
    for l in range(n_layers):
        key = f"blocks.{l}.attn.hook_pattern"
        if key not in cache:
            raise KeyError(f"the cache has no {key!r}: cache every layer's attention pattern")
        out.append(cache[key])
    return out


def ola_from_patterns(
    patterns: Sequence[torch.Tensor], orders: Iterable[int] = (1, 2, 3), *, rollout: bool = False
) -> dict[str, torch.Tensor]:
    """OLA from per-layer, per-head attention patterns recorded by another tool: heads averaged
    per layer (as OLAS captures them), then :func:`~olas_utils.maths.ola.ola_from_layers` (and
    :func:`~olas_utils.maths.ola.rollout_from_layers`), in float64.

    Args:
        patterns: N tensors ``(batch, heads, query, key)``, lowest layer first (TransformerLens:
            :func:`transformer_lens_patterns`; nnsight: the saved attention weights of each
            layer; Hugging Face: ``outputs.attentions``).
        orders: OLA orders, each in ``0..N``.
        rollout: also return ``"rollout"``.

    Returns:
        ``{"ola:k": (batch, query, key) float32 tensor, ...}`` (plus ``"rollout"``), keys named
        as :func:`~olas_utils.extract.extract_ola` names them. Padding is not masked: pass
        one sentence, or sentences of one length.

    Raises:
        ValueError: no patterns, a pattern that is not 4-D, patterns of different shapes, or an
            order outside ``0..N``.
    """
    pats = list(patterns)
    if not pats:
        raise ValueError("no attention patterns given")
    if any(p.dim() != 4 or p.shape != pats[0].shape for p in pats):
        raise ValueError(
            f"patterns must be N tensors of one shape (batch, heads, query, key), got {[tuple(p.shape) for p in pats]}"
        )
    layers = [p.detach().double().mean(1) for p in pats]
    out = {f"ola:{k}": v.float() for k, v in ola_from_layers(layers, orders).items()}
    if rollout:
        out["rollout"] = rollout_from_layers(layers).float()
    return out
