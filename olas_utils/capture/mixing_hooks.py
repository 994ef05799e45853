"""The context-mixing baselines in a captured forward pass: hooks on the modules that
:data:`olas_utils.capture.mixing_specs.MIXING_SPECS` names (:class:`MixingHooks`) hand each layer's
residual input, value vectors, norm statistics and block output to a per-pass collector
(:class:`MixingPass`), which turns them into that layer's value-norm / ALTI / GlobEnc matrices
(:mod:`olas_utils.maths.mixing`), folds them into the accumulators and drops them before the next
layer runs.

:class:`olas_utils.capture.attention.AttentionCapture` owns both: it installs the hooks on entering its
``with`` block, hands every layer's attention weights (and, on the ``"interface"`` path, its
value vectors) to the active pass, and removes the hooks on exit. Alive at any time: one
layer's per-head weights ``(B, H, T, T)``, value vectors, head outputs ``(B, T, H, d)`` and one
block of ``T_i(x_j)`` vectors (:data:`olas_utils.maths.mixing.BLOCK_ROWS` query rows).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from olas_utils.capture.mixing_specs import MIXING_SPECS, MixingSpec, NormSpec
from olas_utils.maths.mixing import (
    LinearisedNorm,
    MixingAccumulator,
    head_outputs,
    head_weight_blocks,
    inverse_scale,
    layer_mixing,
    value_norms,
)

__all__ = ["LayerSite", "MixingHooks", "MixingPass"]


#: ``id(out_proj.weight) -> (key, blocks)``: each output projection's weight cut per value head,
#: made once per weight (a capture builds its sites anew, so the sites cannot hold it); dropped
#: when the weight is garbage-collected.
_BLOCKS: dict[int, tuple] = {}


def _first_input(args: tuple, kwargs: dict) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _norm_parts(module: torch.nn.Module, spec: NormSpec) -> tuple[torch.Tensor | None, float]:
    weight = getattr(module, "weight", None)
    gain = None if weight is None else weight.detach().float() + spec.gain_offset
    eps = getattr(module, "eps", None)
    if eps is None:
        eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        raise ValueError(f"{type(module).__name__} at {spec.path!r} has no eps / variance_epsilon to linearise it with")
    return gain, float(eps)


@dataclass
class LayerSite:
    """One attention layer's modules, resolved from its :class:`~olas_utils.capture.mixing_specs.MixingSpec`.

    Attributes:
        index: the layer's position among the model's attention modules (module order).
        attention: the self-attention module; layer: the module ``spec.layer_up`` levels above.
        spec: the spec it was resolved from.
        modules: ``{field: module}`` for each path the spec sets (``out_proj``, ``residual``,
            ``post_norm``, ``block_output``, ``attn_norm``, ``ffn_norm``, ``value_proj``).
    """

    index: int
    attention: torch.nn.Module
    layer: torch.nn.Module
    spec: MixingSpec
    modules: dict[str, torch.nn.Module]

    def head_blocks(self, kv: int, dh: int) -> torch.Tensor:
        """The output projection's float32 weight cut per value head
        (:func:`~olas_utils.maths.mixing.head_weight_blocks`), kept between passes and captures
        (:data:`_BLOCKS`) until the weight changes (its storage or in-place version)."""
        weight = self.modules["out_proj"].weight
        key = (weight.data_ptr(), weight._version, weight.device, kv, dh)
        held = _BLOCKS.get(id(weight))
        if held is None or held[0] != key:
            if held is None:  # forget the copy when the weight goes
                weakref.finalize(weight, _BLOCKS.pop, id(weight), None)
            held = _BLOCKS[id(weight)] = (key, head_weight_blocks(weight.detach().float(), kv, dh))
        return held[1]

    def norm(self, what: str, inputs: torch.Tensor) -> LinearisedNorm:
        """The linearised ``post_norm`` / ``attn_norm`` / ``ffn_norm`` at the statistics of its
        actual ``(B, T, d)`` input."""
        spec: NormSpec = getattr(self.spec, what)
        gain, eps = _norm_parts(self.modules[what], spec)
        if gain is None:
            gain = torch.ones(inputs.shape[-1], device=inputs.device)
        return LinearisedNorm(gain.to(inputs.device), inverse_scale(inputs, eps, centered=spec.centered), spec.centered)


class MixingHooks:
    """The hooks that read a model's mixing tensors, for every attention module listed in
    :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS`.

    Args:
        model: the model.
        active: returns the :class:`MixingPass` of the forward pass running now, or None
            (then every hook does nothing).

    Raises:
        ValueError: if a path of a spec does not exist in the model (naming the attention
            class, its layer and the path), or an attention-output norm has a shift.
    """

    def __init__(self, model: torch.nn.Module, active: Callable[[], "MixingPass | None"]) -> None:
        self.active = active
        self.sites: dict[int, LayerSite] = {}
        self._handles: list[Any] = []
        names = {id(m): n for n, m in model.named_modules()}
        for module in model.modules():
            spec = MIXING_SPECS.get(type(module).__name__)
            if spec is None:
                continue
            parts = names[id(module)].split(".")
            layer_name = ".".join(parts[: max(0, len(parts) - spec.layer_up)])
            layer = model.get_submodule(layer_name)
            found = {}
            for what in ("out_proj", "residual", "post_norm", "block_output", "attn_norm", "ffn_norm", "value_proj"):
                path = getattr(spec, what)
                if path is None:
                    continue
                path = path.path if isinstance(path, NormSpec) else path
                try:
                    found[what] = layer.get_submodule(path)
                except AttributeError:
                    raise ValueError(
                        f"{type(module).__name__}'s MixingSpec says its layer ({type(layer).__name__} "
                        f"{layer_name!r}) has {what} at {path!r}, but it has no such submodule: fix "
                        "olas_utils.capture.mixing_specs.MIXING_SPECS for this architecture"
                    ) from None
            if "attn_norm" in found and getattr(found["attn_norm"], "bias", None) is not None:
                raise ValueError(f"{type(module).__name__}: an attention-output norm with a shift is not supported")
            self.sites[id(module)] = LayerSite(len(self.sites), module, layer, spec, found)

    def site(self, attention: torch.nn.Module) -> LayerSite:
        """The site of an attention module.

        Raises:
            RuntimeError: for a module without a spec.
        """
        try:
            return self.sites[id(attention)]
        except KeyError:
            raise RuntimeError(f"{type(attention).__name__} has no MixingSpec") from None

    def install(self) -> None:
        """Register the forward hooks (once per site)."""
        for site in self.sites.values():
            m = site.modules
            self._pre(m["residual"], lambda p, s, x: p.residual(s, x), site)
            if "block_output" in m:
                self._pre(m["block_output"], lambda p, s, y: p.block_output(s, y), site)
            for what, fn in (
                ("value_proj", lambda p, s, inp, out: p.values(s, out)),
                ("attn_norm", lambda p, s, inp, out: p.attn_norm(s, inp)),
                ("post_norm", lambda p, s, inp, out: p.post_norm(s, inp, out)),
                ("ffn_norm", lambda p, s, inp, out: p.ffn_norm(s, inp)),
            ):
                if what in m:
                    self._post(m[what], fn, site)

    def _pre(self, module, fn, site) -> None:
        def hook(mod, args, kwargs):
            p = self.active()
            if p is not None:
                fn(p, site, _first_input(args, kwargs))

        self._handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def _post(self, module, fn, site) -> None:
        def hook(mod, args, kwargs, output):
            p = self.active()
            if p is not None:
                fn(p, site, _first_input(args, kwargs), output[0] if isinstance(output, tuple) else output)

        self._handles.append(module.register_forward_hook(hook, with_kwargs=True))

    def remove(self) -> None:
        """Remove every hook."""
        for h in self._handles:
            h.remove()
        self._handles.clear()


@dataclass
class _Scratch:
    residual: torch.Tensor | None = None
    values: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    heads: torch.Tensor | None = None
    attn_norm: LinearisedNorm | None = None
    globenc: torch.Tensor | None = None


@dataclass
class MixingPass:
    """The mixing state of one forward pass: per-method accumulators fed layer by layer.

    Args:
        plan: ``{method: (highest order, bare key wanted)}`` (:func:`olas_utils.maths.mixing.mixing_plan`).
        num_layers: N.
        valid: ``(B, T)`` bool, True at real tokens.
        keep_layers: keep each method's raw per-layer matrices.
        reconstruct: keep, per layer, the block output rebuilt from the decomposition
            (:attr:`reconstructions`).

    Attributes:
        accumulators: ``{method: MixingAccumulator}``.
        reconstructions: per layer (in order) ``{"output": Σ_j T_i(x_j) + b_i}`` (post-LN also
            ``"pre_norm_sum"``), ``(B, T, d)`` each; empty unless ``reconstruct``.
    """

    plan: dict[str, tuple[int, bool]]
    num_layers: int
    valid: torch.Tensor
    keep_layers: bool = False
    reconstruct: bool = False
    accumulators: dict[str, MixingAccumulator] = field(default_factory=dict)
    reconstructions: list[dict[str, torch.Tensor]] = field(default_factory=list)
    _scratch: dict[int, _Scratch] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.accumulators = {
            m: MixingAccumulator(m, max_order=k, bare=bare, num_layers=self.num_layers, keep_layers=self.keep_layers)
            for m, (k, bare) in self.plan.items()
        }
        self._needs_vectors = self.reconstruct or "alti" in self.plan or "globenc" in self.plan
        self._keep = self.valid[:, :, None] & self.valid[:, None, :]

    def _zero_padding(self, x: torch.Tensor) -> torch.Tensor:
        x = x.detach().float()
        return torch.where(self.valid[:, :, None], x, torch.zeros((), dtype=x.dtype, device=x.device))

    def _state(self, site: LayerSite) -> _Scratch:
        return self._scratch.setdefault(site.index, _Scratch())

    # -- events, in the order a layer produces them ----------------------------------------
    def residual(self, site: LayerSite, x: torch.Tensor) -> None:
        """The residual stream entering the layer, ``(B, T, d)``."""
        self._state(site).residual = self._zero_padding(x)

    def values(self, site: LayerSite, v: torch.Tensor) -> None:
        """The value projection's output ``(B, T, KV·dh)`` (``"hook"`` path)."""
        self._state(site).values = v.detach().float()

    def attention(self, site: LayerSite, weights: torch.Tensor, values: torch.Tensor | None = None) -> None:
        """The layer's ``(B, H, T, T)`` attention and ``(B, KV, T, dh)`` values (None: from
        :meth:`values`): head outputs, then the value norms, folded at once."""
        st = self._state(site)
        w = torch.where(self._keep[:, None], weights.detach().float(), torch.zeros((), device=weights.device))
        out_proj = site.modules["out_proj"]
        if values is None:
            v, st.values = st.values, None
            if v is None:
                raise RuntimeError(f"the value projection of {type(site.attention).__name__} did not run before it")
            dh = out_proj.weight.shape[1] // w.shape[1]
            values = v.reshape(v.shape[0], v.shape[1], -1, dh).transpose(1, 2)
        values = values.detach().float()  # zero at padding, so are the head outputs
        values = torch.where(self.valid[:, None, :, None], values, torch.zeros((), device=values.device))
        heads = head_outputs(values, out_proj.weight, blocks=site.head_blocks(values.shape[1], values.shape[-1]))
        if "valuenorm" in self.accumulators:
            self.accumulators["valuenorm"].add_layer(value_norms(w, heads), self.valid)
        if self._needs_vectors:
            st.weights, st.heads = w, heads

    def attn_norm(self, site: LayerSite, a: torch.Tensor) -> None:
        """The input of the norm on the attention output (Gemma 3): its per-position rms."""
        self._state(site).attn_norm = site.norm("attn_norm", a.detach().float())

    def post_norm(self, site: LayerSite, s: torch.Tensor, y: torch.Tensor) -> None:
        """Post-LN: the norm's real input ``s`` and output ``y``: ALTI (and GlobEnc's first part)."""
        self._finish(site, self._zero_padding(y), site.norm("post_norm", s.detach().float()))

    def block_output(self, site: LayerSite, y: torch.Tensor) -> None:
        """Pre-norm: ``y = x + attention output``: ALTI."""
        self._finish(site, self._zero_padding(y), None)

    def _finish(self, site: LayerSite, y: torch.Tensor, post: LinearisedNorm | None) -> None:
        st = self._state(site)
        if not self._needs_vectors:
            return
        if st.weights is None or st.residual is None:
            raise RuntimeError(
                f"layer {site.index} ({type(site.layer).__name__}): the block output arrived before its "
                "residual input or attention: the MixingSpec does not fit this architecture"
            )
        bias = getattr(site.modules["out_proj"], "bias", None)
        shift = getattr(site.modules["post_norm"], "bias", None) if post is not None else None
        want_globenc = "globenc" in self.plan
        ffn_gain = None
        if want_globenc:
            ffn_gain, _ = _norm_parts(site.modules["ffn_norm"], site.spec.ffn_norm)
            ffn_gain = torch.ones(y.shape[-1], device=y.device) if ffn_gain is None else ffn_gain
        res = layer_mixing(
            st.weights,
            st.heads,
            st.residual,
            y,
            attn_norm=st.attn_norm,
            post_norm=post,
            out_bias=None if bias is None else bias.detach().float(),
            shift=None if shift is None else shift.detach().float(),
            alti="alti" in self.plan,
            ffn_gain=ffn_gain,
            reconstruct=self.reconstruct,
            overwrite=True,
        )
        st.weights = st.heads = st.residual = st.attn_norm = None
        if res.alti is not None:
            self.accumulators["alti"].add_layer(res.alti, self.valid)
        if self.reconstruct:
            rec = {"output": res.reconstruction}
            if res.pre_norm_sum is not None:
                rec["pre_norm_sum"] = res.pre_norm_sum
            self.reconstructions.append(rec)
        st.globenc = res.globenc
        if not want_globenc:
            self._scratch.pop(site.index, None)

    def ffn_norm(self, site: LayerSite, s2: torch.Tensor) -> None:
        """Post-LN: the real input of the norm after the feed-forward block: GlobEnc, folded."""
        st = self._scratch.pop(site.index, None)
        if "globenc" not in self.plan:
            return
        if st is None or st.globenc is None:
            raise RuntimeError(f"layer {site.index}: the feed-forward norm ran before the attention block's norm")
        _, eps = _norm_parts(site.modules["ffn_norm"], site.spec.ffn_norm)
        inv = inverse_scale(s2.detach().float(), eps, centered=site.spec.ffn_norm.centered)
        self.accumulators["globenc"].add_layer(st.globenc * inv[:, :, None], self.valid)

    def check_complete(self) -> None:
        """Raise ``RuntimeError`` unless every method received all N layers."""
        for m, acc in self.accumulators.items():
            if acc.n_added != self.num_layers:
                raise RuntimeError(
                    f"{m}: {acc.n_added} of {self.num_layers} layers arrived; the hooks of "
                    "olas_utils.capture.mixing_specs.MIXING_SPECS do not fit this model's forward pass"
                )
