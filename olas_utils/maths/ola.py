"""Order-level attention (OLA): the streaming recurrence, attention rollout and baselines.

Pure tensor code: no model, no tokenizer. Shapes use the names ``batch`` (B), ``query``
and ``key`` (both T, the padded token count) and ``layer`` (N).

Definitions (Liang et al., *Order-Level Attention Similarity Across Language Models*,
NeurIPS 2025, §3.1; see ``docs/method.md#order-level-attention``). With ``A(i)`` the head-averaged,
post-softmax attention of layer ``i`` (1-based, T × T), attention rollout without the ½
weighting is ``R = Π_{i=N..1} (A(i) + I)`` (higher layer on the left). Expanding the product,
``R = Σ_k Σ_{i1<…<ik} A(ik)…A(i1)``; the order-k OLA is the inner sum divided by
``C(N, k)``, so ``OLA_0 = I``, ``OLA_1`` is the mean layer attention and
``R = Σ_k C(N, k)·OLA_k``.

Instead of enumerating the ``C(N, k)`` layer combinations (what the authors' released code
does), the sums follow from the recurrence, applied as each layer arrives::

    S_0 = I;   for j = 1..N:  S_k ← S_k + A(j) · S_{k-1}   for k = K, K-1, …, 1

which needs ``N·K`` batched matrix products and keeps only ``K + 1`` T × T accumulators
per sentence alive — never more than one layer's attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb
from typing import Iterable, Sequence

import torch

__all__ = [
    "OrderAccumulator",
    "ola_from_layers",
    "rollout_from_layers",
    "check_orders",
]


def check_orders(orders: Iterable[int], num_layers: int) -> tuple[int, ...]:
    """Validate and normalise a collection of OLA orders.

    Args:
        orders: orders wanted, each an integer in ``0..num_layers``.
        num_layers: N, the number of attention layers of the model.

    Returns:
        The sorted, de-duplicated orders as a tuple.

    Raises:
        TypeError: if ``orders`` is a single number or a string, not a collection.
        ValueError: if ``orders`` is empty or an order is not an integer in ``0..N``.
    """
    if isinstance(orders, (int, float, str, bytes)) or not isinstance(orders, Iterable):
        if (
            isinstance(orders, str)
            and orders.replace(",", " ").split()
            and all(p.isdigit() for p in orders.replace(",", " ").split())
        ):
            parts = orders.replace(",", " ").split()
            digits = parts if len(parts) > 1 else list(parts[0])
            hint = f"orders=({', '.join(str(int(d)) for d in digits)}{',' if len(digits) == 1 else ''})"
        elif isinstance(orders, (int, float)) and not isinstance(orders, bool) and float(orders).is_integer():
            hint = f"orders=({int(orders)},)"
        else:
            hint = "orders=(1, 2, 3)"
        raise TypeError(f"orders must be a collection of integers, e.g. {hint}, got {type(orders).__name__} {orders!r}")
    out = sorted(set(orders))
    if not out:
        raise ValueError("orders is empty: ask for at least one order, e.g. orders=(1, 2, 3)")
    for k in out:
        if isinstance(k, bool) or not isinstance(k, int):
            raise ValueError(f"OLA order {k!r} is not an integer; orders must be integers in 0..{num_layers}")
        if k < 0 or k > num_layers:
            raise ValueError(
                f"OLA order {k} is outside 0..{num_layers}: a model with {num_layers} layers has "
                f"orders 0..{num_layers} (order k averages products of k distinct layers)"
            )
    return tuple(out)


@dataclass
class OrderAccumulator:
    """Streaming accumulator of order-k OLA, attention rollout and selected layers.

    Feed it each layer's head-averaged attention in layer order with :meth:`add_layer`;
    read the results with :meth:`ola`, :meth:`rollout_map` and :attr:`layers`.

    Args:
        max_order: K, the highest order accumulated (orders 0..K are available).
        keep_layers: 0-based layer indices whose attention is kept as a baseline
            (negative indices count from the last layer and need ``num_layers``).
        rollout: whether to accumulate attention rollout ``Π (A(i) + I)``.
        num_layers: N if known in advance (lets ``keep_layers`` use negative indices and
            checks that exactly N layers were added).
        dtype: accumulation dtype (float32 by default; float64 for reference checks).

    All tensors have shape ``(batch, query, key)``; the accumulators live on the device
    and dtype of the first attention added (cast to ``dtype``).
    """

    max_order: int
    keep_layers: Sequence[int] = ()
    rollout: bool = False
    num_layers: int | None = None
    dtype: torch.dtype = torch.float32
    n_added: int = 0
    _sums: list[torch.Tensor | None] = field(default_factory=list, repr=False)
    _shape: torch.Size | None = field(default=None, repr=False)
    _device: torch.device | None = field(default=None, repr=False)
    _rollout: torch.Tensor | None = field(default=None, repr=False)
    layers: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.max_order < 0:
            raise ValueError(f"max_order must be >= 0, got {self.max_order}")
        if self.num_layers is not None:
            check_orders([self.max_order], self.num_layers)
        keep = []
        for i in self.keep_layers:
            if i < 0:
                if self.num_layers is None:
                    raise ValueError("negative keep_layers need num_layers to be given")
                i = self.num_layers + i
            if self.num_layers is not None and not 0 <= i < self.num_layers:
                raise ValueError(f"layer index {i} is outside 0..{self.num_layers - 1}")
            keep.append(i)
        self._keep = frozenset(keep)

    def add_layer(self, attention: torch.Tensor) -> None:
        """Fold the next layer's attention into the accumulators.

        Args:
            attention: ``(batch, query, key)`` head-averaged attention of the next layer
                (layers must arrive in order 1..N). Rows of padded queries should be zero.
        """
        if attention.dim() != 3 or attention.shape[-1] != attention.shape[-2]:
            raise ValueError(f"attention must be (batch, T, T), got shape {tuple(attention.shape)}")
        if self.num_layers is not None and self.n_added >= self.num_layers:
            raise RuntimeError(f"more than num_layers={self.num_layers} layers were added")
        a = attention.to(self.dtype)
        if self.n_added == 0:
            # S_0 = I is never stored: A·S_0 = A (below) and ola(0) builds it on demand.
            self._sums = [None] + [torch.zeros_like(a) for _ in range(self.max_order)]
            self._shape, self._device = a.shape, a.device
            if self.rollout:
                self._rollout = self._identity()
        elif a.shape != self._shape:
            raise ValueError(f"attention shape {tuple(a.shape)} differs from earlier layers' {tuple(self._shape)}")
        # k from high to low so that S_{k-1} is still the previous layer's value.
        top = min(self.max_order, self.n_added + 1)
        for k in range(top, 1, -1):
            self._sums[k].baddbmm_(a, self._sums[k - 1])
        if top >= 1:  # S_0 = I, so A·S_0 = A
            self._sums[1].add_(a)
        if self._rollout is not None:
            self._rollout = torch.baddbmm(self._rollout, a, self._rollout)
        if self.n_added in self._keep:
            self.layers[self.n_added] = a.clone()
        self.n_added += 1

    def _identity(self) -> torch.Tensor:
        b, t, _ = self._shape
        return torch.eye(t, dtype=self.dtype, device=self._device).expand(b, t, t).contiguous()

    def _check_complete(self) -> int:
        if self.n_added == 0:
            raise RuntimeError("no layer was added: was the capture active during the forward pass?")
        if self.num_layers is not None and self.n_added != self.num_layers:
            raise RuntimeError(f"{self.n_added} layers were added, expected {self.num_layers}")
        return self.n_added

    def ola(self, order: int) -> torch.Tensor:
        """Order-k OLA, ``S_k / C(N, k)``, shape ``(batch, query, key)``.

        Raises:
            ValueError: if ``order`` is outside ``0..min(K, N)``.
        """
        n = self._check_complete()
        check_orders([order], n)
        if order > self.max_order:
            raise ValueError(f"order {order} was not accumulated (max_order={self.max_order})")
        if order == 0:
            return self._identity()
        return self._sums[order] / comb(n, order)

    def rollout_map(self) -> torch.Tensor:
        """Attention rollout ``Π_{i=N..1}(A(i) + I)`` (unnormalised), ``(batch, query, key)``."""
        self._check_complete()
        if self._rollout is None:
            raise ValueError("rollout was not accumulated: create the accumulator with rollout=True")
        return self._rollout


def ola_from_layers(
    attentions: torch.Tensor | Sequence[torch.Tensor], orders: Iterable[int]
) -> dict[int, torch.Tensor]:
    """OLA of several orders from a stack of per-layer attention maps.

    Args:
        attentions: ``(layer, batch, query, key)`` tensor or a sequence of N
            ``(batch, query, key)`` tensors, head-averaged, lowest layer first.
        orders: orders wanted, each in ``0..N``.

    Returns:
        ``{k: (batch, query, key) tensor}``, in the input's dtype.

    Raises:
        ValueError: on an order outside ``0..N``.
    """
    layers = list(attentions)
    wanted = check_orders(orders, len(layers))
    acc = OrderAccumulator(max_order=max(wanted), num_layers=len(layers), dtype=layers[0].dtype)
    for a in layers:
        acc.add_layer(a)
    return {k: acc.ola(k) for k in wanted}


def rollout_from_layers(attentions: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    """Attention rollout without the ½ weighting, ``Π_{i=N..1}(A(i) + I)``.

    Args:
        attentions: ``(layer, batch, query, key)`` or a sequence of ``(batch, query, key)``.

    Returns:
        ``(batch, query, key)`` tensor in the input dtype. Source: Abnar & Zuidema,
        *Quantifying Attention Flow in Transformers* (ACL 2020), as used by Liang et al.
    """
    layers = list(attentions)
    acc = OrderAccumulator(max_order=0, rollout=True, num_layers=len(layers), dtype=layers[0].dtype)
    for a in layers:
        acc.add_layer(a)
    return acc.rollout_map()
