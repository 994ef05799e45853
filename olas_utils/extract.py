"""Batched OLA extraction from any Hugging Face model: words in, :class:`OLAMaps` out.

::

    from olas_utils import load_model, extract_ola

    lm = load_model("minilm-l6")
    res = extract_ola(lm, ["The cat sat.", ["A", "dog", "barked", "."]], orders=(1, 2, 3))
    res["ola:2"][0]                        # (query, key) map of sentence 0, subword level
    maps, mask = res.to_numpy("ola:2")     # (batch, query, key) padded array and its mask

The keys (``"ola:k"``, ``"rollout"``, ``"layer:i"``, the context-mixing keys, ``"flow"``) and
what each computes: ``docs/method.md#map-keys``. :func:`extract_ola` composes the three steps
of :mod:`olas_utils.extract_steps` (plan, batch, assemble).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import torch

from olas_utils.align import tokenize_words
from olas_utils.capture.architecture import check_model
from olas_utils.capture.architecture import check_tokenizer as check_tokenizer_fits
from olas_utils.capture.attention import AttentionCapture
from olas_utils.extract_steps import (
    ATTENTIONS,
    assemble,
    extract_batch,
    length_buckets,
    max_tokens,
    mixing_keys,
    open_capture,
    parse_key,
    plan_extraction,
)
from olas_utils.infra.progress import tqdm
from olas_utils.maps import OLAMaps
from olas_utils.maths.uniform import uniform_reference
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
    """OLA maps (and rollout, single-layer, context-mixing and flow maps) of sentences:
    :func:`~olas_utils.extract_steps.plan_extraction`, then
    :func:`~olas_utils.extract_steps.extract_batch` per length bucket through one open capture,
    then :func:`~olas_utils.extract_steps.assemble`.

    Args:
        model: an eval-mode Hugging Face encoder or decoder, or a
            :class:`~olas_utils.zoo.LoadedModel` (then no ``tokenizer``; its name and attention
            are the defaults of ``model_name`` and ``attention``).
        tokenizer: its fast tokenizer.
        sentences: B sentences, each a list of words or a string split at whitespace.
        orders: OLA orders, each in ``0..N`` (N the number of layers).
        rollout: also ``"rollout"``.
        layers: 0-based layers kept as ``"layer:i"`` (-1 the last).
        level: ``"subword"`` (special tokens included) or ``"word"``
            (:func:`~olas_utils.align.pool_to_words`).
        batch_size: sentences per forward pass.
        device: moves the model there; default its own device.
        progress: progress bar.
        model_name: recorded in the result; default the model's ``name_or_path``.
        truncation: ``"error"`` or ``"warn"`` (:func:`~olas_utils.align.tokenize_words`) for a
            sentence longer than :func:`max_tokens`.
        attention: ``"model"`` (default) or ``"uniform"`` (the tokenizer-only control, no
            forward pass: ``docs/method.md#controls``).
        pooling: word level only, ``"neutral"`` (default) or ``"clark"``.
        check_tokenizer: False skips the vocabulary / special-id match of
            :func:`~olas_utils.capture.architecture.check_tokenizer` (ids outside the embedding
            table are refused either way).
        mixing: on-request keys from the same forward pass: ``"valuenorm"``, ``"alti"``,
            ``"globenc"``, each also ``":k"``, and ``"flow"`` (``docs/method.md#map-keys``).

    Returns:
        :class:`OLAMaps`: per key, one float32 CPU ``(query, key)`` map per sentence, cropped to
        its tokens (subword) or words (word level).

    Raises:
        ValueError: an unknown key, order or layer outside ``0..N`` / ``-N..N-1``, a bad
            ``level`` / ``attention`` / ``pooling``, a sentence too long with
            ``truncation="error"``, a tokenizer that does not fit the model, ``mixing`` with
            ``attention="uniform"`` or keys the model cannot give, ``"flow"`` on sentences over
            :data:`olas_utils.maths.flow.DEFAULT_MAX_TOKENS` tokens, attention contradicting
            the configured causality (first batch).
        TypeError: ``sentences``, ``orders``, ``mixing`` or ``batch_size`` of the wrong type.
        RuntimeError: the model is in training mode.
        FloatingPointError: NaN or infinite attention, or float16 overflow past the causal mask.
    """
    plan = plan_extraction(
        model,
        tokenizer,
        sentences,
        orders=orders,
        rollout=rollout,
        layers=layers,
        level=level,
        batch_size=batch_size,
        device=device,
        model_name=model_name,
        truncation=truncation,
        attention=attention,
        pooling=pooling,
        check_tokenizer=check_tokenizer,
        mixing=mixing,
    )
    with open_capture(plan) as cap:
        bar = tqdm(plan.buckets, desc=f"OLA {plan.model_name}", disable=not progress, unit="batch")
        batches = [extract_batch(plan, cap, idx) for idx in bar]
        path = getattr(cap, "path", None)
    return assemble(plan, batches, capture_path=path, progress=progress)


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
    keys = mixing_keys(mixing)
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
    keys = mixing_keys(methods)
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
