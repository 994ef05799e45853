"""Uniform attention: the tokenizer-only control, and the reference of neutral word pooling.

Under *uniform attention* every query spreads its attention evenly over the positions it
may see: all ``T`` tokens of the sentence for an encoder (``1/T`` each), tokens ``0..i`` for
query ``i`` of a causal model (``1/(i+1)`` each). On a sliding-window layer of window ``w``
(:func:`olas_utils.capture.architecture.attention_windows`) query ``i`` sees only keys ``j`` with
``i - w < j <= i`` (causal) or ``|i - j| < w`` (bidirectional), like the model itself; for a
sentence of at most ``w`` tokens that changes nothing, bit for bit. No model is involved —
only the number of tokens each tokenizer produces and which positions each layer may see —
so anything a pipeline can read from maps built from it comes from tokenisation alone.

Two uses:

* :func:`uniform_attention` feeds the same OLA recurrence as a real model
  (``extract_ola(..., attention="uniform")``): the *tokenizer-only control*.
* :func:`uniform_reference` is the map a key (``"ola:k"``, ``"rollout"``, ``"layer:i"``)
  takes for one sentence under uniform attention in every layer; neutral word pooling
  (:func:`olas_utils.align.pool_to_words`) divides by its pooled value, which
  :func:`neutral_problem` says is meaningless for one kind of key: the product of many causal
  layers.

Pure tensor code; importing this module does no work.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from olas_utils.vocabulary import KEY_METHODS, MapKey

__all__ = ["uniform_attention", "uniform_reference", "neutral_problem", "MAX_NEUTRAL_PRODUCT"]

#: The most causal layers whose product (``"alti"``, ``"globenc"``: ``Π M(i)``) neutral word pooling
#: divides by: :func:`neutral_problem`. The uniform counterpart of such a key is ``U^N`` for a causal
#: ``U`` (``1/(i+1)`` on and below the diagonal), whose entries span about ``T^N`` — for a 50-word
#: chunk (~70 tokens) 3·10⁵ at N = 3 (as ``"ola:3"``), beyond float32's precision (1/ε ≈ 1.7·10⁷)
#: from N = 4, and below its smallest number on the diagonal of later tokens from N ≈ 20: the lift
#: divides by numbers that carry no information (measured at word level: 3·10³¹ on gemma3-270m's
#: 18 layers, infinite on smollm2-135m's 30, against at most 900 for ``"ola:3"``).
MAX_NEUTRAL_PRODUCT = 3


def uniform_attention(attention_mask: torch.Tensor, *, causal: bool, window: int | None = None) -> torch.Tensor:
    """Uniform attention for a right-padded batch.

    Args:
        attention_mask: ``(batch, T)`` 1 at real tokens, 0 at padding (right padding).
        causal: query ``i`` sees keys ``0..i`` (else every real token).
        window: a sliding-window layer's window ``w`` (None: full attention): query ``i``
            then sees only keys with ``i - w < j <= i`` (causal) or ``|i - j| < w``
            (bidirectional). A window of at least ``T`` gives exactly the full-attention map.

    Returns:
        ``(batch, T, T)`` float32: row ``i`` of a real query is ``1/n_i`` on the ``n_i``
        keys it may see and 0 elsewhere; rows and columns of padding are 0. Every real row
        sums to 1.

    Raises:
        ValueError: if ``attention_mask`` is not 2-D, or ``window`` is not a positive integer.
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be (batch, T), got shape {tuple(attention_mask.shape)}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive integer or None, got {window!r}")
    m = attention_mask.to(torch.float32)
    allowed = m[:, :, None] * m[:, None, :]
    t = m.shape[1]
    if causal:
        allowed = allowed * torch.ones(t, t, device=m.device).tril()
    if window is not None and window < t:
        pos = torch.arange(t, device=m.device)
        back = pos[:, None] - pos[None, :]  # i - j
        band = back < window if causal else back.abs() < window
        allowed = allowed * band.to(torch.float32)
    counts = allowed.sum(-1, keepdim=True)
    return torch.where(counts > 0, allowed / counts.clamp_min(1.0), torch.zeros_like(allowed))


def _binding(windows, t: int, num_layers: int) -> tuple[int | None, ...] | None:
    """``windows`` with the entries that restrict nothing at T tokens set to None; None if none restricts.

    Raises:
        ValueError: if ``windows`` does not have one entry per layer.
    """
    if windows is None:
        return None
    windows = tuple(windows)
    if len(windows) != num_layers:
        raise ValueError(f"windows must have one entry per layer ({num_layers}), got {len(windows)}")
    out = tuple(None if w is None or int(w) >= t else int(w) for w in windows)
    return out if any(w is not None for w in out) else None


