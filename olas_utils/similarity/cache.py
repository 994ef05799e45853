"""Cached, resumable extraction of OLA images for the cross-model similarity experiments.

:func:`extract_to_cache` runs :func:`olas_utils.extract.extract_ola` over a corpus batch by
batch, turns every sentence's maps into fixed-size images with the protocol's
pre-processing (:func:`to_image`), and stores them on disk, memory-mappable, committing
progress after every batch. A run killed at any point (exception, Ctrl-C, ``SIGKILL``)
resumes from its last committed batch and ends with arrays bit-for-bit identical to an
uninterrupted run (same machine, same software, same thread settings).

The protocols and the pre-processing are described in :mod:`olas_utils.similarity.images`,
the folder layout in :mod:`olas_utils.similarity.cache_folder`, the manifest in
:mod:`olas_utils.similarity.manifest`; reading is :mod:`olas_utils.similarity.cache_reader`,
multi-process shards :mod:`olas_utils.similarity.shards`.

Commit protocol per batch: write the batch's rows into the memory maps, ``flush`` them
(``msync``), then replace ``progress.json`` atomically (write a temporary file, ``fsync``,
:func:`os.replace`). Rows written after the last commit are simply recomputed on resume.

Importing this module does no work.
"""

from __future__ import annotations

import errno
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from olas_utils.similarity.cache_reader import CachedImages
from olas_utils.similarity.cache_folder import (
    _LENGTHS,
    _MANIFEST,
    _PROGRESS,
    FORMAT_VERSION,
    CacheCorruptError,
    _clear,
    _init,
    _io,
    _locked,
    _read_json,
    _write_json_atomic,
    file_checksums,
    key_filename,
    verify_files,
)
from olas_utils.similarity.images import PREPROCESSING, PROTOCOLS, RESIZE, to_image
from olas_utils.similarity.manifest import (
    CacheMismatchError,
    _canonical,
    _diff,
    _sha256_text,
    _short,
    _versions,
    default_cache_root,
    tokenizer_settings,
)
from olas_utils.similarity.shards import shard_root

__all__ = ["extract_to_cache"]


def _keys(orders: Iterable[int], baselines: Iterable[str]) -> tuple[list[int], bool, list[int], list[str]]:
    """Validate orders and baselines → (orders, rollout, layers, keys)."""
    orders = [int(k) for k in orders]
    if len(set(orders)) != len(orders):
        raise ValueError(f"orders has duplicates: {orders}")
    rollout, layers = False, []
    base = list(baselines)
    if len(set(base)) != len(base):
        raise ValueError(f"baselines has duplicates: {base}")
    for b in base:
        if b == "rollout":
            rollout = True
        elif re.fullmatch(r"layer:-?\d+", str(b)):
            layers.append(int(b.split(":")[1]))
        else:
            raise ValueError(f"unknown baseline {b!r}: use 'rollout' or 'layer:I' (OLA orders go in orders=)")
    keys = [f"ola:{k}" for k in orders] + list(base)
    if not keys:
        raise ValueError("nothing to extract: orders and baselines are both empty")
    return orders, rollout, layers, keys


def _plan(tokenizer, model, chunks: Sequence[Sequence[str]], batch_size: int) -> list[list[int]]:
    from olas_utils.align import tokenize_words
    from olas_utils.extract import length_buckets, max_tokens

    lengths = tokenize_words(tokenizer, chunks, max_length=max_tokens(model, tokenizer)).lengths
    return length_buckets(lengths, batch_size)


