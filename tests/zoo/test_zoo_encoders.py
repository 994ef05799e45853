"""The three small encoders converted from their own formats (see shared/models.md, "More
bidirectional encoders"), each checked against an independent reference:

* paraphrase-minilm-l3 (ONNX): every layer's hidden states equal ``onnxruntime`` running the
  same ONNX file;
* e5-small (E5S1 4-bit): the header is walked here from the layout in models.md, a few Q4_0
  blocks are decoded element by element and compared with the prepared fp32 matrices; the
  rebuilt tokenizer gives the ids of a SentencePiece model (the ``sentencepiece`` library's
  own Unigram + ``nmt_nfkc`` normaliser) built from the stored pieces and scores;
* clear errors and atomicity for the new formats, and the models listed by ``olas models``.
Sanity (paraphrase margin, random copy fails), capture, batching and word alignment are the
parametrized tests of test_zoo.py, test_extract_real.py and test_align.py.
"""

import dataclasses
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from olas_utils import zoo
from olas_utils.zoo import REGISTRY, HashMismatchError, ZooError

pytestmark = pytest.mark.real_model

SENTENCES = [
    "The café in Zürich opened at 9:30 a.m., didn't it?",
    "Naïve résumé: 3,000.50 dollars -- not $42!",
    "Hello world!",
]


def _source(name: str) -> Path:
    return zoo.check_installed(name)[0]


# --------------------------------------------------------------------------------------
# paraphrase-minilm-l3: ONNX graph vs onnxruntime
# --------------------------------------------------------------------------------------


def test_paraphrase_minilm_l3_hidden_states_equal_onnxruntime(zoo_model):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    graph = onnx.load(str(_source("paraphrase-minilm-l3")))
    # expose the output of every LayerNormalization: embeddings, then 2 per layer (the second
    # one is the layer's output, what hidden_states holds)
    ln_outputs = [n.output[0] for n in graph.graph.node if n.op_type == "LayerNormalization"]
    known = {o.name for o in graph.graph.output}
    for name in ln_outputs:
        if name not in known:
            graph.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(graph.SerializeToString(), opts, providers=["CPUExecutionProvider"])

    lm = zoo_model("paraphrase-minilm-l3")
    enc = lm.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    outs = sess.run(
        ln_outputs,
        {
            "input_ids": enc["input_ids"].numpy().astype(np.int64),
            "attention_mask": enc["attention_mask"].numpy().astype(np.int64),
        },
    )
    ref = [outs[0]] + outs[2::2]
    with torch.no_grad():
        hs = lm.model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True
        ).hidden_states
    assert len(hs) == len(ref) == lm.num_layers + 1 == 4
    for i, (h, r) in enumerate(zip(hs, ref)):
        assert h.shape == r.shape
        diff = float(np.abs(h.numpy() - r).max())
        assert diff <= 1e-5, (i, diff)


def test_onnx_graph_without_bert_names_is_a_clear_error(tmp_path):
    onnx = pytest.importorskip("onnx")
    from olas_utils.zoo.onnx_bert import onnx_bert_state_dict

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])
    w = onnx.numpy_helper.from_array(np.ones((2, 2), np.float32), "onnx::MatMul_1")
    node = onnx.helper.make_node("MatMul", ["x", "onnx::MatMul_1"], ["y"])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])
    path = tmp_path / "g.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y], [w])), str(path))
    with pytest.raises(ZooError, match="not a BERT export"):
        onnx_bert_state_dict(path)


# --------------------------------------------------------------------------------------
# e5-small: an independent walk of the E5S1 file and decode of Q4_0 blocks
# --------------------------------------------------------------------------------------


