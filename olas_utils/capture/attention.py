"""Streaming attention capture: each layer's attention is head-averaged and folded into the
OLA accumulators the moment it exists, so no more than one layer's per-head attention is
alive at a time (no ``output_attentions`` tuple of every layer).

Three paths, chosen per model by :func:`olas_utils.capture.architecture.capture_path`:

``"interface"``
    Models whose attention layers dispatch through ``transformers.AttentionInterface``
    (classes with ``_supports_attention_backend``: BERT, Llama, Qwen2, Gemma 3, ...). OLAS
    registers an attention function named ``"olas_capture"`` that calls the architecture's
    *own* ``eager_attention_forward`` (so every quirk — grouped KV heads, soft-capping,
    sliding windows, scaling — is the model's), folds the weights and returns none. For
    bf16/fp16 models the attention core (QKᵀ, softmax, weights·V) runs in fp32 and its
    output is cast back to the model dtype.
``"hook"``
    Architectures that compute attention inside their own module (MPNet): a forward
    pre-hook asks that module for its probabilities and a forward hook folds them and
    drops them from the module's output. Per-architecture settings live in
    :data:`olas_utils.capture.architecture.HOOK_SPECS` (data, not code).
``"output_attentions"``
    Anything else: a plain ``output_attentions=True`` forward, folded layer by layer
    afterwards. Correct but memory-hungry; a warning says so.

The model's attention implementation is switched only inside the ``with`` block and
restored on exit, exactly as it was (every sub-config included), even when the original
cannot be re-selected on this machine (e.g. ``"flash_attention_2"`` without the package).
A model loaded with an implementation that returns no attention weights (``"sdpa"``,
``"flash_attention_2"``, ``"flex_attention"``, ...) is captured through its eager attention
instead, with a ``UserWarning`` saying so; an architecture without an eager attention path
is a clear ``ValueError`` before anything is changed.

Context-mixing baselines (``mixing=("valuenorm", "alti", ...)``, :mod:`olas_utils.maths.mixing`)
come from the same pass: hooks installed from :data:`olas_utils.capture.mixing_specs.MIXING_SPECS`
(:mod:`olas_utils.capture.mixing_hooks`) read each layer's residual input, norm statistics and block
output, and the attention function (or MPNet's hook) hands over the per-head weights and value
vectors; each layer's matrices are folded and dropped before the next layer runs.

Threads: a capture holds a per-model re-entrant lock inside its ``with`` block, so two
threads extracting with one model take turns (exact results; the implementation restored
is the one from before either began). :attr:`AttentionCapture.observed_causal` says whether
any captured layer put weight above the diagonal. What a model is (layers, causality,
capture path, whether it can be captured at all) is read by :mod:`olas_utils.capture.architecture`.
"""

from __future__ import annotations

import contextvars
import importlib
import inspect
import logging
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from olas_utils.capture.architecture import (
    HOOK_SPECS,
    attention_configs,
    check_model,
    missing_eager_attention,
)
from olas_utils.capture.facts import ModelFacts
from olas_utils.capture.mixing_hooks import MixingHooks, MixingPass
from olas_utils.maths.mixing import mixing_plan
from olas_utils.maths.ola import OrderAccumulator, check_orders

__all__ = [
    "CAPTURE_IMPLEMENTATION",
    "NO_WEIGHTS_IMPLEMENTATIONS",
    "head_average",
    "non_finite_message",
    "AttentionCapture",
]


log = logging.getLogger(__name__)


CAPTURE_IMPLEMENTATION = "olas_capture"

#: Attention implementations known to return no attention weights. Any implementation
#: other than ``"eager"`` is treated the same way; this list only documents the usual ones.
NO_WEIGHTS_IMPLEMENTATIONS = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention", "paged_attention")