@lru_cache(maxsize=4096)
def _reference(
    key: str, t: int, causal: bool, num_layers: int, windows: tuple[int | None, ...] | None = None
) -> torch.Tensor:
    from olas_utils.maths.ola import OrderAccumulator

    try:
        parsed = MapKey.parse(key)
    except ValueError:
        parsed = None
    if windows is None:
        u = uniform_attention(torch.ones(1, t), causal=causal).to(torch.float64)
        layers = [u] * num_layers
    else:
        by_w = {w: uniform_attention(torch.ones(1, t), causal=causal, window=w).to(torch.float64) for w in set(windows)}
        layers = [by_w[w] for w in windows]
    mixing = parsed is not None and parsed.mixing
    if mixing and parsed.index is None and KEY_METHODS[parsed.method].bare == "product":
        out = layers[0]
        for u in layers[1:]:
            out = u @ out  # Π U(i), higher layer on the left
    elif parsed is not None and (parsed.method == "ola" or (mixing and parsed.index is not None)):
        k = parsed.index
        if k > num_layers:
            raise ValueError(f"order {k} is outside 0..{num_layers}")
        acc = OrderAccumulator(max_order=k, num_layers=num_layers, dtype=torch.float64)
        for u in layers:
            acc.add_layer(u)
        out = acc.ola(k)
    elif parsed is not None and parsed.method == "flow":
        from olas_utils.maths.flow import attention_flow

        out = attention_flow(torch.stack([u[0] for u in layers]))[None]
    elif parsed is not None and (parsed.method == "rollout" or mixing):
        acc = OrderAccumulator(max_order=0, num_layers=num_layers, rollout=True, dtype=torch.float64)
        for u in layers:
            acc.add_layer(u)
        out = acc.rollout_map()
    elif parsed is not None and parsed.method == "layer":
        i = parsed.index
        if not -num_layers <= i < num_layers:
            raise ValueError(f"layer {i} is outside -{num_layers}..{num_layers - 1}")
        out = layers[i]
    else:
        raise ValueError(
            f"no uniform reference for key {key!r}: use 'ola:k', 'rollout', 'layer:i', 'flow' or a mixing key "
            "('alti', 'alti:k', ...)"
        )
    return out[0].to(torch.float32)


def neutral_problem(key: str, *, causal: bool, num_layers: int) -> str | None:
    """Why neutral word pooling (:func:`olas_utils.align.pool_to_words`) of ``key`` means nothing
    on such a model, or None if it is defined.

    The one case: a bare context-mixing key aggregated as the product of its per-layer matrices
    (``"alti"``, ``"globenc"``: :attr:`olas_utils.vocabulary.KeyMethod.bare` ``"product"``) on a
    causal model with more than :data:`MAX_NEUTRAL_PRODUCT` layers. Its uniform counterpart
    ``Π U_i`` piles all its mass on the first token as causal layers multiply, so dividing by it
    divides by underflowing numbers. Encoders are unaffected (``U·U = U``), and so are the order
    keys (``"alti:k"`` is divided by ``U^k`` like ``"ola:k"``) and rollout-like aggregations
    (``Π (U_i + I)`` keeps the identity). Subword-level maps and Clark pooling are always defined.

    Args:
        key: a map name.
        causal: a causal model.
        num_layers: N.

    Returns:
        One sentence naming the key, why and what to use instead, or None (also for a name that
        is not a map key: :func:`uniform_reference` refuses it).
    """
    try:
        parsed = MapKey.parse(key)
    except ValueError:
        return None
    spec = KEY_METHODS[parsed.method]
    if not (parsed.mixing and parsed.index is None and spec.bare == "product"):
        return None
    if not causal or num_layers <= MAX_NEUTRAL_PRODUCT:
        return None
    return (
        f"{str(parsed)!r} is the product of all {num_layers} causal layers, and neutral word pooling divides it by "
        f"uniform attention's product, which piles its mass on the first token and underflows elsewhere: the lift "
        f"is not a number that means anything. Use it at subword level or with Clark pooling, or its orders "
        f"('{parsed.method}:1' .. '{parsed.method}:{MAX_NEUTRAL_PRODUCT}') at word level"
    )


def uniform_reference(
    key: str, t: int, *, causal: bool, num_layers: int, windows: tuple[int | None, ...] | None = None
) -> torch.Tensor:
    """The map ``key`` takes for a T-token sentence when every layer attends uniformly.

    ``"ola:k"``: order-k OLA of the N uniform layers (``U^k`` when they are identical; ``U``
    itself for an encoder, since ``U·U = U``; ``I`` for k = 0); ``"rollout"``: ``Π(U_i + I)``
    (unnormalised, like :meth:`olas_utils.maths.ola.OrderAccumulator.rollout_map`); ``"layer:i"``:
    ``U_i``. Context-mixing keys (:mod:`olas_utils.maths.mixing`) aggregate row-stochastic per-layer
    matrices over the visible tokens, whose uniform counterpart is ``U_i`` too (every visible
    token contributes alike): ``"alti:k"`` etc. are order k of the ``U_i`` like ``"ola:k"``,
    ``"valuenorm"`` is ``Π(U_i + I)`` like rollout, ``"alti"`` and ``"globenc"`` are ``Π U_i``;
    ``"flow"`` is the attention flow of the ``U_i`` (:func:`olas_utils.maths.flow.attention_flow`: T²
    max-flows, once per cached shape). With ``windows``, layer ``i``'s ``U_i`` is :func:`uniform_attention` with window
    ``windows[i]``. Computed in float64 with the same recurrence as real maps, cached per
    ``(key, T, causal, N, windows that bind at T)``; windows of at least T tokens change
    nothing (the result equals the one computed without them). Each call returns a copy of the
    cached tensor, so modifying it in place changes nothing else.

    Args:
        key: a map name as in :class:`olas_utils.extract.OLAMaps`.
        t: T, the sentence's token count (special tokens included).
        causal: causal model.
        num_layers: N.
        windows: each layer's sliding window (None entries: full attention), as
            :func:`olas_utils.capture.architecture.attention_windows` reads them; None: all full.

    Returns:
        ``(T, T)`` float32 tensor, the caller's own (a copy of the cached one).

    Raises:
        ValueError: on an unknown key, an order above N, a layer outside ``-N..N-1``, or
            ``windows`` without one entry per layer.
    """
    if t < 1 or num_layers < 1:
        raise ValueError(f"t and num_layers must be >= 1, got t={t}, num_layers={num_layers}")
    bind = _binding(windows, int(t), int(num_layers))
    if bind is None:
        ref = _reference(str(key), int(t), bool(causal), int(num_layers))
    else:
        ref = _reference(str(key), int(t), bool(causal), int(num_layers), bind)
    return ref.clone()  # the cached tensor stays private: a caller's in-place edit cannot reach later calls
