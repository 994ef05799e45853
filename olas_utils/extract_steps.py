"""The three steps of an extraction, each callable on its own: :func:`plan_extraction` (check,
tokenise once, bucket by length, decide the keys), :func:`extract_batch` (one tokenised batch
through an open capture: each sentence's maps, cropped) and :func:`assemble` (the
:class:`~olas_utils.maps.OLAMaps`). :func:`olas_utils.extract.extract_ola` is their composition;
the image cache and the task-map cache call them directly.

::

    plan = plan_extraction(lm, sentences, orders=(1, 2), batch_size=8)
    with open_capture(plan) as cap:
        batches = [extract_batch(plan, cap, idx) for idx in plan.buckets]
    res = assemble(plan, batches)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from olas_utils.align import POOLINGS, TokenizedBatch, tokenize_words
from olas_utils.capture.architecture import check_model, declared_bidirectional
from olas_utils.capture.architecture import check_tokenizer as check_tokenizer_fits
from olas_utils.capture.attention import AttentionCapture
from olas_utils.capture.facts import ModelFacts, model_facts
from olas_utils.inputs import resolve_inputs
from olas_utils.maps import OLAMaps
from olas_utils.maths.ola import OrderAccumulator, check_orders
from olas_utils.maths.uniform import uniform_attention
from olas_utils.vocabulary import MapKey

__all__ = [
    "ATTENTIONS",
    "ExtractionPlan",
    "BatchMaps",
    "plan_extraction",
    "open_capture",
    "extract_batch",
    "assemble",
    "parse_key",
    "mixing_keys",
    "max_tokens",
    "length_buckets",
]

#: values of ``extract_ola(attention=...)``: the model's own attention, or uniform attention
#: (the tokenizer-only control; no forward pass).
ATTENTIONS = ("model", "uniform")


def parse_key(key: str, num_layers: int) -> tuple[str, int | None]:
    """Split a map name (``"ola:2"``, ``"rollout"``, ``"layer:-1"``, ``"alti:2"``) into kind and index.

    Args:
        key: the map name (or a :class:`~olas_utils.vocabulary.MapKey`).
        num_layers: N, the model's number of layers (bounds the index).

    Returns:
        ``(kind, index)``: kind ``"ola"``, ``"rollout"``, ``"layer"`` or a mixing method;
        index the order (``0..N``), None for rollout and bare mixing keys, or the layer as
        given (``-N..N-1``).

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


def mixing_keys(mixing: Iterable[str]) -> list[str]:
    """The on-request keys (context mixing, attention flow) as canonical names, each once, in
    the given order.

    Raises:
        TypeError: ``mixing`` is None, a single string or not iterable.
        ValueError: an unknown name, or a key that is not on request (OLA, rollout, layers).
    """
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
    """The longest input the model takes: ``max_position_embeddings`` (less the position offset
    of RoBERTa-like encoders) and the tokenizer's ``model_max_length`` (ignored above 10⁹),
    whichever is smaller.

    Returns:
        A number of tokens, special tokens included, or None if neither says.
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
    """Sentence indices in batches of ``batch_size``, sorted by token count, longest first
    (ties by index).

    Raises:
        ValueError: ``batch_size < 1``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


