"""What OLAS needs to know about a model before capturing it, read from the model and its
config (never from a list of model names): the number of attention layers N
(:func:`num_attention_layers`), whether attention is causal (:func:`is_causal_config`,
:func:`is_causal_model`), each layer's sliding attention window (:func:`attention_windows`),
which capture path fits it (:func:`capture_path`, with the
per-architecture :data:`HOOK_SPECS` as data), and whether it can be captured at all
(:func:`check_model`: plain ``torch.nn`` modules, models without self-attention,
encoder-decoders and architectures whose attention is not one T×T map over the input
(:data:`UNSUPPORTED_ATTENTION`) are refused with a message saying why and what to pass
instead), and whether a tokenizer belongs to the model (:func:`check_tokenizer`: it fits the
embedding table, and its vocabulary size and special-token ids match the config,
:func:`tokenizer_mismatch`).

Causality is read from the config before the class: a config that says it attends
bidirectionally (``use_bidirectional_attention=True``, ``is_causal=False``, or only
encoder-only architecture names) is an encoder even when loaded as ``…ForCausalLM``. What
the attention really does is checked again on the captured maps
(:meth:`olas_utils.capture.attention.AttentionCapture.forward` records whether anything lies above
the diagonal), so a config that claims more than the model does is refused, not trusted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "HookSpec",
    "HOOK_SPECS",
    "UNSUPPORTED_ATTENTION",
    "num_attention_layers",
    "is_causal_config",
    "attention_windows",
    "is_causal_model",
    "declared_bidirectional",
    "capture_path",
    "check_model",
    "check_tokenizer",
    "tokenizer_mismatch",
    "VOCAB_SLACK",
    "attention_configs",
    "missing_eager_attention",
]


@dataclass(frozen=True)
class HookSpec:
    """How to read attention probabilities off a self-attention module that does not use the
    attention interface.

    Attributes:
        force_kwarg: keyword argument that makes the module return its probabilities.
        weights_index: position of the ``(batch, head, query, key)`` probabilities in the
            module's output tuple.
    """

    force_kwarg: str
    weights_index: int


#: Self-attention module class name → how to hook it.
HOOK_SPECS: dict[str, HookSpec] = {
    "MPNetSelfAttention": HookSpec(force_kwarg="output_attentions", weights_index=1),
}


#: ``model_type`` → (config attribute and value that make it unsupported, or None for
#: always; why OLA is not defined for it). Data, read by :func:`check_model`.
UNSUPPORTED_ATTENTION: dict[str, tuple[tuple[str, Any] | None, str]] = {
    "longformer": (
        None,
        "its attention is local (a sliding window per token, plus a few global tokens) and is "
        "returned per window, not as a T×T map over the input",
    ),
    "big_bird": (
        ("attention_type", "block_sparse"),
        "its block-sparse attention (window, random and global blocks) never forms a T×T map; load it "
        "with attention_type='original_full' to get full attention",
    ),
    "funnel": (
        None,
        "it pools the sequence between blocks, so later layers attend over fewer positions than "
        "there are tokens and the layers' maps cannot be multiplied",
    ),
    "canine": (
        None,
        "it downsamples characters before its deep transformer stack, so most layers attend over "
        "downsampled positions, not over the input",
    ),
    "xlnet": (
        None,
        "its two-stream relative attention with permutation masks (and memory) is not one T×T map "
        "over the input in a fixed order",
    ),
    "reformer": (None, "its LSH (hashed, chunked) attention is not a T×T map over the input"),
    "transfo-xl": (None, "its attention also runs over a memory of earlier segments, not only over the input"),
}


def num_attention_layers(model: torch.nn.Module) -> int:
    """N, the number of self-attention layers of a decoder-only or encoder-only model.

    Args:
        model: a ``transformers`` model (``config.num_hidden_layers`` of its text config
            is read).

    Returns:
        N >= 1.

    Raises:
        ValueError: if the config has no ``num_hidden_layers``.
    """
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    n = getattr(cfg, "num_hidden_layers", None)
    if not isinstance(n, int) or n < 1:
        raise ValueError(
            f"cannot tell the number of layers of {type(model).__name__}: its config has no num_hidden_layers "
            "(OLAS needs an encoder-only or decoder-only transformer with self-attention layers)"
        )
    return n


_CAUSAL_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel")
_ENCODER_ARCH_MARKERS = ("ForMaskedLM", "Bidirectional", "EncoderModel", "Encoder")


def declared_bidirectional(config) -> str | None:
    """Why a config says its self-attention is bidirectional, or None if it does not.

    Args:
        config: a ``PretrainedConfig``.

    Returns:
        ``"use_bidirectional_attention=True"``, ``"is_causal=False"``, or
        ``"architectures=[...] are encoder-only"`` (every name ends in / contains
        ``ForMaskedLM``, ``Bidirectional``, ``Encoder``), else None.
    """
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for c in [config] if text is config else [config, text]:
        if getattr(c, "use_bidirectional_attention", None) is True:
            return "use_bidirectional_attention=True"
        if getattr(c, "is_causal", None) is False:
            return "is_causal=False"
    archs = list(getattr(config, "architectures", None) or [])
    if archs and all(any(m in a for m in _ENCODER_ARCH_MARKERS) for a in archs):
        return f"architectures={archs} are encoder-only"
    return None


def is_causal_config(config) -> bool:
    """Whether a ``transformers`` config describes a decoder-only (causal) transformer.

    Read from the config, never from a list of model types: a config is bidirectional if
    it says so (:func:`declared_bidirectional`: ``use_bidirectional_attention=True``,
    ``is_causal=False``, encoder-only architecture names); otherwise causal if
    ``config.is_decoder`` is set, or one of ``config.architectures`` ends in
    ``ForCausalLM`` / ``LMHeadModel``, or (no architecture saying otherwise) its
    ``model_type`` has a causal-LM class in ``transformers`` but no masked-LM class
    (so BERT-like encoders, which have both, stay bidirectional).

    Args:
        config: a ``PretrainedConfig``.

    Returns:
        True for decoder-only causal models, False for bidirectional encoders.

    Raises:
        ValueError: for encoder-decoder models (``config.is_encoder_decoder``), which
            OLAS does not support.
    """
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{getattr(config, 'model_type', type(config).__name__)!r} is an encoder-decoder model; "
            f"OLAS supports encoder-only and decoder-only transformers."
        )
    if declared_bidirectional(config):
        return False
    if getattr(config, "is_decoder", False):
        return True
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith(_CAUSAL_ARCH_SUFFIXES) for a in archs):
        return True
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    mt = getattr(config, "model_type", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    types = {mt, getattr(text, "model_type", None)} - {None}
    return any(t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and t not in MODEL_FOR_MASKED_LM_MAPPING_NAMES for t in types)


def is_causal_model(model: torch.nn.Module) -> bool:
    """Whether a loaded model's self-attention is causal: False if its config says it is
    bidirectional (:func:`declared_bidirectional`, whatever the class), True if its class is
    a ``...ForCausalLM`` / ``...LMHeadModel``, else :func:`is_causal_config`. Whether the
    model honours a bidirectional config is checked on its attention during extraction.

    Args:
        model: a ``transformers`` model.

    Returns:
        True for causal (decoder-only) models.

    Raises:
        ValueError: for encoder-decoder models.
    """
    if declared_bidirectional(model.config):
        is_causal_config(model.config)  # still refuses encoder-decoders
        return False
    if type(model).__name__.endswith(_CAUSAL_ARCH_SUFFIXES):
        return True
    return is_causal_config(model.config)


def attention_windows(config, *, causal: bool) -> tuple[int | None, ...]:
    """Each layer's sliding attention window, read from a ``transformers`` config (None: full attention).

    A layer of ``config.layer_types`` marked ``"sliding_attention"``, or every layer of a
    config with a ``sliding_window`` and no ``layer_types`` (Mistral-like; not when
    ``use_sliding_window`` is False), attends within a window of ``w`` positions: on a causal
    model query ``i`` sees keys ``j`` with ``i - w < j <= i`` (``w = sliding_window``, as in
    transformers' ``sliding_window_overlay``: ``kv_idx > q_idx - sliding_window``, so ``w`` keys
    including itself); on a bidirectional one ``|i - j| < w`` (Gemma 3 with
    ``use_bidirectional_attention``: ``w = sliding_window``, its ``_bidirectional_window_overlay``;
    otherwise transformers' ``sliding_window_bidirectional_overlay``, ``|i - j| <= sliding_window``,
    so ``w = sliding_window + 1``). Used by the uniform control and the neutral-pooling reference
    (:mod:`olas_utils.maths.uniform`).

    Args:
        config: a ``PretrainedConfig`` (its text config is read).
        causal: whether the model attends causally (:func:`is_causal_model`).

    Returns:
        One entry per layer (``num_hidden_layers``): an int ``w >= 1`` or None.

    Raises:
        ValueError: a layer type other than full or sliding attention (its T×T uniform
            attention is not defined here), layer types not matching the number of layers,
            or a sliding layer without a positive integer ``sliding_window``.
    """
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    n = getattr(cfg, "num_hidden_layers", None)
    sw = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if types is None:
        sliding = sw is not None and getattr(cfg, "use_sliding_window", True) is not False
        types = ["sliding_attention" if sliding else "full_attention"] * int(n or 0)
    if n is not None and len(types) != n:
        raise ValueError(f"config.layer_types has {len(types)} entries for {n} layers")
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise ValueError(
            f"layer types {unknown} are neither full nor sliding-window attention: OLAS cannot tell "
            "which positions each query sees (needed by the uniform control and neutral pooling)"
        )
    if "sliding_attention" not in types:
        return (None,) * len(types)
    if isinstance(sw, bool) or not isinstance(sw, int) or sw < 1:
        raise ValueError(f"the config has sliding-window layers but sliding_window={sw!r}")
    w = sw if causal or getattr(cfg, "use_bidirectional_attention", False) else sw + 1
    return tuple(w if t == "sliding_attention" else None for t in types)


def capture_path(model: torch.nn.Module) -> str:
    """Which capture path a model uses (the three paths are described in :mod:`olas_utils.capture.attention`).

    Args:
        model: a ``transformers`` model.

    Returns:
        ``"interface"`` if its class supports the attention interface, ``"hook"`` if it has
        a self-attention module listed in :data:`HOOK_SPECS`, else ``"output_attentions"``.
    """
    if getattr(type(model), "_supports_attention_backend", False):
        return "interface"
    if any(type(m).__name__ in HOOK_SPECS for m in model.modules()):
        return "hook"
    return "output_attentions"


_HF_HINT = (
    "pass a Hugging Face transformers model, e.g. olas_utils.zoo.load_model(name).model or "
    "transformers.AutoModel.from_pretrained(path, attn_implementation='eager')"
)


def check_model(model: Any) -> None:
    """Check that ``model`` is something OLAS can capture: a ``torch.nn.Module`` with a
    ``transformers`` config, encoder-only or decoder-only, with self-attention layers.

    Args:
        model: the object to check (nothing is run or changed).

    Returns:
        None; raises if the model cannot be captured.

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module`` with a ``transformers`` config
            (e.g. a plain ``torch.nn.Linear``, a torchvision model, a tokenizer passed by
            mistake), naming what to pass instead.
        ValueError: for an architecture in :data:`UNSUPPORTED_ATTENTION` (naming it and why
            OLA is not defined for it), an encoder-decoder model, a config without
            ``num_hidden_layers``, or a model without self-attention (no attention interface, no hook spec and no
            submodule whose class name contains "Attention": e.g. a state-space model
            such as Mamba, or a CNN).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a transformers model (torch.nn.Module), got {type(model).__name__}; {_HF_HINT}")
    cfg = getattr(model, "config", None)
    try:
        from transformers import PretrainedConfig
    except ImportError:  # pragma: no cover - transformers is a dependency
        PretrainedConfig = ()  # type: ignore[assignment]
    if not isinstance(cfg, PretrainedConfig):
        raise TypeError(
            f"{type(model).__name__} is not a Hugging Face transformers model (it has no transformers config); "
            f"OLAS reads self-attention of encoder-only and decoder-only transformers: {_HF_HINT}"
        )
    if getattr(cfg, "is_encoder_decoder", False):
        raise ValueError(
            f"{type(model).__name__} is an encoder-decoder model; OLAS supports encoder-only and decoder-only "
            "transformers (for an encoder-decoder, pass its encoder or decoder stack only if it is a "
            "standalone model, e.g. a BERT- or GPT-style checkpoint)"
        )
    mt = getattr(cfg, "model_type", None)
    if mt in UNSUPPORTED_ATTENTION:
        when, why = UNSUPPORTED_ATTENTION[mt]
        if when is None or getattr(cfg, when[0], None) == when[1]:
            raise ValueError(
                f"{type(model).__name__} (model_type {mt!r}) is not supported: OLA is not defined for it because "
                f"{why}. OLAS needs every layer's self-attention as one T×T map over the input tokens "
                "(encoder-only or decoder-only transformers such as BERT, MPNet, Llama, Qwen2, Gemma 3)"
            )
    num_attention_layers(model)
    if capture_path(model) == "output_attentions" and not any(
        "attention" in type(m).__name__.lower() for m in model.modules()
    ):
        raise ValueError(
            f"{type(model).__name__} has no self-attention layers OLAS can read: no submodule is an attention "
            "module, it does not use the attention interface and has no hook spec in "
            "olas_utils.capture.architecture.HOOK_SPECS (is it a transformer? state-space and convolutional models have no "
            "attention to analyse)"
        )