def _walk_e5s1(path: Path):
    """Header, pieces/scores and tensor directory, read here from the layout of models.md."""
    b = path.read_bytes()
    assert b[:4] == b"E5S1"
    pos = 8  # magic, uint32 version
    hidden, layers, heads, ffn, vocab, max_pos, types = struct.unpack_from("<7i", b, pos)
    pos += 28 + 4 + 4  # + eps, block size
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, pos)
    pos += 20
    (blob_len,) = struct.unpack_from("<Q", b, pos)
    pos += 8
    offs = struct.unpack_from(f"<{n + 1}I", b, pos)
    pos += 4 * (n + 1)
    scores = struct.unpack_from(f"<{n}f", b, pos)
    pos += 4 * n
    blob = b[pos : pos + blob_len]
    pos += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    _, map_len = struct.unpack_from("<iI", b, pos)
    pos += 8 + map_len
    (count,) = struct.unpack_from("<i", b, pos)
    pos += 4
    tensors = {}
    for _ in range(count):
        (ln,) = struct.unpack_from("<H", b, pos)
        name = b[pos + 2 : pos + 2 + ln].decode()
        pos += 2 + ln
        dtype, numel, off, nbytes = struct.unpack_from("<BIQQ", b, pos)
        pos += 1 + 4 + 8 + 8
        tensors[name] = (dtype, numel, off, nbytes)
    return b, dict(hidden=hidden, layers=layers, vocab=vocab, ffn=ffn), pieces, scores, (bos, eos, pad, unk), tensors


@pytest.fixture(scope="module")
def e5_file():
    return _walk_e5s1(_source("e5-small"))


def _decode_block(raw: bytes) -> list[float]:
    """One Q4_0 block, element by element: float16 scale, 32 nibbles (low halves first)."""
    (d,) = struct.unpack("<e", raw[:2])
    out = [0.0] * 32
    for j in range(16):
        byte = raw[2 + j]
        out[j] = ((byte & 0x0F) - 8) * d
        out[j + 16] = ((byte >> 4) - 8) * d
    return out