@dataclass(frozen=True, eq=False)
class ExtractionPlan:
    """What an extraction will do, decided before any forward pass (:func:`plan_extraction`).

    Attributes:
        model, tokenizer: the model (eval mode, on its device) and its tokenizer.
        batch: every sentence tokenised once, ``(batch, T_max)`` right-padded.
        lengths: tokens per sentence, special tokens included.
        buckets: sentence indices per forward pass, longest first (:func:`length_buckets`).
        orders: OLA orders; rollout: whether rollout is kept; layers: the requested layer
            indices (as given) and layer_idx the same in ``0..N-1``.
        mixing: the on-request keys (canonical names); capture_mixing: those computed in the
            forward pass (all but ``"flow"``); flow: whether attention flow is asked for.
        keys: every key of the result, in storage order.
        num_layers: N; causal: the model's causality; windows: each layer's sliding window
            (None: full attention).
        attention: ``"model"`` or ``"uniform"``; level, pooling: of the result;
            model_name: recorded in the result; facts: the model's facts (read once).
    """

    model: torch.nn.Module
    tokenizer: object
    batch: TokenizedBatch
    lengths: list[int]
    buckets: list[list[int]]
    orders: list[int]
    rollout: bool
    layers: list[int]
    layer_idx: list[int]
    mixing: list[str]
    capture_mixing: list[str]
    flow: bool
    keys: list[str]
    num_layers: int
    causal: bool
    windows: list
    attention: str
    level: str
    pooling: str | None
    model_name: str
    facts: ModelFacts | None = None

    @property
    def uniform(self) -> bool:
        """True for the tokenizer-only control (no forward pass)."""
        return self.attention == "uniform"


@dataclass(frozen=True, eq=False)
class BatchMaps:
    """One batch's maps (:func:`extract_batch`).

    Attributes:
        indices: the sentences, in batch order.
        maps: ``{key: [(T_i, T_i) float32 CPU tensor per sentence of indices]}``.
        flow_layers: with attention flow, each sentence's ``(layer, query, key)`` float32
            head-averaged attention; else None.
    """

    indices: list[int]
    maps: dict[str, list[torch.Tensor]]
    flow_layers: list[torch.Tensor] | None = None


def _refuse_mixing(facts: ModelFacts, capture_mixing: list[str], mixing: list[str]) -> None:
    """Refuse the mixing keys the model cannot give, naming those alone and the ones it can."""
    why = {k: facts.mixing.get(MapKey.parse(k).method) for k in capture_mixing}
    bad = {k: w for k, w in why.items() if w is not None}
    if bad:
        ok = tuple(k for k in mixing if k not in bad)
        raise ValueError(
            f"{facts.model_class} cannot give the mixing key(s) {list(bad)}: {'; '.join(dict.fromkeys(bad.values()))}. "
            + (f"The others can be extracted from it: mixing={ok}" if ok else "Leave them out for this model")
        )


def _check_arguments(sentences, level, batch_size, attention, pooling, mixing) -> None:
    if mixing and attention == "uniform":
        raise ValueError(
            f"mixing={mixing}: attention='uniform' runs no forward pass (it replaces attention by uniform "
            "attention), so it gives no value vectors or hidden states. Extract these keys with attention='model'; "
            "their tokenizer-only maps (each key's uniform counterpart, olas_utils.maths.uniform.uniform_reference) are "
            "added to a uniform extraction by olas_utils.extract.uniform_mixing(res, mixing)"
        )
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


def _check_flow_lengths(lengths: list[int]) -> None:
    from olas_utils.maths.flow import DEFAULT_MAX_TOKENS

    long = [i for i, n in enumerate(lengths) if n > DEFAULT_MAX_TOKENS]
    if long:
        raise ValueError(
            f"mixing=('flow',): sentence(s) {long[:5]} have more than {DEFAULT_MAX_TOKENS} tokens "
            f"(longest {max(lengths)}): attention flow solves T² max-flows a sentence. Leave 'flow' out for them, "
            "or compute it with olas_utils.maths.flow.attention_flow_many(..., max_tokens=None) on their 'layer:i' maps"
        )


