"""Batched OLA extraction from any Hugging Face model: words in, :class:`OLAMaps` out.

::

    from olas_utils.zoo import load_model
    from olas_utils.extract import extract_ola

    lm = load_model("minilm-l6")
    res = extract_ola(lm, ["The cat sat.", ["A", "dog", "barked", "."]], orders=(1, 2, 3))
    res["ola:2"][0]         # (T, T) tensor of sentence 0 (subword level, special tokens included)
    res.plot("ola:2", sentence=0)           # a matplotlib figure
    maps, mask = res.to_numpy("ola:2")     # (B, T_max, T_max) padded array and its mask

Stable names of what can be extracted (keys of :class:`OLAMaps`; parsed and formatted by
:class:`olas_utils.vocabulary.MapKey`):

==================  =========================================================================
``"ola:k"``         order-k OLA, ``k`` in ``0..N``
``"rollout"``       attention rollout ``Π (A(i) + I)``, unnormalised (Abnar & Zuidema, 2020)
``"layer:i"``       head-averaged attention of layer ``i`` (0-based; ``-1`` = last layer)
``"valuenorm"``     value-norm rollout ``Π (M(i) + I)``, ``M(i)`` layer i's value norms
                    ``‖Σ_h α^h_ij f^h(x_j)‖₂`` row-normalised (Kobayashi et al., 2020)
``"alti"``          ALTI ``Π C(i)``, ``C(i)`` layer i's row-normalised contributions
                    ``max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)`` (Ferrando et al., 2022)
``"globenc"``       GlobEnc ``Π G(i)``, ``G(i)`` the row-normalised norms of ``T_i(x_j)``
                    through both layer norms of a post-LN encoder layer (Modarressi et al.,
                    2022); post-LN encoders only
``"valuenorm:k"``   order-k decomposition of the per-layer matrices (the OLA recurrence:
``"alti:k"``        sum over the ``C(N, k)`` ordered products of k distinct layers, divided
``"globenc:k"``     by ``C(N, k)``); ``"alti:1"`` is the mean per-layer ALTI matrix
``"flow"``          attention flow: the max-flow from output token i to input token j through
                    every layer's ``(A(l) + I) / 2`` (Abnar & Zuidema, 2020; :mod:`olas_utils.maths.flow`)
==================  =========================================================================

The per-layer mean attention baseline is ``"ola:1"`` (identical by definition). Mixing keys
(``extract_ola(..., mixing=("alti", "valuenorm:2"))``) come from the same forward pass as OLA
(:mod:`olas_utils.maths.mixing`, ``docs/method.md#context-mixing``); their raw per-layer matrices
from :func:`mixing_layers`. Attention flow (``mixing=("flow",)``) is solved after the forward
passes from every layer's head-averaged attention of each sentence
(:func:`olas_utils.maths.flow.attention_flow_many`: its cost estimate is printed first; T² max-flows a
sentence, so it is opt-in).

``attention="uniform"`` replaces every layer's attention by uniform attention
(:mod:`olas_utils.maths.uniform`) and runs no forward pass: the *tokenizer-only control*, through
exactly the same tokenisation, batching, recurrence and pooling. Mixing keys need a forward
pass; their tokenizer-only maps (and attention flow's) are their uniform counterparts, which
:func:`uniform_mixing` adds to such an extraction.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterable, Sequence

import torch
from tqdm.auto import tqdm

from olas_utils.align import POOLINGS, tokenize_words
from olas_utils.capture.architecture import (
    attention_windows,
    check_model,
    declared_bidirectional,
    is_causal_model,
    num_attention_layers,
)
from olas_utils.capture.architecture import (
    check_tokenizer as check_tokenizer_fits,
)
from olas_utils.capture.attention import AttentionCapture
from olas_utils.inputs import resolve_inputs
from olas_utils.maps import OLAMaps
from olas_utils.maths.ola import OrderAccumulator, check_orders
from olas_utils.maths.uniform import uniform_attention, uniform_reference
from olas_utils.vocabulary import MapKey

__all__ = [
    "OLAMaps",
    "extract_ola",
    "mixing_layers",
    "uniform_mixing",
    "max_tokens",
    "length_buckets",
    "parse_key",
    "ATTENTIONS",
]

#: values of ``extract_ola(attention=...)``: the model's own attention, or uniform attention
#: (the tokenizer-only control; no forward pass).
ATTENTIONS = ("model", "uniform")


def parse_key(key: str, num_layers: int) -> tuple[str, int | None]:
    """Split a map name (``"ola:2"``, ``"rollout"``, ``"layer:-1"``, ``"alti:2"``, ``"valuenorm"``)
    into kind and index.

    Args:
        key: the map name (or a :class:`~olas_utils.vocabulary.MapKey`).
        num_layers: N, the model's number of layers (bounds the index).

    Returns:
        ``(kind, index)``: kind ``"ola"``, ``"rollout"``, ``"layer"`` or a mixing method
        (``"valuenorm"``, ``"alti"``, ``"globenc"``); index the order (``0..N``), None for
        rollout and bare mixing keys, or the layer as given (``-N..N-1``).

    Raises:
        ValueError: on an unknown name or an index out of range.
    """
    try:
        k = MapKey.parse(key)
    except ValueError as e:
        raise ValueError(
            f"unknown map name {key!r} ({e}): use 'ola:K' (K in 0..{num_layers}), 'rollout', 'layer:I', or a "
            "mixing key: 'valuenorm', 'alti', 'globenc', each also with ':K'"
        ) from None
    if k.method == "ola" or (k.mixing and k.index is not None):
        check_orders([k.index], num_layers)
    k.check(num_layers)
    return k.method, k.index


def _mixing_keys(mixing: Iterable[str]) -> list[str]:
    """The on-request keys (context mixing, attention flow) as canonical names, each once, in the
    given order (no model needed)."""
    if mixing is None:
        raise TypeError("mixing must be a collection of keys; for none pass mixing=() (the default), not None")
    if isinstance(mixing, (str, bytes, MapKey)) or not isinstance(mixing, Iterable):
        raise TypeError(f"mixing must be a collection of keys, e.g. mixing=({str(mixing)!r},), got {mixing!r}")
    out: list[str] = []
    for key in mixing:
        try:
            k = MapKey.parse(key)
        except ValueError as e:
            raise ValueError(f"unknown map name {key!r} in mixing ({e})") from None
        if not k.on_request:
            raise ValueError(
                f"{str(k)!r} is not a context-mixing key: mixing takes 'valuenorm', 'alti', 'globenc' and their "
                "orders ('alti:2'), and attention flow ('flow'); OLA orders, rollout and layers have their own arguments"
            )
        if str(k) not in out:
            out.append(str(k))
    return out


def max_tokens(model: torch.nn.Module, tokenizer) -> int | None:
    """The longest input the model takes, from its config (``max_position_embeddings``,
    minus the position offset some encoders reserve) and the tokenizer
    (``model_max_length``), whichever is smaller.

    Args:
        model: a ``transformers`` model (its config is read).
        tokenizer: its tokenizer (``model_max_length`` above 10⁹ means "unset").

    Returns:
        A number of tokens, special tokens included (e.g. 512 for MiniLM), or None if
        neither the config nor the tokenizer says.
    """
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    n = getattr(cfg, "max_position_embeddings", None)
    pad = getattr(cfg, "pad_token_id", None)
    if n is not None and getattr(cfg, "model_type", "") in ("mpnet", "roberta", "xlm-roberta", "camembert"):
        n -= (pad or 0) + 1  # positions start after the padding index
    tm = getattr(tokenizer, "model_max_length", None)
    if tm is not None and tm < 10**9:
        n = tm if n is None else min(n, tm)
    return n


def length_buckets(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (sorted by length, longest first).

    Args:
        lengths: token count per sentence.
        batch_size: sentences per batch (>= 1).

    Returns:
        List of batches, each a list of sentence indices.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _causality_mismatch(model: torch.nn.Module, causal: bool) -> None:
    params = next(model.parameters(), None)
    if causal and params is not None and params.dtype == torch.float16:
        # a causal mask is added as float16's lowest value: scores past 65,504 overflow it
        raise FloatingPointError(
            f"{type(model).__name__} runs in float16 and its causal attention put weight above the diagonal: its "
            "attention scores most likely overflowed past the causal mask (float16 holds at most 65,504). No map "
            "was made from it. Load the model in float32 or bfloat16 (load_model(name, dtype=torch.float32) or "
            "torch.bfloat16); if it does the same there, its config declares causal attention it does not apply"
        )
    why = declared_bidirectional(model.config) if not causal else f"class {type(model).__name__}"
    seen = "causal: no weight above the diagonal" if causal is False else "bidirectional: weight above the diagonal"
    raise ValueError(
        f"{type(model).__name__} is {'causal' if causal else 'bidirectional'} by its config ({why}) but its attention "
        f"is {seen}; OLAS refuses rather than mislabel it (sinks and symmetrisation depend on it). Fix the config "
        "(e.g. drop is_causal=False / use_bidirectional_attention) or load the class that honours it"
    )


def _refuse_mixing(model, capture_mixing: list[str], mixing: list[str]) -> None:
    """Refuse the mixing keys the model cannot give, naming those alone and the ones it can."""
    from olas_utils.capture.mixing_specs import mixing_problem

    why = {k: mixing_problem(model, [MapKey.parse(k).method]) for k in capture_mixing}
    bad = {k: w for k, w in why.items() if w is not None}
    if bad:
        ok = tuple(k for k in mixing if k not in bad)
        raise ValueError(
            f"{type(model).__name__} cannot give the mixing key(s) {list(bad)}: {'; '.join(dict.fromkeys(bad.values()))}. "
            + (f"The others can be extracted from it: mixing={ok}" if ok else "Leave them out for this model")
        )


@torch.no_grad()
def extract_ola(
    model,
    tokenizer=None,
    sentences: Sequence[Sequence[str] | str] | None = None,
    *,
    orders: Iterable[int] = (1, 2, 3),
    rollout: bool = True,
    layers: Iterable[int] = (0, -1),
    level: str = "subword",
    batch_size: int = 8,
    device: str | torch.device | None = None,
    progress: bool = True,
    model_name: str | None = None,
    truncation: str = "error",
    attention: str | None = None,
    pooling: str | None = None,
    check_tokenizer: bool = True,
    mixing: Iterable[str] = (),
) -> OLAMaps:
    """Extract order-k OLA (and rollout, single-layer and context-mixing baselines) for sentences.

    Sentences are tokenised with word ids (:func:`~olas_utils.align.tokenize_words`),
    bucketed by length, right-padded, and run through the model once per batch with a
    streaming :class:`~olas_utils.capture.attention.AttentionCapture`. Padding does not change any
    result: padded rows and columns are zeroed before the recurrence, and each sentence's
    maps are cropped to its tokens.

    Args:
        model: encoder-only or decoder-only Hugging Face model (eval mode). Its parameters'
            device is used unless ``device`` is given (then the model is moved there). Or a
            :class:`~olas_utils.zoo.LoadedModel`, called as ``extract_ola(lm, sentences)``: its
            model and tokenizer, its name as ``model_name`` and its ``attention`` by default.
        tokenizer: its fast tokenizer (none with a ``LoadedModel``).
        sentences: B sentences, each a list of words or a raw string, split into words at
            whitespace (:func:`olas_utils.inputs.split_words`: ``"The cat sat."`` gives the
            words ``The``, ``cat``, ``sat.``; the tokenizer sees the text with single spaces).
        orders: OLA orders, each in ``0..N``.
        rollout: also extract attention rollout (``"rollout"``).
        layers: 0-based layer indices to keep as baselines (``"layer:i"``; -1 = last).
        level: ``"subword"`` (the released code's protocol: each model's tokens, special
            tokens included) or ``"word"`` (OLAS protocol, see
            :func:`~olas_utils.align.pool_to_words`).
        batch_size: sentences per forward pass.
        device: where to run; default the model's device.
        progress: show a progress bar.
        model_name: recorded in the result; default ``model.name_or_path``.
        truncation: a sentence with more tokens than the model takes (:func:`max_tokens`,
            special tokens included): ``"error"`` (default) raises ``ValueError`` naming the
            sentence, its token count and the maximum; ``"warn"`` cuts it at a word boundary
            so it fits, with one ``UserWarning`` naming the cut sentences and the words and
            tokens removed — the result's ``words`` and maps are those of the cut sentence,
            identical to extracting the cut word list directly (see
            :func:`~olas_utils.align.tokenize_words`).
        attention: ``"model"`` (None, the default, means it, or a ``LoadedModel``'s own) or ``"uniform"``: every layer's attention replaced
            by uniform attention over the visible tokens (:mod:`olas_utils.maths.uniform`), no
            forward pass — the tokenizer-only control (the model still gives the number
            of layers, causality and maximum length).
        pooling: word level only: ``"neutral"`` (None, the default, means it) or ``"clark"``
            (:func:`~olas_utils.align.pool_to_words`). With ``level="subword"`` a pooling is an
            error: subword maps are not pooled; pool them later with ``res.to_words(pooling)``.
        check_tokenizer: True (default) refuses a tokenizer whose vocabulary size or BOS /
            EOS / pad ids do not match the model's config
            (:func:`~olas_utils.capture.architecture.check_tokenizer`); False skips that check for a
            pair you know belongs together (a tokenizer you extended on purpose). Ids outside
            the embedding table are refused either way.
        mixing: context-mixing keys computed in the same forward pass (default none):
            ``"valuenorm"``, ``"alti"``, ``"globenc"`` and their orders ``"valuenorm:k"``,
            ``"alti:k"``, ``"globenc:k"`` (module docstring, :mod:`olas_utils.maths.mixing`), and
            attention flow, ``"flow"`` (:func:`olas_utils.maths.flow.attention_flow_many` on every layer's
            head-averaged attention of each sentence after the forward passes; one process,
            sentences of at most :data:`olas_utils.maths.flow.DEFAULT_MAX_TOKENS` tokens). Every
            other key is bit-identical with and without them. ``"globenc"`` needs a post-LN
            encoder; an architecture without a
            :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS` entry is refused (OLA keys still work
            without ``mixing``). Word pooling treats them like attention maps: their per-layer
            matrices are row-stochastic over the visible tokens, so neutral pooling divides by the
            same aggregation of uniform per-layer matrices (:func:`olas_utils.maths.uniform.uniform_reference`),
            and Clark pooling averages a word's rows and sums its columns (contributions of a
            word's subwords add up).

    Returns:
        :class:`OLAMaps` with keys ``"ola:k"`` for each order, ``"rollout"``, ``"layer:i"``
        and the ``mixing`` keys; each value a list of B float32 CPU tensors, ``(T_i, T_i)``
        (subword) or ``(W_i, W_i)`` (word).

    Warns:
        UserWarning: with ``truncation="warn"`` when a sentence is cut; when the model was
            loaded with an attention implementation that returns no weights (``"sdpa"``,
            ``"flash_attention_2"``, ...): the extraction runs the model's eager attention
            and the implementation is restored afterwards
            (:class:`~olas_utils.capture.attention.AttentionCapture`).

    Raises:
        TypeError: if ``model`` is not a Hugging Face transformers model (e.g. a plain
            ``torch.nn.Module``), or on malformed sentences (see
            :func:`~olas_utils.align.tokenize_words`).
        ValueError: on an encoder-decoder model or one without self-attention, an
            architecture without an eager attention path, an order outside ``0..N``, an
            unknown level or truncation, an empty sentence or word, a word without
            subword, or (``truncation="error"``) a sentence longer than the model's maximum;
            a tokenizer that does not fit the model's embedding table, or (unless
            ``check_tokenizer=False``) whose vocabulary size or special-token ids differ from
            the model's config (naming both); a ``pooling`` with ``level="subword"``; a
            config that says bidirectional on a model whose attention is causal (or the
            reverse), found on the first batch.
        TypeError: ``sentences`` not a list of word lists, ``orders`` not a collection of
            integers, ``batch_size`` not a positive ``int``.
        RuntimeError: if ``model`` is in training mode (dropout would randomise attention).
        FloatingPointError: a layer's attention is NaN or infinite (float16 overflow): names
            the layer and dtype and says to use float32 or bfloat16 (never reported as a
            causality mismatch).
        ValueError: ``mixing`` with ``attention="uniform"``, a key in ``mixing`` that is not a
            mixing key, or mixing keys the model cannot give (naming what is missing).
    """
    model, tokenizer, sentences, lm_name, lm_attention = resolve_inputs(model, tokenizer, sentences)
    model_name = model_name or lm_name
    attention = attention if attention is not None else (lm_attention or "model")
    mixing = _mixing_keys(mixing)
    if mixing and attention == "uniform":
        raise ValueError(
            f"mixing={mixing}: attention='uniform' runs no forward pass (it replaces attention by uniform "
            "attention), so it gives no value vectors or hidden states. Extract these keys with attention='model'; "
            "their tokenizer-only maps (each key's uniform counterpart, olas_utils.maths.uniform.uniform_reference) are "
            "added to a uniform extraction by olas_utils.extract.uniform_mixing(res, mixing)"
        )
    flow = str(MapKey("flow")) in mixing
    capture_mixing = [k for k in mixing if MapKey.parse(k).mixing]
    if level not in ("subword", "word"):
        raise ValueError(f"level must be 'subword' or 'word', got {level!r}")
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Iterable):
        raise TypeError(
            f"sentences must be a list of sentences, each a list of words (e.g. [['The', 'cat']]), "
            f"got {type(sentences).__name__}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TypeError(f"batch_size must be a positive int (sentences per forward pass), got {batch_size!r}")
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if pooling is not None and level != "word":
        raise ValueError(
            f"pooling={pooling!r} applies at word level only, but level={level!r}: subword maps are not pooled. "
            f"Pass level='word', pooling={pooling!r}, or keep the subword maps and pool them later with "
            f"res.to_words(pooling={pooling!r})"
        )
    check_model(model)
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    n_layers = num_attention_layers(model)
    wanted = check_orders(orders, n_layers)
    layers = list(layers)
    layer_idx = [parse_key(MapKey.layer(i), n_layers)[1] % n_layers for i in layers]
    for key in mixing:
        parse_key(key, n_layers)
    _refuse_mixing(model, capture_mixing, mixing)
    kept = sorted(set(layer_idx) | (set(range(n_layers)) if flow else set()))
    if device is not None:
        from olas_utils.infra.settings import resolve_device

        model.to(resolve_device(device))
    dev = next(model.parameters()).device
    causal = is_causal_model(model)
    windows = attention_windows(model.config, causal=causal)

    check_tokenizer_fits(model, tokenizer, match_config=check_tokenizer)
    batch_all = tokenize_words(tokenizer, sentences, max_length=max_tokens(model, tokenizer), truncation=truncation)
    check_tokenizer_fits(model, tokenizer, batch_all.input_ids, match_config=check_tokenizer)
    lengths = batch_all.lengths
    if flow:  # refused before any forward pass, not after (attention_flow_many would refuse it then)
        from olas_utils.maths.flow import DEFAULT_MAX_TOKENS

        long = [i for i, n in enumerate(lengths) if n > DEFAULT_MAX_TOKENS]
        if long:
            raise ValueError(
                f"mixing=('flow',): sentence(s) {long[:5]} have more than {DEFAULT_MAX_TOKENS} tokens "
                f"(longest {max(lengths)}): attention flow solves T² max-flows a sentence. Leave 'flow' out for them, "
                "or compute it with olas_utils.maths.flow.attention_flow_many(..., max_tokens=None) on their 'layer:i' maps"
            )
    keys = (
        [str(MapKey.ola(k)) for k in wanted]
        + ([str(MapKey("rollout"))] if rollout else [])
        + [str(MapKey.layer(i)) for i in layers]
        + mixing
    )
    out: dict[str, list] = {k: [None] * len(lengths) for k in keys}
    word_ids = [batch_all.word_ids[i, : lengths[i]].clone() for i in range(len(lengths))]

    buckets = length_buckets(lengths, batch_size)
    uniform = attention == "uniform"
    capture = (
        contextlib.nullcontext()
        if uniform
        else AttentionCapture(model, max_order=max(wanted), rollout=rollout, keep_layers=kept, mixing=capture_mixing)
    )
    flow_layers: list = [None] * len(lengths)  # per sentence (N, T_i, T_i), for attention flow
    with capture as cap:
        for idx in tqdm(
            buckets, desc=f"OLA {model_name or getattr(model, 'name_or_path', '')}", disable=not progress, unit="batch"
        ):
            t = max(lengths[i] for i in idx)
            inputs = {
                "input_ids": batch_all.input_ids[idx, :t].to(dev),
                "attention_mask": batch_all.attention_mask[idx, :t].to(dev),
            }
            if uniform:
                # float64, like uniform_reference: neutral pooling then gives exactly 1
                acc = OrderAccumulator(
                    max_order=max(wanted),
                    keep_layers=layer_idx,
                    rollout=rollout,
                    num_layers=n_layers,
                    dtype=torch.float64,
                )
                for w in windows:  # each layer's own sliding window (None: full attention)
                    acc.add_layer(uniform_attention(inputs["attention_mask"], causal=causal, window=w).double())
            else:
                acc, mix = cap.forward_with_mixing(**inputs)
                if cap.observed_causal is not None and cap.observed_causal != causal:
                    _causality_mismatch(model, causal)
            results = {str(MapKey.ola(k)): acc.ola(k) for k in wanted}
            if rollout:
                results[str(MapKey("rollout"))] = acc.rollout_map()
            for i_req, i_abs in zip(layers, layer_idx):
                results[str(MapKey.layer(i_req))] = acc.layers[i_abs]
            for key in capture_mixing:
                k = MapKey.parse(key)
                m = mix.accumulators[k.method]
                results[key] = m.aggregate() if k.index is None else m.order(k.index)
            if flow:
                stack = torch.stack([acc.layers[i] for i in range(n_layers)], 1).float().cpu()  # (B, N, t, t)
                for row, i in enumerate(idx):
                    flow_layers[i] = stack[row, :, : lengths[i], : lengths[i]].contiguous()
            for key, val in results.items():
                val = val.float().cpu()
                for row, i in enumerate(idx):
                    out[key][i] = val[row, : lengths[i], : lengths[i]].contiguous()
            del acc, results
            mix = None
    if flow:
        from olas_utils.maths.flow import attention_flow_many

        out[str(MapKey("flow"))] = attention_flow_many(flow_layers, progress=progress)
        del flow_layers
    res = OLAMaps(
        maps=out,
        tokens=batch_all.tokens,
        words=batch_all.words,
        word_ids=word_ids,
        model_name=model_name or str(getattr(model, "name_or_path", type(model).__name__)),
        num_layers=n_layers,
        is_causal=causal,
        level="subword",
        capture_path="uniform attention (no forward pass)" if uniform else cap.path,
        dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
        attention=attention,
        windows=windows,
    )
    return res.to_words(pooling or "neutral") if level == "word" else res


def uniform_mixing(res: OLAMaps, mixing: Iterable[str]) -> OLAMaps:
    """The tokenizer-only control's context-mixing maps, added to its extraction.

    The control runs no forward pass, so it has no value vectors or hidden states to mix; its
    map of a mixing key is the key's *uniform counterpart*
    (:func:`olas_utils.maths.uniform.uniform_reference`): every per-layer matrix replaced by uniform
    attention over the tokens its queries see (each visible token contributes alike), then
    aggregated as the key aggregates real matrices (``"alti:k"`` like ``"ola:k"``,
    ``"valuenorm"`` like rollout, ``"alti"`` / ``"globenc"`` as the product of the layers); the
    control's attention flow (``"flow"``) is the flow of its uniform layers.
    Each layer's sliding window (``res.windows``) is honoured, as in the control's OLA maps
    (``docs/method.md#controls``).

    Args:
        res: a subword-level ``extract_ola(..., attention="uniform")`` result.
        mixing: context-mixing keys (``"alti"``, ``"valuenorm:2"``, ...; orders up to
            ``res.num_layers``) and ``"flow"``.

    Returns:
        A new :class:`OLAMaps` with ``res``'s maps and one ``(T_i, T_i)`` float32 map per
        sentence for each mixing key (a key ``res`` already holds is recomputed the same way).

    Raises:
        ValueError: ``res`` is not a uniform-attention extraction or not at subword level (pool
            after adding the keys: ``uniform_mixing(res, keys).to_words()``), a key that is
            not a mixing key, or an order above ``res.num_layers``.
        TypeError: ``mixing`` is a single string rather than a collection of keys.
    """
    keys = _mixing_keys(mixing)
    if res.attention != "uniform":
        raise ValueError(
            f"uniform_mixing adds the tokenizer-only maps of mixing keys to an attention='uniform' extraction, "
            f"but these maps were made with attention={res.attention!r}: extract mixing keys from the model with "
            "extract_ola(..., mixing=...)"
        )
    if res.level != "subword":
        raise ValueError("uniform_mixing needs subword-level maps; pool afterwards with .to_words()")
    for key in keys:
        parse_key(key, res.num_layers)
    maps = dict(res.maps)
    for key in keys:
        maps[key] = [
            uniform_reference(
                key, len(wid), causal=res.is_causal, num_layers=res.num_layers, windows=res.windows
            ).clone()
            for wid in res.word_ids
        ]
    return dataclasses.replace(res, maps=maps)


@torch.no_grad()
def mixing_layers(
    model: torch.nn.Module,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    *,
    methods: Iterable[str] = ("valuenorm", "alti"),
    normalised: bool = False,
    batch_size: int = 8,
    truncation: str = "error",
) -> dict[str, list[torch.Tensor]]:
    """Each layer's context-mixing matrix, per sentence, at subword level (special tokens included).

    The same forward pass and per-layer matrices as :func:`extract_ola`'s mixing keys
    (:mod:`olas_utils.maths.mixing`), before they are aggregated over layers.

    Args:
        model: encoder-only or decoder-only Hugging Face model (eval mode) whose attention class
            has a :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS` entry.
        tokenizer: its fast tokenizer.
        sentences: B sentences, each a list of words.
        methods: ``"valuenorm"`` (``‖Σ_h α^h_ij f^h(x_j)‖₂``, hidden-state units), ``"alti"``
            (``max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)``, L1 units), ``"globenc"`` (post-LN encoders:
            the L2 norm of ``T_i(x_j)`` through both layer norms).
        normalised: rows scaled to sum 1 (as the keys aggregate them) instead of raw.
        batch_size: sentences per forward pass (right padding; results do not depend on it).
        truncation: as in :func:`extract_ola`.

    Returns:
        ``{method: [(N, T_i, T_i) float32 CPU tensor per sentence]}``.

    Raises:
        ValueError: an unknown method or one the model cannot give (naming what is missing),
            and the errors of :func:`extract_ola`.
    """
    from olas_utils.maths.mixing import row_normalise

    methods = list(dict.fromkeys(methods))
    keys = _mixing_keys(methods)
    if any(not MapKey.parse(k).mixing for k in keys):
        raise ValueError(
            f"methods {methods}: attention flow has no per-layer matrices of its own (its layers are the "
            "head-averaged attention maps, 'layer:i' of extract_ola); mixing_layers takes 'valuenorm', 'alti', 'globenc'"
        )
    if any(":" in k for k in keys):
        raise ValueError(f"methods are names without an order ('valuenorm', 'alti', 'globenc'), got {methods}")
    check_model(model)
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    check_tokenizer_fits(model, tokenizer)
    batch_all = tokenize_words(tokenizer, sentences, max_length=max_tokens(model, tokenizer), truncation=truncation)
    check_tokenizer_fits(model, tokenizer, batch_all.input_ids)
    lengths = batch_all.lengths
    dev = next(model.parameters()).device
    out: dict[str, list] = {m: [None] * len(lengths) for m in keys}
    with AttentionCapture(model, max_order=0, mixing=[f"{m}:0" for m in keys], keep_mixing_layers=True) as cap:
        for idx in length_buckets(lengths, batch_size):
            t = max(lengths[i] for i in idx)
            mask = batch_all.attention_mask[idx, :t].to(dev)
            _, mix = cap.forward_with_mixing(input_ids=batch_all.input_ids[idx, :t].to(dev), attention_mask=mask)
            for m in keys:
                layers = mix.accumulators[m].raw_layers
                if normalised:
                    layers = [row_normalise(x, mask.bool()) for x in layers]
                stack = torch.stack(layers, 1).float().cpu()  # (B, N, T, T)
                for row, i in enumerate(idx):
                    out[m][i] = stack[row, :, : lengths[i], : lengths[i]].contiguous()
    return out
