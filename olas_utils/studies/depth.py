"""Which OLA orders and map keys a model can have: order k multiplies k distinct layers, so a
model with N layers has orders up to N (the 2-layer ``splade-tiny`` has no order 3), and a
context-mixing key needs an architecture whose layers OLAS knows how to decompose
(:data:`olas_utils.capture.mixing_specs.MIXING_SPECS`; ``"globenc"`` only post-LN encoders) and, at
word level, a neutral pooling that means something for the key on that model (not so for
``"alti"`` of a deep causal model: :func:`olas_utils.maths.uniform.neutral_problem`). The studies
ask for the same keys of every model and drop, per model, those it cannot have, with a
warning naming the key and why; each comparison then uses the models that have the key
compared.
"""

from __future__ import annotations

import warnings
from typing import Sequence

from olas_utils.vocabulary import MapKey

__all__ = ["orders_for", "keys_for", "mixing_keys", "mixing_skips", "drop_skipped"]


def _depth(model: str, num_layers: int | None) -> int | None:
    if num_layers is not None:
        return int(num_layers)
    from olas_utils.zoo.registry import REGISTRY

    entry = REGISTRY.get(model)
    return entry.num_layers if entry is not None else None


def _order(key: str) -> int | None:
    """The order of an ``"ola:k"`` or ``"<mixing method>:k"`` key, else None."""
    k = MapKey.parse(key)
    return k.index if k.method == "ola" or (k.mixing and k.index is not None) else None


def orders_for(model: str, orders: Sequence[int], num_layers: int | None = None) -> tuple[int, ...]:
    """The ``orders`` that ``model`` has (those not above its number of layers).

    Args:
        model: zoo name, folder or Hugging Face id.
        orders: the orders wanted.
        num_layers: the model's depth if known (a loaded model's); else read from the zoo
            registry; a model outside the zoo keeps every order (extraction then says if one
            is out of range).

    Returns:
        A tuple of orders, in the given order.
    """
    depth = _depth(model, num_layers)
    return tuple(k for k in orders if depth is None or int(k) <= depth)


def keys_for(model: str, keys: Sequence[str], num_layers: int | None = None) -> list[str]:
    """The map ``keys`` (``"ola:k"``, ``"rollout"``, ``"layer:i"``, ``"alti:k"``, ...) that
    ``model`` has by its depth: every key without an order, and each ``"ola:k"`` /
    ``"<mixing method>:k"`` with ``k`` among :func:`orders_for`. Whether the architecture has
    the mixing keys is :func:`mixing_skips`'s question (it needs the model)."""
    depth = _depth(model, num_layers)
    return [k for k in keys if depth is None or (o := _order(k)) is None or o <= depth]


def mixing_keys(keys: Sequence[str]) -> list[str]:
    """The keys among ``keys`` that extraction computes on request (its ``mixing=`` argument: the
    context-mixing keys ``"alti"``, ``"valuenorm:2"``, ... and attention flow, ``"flow"``), as
    canonical names, in order.

    Raises:
        ValueError: a key that is not a map key (:meth:`olas_utils.vocabulary.MapKey.parse`).
    """
    return [str(k) for k in map(MapKey.parse, keys) if k.on_request]


def mixing_skips(model, keys: Sequence[str], *, level: str = "subword") -> dict[str, str]:
    """Why ``model`` cannot give each of the context-mixing ``keys`` it lacks.

    Args:
        model: a :class:`~olas_utils.zoo.LoadedModel` (its facts, read once) or a ``transformers``
            model (its modules and config are read).
        keys: map keys; those that are not mixing keys are never skipped here.
        level: ``"subword"`` or ``"word"`` (neutral pooling): at word level a key whose neutral
            pooling means nothing on the model is skipped too
            (:func:`olas_utils.maths.uniform.neutral_problem`: ``"alti"`` / ``"globenc"`` of a deep
            causal model).

    Returns:
        ``{key: reason}`` for every mixing key that ``model`` cannot give: an order above its
        number of layers, an architecture without a
        :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS` entry, ``"globenc"`` on a model that is
        not post-LN (:func:`olas_utils.capture.mixing_specs.mixing_problem`'s sentence), and at word
        level the neutral-pooling case; empty when it has them all.

    Raises:
        ValueError: an unknown level.
    """
    from olas_utils.capture.facts import model_facts

    if level not in ("subword", "word"):
        raise ValueError(f"level must be 'subword' or 'word', got {level!r}")
    wanted = mixing_keys(keys)
    if not wanted:
        return {}
    return model_facts(model).map_keys(wanted, level=level).dropped


def drop_skipped(model: str, keys: Sequence[str], skips: dict[str, str]) -> list[str]:
    """``keys`` without those in ``skips`` (:func:`mixing_skips`), with one ``UserWarning``
    per skipped key naming the model, the key and why (no images or maps of it for that
    model; the comparisons of the key use the other models).

    Returns:
        The remaining keys, in order (canonical names for mixing keys).
    """
    out = []
    for key in keys:
        name = str(MapKey.parse(key))
        if name in skips:
            warnings.warn(
                f"{model}: no {name!r} maps ({skips[name]}); that key's comparisons leave {model} out",
                UserWarning,
                stacklevel=2,
            )
        else:
            out.append(name if MapKey.parse(key).on_request else key)
    return out