def plan_extraction(
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
    model_name: str | None = None,
    truncation: str = "error",
    attention: str | None = None,
    pooling: str | None = None,
    check_tokenizer: bool = True,
    mixing: Iterable[str] = (),
) -> ExtractionPlan:
    """Check everything, tokenise every sentence once and bucket them by length.

    Args: those of :func:`olas_utils.extract.extract_ola` (less ``progress``); ``device``
    moves the model there.

    Raises:
        The errors of :func:`olas_utils.extract.extract_ola` found before a forward pass.
    """
    given = model
    model, tokenizer, sentences, lm_name, lm_attention = resolve_inputs(model, tokenizer, sentences)
    attention = attention if attention is not None else (lm_attention or "model")
    mixing = mixing_keys(mixing)
    _check_arguments(sentences, level, batch_size, attention, pooling, mixing)
    flow = str(MapKey("flow")) in mixing
    capture_mixing = [k for k in mixing if MapKey.parse(k).mixing]
    check_model(model)
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    facts = model_facts(given)  # a LoadedModel's, read once
    n_layers = facts.num_layers
    wanted = check_orders(orders, n_layers)
    layers = list(layers)
    layer_idx = [parse_key(MapKey.layer(i), n_layers)[1] % n_layers for i in layers]
    for key in mixing:
        parse_key(key, n_layers)
    _refuse_mixing(facts, capture_mixing, mixing)
    if device is not None:
        from olas_utils.infra.settings import resolve_device

        model.to(resolve_device(device))
    causal = facts.is_causal
    check_tokenizer_fits(model, tokenizer, match_config=check_tokenizer)
    batch = tokenize_words(tokenizer, sentences, max_length=max_tokens(model, tokenizer), truncation=truncation)
    check_tokenizer_fits(model, tokenizer, batch.input_ids, match_config=check_tokenizer)
    lengths = batch.lengths
    if flow:  # refused before any forward pass
        _check_flow_lengths(lengths)
    keys = (
        [str(MapKey.ola(k)) for k in wanted]
        + ([str(MapKey("rollout"))] if rollout else [])
        + [str(MapKey.layer(i)) for i in layers]
        + mixing
    )
    return ExtractionPlan(
        model=model,
        tokenizer=tokenizer,
        batch=batch,
        lengths=lengths,
        buckets=length_buckets(lengths, batch_size),
        orders=list(wanted),
        rollout=bool(rollout),
        layers=layers,
        layer_idx=layer_idx,
        mixing=mixing,
        capture_mixing=capture_mixing,
        flow=flow,
        keys=keys,
        num_layers=n_layers,
        causal=causal,
        windows=list(facts.windows),
        attention=attention,
        level=level,
        pooling=pooling,
        model_name=model_name or lm_name or str(getattr(model, "name_or_path", type(model).__name__)),
        facts=facts,
    )


def open_capture(plan: ExtractionPlan):
    """The capture :func:`extract_batch` runs batches through: an
    :class:`~olas_utils.capture.attention.AttentionCapture` (a context manager; open it once
    and reuse it for every batch), or a null context for uniform attention."""
    if plan.uniform:
        return contextlib.nullcontext()
    kept = sorted(set(plan.layer_idx) | (set(range(plan.num_layers)) if plan.flow else set()))
    return AttentionCapture(
        plan.model,
        max_order=max(plan.orders),
        rollout=plan.rollout,
        keep_layers=kept,
        mixing=plan.capture_mixing,
        facts=plan.facts,
    )


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


