"""A DistilBERT token classifier exported to ONNX with int8 weights (per-tensor QDQ: a
``QuantizeLinear`` / ``DequantizeLinear`` pair around every weight), turned back into a
``DistilBertForTokenClassification`` state dict (fp32) and config, read with the ``onnx`` package.

The export keeps the Hugging Face names of the biases and LayerNorms as float initialisers
(``distilbert.transformer.layer.0.attention.q_lin.bias``) and of the two embedding tables as
int8 ones (``<name>_quantized`` with ``<name>_scale`` and ``<name>_zero_point``). Each weight
matrix is an unnamed int8 initialiser (``onnx::MatMul_753_quantized``) that a
``DequantizeLinear`` feeds into one ``MatMul``; the ``MatMul``'s output is named after the
module (``/distilbert/transformer/layer.0/attention/q_lin/MatMul_output_0``), which gives the
parameter's name (``distilbert.transformer.layer.0.attention.q_lin.weight``). The matrix is
stored ``(in, out)`` and is transposed to ``nn.Linear``'s ``(out, in)``. Dequantisation is
ONNX's: ``(q - zero_point) * scale``.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from olas_utils.zoo.errors import ZooError

__all__ = ["onnx_distilbert_state_dict", "onnx_distilbert_config"]

_PREFIX = "distilbert."
_MATMUL_OUT = re.compile(r"^/(.+)/MatMul_output_0$")
_EMBEDDINGS = ("distilbert.embeddings.word_embeddings.weight", "distilbert.embeddings.position_embeddings.weight")


def _dequantise(inits: dict, q: str, scale: str, zero_point: str) -> torch.Tensor:
    from onnx import numpy_helper

    for n in (q, scale, zero_point):
        if n not in inits:
            raise ZooError(f"the ONNX graph has no initialiser {n!r}: this is not a per-tensor int8 QDQ export")
    s = numpy_helper.to_array(inits[scale])
    z = numpy_helper.to_array(inits[zero_point])
    if s.size != 1 or z.size != 1:
        raise ZooError(f"{q}: scale and zero point must be per-tensor (one value each), got {s.shape}, {z.shape}")
    values = numpy_helper.to_array(inits[q]).astype("float32")
    return torch.from_numpy(((values - z.astype("float32")) * s.astype("float32")).copy())


def onnx_distilbert_state_dict(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """Read an int8 QDQ DistilBERT token-classification export into an fp32 state dict.

    Args:
        path: the ``.onnx`` file.

    Returns:
        ``(state_dict, info)``: the ``DistilBertForTokenClassification`` parameters
        (``distilbert.*`` and ``classifier.*``), and ``info`` with ``layer_norm_eps`` (from the
        graph's ``LayerNormalization`` nodes).

    Raises:
        ZooError: if an embedding table or a weight matrix is missing or not per-tensor
            int8, a dequantised matrix does not feed exactly one ``MatMul`` named after its
            module, two matrices claim one name, a bias has no matrix, or shapes disagree.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)

    state: dict[str, torch.Tensor] = {}
    for name, t in inits.items():  # biases and LayerNorms: float, named
        if (name.startswith(_PREFIX) or name.startswith("classifier.")) and t.data_type == onnx.TensorProto.FLOAT:
            if name.endswith("_scale"):
                continue
            state[name] = torch.from_numpy(numpy_helper.to_array(t).astype("float32").copy())
    for name in _EMBEDDINGS:
        state[name] = _dequantise(inits, f"{name}_quantized", f"{name}_scale", f"{name}_zero_point")

    for node in graph.node:
        if node.op_type != "DequantizeLinear" or not node.input[0].startswith("onnx::MatMul_"):
            continue
        nxt = consumers.get(node.output[0], [])
        if len(nxt) != 1 or nxt[0].op_type != "MatMul":
            raise ZooError(f"{path}: the int8 matrix {node.input[0]!r} does not feed exactly one MatMul")
        m = _MATMUL_OUT.match(nxt[0].output[0])
        if m is None:
            raise ZooError(f"{path}: cannot name the MatMul {nxt[0].output[0]!r} fed by {node.input[0]!r}")
        hf = m.group(1).replace("/", ".") + ".weight"
        if hf in state:
            raise ZooError(f"{path}: two int8 matrices are both named {hf!r}")
        w = _dequantise(inits, *node.input[:3]).T.contiguous()
        bias = state.get(hf[: -len(".weight")] + ".bias")
        if bias is None or w.shape[0] != bias.shape[0]:
            raise ZooError(f"{path}: matrix {hf!r} of shape {tuple(w.shape)} has no bias of the same width")
        state[hf] = w

    biases = [k for k in state if k.endswith(".bias") and "layer_norm" not in k and "LayerNorm" not in k]
    lacking = [k for k in biases if k[: -len(".bias")] + ".weight" not in state]
    if lacking:
        raise ZooError(f"{path}: no weight matrix found for {', '.join(lacking[:5])}")
    eps = {a.f for n in graph.node if n.op_type == "LayerNormalization" for a in n.attribute if a.name == "epsilon"}
    if len(eps) != 1 or abs(next(iter(eps)) - 1e-12) > 1e-15:
        # DistilBERT's layer norms have a fixed epsilon of 1e-12 (not a config setting)
        raise ZooError(f"{path}: expected one LayerNorm epsilon of 1e-12 in the graph, found {sorted(eps)}")
    acts = {n.op_type for n in graph.node} & {"Erf", "Tanh", "Relu"}
    if acts != {"Erf"}:
        raise ZooError(f"{path}: expected the exact (Erf) GELU, the graph uses {sorted(acts)}")
    return state, {"layer_norm_eps": float(eps.pop())}


def onnx_distilbert_config(state: dict[str, torch.Tensor], num_heads: int, labels: dict[int, str]):
    """The ``transformers.DistilBertConfig`` that fits a state dict of :func:`onnx_distilbert_state_dict`.

    Args:
        state: the state dict (sizes are read from its shapes).
        num_heads: attention heads per layer (not stored as a tensor in the graph).
        labels: the classifier's tags, id → tag (its ``tag_vocab.json``).

    Raises:
        ZooError: if the hidden size is not divisible by ``num_heads``, or the classifier's
            width differs from the number of tags.
    """
    from transformers import DistilBertConfig

    vocab, dim = state[_EMBEDDINGS[0]].shape
    if dim % num_heads:
        raise ZooError(f"hidden size {dim} is not divisible by num_heads={num_heads}")
    n_labels = int(state["classifier.weight"].shape[0])
    if n_labels != len(labels):
        raise ZooError(f"the classifier has {n_labels} outputs but the tag vocabulary has {len(labels)} tags")
    return DistilBertConfig(
        vocab_size=int(vocab),
        dim=int(dim),
        n_layers=1 + max(int(k.split(".")[3]) for k in state if k.startswith("distilbert.transformer.layer.")),
        n_heads=num_heads,
        hidden_dim=int(state["distilbert.transformer.layer.0.ffn.lin1.bias"].shape[0]),
        max_position_embeddings=int(state[_EMBEDDINGS[1]].shape[0]),
        activation="gelu",
        sinusoidal_pos_embds=False,
        pad_token_id=0,
        id2label={int(i): t for i, t in labels.items()},
        label2id={t: int(i) for i, t in labels.items()},
    )