def extract_to_cache(
    model_name_or_loaded,
    chunks: Sequence[Sequence[str]],
    *,
    cache_root: str | os.PathLike | None = None,
    orders: Iterable[int] = (1, 2, 3),
    baselines: Iterable[str] = ("rollout", "layer:0", "layer:-1"),
    protocol: str = "paper",
    image_size: int = 50,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
    overwrite: bool = False,
    device: str | torch.device | None = None,
    cache_dir: str | os.PathLike | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    shard: tuple[int, int] | None = None,
) -> CachedImages:
    """Extract OLA images of a corpus into a resumable on-disk cache (or reuse it).

    Batches are fixed by the corpus, tokenizer and ``batch_size`` (chunks bucketed by token
    length, longest first: :func:`olas_utils.extract.length_buckets`) and run one forward
    pass each through :func:`olas_utils.extract.extract_ola`; each sentence's maps become
    images with :func:`to_image`. After each batch the rows are flushed and the progress is
    committed atomically; calling again with the same settings resumes after the last
    committed batch (or returns at once if complete). The protocols and pre-processing
    are described in :mod:`~olas_utils.similarity.images`, the files in
    :mod:`~olas_utils.similarity.cache_folder` and the manifest in
    :mod:`~olas_utils.similarity.manifest`.

    Args:
        model_name_or_loaded: a zoo name / folder / Hugging Face id (loaded with
            :func:`olas_utils.zoo.load_model`) or a :class:`~olas_utils.zoo.LoadedModel`. A
            model whose weights were changed must have ``weights_sha256=None`` (then its
            state dict is hashed).
        chunks: the corpus, lists of words (e.g. :func:`olas_utils.data.corpus.build_chunks`).
        cache_root: the cache folder; default
            ``<cache>/ola/<model>/<protocol>-<settings hash>`` (:func:`default_cache_root`).
        orders: OLA orders, stored as ``"ola:k"``.
        baselines: ``"rollout"`` and/or ``"layer:i"`` (0-based, -1 = last).
        protocol: ``"paper"`` (subword level) or ``"word"`` (word level).
        image_size: S, images are S × S.
        batch_size: sentences per forward pass (part of the settings: it fixes the batches,
            and so the exact float results).
        seed: the seed the corpus was drawn with (provenance; recorded and compared).
        progress: show a progress bar.
        overwrite: delete any existing cache at ``cache_root`` (other settings, or the same
            settings finished or not) and rebuild it from scratch.
        device: device for loading a model by name (``load_model(device=...)``).
        cache_dir: OLAS cache folder for the default ``cache_root``.
        on_batch: called as ``on_batch(batches_done, n_batches)`` after each committed batch
            (an exception raised there stops the run; the cache stays resumable).
        shard: ``(index, count)`` for multi-process extraction: this process computes only
            the batches ``b`` of the full plan with ``b % count == index`` (the very same
            batches as a single-process run) into its own shard folder
            ``<cache_root>.shard-III-of-NNN``; :func:`~olas_utils.similarity.shards.merge_shards` then assembles the cache.
            ``None`` or ``(0, 1)``: no sharding.

    Returns:
        :class:`CachedImages` of the complete cache.

    Raises:
        CacheMismatchError: ``cache_root`` holds a cache made with other settings (the
            message names each differing field, both values, and the fixes: another
            ``cache_root`` or ``overwrite=True``).
        CacheBusyError: another process is writing the same folder.
        CacheCorruptError: a file of the cache is damaged (JSON that does not parse, an
            array missing, truncated, or changed since completion: sizes and SHA-256 are
            recorded in ``progress.json`` at completion and checked on open), naming it;
            ``overwrite=True`` rebuilds. A complete, intact cache in a folder that cannot be
            written (read-only filesystem) is reused as is.
        FileExistsError: ``cache_root`` holds files that are not an OLAS cache.
        ValueError: unknown protocol or baseline, bad sizes, an empty corpus, or a chunk too
            long for the model (from tokenisation).
        OSError: (same type and errno) on a failed write — permission, disk full — naming
            the path.
    """
    from olas_utils.data.corpus import corpus_hash

    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    if not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if chunks is None or isinstance(chunks, (str, bytes, int)):
        raise TypeError(f"chunks must be a list of chunks, each a list of words, got {type(chunks).__name__}")
    chunks = [list(c) for c in chunks]
    if not chunks:
        raise ValueError("the corpus is empty")
    orders, rollout, layers, keys = _keys(orders, baselines)
    level = PROTOCOLS[protocol]

    if isinstance(model_name_or_loaded, (str, os.PathLike)):
        from olas_utils.zoo import load_model

        lm = load_model(model_name_or_loaded, device=device)
    else:
        lm = model_name_or_loaded
    model, tokenizer = lm.model, lm.tokenizer
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    from olas_utils.architecture import is_causal_model, num_attention_layers
    from olas_utils.extract import parse_key
    from olas_utils.ola import check_orders
    from olas_utils.zoo import weights_fingerprint

    n_layers = num_attention_layers(model)
    check_orders(orders, n_layers)
    for i in layers:
        parse_key(f"layer:{i}", n_layers)

    plan = _plan(tokenizer, model, chunks, batch_size)
    manifest = {
        "format": FORMAT_VERSION,
        "model": str(lm.name),
        "weights_sha256": weights_fingerprint(lm),
        "is_causal": bool(is_causal_model(model)),  # what the images are made with (to_image)
        "num_layers": int(n_layers),
        "model_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "orders": orders,
        "keys": keys,
        "protocol": protocol,
        "level": level,
        "preprocessing": PREPROCESSING,
        "resize": RESIZE,
        "image_size": image_size,
        "dtype": "float32",
        "n_chunks": len(chunks),
        "corpus_sha256": corpus_hash(chunks),
        "seed": int(seed),
        "batch_size": batch_size,
        "plan_sha256": _sha256_text(_canonical(plan)),
        "tokenizer": tokenizer_settings(tokenizer),
        "versions": _versions(),
    }
    root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root(manifest, cache_dir)
    if shard is not None and shard[1] > 1:
        index, count = shard
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} is outside 0..{count - 1}")
        root = shard_root(root, index, count)
        manifest["shard"] = [index, count]
        plan = [batch for b, batch in enumerate(plan) if b % count == index]
    try:
        with _io(root, "create the cache folder"):
            root.mkdir(parents=True, exist_ok=True)
        with _locked(root):
            _prepare_folder(root, manifest, plan, keys, image_size, overwrite)
            state = _read_json(root / _PROGRESS)
            if int(state["batches_done"]) < len(plan):
                _run(root, lm, chunks, plan, state, keys=keys, orders=orders, rollout=rollout, layers=layers,
                     level=level, image_size=image_size, progress=progress, on_batch=on_batch)
            return CachedImages(root)
    except OSError as e:
        if overwrite or e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        return _reuse_read_only(root, manifest, e)