@torch.no_grad()
def extract_batch(plan: ExtractionPlan, capture, indices: Sequence[int]) -> BatchMaps:
    """One batch of the plan through an open capture (:func:`open_capture`).

    Args:
        plan: from :func:`plan_extraction`.
        capture: the opened capture (None or the null context's value for uniform attention).
        indices: sentence indices, usually one of ``plan.buckets``.

    Returns:
        :class:`BatchMaps`: each sentence's maps cropped to its ``T_i`` tokens.

    Raises:
        ValueError: the model's attention contradicts its configured causality.
        FloatingPointError: float16 overflow past the causal mask, or NaN attention.
    """
    idx = list(indices)
    lengths = plan.lengths
    t = max(lengths[i] for i in idx)
    dev = next(plan.model.parameters()).device
    mask = plan.batch.attention_mask[idx, :t].to(dev)
    if plan.uniform:
        # float64, like uniform_reference: neutral pooling then gives exactly 1
        acc = OrderAccumulator(
            max_order=max(plan.orders),
            keep_layers=plan.layer_idx,
            rollout=plan.rollout,
            num_layers=plan.num_layers,
            dtype=torch.float64,
        )
        for w in plan.windows:  # each layer's own sliding window (None: full attention)
            acc.add_layer(uniform_attention(mask, causal=plan.causal, window=w).double())
        mix = None
    else:
        acc, mix = capture.forward_with_mixing(input_ids=plan.batch.input_ids[idx, :t].to(dev), attention_mask=mask)
        if capture.observed_causal is not None and capture.observed_causal != plan.causal:
            _causality_mismatch(plan.model, plan.causal)
    results = {str(MapKey.ola(k)): acc.ola(k) for k in plan.orders}
    if plan.rollout:
        results[str(MapKey("rollout"))] = acc.rollout_map()
    for i_req, i_abs in zip(plan.layers, plan.layer_idx):
        results[str(MapKey.layer(i_req))] = acc.layers[i_abs]
    for key in plan.capture_mixing:
        k = MapKey.parse(key)
        m = mix.accumulators[k.method]
        results[key] = m.aggregate() if k.index is None else m.order(k.index)
    flow_layers = None
    if plan.flow:
        stack = torch.stack([acc.layers[i] for i in range(plan.num_layers)], 1).float().cpu()  # (B, N, t, t)
        flow_layers = [stack[row, :, : lengths[i], : lengths[i]].contiguous() for row, i in enumerate(idx)]
    maps = {}
    for key, val in results.items():
        val = val.float().cpu()
        maps[key] = [val[row, : lengths[i], : lengths[i]].contiguous() for row, i in enumerate(idx)]
    return BatchMaps(idx, maps, flow_layers)


def assemble(
    plan: ExtractionPlan,
    batches: Iterable[BatchMaps],
    *,
    indices: Sequence[int] | None = None,
    capture_path: str | None = None,
    progress: bool = False,
) -> OLAMaps:
    """The :class:`~olas_utils.maps.OLAMaps` of the sentences the batches cover.

    Args:
        plan: from :func:`plan_extraction`.
        batches: from :func:`extract_batch`.
        indices: the sentences of the result, in its order (default every sentence of the plan).
        capture_path: the capture's ``path`` (recorded); ignored for uniform attention.
        progress: progress bar of attention flow.

    Returns:
        Subword-level maps, pooled to words when ``plan.level == "word"``.

    Raises:
        ValueError: a sentence of ``indices`` that no batch covers.
    """
    got: dict[int, tuple[BatchMaps, int]] = {}
    for b in batches:
        for row, i in enumerate(b.indices):
            got[i] = (b, row)
    order = list(range(len(plan.lengths))) if indices is None else list(indices)
    missing = [i for i in order if i not in got]
    if missing:
        raise ValueError(f"assemble: sentence(s) {missing[:5]} are in no batch ({len(missing)} missing)")
    maps = {key: [got[i][0].maps[key][got[i][1]] for i in order] for key in plan.keys if key != str(MapKey("flow"))}
    if plan.flow:
        from olas_utils.maths.flow import attention_flow_many

        layers = [got[i][0].flow_layers[got[i][1]] for i in order]
        maps[str(MapKey("flow"))] = attention_flow_many(layers, progress=progress)
        maps = {key: maps[key] for key in plan.keys}
    b = plan.batch
    res = OLAMaps(
        maps=maps,
        tokens=[b.tokens[i] for i in order],
        words=[b.words[i] for i in order],
        word_ids=[b.word_ids[i, : plan.lengths[i]].clone() for i in order],
        model_name=plan.model_name,
        num_layers=plan.num_layers,
        is_causal=plan.causal,
        level="subword",
        capture_path="uniform attention (no forward pass)" if plan.uniform else capture_path,
        dtype=str(next(plan.model.parameters()).dtype).replace("torch.", ""),
        attention=plan.attention,
        windows=plan.windows,
    )
    return res.to_words(plan.pooling or "neutral") if plan.level == "word" else res