#: Rows an embedding table may have beyond the tokenizer's vocabulary (``len(tokenizer)``):
#: real checkpoints pad it to a multiple (Qwen2.5: 151,665 tokens in 151,936 rows; e5-small:
#: 250,002 in 250,037). The larger of this many rows and 1% of the table is allowed.
VOCAB_SLACK = 512


def _ids(value) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, (list, tuple, set)):
        return {int(v) for v in value if v is not None}
    return {int(value)}


def tokenizer_mismatch(config, tokenizer) -> str | None:
    """Why ``tokenizer`` does not belong to the model of ``config``, or None when it may.

    Read from the config and the tokenizer only (no weights): the vocabulary size
    (``len(tokenizer)``, added tokens included) must not exceed ``config.vocab_size`` nor fall
    short of it by more than the padding real checkpoints use (:data:`VOCAB_SLACK` rows, or 1%
    of the table if more); and each of the tokenizer's BOS / EOS / pad ids must equal the
    config's ``bos_token_id`` / ``eos_token_id`` (any of a list) / ``pad_token_id`` where both
    set one (a pad token that is the tokenizer's own EOS, as :func:`olas_utils.zoo.load_model`
    sets when it has none, is accepted). A config or tokenizer without these attributes is not
    checked on them.

    Args:
        config: a ``transformers`` config (``vocab_size``, ``*_token_id`` are read).
        tokenizer: the tokenizer that will encode the sentences.

    Returns:
        None, or one sentence naming what differs and both values.
    """
    vocab = getattr(config, "vocab_size", None)
    n_tok = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    if isinstance(vocab, int) and isinstance(n_tok, int):
        slack = max(VOCAB_SLACK, vocab // 100)
        if n_tok > vocab or vocab - n_tok > slack:
            return (
                f"its vocabulary has {n_tok} tokens but the model's config says vocab_size={vocab} "
                f"(at most {slack} rows of padding are normal)"
            )
    tok_eos = getattr(tokenizer, "eos_token_id", None)
    for what in ("bos", "eos", "pad"):
        tid = getattr(tokenizer, f"{what}_token_id", None)
        want = _ids(getattr(config, f"{what}_token_id", None))
        if tid is None or not want or int(tid) in want:
            continue
        if what == "pad" and tok_eos is not None and int(tid) == int(tok_eos):
            continue
        shown = sorted(want)[0] if len(want) == 1 else sorted(want)
        return f"its {what} token id is {tid} but the model's config says {what}_token_id={shown}"
    return None


def check_tokenizer(
    model: torch.nn.Module, tokenizer, input_ids: torch.Tensor | None = None, *, match_config: bool = True
) -> None:
    """Check that ``tokenizer`` belongs to ``model``: its vocabulary (``len(tokenizer)``,
    added tokens included) fits the model's input embedding table, and so do the ids it
    produced (``input_ids``); and its vocabulary size and special-token ids match the model's
    config (:func:`tokenizer_mismatch`). A mismatched pair gives meaningless maps (ids that
    mean other words: minilm-l6's 30,522 WordPiece ids fit gemma3-270m's table of 262,144
    rows and return plausible-looking maps) or torch's bare "index out of range in self".

    Args:
        model: a ``transformers`` model (``get_input_embeddings()`` and ``config`` are read;
            a model without an ``nn.Embedding`` input table or a config is not checked on it).
        tokenizer: the tokenizer that will encode the sentences.
        input_ids: optional ``(batch, T)`` ids to check too.
        match_config: also check the vocabulary size and special-token ids against the config
            (False: only the embedding table, which no override can skip).

    Raises:
        ValueError: naming the tokenizer, the model, what differs and both values, and the
            override (``extract_ola(..., check_tokenizer=False)``).
    """
    tname = f"{type(tokenizer).__name__} {str(getattr(tokenizer, 'name_or_path', '') or '')!r}"
    mname = f"{type(model).__name__} {str(getattr(model, 'name_or_path', '') or '')!r}"
    get = getattr(model, "get_input_embeddings", None)
    try:
        emb = get() if get is not None else None
    except NotImplementedError:
        emb = None
    rows = getattr(emb, "num_embeddings", None)
    if isinstance(rows, int):
        n_tok = len(tokenizer) if hasattr(tokenizer, "__len__") else None
        top = int(input_ids.max()) if input_ids is not None and input_ids.numel() else -1
        if (n_tok is not None and n_tok > rows) or top >= rows:
            what = f"has {n_tok} tokens" if n_tok is not None and n_tok > rows else f"produced token id {top}"
            raise ValueError(
                f"the tokenizer {tname} {what} but the model {mname} has an embedding table of {rows} rows: they do "
                "not belong together (ids would index outside the table or mean other tokens). Pass the model's own "
                "tokenizer, e.g. load_model(name).tokenizer or AutoTokenizer.from_pretrained(<the model's folder>)"
            )
    config = getattr(model, "config", None)
    why = tokenizer_mismatch(config, tokenizer) if config is not None and match_config else None
    if why is not None:
        raise ValueError(
            f"the tokenizer {tname} does not belong to the model {mname}: {why}. Its ids would mean other tokens "
            "and the maps would look plausible but be wrong. Pass the model's own tokenizer, e.g. "
            "load_model(name).tokenizer or AutoTokenizer.from_pretrained(<the model's folder>); if the pair is "
            "right (a tokenizer you extended on purpose), pass check_tokenizer=False to extract_ola"
        )


def attention_configs(model: torch.nn.Module) -> list:
    """Every config object whose attention implementation a switch may change: the model's,
    each sub-model's, and their registered sub-configs, at any depth (each once)."""
    seen: dict[int, Any] = {}
    todo = [getattr(m, "config", None) for m in model.modules()]
    while todo:
        cfg = todo.pop()
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "sub_configs"):
            continue
        seen[id(cfg)] = cfg
        todo.extend(getattr(cfg, k, None) for k in cfg.sub_configs)
    return list(seen.values())


def missing_eager_attention(model: torch.nn.Module) -> list[str]:
    """Python modules of ``model`` that dispatch attention through the interface but define
    no ``eager_attention_forward`` for OLAS to call."""
    bad = []
    for name in dict.fromkeys(type(m).__module__ for m in model.modules()):
        pymod = sys.modules.get(name)
        if (
            pymod is not None
            and hasattr(pymod, "ALL_ATTENTION_FUNCTIONS")
            and not hasattr(pymod, "eager_attention_forward")
        ):
            bad.append(name)
    return bad
