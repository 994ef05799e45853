"""Where each architecture keeps what the context-mixing baselines read — its layers' output
projection, residual input and norms, relative to the self-attention module (:data:`MIXING_SPECS`,
data keyed by the attention module's class, like :data:`olas_utils.capture.architecture.HOOK_SPECS`) —
and whether a model has all of it (:func:`mixing_problem`).

The model's own modules are matched against the table, never its name: a model whose attention
class is missing gets OLA keys but no mixing keys, with a message saying what to add.
Importing this module does no work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from olas_utils.capture.architecture import capture_path

__all__ = ["NormSpec", "MixingSpec", "MIXING_SPECS", "mixing_problem"]


@dataclass(frozen=True)
class NormSpec:
    """A normalisation module that the context-mixing baselines linearise.

    Attributes:
        path: its path from the layer (``"attention.output.LayerNorm"``).
        centered: a layer norm, which subtracts the mean (True), or an RMSNorm (False).
        gain_offset: its gain is ``gain_offset + weight`` (Gemma's RMSNorm: 1; others 0).
    """

    path: str
    centered: bool = True
    gain_offset: float = 0.0


@dataclass(frozen=True)
class MixingSpec:
    """Where the context-mixing baselines (:mod:`olas_utils.maths.mixing`) read their tensors, for one
    self-attention module class. Paths are from the attention module's *layer*, the module
    ``layer_up`` levels above it (``"a.b"`` is submodule ``b`` of ``a``).

    Attributes:
        layer_up: levels from the attention module up to its layer (BERT: 2, Llama: 1).
        out_proj: the output projection ``W_O`` (an ``nn.Linear`` over the concatenated heads).
        residual: the module whose first input is the residual stream ``x`` entering the layer.
        post_norm: post-LN models: the layer norm applied after the residual add; its output is
            the block output ``y``.
        block_output: pre-norm models: the module whose first input is ``y = x + attention
            output`` (the next norm). Exactly one of ``post_norm`` and ``block_output`` is set.
        attn_norm: a norm applied to the attention output before the residual add (Gemma 3's
            ``post_attention_layernorm``), or None.
        ffn_norm: post-LN models: the layer norm after the feed-forward block (GlobEnc), or None.
        value_proj: the value projection, needed by the ``"hook"`` capture path only (its
            attention module hands out no value vectors); its output is ``x W_V + b_V``.

    Raises:
        ValueError: if both or neither of ``post_norm`` and ``block_output`` are set.
    """

    layer_up: int
    out_proj: str
    residual: str
    post_norm: NormSpec | None = None
    block_output: str | None = None
    attn_norm: NormSpec | None = None
    ffn_norm: NormSpec | None = None
    value_proj: str | None = None

    def __post_init__(self) -> None:
        if (self.post_norm is None) == (self.block_output is None):
            raise ValueError("a MixingSpec sets exactly one of post_norm (post-LN) and block_output (pre-norm)")


_PRE_RMSNORM = MixingSpec(
    layer_up=1, out_proj="self_attn.o_proj", residual="input_layernorm", block_output="post_attention_layernorm"
)

#: Self-attention module class name → where its layer keeps what the mixing baselines read.
MIXING_SPECS: dict[str, MixingSpec] = {
    # BertLayer: attention(self → output.dense → output.LayerNorm(· + x)) → intermediate → output.LayerNorm
    "BertSelfAttention": MixingSpec(
        layer_up=2,
        out_proj="attention.output.dense",
        residual="attention",
        post_norm=NormSpec("attention.output.LayerNorm"),
        ffn_norm=NormSpec("output.LayerNorm"),
    ),
    # MPNetLayer: attention(attn(q, k, v, o) → LayerNorm(· + x)) → intermediate → output.LayerNorm
    "MPNetSelfAttention": MixingSpec(
        layer_up=2,
        out_proj="attention.attn.o",
        residual="attention",
        post_norm=NormSpec("attention.LayerNorm"),
        ffn_norm=NormSpec("output.LayerNorm"),
        value_proj="attention.attn.v",
    ),
    # TransformerBlock: sa_layer_norm(attention(x; q_lin, k_lin, v_lin → out_lin) + x) → ffn → output_layer_norm
    "DistilBertSelfAttention": MixingSpec(
        layer_up=1,
        out_proj="attention.out_lin",
        residual="attention",
        post_norm=NormSpec("sa_layer_norm"),
        ffn_norm=NormSpec("output_layer_norm"),
    ),
    # decoder layer: x + self_attn(input_layernorm(x)) → post_attention_layernorm → mlp
    "LlamaAttention": _PRE_RMSNORM,
    "Qwen2Attention": _PRE_RMSNORM,
    # x + post_attention_layernorm(self_attn(input_layernorm(x))) → pre_feedforward_layernorm → mlp
    "Gemma3Attention": MixingSpec(
        layer_up=1,
        out_proj="self_attn.o_proj",
        residual="input_layernorm",
        attn_norm=NormSpec("post_attention_layernorm", centered=False, gain_offset=1.0),
        block_output="pre_feedforward_layernorm",
    ),
}


def mixing_problem(model: torch.nn.Module, methods: Iterable[str] = ("valuenorm", "alti")) -> str | None:
    """Why the context-mixing ``methods`` cannot be extracted from ``model``, or None if they can.

    Read from the model's modules and :data:`MIXING_SPECS`: the model must have a self-attention
    module class listed there, be captured through the ``"interface"`` or ``"hook"`` path
    (:func:`olas_utils.capture.architecture.capture_path`), and, for ``"globenc"``, be post-LN with a
    norm after its feed-forward block. Whether each listed submodule exists is checked when the
    capture starts (:class:`olas_utils.capture.mixing_hooks.MixingHooks`).

    Args:
        model: a ``transformers`` model.
        methods: method names (``"valuenorm"``, ``"alti"``, ``"globenc"``).

    Returns:
        One sentence naming what is missing, or None.
    """
    name = type(model).__name__
    specs = {
        type(m).__name__: MIXING_SPECS[type(m).__name__] for m in model.modules() if type(m).__name__ in MIXING_SPECS
    }
    if not specs:
        seen = sorted({type(m).__name__ for m in model.modules() if "attention" in type(m).__name__.lower()})
        return (
            f"{name} has no self-attention module listed in olas_utils.capture.mixing_specs.MIXING_SPECS (its attention "
            f"modules: {', '.join(seen) or 'none found'}): the mixing baselines need to know where each layer's "
            "output projection, residual input and norms are; add a MixingSpec for its attention class (OLA keys "
            "work without one)"
        )
    path = capture_path(model)
    if path not in ("interface", "hook"):
        return f"{name} is captured through the {path!r} path, which hands out no value vectors or hidden states"
    if path == "hook" and any(s.value_proj is None for s in specs.values()):
        return f"{name} is captured through hooks but its MixingSpec names no value_proj to read the values from"
    if "globenc" in methods:
        bad = sorted(c for c, s in specs.items() if s.post_norm is None or s.ffn_norm is None)
        if bad:
            return (
                "globenc (Modarressi et al. 2022) linearises the two layer norms of a post-LN encoder layer, and "
                f"{', '.join(bad)} of {name} has no post-LN norm and norm after the feed-forward block "
                "(MixingSpec.post_norm, ffn_norm): use 'alti' or 'valuenorm'"
            )
    return None