def head_average(weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Average attention over heads, with padded query rows and key columns set to zero.

    Args:
        weights: ``(batch, head, query, key)`` post-softmax attention.
        valid: ``(batch, T)`` bool, True at real (non-padding) tokens.

    Returns:
        ``(batch, query, key)`` float32 tensor. ``torch.where`` is used, so a NaN in a
        padded row (an all-masked softmax) cannot leak into the result.
    """
    a = weights.float().mean(dim=1)
    keep = valid[:, :, None] & valid[:, None, :]
    return torch.where(keep, a, torch.zeros((), dtype=a.dtype, device=a.device))


@dataclass
class _ForwardState:
    capture: "AttentionCapture"
    acc: OrderAccumulator
    valid: torch.Tensor
    calls: list[int]
    upper: bool | None = None  # weight above the diagonal in some layer (None: T < 2)
    mixing: MixingPass | None = None

    def fold(self, module: torch.nn.Module, weights: torch.Tensor) -> None:
        if weights is None:
            raise RuntimeError(f"{type(module).__name__} returned no attention weights to capture")
        t = self.valid.shape[1]
        if weights.dim() != 4 or tuple(weights.shape[-2:]) != (t, t):
            raise ValueError(
                f"{type(module).__name__} returned attention of shape {tuple(weights.shape)}, not (batch, head, {t}, "
                f"{t}) over the {t} input tokens: OLA is not defined for this architecture (it needs every layer's "
                "attention as one T×T map over the input)"
            )
        self.calls.append(id(module))
        a = head_average(weights, self.valid)
        if not bool(torch.isfinite(a).all()):
            raise FloatingPointError(non_finite_message(self.capture.model, len(self.calls) - 1, weights.dtype))
        if a.shape[-1] >= 2 and not self.upper:
            self.upper = bool(torch.triu(a, 1).abs().amax() > 0)
        self.acc.add_layer(a)


def non_finite_message(model: torch.nn.Module, layer: int, dtype: torch.dtype) -> str:
    """What to say when layer ``layer`` (0-based) of ``model`` returned NaN or infinite
    attention: an overflow (float16 scores above 65,504), not a fact about the model."""
    params = next(model.parameters(), None)
    pdtype = str(params.dtype if params is not None else dtype).replace("torch.", "")
    return (
        f"layer {layer} of {type(model).__name__} {str(getattr(model, 'name_or_path', '') or '')!r} returned NaN or "
        f"infinite attention (attention in {str(dtype).replace('torch.', '')}, parameters in {pdtype}): its "
        "activations overflowed, which float16 does above 65,504. No map was made from it. Load the model in "
        "float32 or bfloat16 (load_model(name, dtype=torch.float32) or torch.bfloat16)"
    )


_LOCKS: "weakref.WeakKeyDictionary[torch.nn.Module, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _model_lock(model: torch.nn.Module) -> threading.RLock:
    """The re-entrant lock that serialises captures of one model across threads."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


_ACTIVE: contextvars.ContextVar[_ForwardState | None] = contextvars.ContextVar("olas_active_capture", default=None)


def _eager_for(module: torch.nn.Module) -> Callable:
    mod = importlib.import_module(type(module).__module__)
    fn = getattr(mod, "eager_attention_forward", None)
    if fn is None:
        raise RuntimeError(
            f"{type(module).__name__} ({type(module).__module__}) has no eager_attention_forward; "
            "OLAS cannot read its attention weights through the attention interface; this architecture has "
            "no eager attention path OLAS can capture (use an encoder-only or decoder-only model with eager "
            "attention, or add a HookSpec for it in olas_utils.capture.architecture.HOOK_SPECS)"
        )
    return fn


def _olas_attention(module, query, key, value, attention_mask, **kwargs):
    """Attention function registered as ``"olas_capture"``: the model's own eager attention,
    with weights folded into the active accumulator and not returned."""
    eager = _eager_for(module)
    state = _ACTIVE.get()
    if state is None:
        return eager(module, query, key, value, attention_mask, **kwargs)
    dtype = query.dtype
    if dtype in (torch.float16, torch.bfloat16):
        query, key, value = query.float(), key.float(), value.float()
        if attention_mask is not None and attention_mask.is_floating_point():
            attention_mask = attention_mask.float()
    out, weights = eager(module, query, key, value, attention_mask, **kwargs)
    state.fold(module, weights)
    if state.mixing is not None:
        state.mixing.attention(state.capture.mixing_hooks.site(module), weights, value)
    return out.to(dtype), None


def _register_interface() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE_IMPLEMENTATION, _olas_attention)
    if CAPTURE_IMPLEMENTATION not in ALL_MASK_ATTENTION_FUNCTIONS:
        AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, eager_mask)


