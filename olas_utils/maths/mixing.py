"""Context-mixing baselines of one layer as pure tensor functions — value norms (Kobayashi et al.
2020), ALTI (Ferrando et al. 2022), GlobEnc (Modarressi et al. 2022) — and their streaming
aggregation over layers by order (the OLA recurrence), rollout or product.

No model, no hooks: :mod:`olas_utils.capture.mixing_hooks` reads the tensors off a forward pass and
calls these functions one layer at a time. Shapes: ``B`` batch, ``H`` query heads, ``KV`` value
heads, ``T`` tokens (query ``i``, key ``j``), ``d`` hidden size, ``dh`` head size. Every
function works in the dtype it is given (the capture passes float32).

Per layer, with ``α^h`` the post-softmax attention of head ``h`` and
``f^h(x) = (x W_V^h + b_V^h) W_O^h`` (``x`` the input the value projection sees: the hidden
state for post-LN models, the normed hidden state for pre-norm ones; grouped-query attention:
head ``h`` reads value head ``h // (H / KV)``, as the model does):

``valuenorm`` (Kobayashi et al., *Attention is Not Only a Weight: Analyzing Transformers with
Vector Norms*, EMNLP 2020, eq. 5 summed over heads):
    ``N_ij = ‖Σ_h α^h_ij f^h(x_j)‖₂`` (units of the hidden state). Computed from the per-token
    head outputs ``F^h_j = f^h(x_j)`` (``T·d²`` per layer) and their per-token Gram matrix
    ``G_j = [⟨F^h_j, F^g_j⟩]_{hg}``: ``N_ij² = Σ_{h,g} α^h_ij α^g_ij G_j^{hg}``; the
    ``(T, T, d)`` tensor of one head is never formed (:func:`value_norms`).
``alti`` (Ferrando, Gállego & Costa-jussà, *Measuring the Mixing of Contextual Information in
the Transformer*, EMNLP 2022, §2–3):
    ``T_i(x_j) = P_i(1[i=j]·x_j + A_i(Σ_h α^h_ij f^h(x_j)))`` where ``x_j`` is the residual
    stream entering the layer, ``A_i`` an RMSNorm applied to the attention output before the
    residual add (Gemma 3's ``post_attention_layernorm``) and ``P_i`` a layer norm applied after
    it (post-LN: BERT, MPNet), each linearised with position ``i``'s actual statistics
    (:class:`LinearisedNorm`: centring if the norm centres, division by the real σ_i or rms_i of
    its real input, times its gain); absent norms are the identity. The block output is then
    ``y_i = Σ_j T_i(x_j) + b_i`` with ``b_i = P_i(A_i(b_O)) + β`` (output-projection bias and
    the norm's shift, attributed to no token: :func:`bias_term`). Contributions
    ``c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)`` (:func:`alti_from_vectors`), rows normalised to
    sum 1. ``T_i(x_j)`` is a ``(T, T, d)`` tensor summed over heads (the L1 distance has no Gram
    shortcut); :func:`layer_mixing` builds it a block of query rows at a time.
``globenc`` (Modarressi, Fayyaz, Yaghoobzadeh & Pilehvar, *GlobEnc: Quantifying Global Token
Attribution by Incorporating the Whole Encoder Layer in Transformers*, NAACL 2022, §3):
    post-LN encoders only. ``‖P2_i(T_i(x_j))‖₂`` where ``P2_i`` is the second layer norm (after
    the feed-forward block and its residual) linearised with position ``i``'s actual σ of its
    real input — faithful to the paper's "whole encoder layer" except the feed-forward
    network, which GlobEnc does not decompose either (its output, like the biases, is
    attributed to no token). :func:`globenc_from_vectors` gives it up to the per-row factor
    ``1/σ2_i``, applied once the second norm has run.

Why per-layer matrices are row-normalised before aggregation (:func:`row_normalise`): raw value
norms and L2 attributions are in units of the hidden state, whose scale differs from layer to
layer (and model to model) by orders of magnitude; normalising each row to sum 1 makes every
layer's matrix row-stochastic like attention, so products weigh every layer alike, order-k
averages over layer subsets mean the same thing as for OLA, and the rollout's ``+ I`` keeps the
meaning it has for attention. ALTI normalises its rows by definition. The raw matrices are
available through :class:`MixingAccumulator` (``keep_layers``) and
:func:`olas_utils.extract.mixing_layers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch

from olas_utils.maths.ola import OrderAccumulator, check_orders
from olas_utils.vocabulary import KEY_METHODS, MapKey

__all__ = [
    "LinearisedNorm",
    "LayerMixing",
    "MixingAccumulator",
    "alti_from_vectors",
    "bias_term",
    "contribution_vectors",
    "globenc_from_vectors",
    "head_outputs",
    "head_weight_blocks",
    "inverse_scale",
    "layer_mixing",
    "mixing_plan",
    "row_normalise",
    "value_norms",
]

#: Query rows of one block of ``T_i(x_j)`` vectors (``B × rows × T × d``) built at a time by
#: :func:`layer_mixing`: blocks of 16 rows were measured fastest on one CPU thread (8 sentences
#: × 63 tokens × 768: 68 ms a layer, against 75 ms for 5 rows and 91 ms for all 63 at once).
BLOCK_ROWS = 16
#: The most elements one block may hold (2^24 float32 = 64 MiB); long inputs get fewer rows.
BLOCK_ELEMENTS = 2**24


def head_weight_blocks(out_weight: torch.Tensor, kv: int, dh: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The output projection's weight cut per value head, as :func:`head_outputs` multiplies it.

    Args:
        out_weight: ``(d, H·dh)`` weight of the output projection (``nn.Linear.weight``).
        kv: value heads ``KV``; dh: head size.
        dtype: of the result (default: ``out_weight``'s).

    Returns:
        ``(KV, dh, g·d)`` contiguous, ``g = H / KV``: block ``k`` maps a value vector of value
        head ``k`` to the ``g`` query heads that read it, side by side (``repeat_kv``'s order).

    Raises:
        ValueError: if the input size is not a multiple of ``dh`` or ``H`` not a multiple of ``KV``.
    """
    d, inner = out_weight.shape
    if inner % dh:
        raise ValueError(f"output projection takes {inner} inputs, not a multiple of the head size {dh}")
    h = inner // dh
    if h % kv:
        raise ValueError(f"{h} query heads are not a multiple of {kv} value heads")
    w = out_weight if dtype is None else out_weight.to(dtype)
    return w.reshape(d, kv, h // kv, dh).permute(1, 3, 2, 0).reshape(kv, dh, (h // kv) * d).contiguous()


def head_outputs(values: torch.Tensor, out_weight: torch.Tensor, *, blocks: torch.Tensor | None = None) -> torch.Tensor:
    """Every head's output vector per token, ``F^h_j = v^h_j W_O^h`` (Kobayashi et al. 2020's
    ``f^h(x_j)``, the value bias included in ``v``).

    Args:
        values: ``(B, KV, T, dh)`` value vectors ``x W_V + b_V`` as the attention receives them
            (``KV`` value heads; ``KV = H`` without grouped-query attention).
        out_weight: ``(d, H·dh)`` weight of the output projection (``nn.Linear.weight``); its
            input columns ``h·dh .. (h+1)·dh`` belong to head ``h``.
        blocks: :func:`head_weight_blocks` of ``out_weight`` in ``values``' dtype, if the
            caller keeps them between passes (None: cut here).

    Returns:
        ``(B, T, H, d)`` contiguous (token-major: each token's ``H × d`` head matrix is
        contiguous): head ``h`` uses value head ``h // (H / KV)`` (``repeat_kv``'s order). One
        matrix product per value head, written in place into the token-major result; cost
        ``B·T·H·dh·d``.

    Raises:
        ValueError: if ``out_weight``'s input size is not a multiple of ``dh`` or the number of
            query heads is not a multiple of ``KV``.
    """
    b, kv, t, dh = values.shape
    d, inner = out_weight.shape
    w = head_weight_blocks(out_weight, kv, dh, values.dtype) if blocks is None else blocks
    h = inner // dh
    out = torch.empty(b * t, kv, w.shape[2], dtype=values.dtype, device=values.device)
    for k in range(kv):  # (B·T, dh) @ (dh, g·d) into the rows' k-th slot (a strided out, no copy)
        torch.mm(values[:, k].reshape(b * t, dh), w[k], out=out[:, k])
    return out.view(b, t, h, d)


def value_norms(weights: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    """Kobayashi et al. (2020)'s norms ``N_ij = ‖Σ_h α^h_ij F^h_j‖₂`` through the per-token head
    Gram matrix (no ``(T, T, d)`` tensor).

    Args:
        weights: ``(B, H, T, T)`` attention (zero where a query may not look).
        heads: ``(B, T, H, d)`` head outputs :func:`head_outputs`.

    Returns:
        ``(B, T, T)``, non-negative, in the units of the hidden state. Cost ``B·T·H²·d`` for the
        Gram matrices and ``B·T²·H²`` for the quadratic forms.
    """
    return _quadratic(weights, heads @ heads.transpose(-1, -2)).clamp_min(0).sqrt()


def _quadratic(weights: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """``Σ_{h,g} α^h_ij α^g_ij gram_j^{hg}``: ``(B, H, T, T)``, ``(B, T, H, H)`` → ``(B, T, T)``."""
    mixed = torch.einsum("bhij,bjhg->bgij", weights, gram)  # Σ_h α^h_ij gram_j^{hg}
    return mixed.mul_(weights).sum(1)


def inverse_scale(inputs: torch.Tensor, eps: float, *, centered: bool) -> torch.Tensor:
    """``1/σ_i`` (layer norm: ``σ_i = sqrt(var(s_i) + eps)``, biased variance) or ``1/rms_i``
    (RMSNorm: ``sqrt(mean(s_i²) + eps)``) of a norm's actual input, per position.

    Args:
        inputs: ``(B, T, d)`` what the norm received.
        eps: the norm's epsilon.
        centered: layer norm (True) or RMSNorm (False).

    Returns:
        ``(B, T)``.
    """
    s = inputs - inputs.mean(-1, keepdim=True) if centered else inputs
    return torch.rsqrt(s.pow(2).mean(-1) + eps)


@dataclass(frozen=True)
class LinearisedNorm:
    """A layer norm or RMSNorm frozen at each position's actual statistics: the linear map
    ``z ↦ gain ⊙ (z − mean(z)) · inv_scale_i`` (``centered``) or ``z ↦ gain ⊙ z · inv_scale_i``,
    applied to every vector summed into position ``i``'s input. The sum of the images is the
    norm's real output minus its shift (``β``), exactly.

    Attributes:
        gain: ``(d,)`` the norm's effective gain (``γ``; Gemma 3's RMSNorm: ``1 + weight``).
        inv_scale: ``(B, T)`` :func:`inverse_scale` of the norm's real input.
        centered: whether the norm subtracts the mean (layer norm) or not (RMSNorm).
    """

    gain: torch.Tensor
    inv_scale: torch.Tensor
    centered: bool = True

    def transform(self, z: torch.Tensor) -> torch.Tensor:
        """The position-independent part, ``gain ⊙ (z − mean(z))`` (or ``gain ⊙ z``), on the last dim."""
        if self.centered:
            z = z - z.mean(-1, keepdim=True)
        return z * self.gain

    def __call__(self, z: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Apply to ``z`` of shape ``(B, R, ..., d)`` whose dim 1 holds the query positions
        ``rows`` (so ``inv_scale[:, rows]`` matches it)."""
        scale = self.inv_scale[:, rows]
        return self.transform(z) * scale.reshape(scale.shape + (1,) * (z.dim() - 2))


def contribution_vectors(
    weights: torch.Tensor,
    heads: torch.Tensor,
    residual: torch.Tensor,
    rows: slice,
    *,
    attn_norm: LinearisedNorm | None = None,
    post_norm: LinearisedNorm | None = None,
) -> torch.Tensor:
    """ALTI's transformed vectors ``T_i(x_j) = P_i(1[i=j]·x_j + A_i(Σ_h α^h_ij F^h_j))`` for the
    query positions ``rows`` (Ferrando et al. 2022, eq. 6–8; module docstring).

    Args:
        weights: ``(B, H, T, T)`` attention.
        heads: ``(B, T, H, d)`` :func:`head_outputs`.
        residual: ``(B, T, d)`` the residual stream ``x`` entering the layer.
        rows: a ``slice(start, stop)`` of query positions.
        attn_norm: ``A``, a norm on the attention output before the residual add (Gemma 3).
        post_norm: ``P``, a layer norm after the residual add (post-LN models).

    Returns:
        ``(B, R, T, d)`` with ``R`` the number of rows. Cost ``B·R·T·H·d``.
    """
    start, stop, _ = rows.indices(weights.shape[-1])
    vec = torch.einsum("bhij,bjhd->bijd", weights[:, :, start:stop], heads)
    if attn_norm is not None:
        vec = attn_norm(vec, slice(start, stop))
    r = torch.arange(stop - start, device=vec.device)
    vec[:, r, r + start] += residual[:, start:stop]
    return post_norm(vec, slice(start, stop)) if post_norm is not None else vec


def bias_term(
    out_bias: torch.Tensor | None,
    shape: tuple[int, int, int],
    *,
    attn_norm: LinearisedNorm | None = None,
    post_norm: LinearisedNorm | None = None,
    shift: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The part of the block output that ALTI attributes to no token,
    ``b_i = P_i(A_i(b_O)) + β``, so that ``y_i = Σ_j T_i(x_j) + b_i``.

    Args:
        out_bias: ``(d,)`` the output projection's bias, or None.
        shape: ``(B, T, d)``.
        attn_norm, post_norm: as in :func:`contribution_vectors`.
        shift: ``(d,)`` the post norm's shift ``β``, or None.
        dtype, device: of the result.

    Returns:
        ``(B, T, d)``.
    """
    b = torch.zeros(shape, dtype=dtype, device=device)
    if out_bias is not None:
        b = b + out_bias.to(dtype)
        if attn_norm is not None:
            b = attn_norm(b)
        if post_norm is not None:
            b = post_norm(b)
    if shift is not None:
        b = b + shift.to(dtype)
    return b


def alti_from_vectors(vectors: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """ALTI's contributions ``c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁)`` (Ferrando et al. 2022,
    eq. 10), before row normalisation.

    Args:
        vectors: ``(B, R, T, d)`` :func:`contribution_vectors` of ``R`` query rows.
        outputs: ``(B, R, d)`` the real block outputs ``y_i`` of those rows.

    Returns:
        ``(B, R, T)``, non-negative, in units of the hidden state's L1 norm.
    """
    dist = (outputs[:, :, None, :] - vectors).abs().sum(-1)
    return (outputs.abs().sum(-1)[:, :, None] - dist).clamp_min(0)


def globenc_from_vectors(vectors: torch.Tensor, ffn_gain: torch.Tensor) -> torch.Tensor:
    """GlobEnc's norms ``‖P2_i(T_i(x_j))‖₂`` up to the factor ``1/σ2_i`` of the second layer norm
    (which needs that norm's real input, known only after the feed-forward block).

    Args:
        vectors: ``(B, R, T, d)`` post-LN :func:`contribution_vectors` (first norm applied).
        ffn_gain: ``(d,)`` ``γ`` of the layer norm after the feed-forward block.

    Returns:
        ``(B, R, T)``; multiply row ``i`` by ``1/σ2_i`` (:func:`inverse_scale`) for the norms.
    """
    return ((vectors - vectors.mean(-1, keepdim=True)) * ffn_gain).norm(dim=-1)


@dataclass
class LayerMixing:
    """What :func:`layer_mixing` computes for one layer (each ``(B, T, T)`` or None).

    Attributes:
        alti: raw ALTI contributions (rows not yet normalised).
        globenc: GlobEnc norms without the ``1/σ2_i`` factor (:func:`globenc_from_vectors`).
        reconstruction: ``(B, T, d)`` ``Σ_j T_i(x_j) + b_i``, the block output rebuilt from the
            decomposition (the real one is ``y``), when asked for.
        pre_norm_sum: ``(B, T, d)`` post-LN only: ``x_i + A_i(Σ_j Σ_h α^h_ij F^h_j) + b_O``, the
            post norm's input rebuilt from the weights and head outputs, when asked for.
    """

    alti: torch.Tensor | None = None
    globenc: torch.Tensor | None = None
    reconstruction: torch.Tensor | None = None
    pre_norm_sum: torch.Tensor | None = None


def layer_mixing(
    weights: torch.Tensor,
    heads: torch.Tensor,
    residual: torch.Tensor,
    outputs: torch.Tensor,
    *,
    attn_norm: LinearisedNorm | None = None,
    post_norm: LinearisedNorm | None = None,
    out_bias: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    alti: bool = True,
    ffn_gain: torch.Tensor | None = None,
    reconstruct: bool = False,
    block_elements: int = BLOCK_ELEMENTS,
    overwrite: bool = False,
    fused: bool | None = None,
) -> LayerMixing:
    """One layer's ALTI contributions (and GlobEnc norms), streaming: the ``T_i(x_j)`` vectors
    exist a block of query rows at a time (at most :data:`BLOCK_ROWS` rows and ``block_elements``
    values, in one buffer reused by every block), and only for the keys those rows reach.

    Equal to :func:`contribution_vectors` followed by :func:`alti_from_vectors` /
    :func:`globenc_from_vectors` (the definitions), but with the norms folded into the head
    outputs first: both norms are linear per position, so with ``κ_i = a_i·p_i`` (the
    attention-output and post norms' ``1/rms_i``, ``1/σ_i``; 1 when absent),
    ``G^h_j = P(A(F^h_j))`` and ``r_i = P(x_i)/a_i`` (gain and centring only, no scale, applied
    in place), ``T_i(x_j) = κ_i·V_ij`` with ``V_ij = Σ_h α^h_ij G^h_j + 1[i=j]·r_i``. ALTI's
    distance is then ``κ_i·‖y_i/κ_i − V_ij‖₁`` (one matrix product and three in-place passes over
    the block), and GlobEnc's norm ``κ_i·‖γ2 ⊙ centre(V_ij)‖₂`` follows from the per-token head
    Gram matrix of ``γ2 ⊙ centre(G)`` plus a diagonal term (like :func:`value_norms`: no block).

    Args:
        weights: ``(B, H, T, T)`` attention, zero where a query may not look (padding, future,
            outside a sliding window).
        heads: ``(B, T, H, d)`` :func:`head_outputs`, zero at padding.
        residual: ``(B, T, d)`` the residual stream entering the layer, zero at padding.
        outputs: ``(B, T, d)`` the real block output ``y`` (post-LN: the norm's output).
        attn_norm, post_norm: the linearised norms (:func:`contribution_vectors`).
        out_bias, shift: ``b_O`` and the post norm's ``β`` (:func:`bias_term`).
        alti: compute ALTI.
        ffn_gain: ``γ`` of the norm after the feed-forward block: compute GlobEnc (post-LN).
        reconstruct: also rebuild ``Σ_j T_i(x_j) + b_i`` from the streamed blocks (and the post
            norm's input from the weights and head outputs) to check the decomposition.
        block_elements: the block budget.
        overwrite: transform ``heads`` in place (it is garbage afterwards) instead of a copy:
            saves one ``(B, T, H, d)`` tensor and its allocation.
        fused: ALTI through :func:`olas_utils.maths.alti_kernel.alti_contributions` (one
            compiled loop, no block in memory; the reconstruction then by one einsum) instead of
            the blocked torch loop. None: fused on CPU, blocked elsewhere. The two agree to
            float rounding (``tests/core/test_mixing_fused.py`` states the tolerance).

    Returns:
        A :class:`LayerMixing`. ALTI entries are zero where ``i ≠ j`` and no head of query ``i``
        attends to ``j`` (so rounding cannot leak weight into the causal future).
    """
    b, t, d = residual.shape
    ones = torch.ones(b, t, dtype=residual.dtype, device=residual.device)
    a_scale = attn_norm.inv_scale if attn_norm is not None else ones
    kappa = a_scale * (post_norm.inv_scale if post_norm is not None else ones)  # (B, T)
    pre_sum = None
    if reconstruct and post_norm is not None:  # the post norm's input, from the weights and head outputs
        mixed = torch.einsum("bhij,bjhd->bid", weights, heads)
        mixed = attn_norm(mixed) if attn_norm is not None else mixed
        pre_sum = mixed + residual + (out_bias.to(residual.dtype) if out_bias is not None else 0)
    g = heads if overwrite else heads.clone()
    r = residual
    for norm in (attn_norm, post_norm):  # G = P(A(F)), in place
        if norm is not None:
            if norm.centered:
                g.sub_(g.mean(-1, keepdim=True))
            g.mul_(norm.gain)
    if post_norm is not None:
        r = post_norm.transform(r)
    r = r / a_scale[..., None]
    out = LayerMixing(pre_norm_sum=pre_sum)
    if fused is None:
        fused = residual.device.type == "cpu"
    if fused and (alti or reconstruct):
        y_scaled = outputs / kappa[..., None]
        if alti:
            from olas_utils.maths.alti_kernel import alti_contributions

            out.alti = alti_contributions(weights, g, r, y_scaled, outputs.abs().sum(-1), kappa)
        if reconstruct:  # Σ_j T_i(x_j) = κ_i·(Σ_j Σ_h α^h_ij G^h_j + r_i)
            rebuilt = (torch.einsum("bhij,bjhd->bid", weights, g) + r) * kappa[..., None]
    elif alti or reconstruct:
        reach = (weights > 0).any(1) | torch.eye(t, dtype=torch.bool, device=weights.device)
        out.alti = torch.zeros(b, t, t, dtype=residual.dtype, device=residual.device) if alti else None
        rebuilt = torch.zeros_like(residual)
        y_scaled = outputs / kappa[..., None]
        y_norm = outputs.abs().sum(-1)
        # a causal block reaches only the keys up to its last row
        step = max(1, min(BLOCK_ROWS, block_elements // max(1, b * t * d)))
        buf = torch.empty(b * t * min(step, t) * d, dtype=residual.dtype, device=residual.device)
        for start in range(0, t, step):
            stop = min(t, start + step)
            seen = reach[:, start:stop].any(0).any(0).nonzero()
            c0, c1 = int(seen[0]), int(seen[-1]) + 1  # the diagonal is reached: c0 <= start, c1 >= stop
            w_keys = weights[:, :, start:stop, c0:c1].permute(0, 3, 2, 1).contiguous()  # (B, C, R, H)
            vec = buf[: b * (c1 - c0) * (stop - start) * d].view(b, c1 - c0, stop - start, d)
            for k in range(b):  # per sentence, so that g's key slice needs no copy
                torch.matmul(w_keys[k], g[k, c0:c1], out=vec[k])  # one (R × H)·(H × d) product per key
            i = torch.arange(start, stop, device=vec.device)
            vec[:, i - c0, i - start] += r[:, start:stop]
            if reconstruct:
                rebuilt[:, start:stop] = vec.sum(1) * kappa[:, start:stop, None]
            if alti:
                dist = vec.sub_(y_scaled[:, None, start:stop]).abs_().sum(-1).transpose(1, 2)  # (B, R, C)
                c = (y_norm[:, start:stop, None] - kappa[:, start:stop, None] * dist).clamp_min(0)
                out.alti[:, start:stop, c0:c1] = c * reach[:, start:stop, c0:c1]
        del buf
    if reconstruct:  # the layer's output rebuilt from its per-key terms, either path
        out.reconstruction = rebuilt + bias_term(
            out_bias,
            (b, t, d),
            attn_norm=attn_norm,
            post_norm=post_norm,
            shift=shift,
            dtype=residual.dtype,
            device=residual.device,
        )
    if ffn_gain is not None:
        g2 = g.sub_(g.mean(-1, keepdim=True)).mul_(ffn_gain)  # γ2 ⊙ centre(G), in place: g is done with
        r2 = (r - r.mean(-1, keepdim=True)) * ffn_gain
        sq = _quadratic(weights, g2 @ g2.transpose(-1, -2))
        diag = weights.diagonal(dim1=2, dim2=3)  # (B, H, T): α^h_ii
        cross = torch.linalg.vecdot(g2, r2[:, :, None]).transpose(1, 2)  # (B, H, T): ⟨G2^h_i, r2_i⟩
        idx = torch.arange(t, device=weights.device)
        sq[:, idx, idx] += 2 * (diag * cross).sum(1) + r2.pow(2).sum(-1)
        out.globenc = sq.clamp_min(0).sqrt() * kappa[:, :, None]
    return out


def row_normalise(matrices: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Rows scaled to sum 1 over the real tokens; rows and columns of padding zero; a row that
    sums to 0 stays 0.

    Args:
        matrices: ``(B, T, T)`` non-negative.
        valid: ``(B, T)`` bool, True at real tokens.

    Returns:
        ``(B, T, T)``.
    """
    keep = valid[:, :, None] & valid[:, None, :]
    m = torch.where(keep, matrices, torch.zeros((), dtype=matrices.dtype, device=matrices.device))
    s = m.sum(-1, keepdim=True)
    return torch.where(s > 0, m / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(m))


def mixing_plan(keys: Iterable[str | MapKey], num_layers: int) -> dict[str, tuple[int, bool]]:
    """What to accumulate for a set of mixing keys.

    Args:
        keys: map keys of mixing methods (``"alti"``, ``"alti:2"``, ``"valuenorm"``,
            ``"globenc:1"``, ...).
        num_layers: N.

    Returns:
        ``{method: (highest order asked, whether the bare key is asked)}``, in order of first
        appearance.

    Raises:
        TypeError: ``keys`` is a single string, not a collection.
        ValueError: a key that is not a mixing key, or an order outside ``0..N``.
    """
    if keys is None:
        raise TypeError(
            "mixing=None: pass () for no context-mixing keys, or a collection such as ('alti', 'valuenorm')"
        )
    if isinstance(keys, (str, bytes, MapKey)):
        raise TypeError(f"mixing must be a collection of keys, e.g. mixing=({str(keys)!r},), got {keys!r}")
    plan: dict[str, tuple[int, bool]] = {}
    for key in keys:
        k = MapKey.parse(key)
        if not k.mixing:
            mixing = sorted(m for m, s in KEY_METHODS.items() if s.mixing)
            raise ValueError(f"{str(k)!r} is not a context-mixing key; mixing keys name one of {mixing}")
        if k.index is not None:
            check_orders([k.index], num_layers)
        top, bare = plan.get(k.method, (0, False))
        plan[k.method] = (max(top, k.index or 0), bare or k.index is None)
    return plan


@dataclass
class MixingAccumulator:
    """Streaming aggregation of one mixing method's per-layer matrices ``M(1..N)``.

    Each raw layer is row-normalised (:func:`row_normalise`) and folded, as it arrives, into the
    OLA recurrence (orders ``0..max_order``: order k is the sum over the ``C(N, k)`` ordered
    products of k distinct layers divided by ``C(N, k)``) and into the bare key's aggregate
    (``KEY_METHODS[method].bare``: ``"rollout"``, ``Π (M(i) + I)``, or ``"product"``,
    ``Π M(i)``, higher layer on the left).

    Args:
        method: ``"valuenorm"``, ``"alti"`` or ``"globenc"``.
        max_order: K, the highest order accumulated.
        bare: also accumulate the bare key's aggregate.
        num_layers: N (checked when reading).
        keep_layers: keep every raw per-layer matrix (:attr:`raw_layers`; N × ``(B, T, T)``).
        dtype: accumulation dtype.
    """

    method: str
    max_order: int = 0
    bare: bool = False
    num_layers: int | None = None
    keep_layers: bool = False
    dtype: torch.dtype = torch.float32
    raw_layers: list[torch.Tensor] = field(default_factory=list, repr=False)
    _orders: OrderAccumulator | None = field(default=None, repr=False)
    _product: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        spec = KEY_METHODS.get(self.method)
        if spec is None or not spec.mixing:
            raise ValueError(f"{self.method!r} is not a context-mixing method")
        self._kind = spec.bare
        self._orders = OrderAccumulator(
            max_order=self.max_order,
            rollout=self.bare and self._kind == "rollout",
            num_layers=self.num_layers,
            dtype=self.dtype,
        )

    @property
    def n_added(self) -> int:
        """Layers folded so far."""
        return self._orders.n_added

    def add_layer(self, raw: torch.Tensor, valid: torch.Tensor) -> None:
        """Fold the next layer's raw ``(B, T, T)`` matrix (``valid``: ``(B, T)`` real tokens)."""
        m = row_normalise(raw.to(self.dtype), valid)
        if self.keep_layers:
            self.raw_layers.append(torch.where(valid[:, :, None] & valid[:, None, :], raw, torch.zeros_like(raw)))
        self._orders.add_layer(m)
        if self.bare and self._kind == "product":
            self._product = m if self._product is None else torch.bmm(m, self._product)

    def order(self, k: int) -> torch.Tensor:
        """The order-k decomposition ``S_k / C(N, k)``, ``(B, T, T)`` (k = 0: the identity).

        Raises:
            ValueError: an order outside ``0..max_order``; RuntimeError: layers missing.
        """
        return self._orders.ola(k)

    def aggregate(self) -> torch.Tensor:
        """The bare key's map: ``Π (M(i) + I)`` or ``Π M(i)``, ``(B, T, T)``.

        Raises:
            ValueError: if it was not accumulated (``bare=False``); RuntimeError: layers missing.
        """
        if not self.bare:
            raise ValueError(f"the bare {self.method!r} map was not accumulated (bare=False)")
        if self._kind == "rollout":
            return self._orders.rollout_map()
        self._orders.ola(0)  # checks that every layer arrived
        return self._product
