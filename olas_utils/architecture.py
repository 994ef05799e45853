"""What OLAS needs to know about a model before capturing it, read from the model and its
config (never from a list of model names): the number of attention layers N
(:func:`num_attention_layers`), whether attention is causal (:func:`is_causal_config`,
:func:`is_causal_model`), which capture path fits it (:func:`capture_path`, with the
per-architecture :data:`HOOK_SPECS` as data), and whether it can be captured at all
(:func:`check_model`: plain ``torch.nn`` modules, models without self-attention and
encoder-decoders are refused with a message saying what to pass instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["HookSpec", "HOOK_SPECS", "num_attention_layers", "is_causal_config", "is_causal_model",
           "capture_path", "check_model"]


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


def is_causal_config(config) -> bool:
    """Whether a ``transformers`` config describes a decoder-only (causal) transformer.

    Read from the config, never from a list of model types: a config is causal if
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
            f"OLAS supports encoder-only and decoder-only transformers.")
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
    return any(t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and t not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
               for t in types)


def is_causal_model(model: torch.nn.Module) -> bool:
    """Whether a loaded model's self-attention is causal: :func:`is_causal_config` on its
    config, or its class is a ``...ForCausalLM`` / ``...LMHeadModel``.

    Args:
        model: a ``transformers`` model.

    Returns:
        True for causal (decoder-only) models.

    Raises:
        ValueError: for encoder-decoder models.
    """
    if type(model).__name__.endswith(_CAUSAL_ARCH_SUFFIXES):
        return True
    return is_causal_config(model.config)


def capture_path(model: torch.nn.Module) -> str:
    """Which capture path a model uses (the three paths are described in :mod:`olas_utils.capture`).

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
        ValueError: for an encoder-decoder model, a config without ``num_hidden_layers``,
            or a model without self-attention (no attention interface, no hook spec and no
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
    num_attention_layers(model)
    if capture_path(model) == "output_attentions" and not any("attention" in type(m).__name__.lower() for m in model.modules()):
        raise ValueError(
            f"{type(model).__name__} has no self-attention layers OLAS can read: no submodule is an attention "
            "module, it does not use the attention interface and has no hook spec in "
            "olas_utils.architecture.HOOK_SPECS (is it a transformer? state-space and convolutional models have no "
            "attention to analyse)"
        )