def _warn_switch(name: str, impl: Any, to: str) -> None:
    warnings.warn(
        f"{name} uses attn_implementation={impl!r}, which returns no attention weights; OLAS switched it to {to} "
        f"for this extraction and restores {impl!r} afterwards. Load the model with attn_implementation='eager' "
        "to silence this warning.",
        UserWarning,
        stacklevel=4,
    )


class AttentionCapture:
    """Context manager that turns a model's forward pass into streaming OLA extraction.

    Example::

        with AttentionCapture(model, max_order=3, rollout=True, keep_layers=(0, -1)) as cap:
            acc = cap.forward(input_ids=ids, attention_mask=mask)
        ola2 = acc.ola(2)            # (batch, T, T)

    Args:
        model: a Hugging Face encoder-only or decoder-only transformer, in eval mode.
        max_order: K, highest OLA order accumulated (orders 0..K), ``0 <= K <= N``.
        rollout: also accumulate attention rollout.
        keep_layers: 0-based indices of layers whose head-averaged attention is kept
            (negative counts from the last layer) — the first/last-layer baselines.
        path: force a capture path (``"interface"``, ``"hook"``, ``"output_attentions"``);
            default :func:`capture_path`.
        facts: the model's :class:`~olas_utils.capture.facts.ModelFacts` if already read (a
            ``LoadedModel``'s); default read now.
        mixing: context-mixing keys to accumulate in the same pass (``"valuenorm"``,
            ``"alti:2"``, ``"globenc"``, ...; :func:`olas_utils.maths.mixing.mixing_plan`); read them
            from :meth:`forward_with_mixing`. Needs the ``"interface"`` or ``"hook"`` path and a
            :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS` entry for the model's attention.
        keep_mixing_layers: also keep each mixing method's raw per-layer matrices.
        reconstruct: keep, per layer, the block output rebuilt from the ALTI decomposition
            (the ``reconstructions`` of :class:`olas_utils.capture.mixing_hooks.MixingPass`), to check it.

    Attention implementations: inside the ``with`` block the ``"interface"`` path runs the
    model's own eager attention whatever the model was loaded with; a model loaded with an
    implementation that returns no weights (``"sdpa"``, ``"flash_attention_2"``, ...) gets
    a ``UserWarning`` saying so. The ``"output_attentions"`` path switches such a model to
    ``"eager"`` (with the same warning) when the architecture allows it; if it does not,
    and the forward pass returns no weights, :meth:`forward` raises a ``RuntimeError``
    saying to reload the model with ``attn_implementation="eager"``. On exit every
    config's implementation is restored exactly as it was.

    Raises:
        TypeError, ValueError: for what is not an encoder-only or decoder-only transformer
            (:func:`check_model`).
        ValueError: if ``max_order`` is outside ``0..N``; on entering, if the architecture
            has no eager attention path (``eager_attention_forward``) to capture; mixing keys
            the model cannot give (:func:`~olas_utils.capture.mixing_specs.mixing_problem`, naming
            what is missing) or that are not mixing keys.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        max_order: int,
        rollout: bool = False,
        keep_layers: Sequence[int] = (),
        path: str | None = None,
        mixing: Iterable[str] = (),
        keep_mixing_layers: bool = False,
        reconstruct: bool = False,
        facts: ModelFacts | None = None,
    ) -> None:
        check_model(model)
        self.model = model
        facts = facts if facts is not None else ModelFacts.of(model)
        self.num_layers = facts.num_layers
        check_orders([max_order], self.num_layers)
        self.max_order = max_order
        self.rollout = rollout
        self.keep_layers = tuple(keep_layers)
        self.path = path or facts.capture_path
        if self.path not in ("interface", "hook", "output_attentions"):
            raise ValueError(f"unknown capture path {self.path!r}")
        self.mixing_plan = mixing_plan(mixing, self.num_layers)
        self.keep_mixing_layers, self.reconstruct = keep_mixing_layers, reconstruct
        self.mixing_hooks: MixingHooks | None = None
        if self.mixing_plan:
            # each method on its own, so that only the ones the model lacks are named
            bad = {m: facts.mixing.get(m) for m in self.mixing_plan}
            bad = {m: why for m, why in bad.items() if why is not None}
            if not bad and self.path not in ("interface", "hook"):
                why = f"the {self.path!r} capture path hands out no value vectors or hidden states"
                bad = dict.fromkeys(self.mixing_plan, why)
            if bad:
                raise ValueError(f"cannot extract {sorted(bad)}: {'; '.join(dict.fromkeys(bad.values()))}")
            self.mixing_hooks = MixingHooks(model, lambda: getattr(_ACTIVE.get(), "mixing", None))
        self._handles: list[Any] = []
        self._previous_impl: Any = None
        self._saved_impls: list[tuple[Any, Any]] = []
        self._layer_order: list[int] | None = None
        self._entered = False
        self._forward_params = frozenset(inspect.signature(model.forward).parameters)
        self._lock = _model_lock(model)
        #: whether the captured attention was causal: False once any layer of any batch put
        #: weight above the diagonal, True if batches with T >= 2 never did, None before.
        self.observed_causal: bool | None = None

    # -- context management -------------------------------------------------------------
    def __enter__(self) -> "AttentionCapture":
        self._lock.acquire()  # another thread capturing this model finishes first
        try:
            impl = getattr(self.model.config, "_attn_implementation", None)
            self._previous_impl = impl
            self._saved_impls = [
                (c, getattr(c, "_attn_implementation_internal", None)) for c in attention_configs(self.model)
            ]
            try:
                self._switch(impl)
                if self.mixing_hooks is not None:
                    self.mixing_hooks.install()
            except BaseException:
                if self.mixing_hooks is not None:
                    self.mixing_hooks.remove()
                self._restore()
                raise
        except BaseException:
            self._lock.release()
            raise
        self._entered = True
        return self

    def _switch(self, impl: Any) -> None:
        name = type(self.model).__name__
        no_weights = impl not in (None, "eager", CAPTURE_IMPLEMENTATION)
        if self.path == "interface":
            bad = missing_eager_attention(self.model)
            if bad:
                raise ValueError(
                    f"{name} has no eager attention path OLAS can capture: {', '.join(bad)} dispatch(es) "
                    "attention through transformers' attention interface but define no eager_attention_forward. "
                    "Use a model whose architecture has eager attention, or add a HookSpec for it in "
                    "olas_utils.capture.architecture.HOOK_SPECS."
                )
            if no_weights:
                _warn_switch(
                    name, impl, f"its eager-based capture ({CAPTURE_IMPLEMENTATION!r}, the model's own eager attention)"
                )
            _register_interface()
            self.model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
        elif self.path == "hook":
            self._install_hooks()
        else:
            if no_weights and getattr(type(self.model), "_can_set_attn_implementation", lambda: False)():
                _warn_switch(name, impl, "'eager'")
                self.model.set_attn_implementation("eager")
            # an architecture that cannot switch at run time either returns weights anyway
            # (e.g. Falcon computes them when asked) or forward() says to reload with eager
            warnings.warn(
                f"{name} neither uses the attention interface nor has a hook "
                "spec in olas_utils.capture.architecture.HOOK_SPECS: falling back to output_attentions=True, "
                "which keeps every layer's attention in memory during the forward pass.",
                stacklevel=3,
            )

    def _restore(self) -> None:
        """Put every config's attention implementation back as it was on entering (set
        directly, so an implementation that cannot be re-selected here is still restored)."""
        for cfg, value in self._saved_impls:
            cfg._attn_implementation_internal = value
        self._saved_impls = []

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self.mixing_hooks is not None:
            self.mixing_hooks.remove()
        self._restore()
        if self._entered:
            self._entered = False
            self._lock.release()

    def _install_hooks(self) -> None:
        for module in self.model.modules():
            spec = HOOK_SPECS.get(type(module).__name__)
            if spec is None:
                continue

            def pre_hook(mod, args, kwargs, spec=spec):
                if _ACTIVE.get() is not None:
                    kwargs = {**kwargs, spec.force_kwarg: True}
                return args, kwargs

            def post_hook(mod, args, kwargs, output, spec=spec):
                state = _ACTIVE.get()
                if state is None:
                    return output
                state.fold(mod, output[spec.weights_index])
                if state.mixing is not None:
                    state.mixing.attention(self.mixing_hooks.site(mod), output[spec.weights_index])
                return tuple(o for i, o in enumerate(output) if i != spec.weights_index)

            self._handles.append(module.register_forward_pre_hook(pre_hook, with_kwargs=True))
            self._handles.append(module.register_forward_hook(post_hook, with_kwargs=True))

    # -- running ----------------------------------------------------------------------------
    def new_accumulator(self) -> OrderAccumulator:
        """An empty accumulator with this capture's settings."""
        return OrderAccumulator(
            max_order=self.max_order,
            keep_layers=self.keep_layers,
            rollout=self.rollout,
            num_layers=self.num_layers,
        )

    @torch.no_grad()
    def forward(self, *, attention_mask: torch.Tensor, **inputs: Any) -> OrderAccumulator:
        """Run the model on one batch and return the filled OLA accumulator (mixing maps, if
        any were asked for, are computed too: :meth:`forward_with_mixing` returns them).

        Args:
            attention_mask: ``(batch, T)`` 1 at real tokens, 0 at (right) padding.
            **inputs: the other model inputs (``input_ids``, ...), all ``(batch, T)``.

        Returns:
            An :class:`~olas_utils.maths.ola.OrderAccumulator` holding ``(batch, T, T)`` sums.

        Raises:
            RuntimeError: if used outside the ``with`` block, or if the number or order of
                captured layers is not the model's N layers in order.
            FloatingPointError: a layer's attention is NaN or infinite (an overflow, typically
                float16): names the layer and dtype and advises float32 or bfloat16; checked
                before causality, so an overflow is never reported as a config mismatch.
        """
        return self.forward_with_mixing(attention_mask=attention_mask, **inputs)[0]

    @torch.no_grad()
    def forward_with_mixing(
        self, *, attention_mask: torch.Tensor, **inputs: Any
    ) -> tuple[OrderAccumulator, MixingPass | None]:
        """:meth:`forward`, also returning the pass's context-mixing state.

        Returns:
            ``(accumulator, mixing)``: ``mixing`` is a
            :class:`~olas_utils.capture.mixing_hooks.MixingPass` whose ``accumulators[method]``
            (:class:`~olas_utils.maths.mixing.MixingAccumulator`) hold ``(batch, T, T)`` maps, or
            None when the capture was made without mixing keys.

        Raises:
            The errors of :meth:`forward`; RuntimeError if a mixing method did not receive
            every layer (a spec that does not fit the model).
        """
        if not self._entered:
            raise RuntimeError("AttentionCapture.forward must be called inside `with AttentionCapture(...)`")
        valid = attention_mask.bool()
        # outputs are discarded: no KV cache, and a causal LM's head on one position only
        for name, value in (("use_cache", False), ("logits_to_keep", 1)):
            if name in self._forward_params:
                inputs.setdefault(name, value)
        acc = self.new_accumulator()
        state = _ForwardState(self, acc, valid, [])
        if self.mixing_plan:
            state.mixing = MixingPass(
                self.mixing_plan,
                self.num_layers,
                valid,
                keep_layers=self.keep_mixing_layers,
                reconstruct=self.reconstruct,
            )
        if self.path == "output_attentions":
            out = self.model(attention_mask=attention_mask, output_attentions=True, **inputs)
            if not getattr(out, "attentions", None) or any(w is None for w in out.attentions):
                raise RuntimeError(
                    f"{type(self.model).__name__} returned no attention weights with output_attentions=True "
                    f"(attn_implementation={getattr(self.model.config, '_attn_implementation', None)!r}); "
                    "if it is a transformer, reload it with attn_implementation='eager'; a model without "
                    "self-attention cannot be analysed"
                )
            for w in out.attentions:
                state.fold(self.model, w)
            del out
        else:
            token = _ACTIVE.set(state)
            try:
                self.model(attention_mask=attention_mask, **inputs)
            finally:
                _ACTIVE.reset(token)
            self._check_layer_order(state.calls)
        if state.upper:
            self.observed_causal = False
        elif state.upper is not None and self.observed_causal is None:
            self.observed_causal = True
        if acc.n_added != self.num_layers:
            raise RuntimeError(
                f"captured {acc.n_added} attention layers but the model has {self.num_layers}: "
                f"the {self.path!r} capture path does not fit {type(self.model).__name__}"
            )
        if state.mixing is not None:
            state.mixing.check_complete()
        return acc, state.mixing

    def _check_layer_order(self, calls: list[int]) -> None:
        if len(set(calls)) != len(calls):
            raise RuntimeError("an attention module ran twice in one forward pass; OLA needs each layer once")
        if self._layer_order is None:
            self._layer_order = calls
        elif calls != self._layer_order:
            raise RuntimeError("attention layers ran in a different order than in the first batch")
