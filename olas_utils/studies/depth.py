"""Which OLA orders and map keys a model can have: order k multiplies k distinct layers, so a
model with N layers has orders up to N (the 2-layer ``splade-tiny`` has no order 3). The
studies ask for the same orders of every model and drop, per model, those it cannot have;
each comparison then uses the models that have the key compared.
"""

from __future__ import annotations

from typing import Sequence

from olas_utils.vocabulary import MapKey

__all__ = ["orders_for", "keys_for"]


def _depth(model: str, num_layers: int | None) -> int | None:
    if num_layers is not None:
        return int(num_layers)
    from olas_utils.zoo.registry import REGISTRY

    entry = REGISTRY.get(model)
    return entry.num_layers if entry is not None else None


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
    """The map ``keys`` (``"ola:k"``, ``"rollout"``, ``"layer:i"``) that ``model`` has: every
    non-OLA key, and ``"ola:k"`` for the orders of :func:`orders_for`."""
    depth = _depth(model, num_layers)
    return [k for k in keys if depth is None or (o := MapKey.parse(k).order) is None or o <= depth]