def _prepare_folder(root: Path, manifest: dict, plan, keys, image_size: int, overwrite: bool) -> None:
    """Make ``root`` hold a cache for ``manifest`` that is intact so far: refuse other
    settings or damaged files (unless ``overwrite``, which clears any of them), create it
    if absent."""
    mpath = root / _MANIFEST
    if mpath.is_file() and overwrite:
        try:
            stored_keys = _read_json(mpath).get("keys")
        except (CacheCorruptError, AttributeError):
            stored_keys = None
        _clear(root, stored_keys)
    elif mpath.is_file():
        stored = _read_json(mpath)
        diff = _diff(stored, manifest) if isinstance(stored, dict) else {"manifest": (stored, "a dict")}
        if diff:
            lines = "\n".join(f"  {k}: cache has {_short(a)}, asked for {_short(b)}" for k, (a, b) in diff.items())
            raise CacheMismatchError(
                f"the OLAS image cache {root} was made with different settings ({', '.join(diff)}):\n{lines}\n"
                f"It is never reused silently. Use another cache_root (or leave cache_root=None for a "
                f"folder per settings), or pass overwrite=True to delete it and rebuild.",
                path=root, fields=diff)
        state = _read_json(root / _PROGRESS)
        n = manifest["n_chunks"]
        shapes = {key_filename(k): (n, image_size, image_size) for k in keys} | {_LENGTHS: (n,)}
        if not state.get("complete"):  # a damaged cache is refused, never resumed; a complete one is
            verify_files(root, None, shapes)  # checked against its checksums by CachedImages on return
    if not mpath.is_file():
        _init(root, manifest, plan, keys, image_size)


def _reuse_read_only(root: Path, manifest: dict, error: OSError) -> CachedImages:
    """A complete, intact cache with these settings in a folder OLAS cannot write to."""
    if (root / _MANIFEST).is_file() and not _diff(_read_json(root / _MANIFEST), manifest):
        cached = CachedImages(root)  # checks sizes and checksums
        if cached.complete:
            return cached
    raise type(error)(error.errno, f"{error} (the folder cannot be written: only a complete cache made with the "
                                   f"same settings can be reused from it; choose another cache_root)") from error


def _run(root: Path, lm, chunks, plan, state, *, keys, orders, rollout, layers, level, image_size,
         progress, on_batch) -> None:
    from tqdm.auto import tqdm

    from olas_utils.extract import extract_ola

    n_batches = len(plan)
    done = int(state["batches_done"])
    mms = {}
    for key in keys:
        path = root / key_filename(key)
        with _io(path, "open"):
            mms[key] = np.lib.format.open_memmap(path, mode="r+")
    with _io(root / _LENGTHS, "open"):
        lengths = np.lib.format.open_memmap(root / _LENGTHS, mode="r+")
    dev = str(next(lm.model.parameters()).device)
    devices = list(state.get("devices", []))
    if dev not in devices:
        devices.append(dev)
    chunks_done = int(state.get("chunks_done", 0))
    try:
        bar = tqdm(total=n_batches, initial=done, desc=f"OLA images {lm.name} ({level})", unit="batch",
                   disable=not progress)
        with bar:
            for b in range(done, n_batches):
                idx = plan[b]
                res = extract_ola(lm.model, lm.tokenizer, [chunks[i] for i in idx], orders=orders, rollout=rollout,
                                  layers=layers, level=level, batch_size=len(idx), progress=False,
                                  model_name=str(lm.name))
                for key in keys:
                    mm = mms[key]
                    for j, i in enumerate(idx):
                        mm[i] = to_image(res[key][j], causal=res.is_causal, image_size=image_size).numpy()
                for j, i in enumerate(idx):
                    lengths[i] = res[keys[0]][j].shape[-1]
                for key, mm in mms.items():
                    with _io(root / key_filename(key), "write"):
                        mm.flush()
                with _io(root / _LENGTHS, "write"):
                    lengths.flush()
                chunks_done += len(idx)
                last = b + 1 == n_batches
                files = file_checksums(root, [key_filename(k) for k in keys] + [_LENGTHS]) if last else None
                _write_json_atomic(root / _PROGRESS, {
                    "batches_done": b + 1, "n_batches": n_batches, "chunks_done": chunks_done,
                    "complete": last, "devices": devices, "updated": time.time(),
                    **({"files": files} if last else {})})
                bar.update(1)
                if on_batch is not None:
                    on_batch(b + 1, n_batches)
    finally:
        for mm in mms.values():
            del mm
        mms.clear()
        del lengths
