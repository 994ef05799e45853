"""A BERT encoder exported to ONNX (as sentence-transformers export it), turned back into a
``BertModel`` state dict and config, read with the ``onnx`` package.

The export names the biases, LayerNorms and embeddings after their PyTorch parameters
(``<prefix>encoder.layer.0.attention.self.query.bias``) but leaves each weight matrix an
unnamed ``MatMul`` input (``onnx::MatMul_470``), stored ``(in, out)``. Each such matrix is
given the name of the named bias that the ``MatMul``'s output is added to next (``.bias`` ->
``.weight``) and transposed to the ``(out, in)`` of ``nn.Linear``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from olas_utils.zoo.errors import ZooError

__all__ = ["onnx_bert_state_dict", "onnx_bert_config"]

_WORD = "embeddings.word_embeddings.weight"


def _prefix(names) -> str:
    hits = [n[: -len(_WORD)] for n in names if n.endswith(_WORD)]
    if len(hits) != 1:
        raise ZooError(
            f"expected one initialiser named '*{_WORD}' in the ONNX graph, found {len(hits)}; this is not a BERT export"
        )
    return hits[0]


def onnx_bert_state_dict(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """Read a BERT ONNX export into a ``BertModel`` state dict (fp32, no pooler).

    Args:
        path: the ``.onnx`` file.

    Returns:
        ``(state_dict, info)``; ``info`` has ``layer_norm_eps`` (from the graph's
        ``LayerNormalization`` nodes) and ``hidden_act`` (``"gelu"`` if the graph uses
        ``Erf``).

    Raises:
        ZooError: if a weight matrix is not followed by an ``Add`` of a named bias, two
            matrices claim the same bias, a bias has no matrix, or shapes disagree.
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    prefix = _prefix(inits)
    consumers: dict[str, list] = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)

    state: dict[str, torch.Tensor] = {}
    for name, t in inits.items():
        if name.startswith(prefix) and not name.startswith(prefix + "pooler."):
            state[name[len(prefix) :]] = torch.from_numpy(numpy_helper.to_array(t).astype("float32").copy())

    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits or node.input[1].startswith(prefix):
            continue
        weight = node.input[1]
        nxt = consumers.get(node.output[0], [])
        biases = [i for n in nxt if n.op_type == "Add" for i in n.input if i.startswith(prefix) and i.endswith(".bias")]
        if len(nxt) != 1 or len(biases) != 1:
            raise ZooError(
                f"{path}: the ONNX weight matrix {weight!r} is not followed by exactly one Add of a "
                f"named bias (next: {[n.op_type for n in nxt]}); cannot name it"
            )
        hf = biases[0][len(prefix) : -len(".bias")] + ".weight"
        if hf in state:
            raise ZooError(f"{path}: two ONNX weight matrices both feed the bias {biases[0]!r}")
        w = torch.from_numpy(numpy_helper.to_array(inits[weight]).astype("float32").T.copy())
        if w.shape[0] != state[hf[: -len(".weight")] + ".bias"].shape[0]:
            raise ZooError(f"{path}: matrix {weight!r} of shape {tuple(w.T.shape)} does not fit bias {biases[0]!r}")
        state[hf] = w

    linear_biases = [k for k in state if k.endswith(".bias") and "LayerNorm" not in k]
    lacking = [k for k in linear_biases if k[: -len(".bias")] + ".weight" not in state]
    if lacking:
        raise ZooError(f"{path}: no weight matrix found for {', '.join(lacking[:5])}")
    eps = {a.f for n in graph.node if n.op_type == "LayerNormalization" for a in n.attribute if a.name == "epsilon"}
    if len(eps) != 1:
        raise ZooError(f"{path}: expected one LayerNorm epsilon in the graph, found {sorted(eps)}")
    acts = {n.op_type for n in graph.node} & {"Erf", "Tanh", "Relu"}
    if acts != {"Erf"}:
        raise ZooError(f"{path}: expected the exact (Erf) GELU, the graph uses {sorted(acts)}")
    return state, {"layer_norm_eps": float(eps.pop()), "hidden_act": "gelu"}


def onnx_bert_config(state: dict[str, torch.Tensor], info: dict, num_heads: int):
    """The ``transformers.BertConfig`` that fits a state dict from :func:`onnx_bert_state_dict`.

    Args:
        state: the state dict (sizes are read from its shapes).
        info: its ``info`` (epsilon, activation).
        num_heads: attention heads per layer (not stored as a tensor in the graph).

    Raises:
        ZooError: if the hidden size is not divisible by ``num_heads``.
    """
    from transformers import BertConfig

    vocab, hidden = state[_WORD].shape
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.layer."))
    if hidden % num_heads:
        raise ZooError(f"hidden size {hidden} is not divisible by num_heads={num_heads}")
    return BertConfig(
        vocab_size=int(vocab),
        hidden_size=int(hidden),
        num_hidden_layers=layers,
        num_attention_heads=num_heads,
        intermediate_size=int(state["encoder.layer.0.intermediate.dense.bias"].shape[0]),
        max_position_embeddings=int(state["embeddings.position_embeddings.weight"].shape[0]),
        type_vocab_size=int(state["embeddings.token_type_embeddings.weight"].shape[0]),
        layer_norm_eps=info["layer_norm_eps"],
        hidden_act=info["hidden_act"],
        pad_token_id=0,
    )