@pytest.mark.parametrize(
    "src,dst",
    [
        ("emb.word", "embeddings.word_embeddings.weight"),
        ("l0.q.w", "encoder.layer.0.attention.self.query.weight"),
        ("l5.fi.w", "encoder.layer.5.intermediate.dense.weight"),
        ("l11.fo.w", "encoder.layer.11.output.dense.weight"),
    ],
)
def test_e5_dequantised_matrices_equal_a_hand_decode_of_q4_0_blocks(e5_file, src, dst):
    from safetensors import safe_open

    data, hp, _, _, _, tensors = e5_file
    dtype, numel, off, nbytes = tensors[src]
    assert dtype == 1 and nbytes == numel // 32 * 18
    with safe_open(str(zoo.prepare("e5-small") / "model.safetensors"), framework="pt") as fh:
        w = fh.get_tensor(dst)
    assert w.dtype == torch.float32 and w.numel() == numel
    flat = w.reshape(-1)  # stored (out, in), row-major, as nn.Linear keeps it
    nblocks = numel // 32
    for blk in (0, 1, nblocks // 3, nblocks - 1):
        ref = _decode_block(data[off + 18 * blk : off + 18 * (blk + 1)])
        got = flat[32 * blk : 32 * (blk + 1)].tolist()
        assert got == ref, (src, blk)  # exact: a 4-bit integer times a float16 fits in float32
        assert any(v != 0 for v in ref)


def test_e5_float_tensors_are_copied_exactly(e5_file):
    from safetensors import safe_open

    data, _, _, _, _, tensors = e5_file
    with safe_open(str(zoo.prepare("e5-small") / "model.safetensors"), framework="pt") as fh:
        for src, dst in [
            ("emb.ln.w", "embeddings.LayerNorm.weight"),
            ("l3.aln.b", "encoder.layer.3.attention.output.LayerNorm.bias"),
            ("l7.k.b", "encoder.layer.7.attention.self.key.bias"),
        ]:
            dtype, numel, off, nbytes = tensors[src]
            assert dtype != 1 and nbytes == 4 * numel
            ref = np.frombuffer(data[off : off + nbytes], dtype="<f4")
            assert np.array_equal(fh.get_tensor(dst).numpy().reshape(-1), ref)


def _sentencepiece_reference(pieces, scores, special):
    """A SentencePiece Unigram model from the stored pieces and scores, with the library's
    own ``nmt_nfkc`` normaliser (taken from a throwaway model trained with that rule)."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c d e f g h"] * 20),
        model_writer=buf,
        vocab_size=12,
        model_type="unigram",
        normalization_rule_name="nmt_nfkc",
        minloglevel=2,
    )
    donor = pb.ModelProto.FromString(buf.getvalue())
    bos, eos, pad, unk = special
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = unk, bos, eos, pad
    m.normalizer_spec.CopyFrom(donor.normalizer_spec)
    assert m.normalizer_spec.name == "nmt_nfkc" and m.normalizer_spec.precompiled_charsmap
    for i, (p, s) in enumerate(zip(pieces, scores)):
        sp = m.pieces.add()
        sp.piece, sp.score = p, s
        if i == unk:
            sp.type = pb.ModelProto.SentencePiece.UNKNOWN
        elif i in (bos, eos, pad) or p == "<mask>":
            sp.type = pb.ModelProto.SentencePiece.CONTROL
    proc = spm.SentencePieceProcessor()
    proc.LoadFromSerializedProto(m.SerializeToString())
    return proc


def test_e5_tokenizer_equals_sentencepiece_on_english(zoo_model, e5_file):
    _, _, pieces, scores, special, _ = e5_file
    ref = _sentencepiece_reference(pieces, scores, special)
    tok = zoo_model("e5-small").tokenizer
    texts = SENTENCES + [
        "Mr. O'Neil paid $3,000.50 in 2019 (see e-mail); co-op isn't U.S.A.-based...",
        "Crème brûlée, jalapeño & façade: 1st, 2nd, 3rd -- 100% naïve!",
        "query: how much protein should a female eat per day?",
        "The  quick\tbrown fox jumps over 13 lazy dogs [sic] {really}?!",
    ]
    for t in texts:
        expected = [special[0]] + ref.EncodeAsIds(t) + [special[1]]
        assert tok(t)["input_ids"] == expected, (t, tok.tokenize(t), [ref.IdToPiece(i) for i in expected])
    # XLM-R's published ids for this sentence (<s> ▁Hello ▁world ! </s>)
    assert tok("Hello world!")["input_ids"] == [0, 35378, 8999, 38, 2]


def test_e5s1_bad_magic_and_truncation_are_clear_errors(tmp_path):
    from olas_utils.zoo.e5s1 import read_e5s1

    bad = tmp_path / "x.bin"
    bad.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ZooError, match=r"x\.bin is not an E5S1 file"):
        read_e5s1(bad)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(_source("e5-small").read_bytes()[:5000])
    with pytest.raises(ZooError, match=r"cut\.bin: the E5S1 header is truncated"):
        read_e5s1(cut)


@pytest.mark.parametrize("name", ["e5-small", "paraphrase-minilm-l3"])
def test_new_format_hash_mismatch_leaves_nothing(monkeypatch, tmp_path, name):
    e = REGISTRY[name]
    monkeypatch.setitem(REGISTRY, name, dataclasses.replace(e, sha256="0" * 64))
    with pytest.raises(HashMismatchError) as ei:
        zoo.prepare(name, cache_dir=tmp_path)
    assert ei.value.actual == e.sha256 and e.weights_file in ei.value.path
    assert "0" * 64 in str(ei.value) and "--force-reinstall" in str(ei.value)
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_new_encoders_listed_by_olas_models():
    r = subprocess.run(
        [sys.executable, "-m", "olas_utils.ui.cli", "models", "--no-verify"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    status = r.stdout.split("\n\n")[0]  # the status table; the lineage table follows
    rows = {line.split()[0]: line for line in status.splitlines() if line.strip()}
    for name in ("e5-small", "paraphrase-minilm-l3", "splade-tiny", "distilbert-gector"):
        assert name in rows and "encoder" in rows[name], r.stdout


# --------------------------------------------------------------------------------------
# distilbert-gector (int8 QDQ ONNX): weights and tags vs onnxruntime, the tagger sanity check
# --------------------------------------------------------------------------------------


def _gector_session(graph):
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    return ort.InferenceSession(graph.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def test_distilbert_gector_matrices_equal_onnxruntime_dequantised(zoo_model):
    """Every weight matrix of the prepared model equals what onnxruntime's DequantizeLinear
    feeds the MatMul of that module (named here from the MatMul node's own name, not its
    output's), transposed to nn.Linear's (out, in)."""
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(_source("distilbert-gector")))
    feeds = {}  # dequantised tensor name -> HF parameter name
    for node in graph.graph.node:
        if (
            node.op_type == "MatMul"
            and node.input[1].startswith("onnx::MatMul_")
            and node.name.startswith("/distilbert/")
        ):
            module = node.name.strip("/").rsplit("/", 1)[0].replace("/", ".")
            feeds[node.input[1]] = module + ".weight"
    assert len(feeds) == 6 * 6, len(feeds)  # q, k, v, out, lin1, lin2 per layer (the classifier is not in the model)
    for name in feeds:
        graph.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    lm = zoo_model("distilbert-gector")
    enc = lm.tokenizer("Hello world", return_tensors="np")
    outs = _gector_session(graph).run(
        list(feeds), {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask")}
    )
    params = dict(lm.model.named_parameters())
    for hf, ref in zip(feeds.values(), outs):
        mine = params[hf.removeprefix("distilbert.")].detach().numpy()
        assert mine.shape == ref.T.shape, hf
        assert np.array_equal(mine, ref.T), hf


def test_distilbert_gector_tags_agree_with_onnxruntime(zoo_model):
    """The prepared model plus its tag head against onnxruntime running the int8 file (which
    also quantises activations, so not bit-equal): measured on 40 UD English-EWT dev sentences,
    1,187 pieces, tag agreement 0.992; here at least 0.95 on the first 20, and the logits'
    Pearson correlation at least 0.95."""
    onnx = pytest.importorskip("onnx")
    from safetensors.torch import load_file

    from olas_utils.zoo.formats import TAG_HEAD_FILE

    sess = _gector_session(onnx.load(str(_source("distilbert-gector"))))
    lm = zoo_model("distilbert-gector")
    head = load_file(str(Path(lm.source) / TAG_HEAD_FILE))
    mine_all, ref_all = [], []
    from olas_utils.data import load_ud_ewt

    for text in load_ud_ewt("dev")[:20]["text"]:
        enc = lm.tokenizer(text, return_tensors="pt")
        ref = sess.run(None, {k: enc[k].numpy().astype(np.int64) for k in ("input_ids", "attention_mask")})[0][0]
        with torch.no_grad():
            hidden = lm.model(**enc).last_hidden_state[0]
        mine_all.append((hidden @ head["classifier.weight"].T + head["classifier.bias"]).numpy())
        ref_all.append(ref)
    mine, ref = np.concatenate(mine_all), np.concatenate(ref_all)
    agreement = float((mine.argmax(-1) == ref.argmax(-1)).mean())
    corr = float(np.corrcoef(mine.ravel(), ref.ravel())[0, 1])
    assert agreement >= 0.95 and corr >= 0.95, (agreement, corr)


def test_distilbert_gector_sanity_is_the_tagger_check_and_a_random_copy_fails(zoo_model):
    from olas_utils.zoo.controls import random_weights_copy
    from olas_utils.zoo.sanity import TAGGER_AGREEMENT, sanity_check

    lm = zoo_model("distilbert-gector")
    report = sanity_check(lm)
    assert report.metric == "tagger_agreement" and report.passed, report
    assert report.value == 1.0, report.details  # "went" after "have" -> $REPLACE_gone, the rest $KEEP
    bad = sanity_check(random_weights_copy(lm, seed=0))
    assert bad.value < TAGGER_AGREEMENT and not bad.passed, bad


def test_distilbert_gector_tokenizer_does_not_truncate(zoo_model):
    """The export's tokenizer.json truncates at 128 pieces; the prepared one must not (OLAS
    refuses over-long input itself, it never cuts silently)."""
    lm = zoo_model("distilbert-gector")
    assert len(lm.tokenizer("word " * 300)["input_ids"]) == 302


def test_int8_graph_without_distilbert_names_is_a_clear_error(tmp_path):
    onnx = pytest.importorskip("onnx")
    from olas_utils.zoo.onnx_distilbert import onnx_distilbert_state_dict

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])
    w = onnx.numpy_helper.from_array(np.ones((2, 2), np.float32), "onnx::MatMul_1")
    node = onnx.helper.make_node("MatMul", ["x", "onnx::MatMul_1"], ["y"])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])
    path = tmp_path / "g.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y], [w])), str(path))
    with pytest.raises(ZooError, match="not a per-tensor int8 QDQ export"):
        onnx_distilbert_state_dict(path)


# --------------------------------------------------------------------------------------
# embeddinggemma-300m (optional): 25 wheel chunks; tested where it is prepared
# --------------------------------------------------------------------------------------

needs_embeddinggemma = pytest.mark.skipif(
    not zoo.is_prepared("embeddinggemma-300m"),
    reason="optional model not prepared (python -m olas_utils.zoo prepare embeddinggemma-300m)",
)


@needs_embeddinggemma
def test_embeddinggemma_is_a_bidirectional_trained_encoder(zoo_model):
    from olas_utils.zoo.controls import random_weights_copy
    from olas_utils.zoo.sanity import sanity_check

    lm = zoo_model("embeddinggemma-300m")
    assert lm.family == "encoder" and not lm.is_causal and lm.num_layers == 24
    # the multimodal <image_soft_token> (beyond the 262,144-row table) was dropped at preparation
    assert len(lm.tokenizer) == lm.model.config.vocab_size == 262144
    enc = lm.tokenizer(["The cat sat on the mat.", "It rained."], padding=True, return_tensors="pt")
    with torch.no_grad():
        att = lm.model(**enc, output_attentions=True).attentions
    assert len(att) == 24
    # really bidirectional: attention mass above the diagonal in every layer (measured >= 0.2)
    above = [torch.triu(a[0].mean(0), 1).sum(-1).mean().item() for a in att]
    assert min(above) > 0.05, above
    good, bad = sanity_check(lm), sanity_check(random_weights_copy(lm, seed=0))
    assert good.passed and not bad.passed, (good, bad)


def test_tokens_beyond_the_embedding_table_are_dropped(tmp_path):
    import json

    from olas_utils.zoo.formats import drop_tokens_beyond_table

    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 4}))
    added = [{"id": 3, "content": "<pad>", "special": True}, {"id": 4, "content": "<img>", "special": True}]
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": added, "model": {}}))
    (tmp_path / "added_tokens.json").write_text(json.dumps({"<img>": 4}))
    cfg = {
        "image_token": "<img>",
        "pad_token": "<pad>",
        "extra_special_tokens": {"image_token": "<img>"},
        "added_tokens_decoder": {"3": {"content": "<pad>"}, "4": {"content": "<img>"}},
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert drop_tokens_beyond_table(tmp_path) == ["<img>"]
    assert [t["id"] for t in json.loads((tmp_path / "tokenizer.json").read_text())["added_tokens"]] == [3]
    assert json.loads((tmp_path / "added_tokens.json").read_text()) == {}
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert cfg == {
        "pad_token": "<pad>",
        "extra_special_tokens": {},
        "added_tokens_decoder": {"3": {"content": "<pad>"}},
    }
    assert drop_tokens_beyond_table(tmp_path) == []  # nothing left to drop
