"""Cached, resumable extraction of OLA images for the cross-model similarity experiments.

:func:`extract_protocols` runs :func:`olas_utils.extract.extract_ola` over a corpus batch by
batch — **one forward pass per batch serves every protocol and key** (subword maps for
``"paper"``/``"released"``, the same maps pooled to words for ``"word"``) — turns every
sentence's maps into fixed-size images with each protocol's pre-processing
(:func:`to_image`), and stores them on disk, one cache folder per protocol, memory-mappable,
committing progress after every batch. :func:`extract_to_cache` is the one-protocol form
(with a chosen ``cache_root``); :func:`~olas_utils.similarity.imagecache.plan.cache_complete`
tells whether every cache of a model is done without running it. A run killed at any point
(exception, Ctrl-C, ``SIGKILL``) resumes from its last committed batch and ends with arrays
bit-for-bit identical to an uninterrupted run (same machine, same software, same thread
settings).

The protocols and the pre-processing are described in :mod:`olas_utils.similarity.images`,
the folder layout in :mod:`olas_utils.similarity.imagecache.folder`, the manifest in
:mod:`olas_utils.similarity.imagecache.manifest`, what a run will write in
:mod:`olas_utils.similarity.imagecache.plan`; reading is
:mod:`olas_utils.similarity.imagecache.read`, multi-process shards
:mod:`olas_utils.similarity.imagecache.shards`.

Commit protocol per batch: write the batch's rows into the memory maps, ``flush`` them
(``msync``), then replace ``progress.json`` atomically (:func:`olas_utils.infra.atomic.write_json_atomic`:
a temporary file, ``fsync``, :func:`os.replace`). Rows written after the last commit are simply
recomputed on resume.

Importing this module does no work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from olas_utils.infra.atomic import reserve_file
from olas_utils.similarity.imagecache.folder import (
    LENGTHS,
    MANIFEST,
    PROGRESS,
    CacheCorruptError,
    clear_folder,
    file_checksums,
    init_folder,
    io_errors,
    key_filename,
    locked,
    read_json,
    verify_files,
    write_json,
)
from olas_utils.similarity.imagecache.manifest import manifest_diff, mismatch_error
from olas_utils.similarity.imagecache.plan import (
    CacheSettings,
    Target,
    check_settings,
    check_targets,
    loaded_model,
    plan_targets,
)
from olas_utils.similarity.imagecache.read import CachedImages
from olas_utils.similarity.images import PROTOCOLS, to_image

__all__ = ["extract_to_cache", "extract_protocols"]


def extract_protocols(
    model_name_or_loaded,
    chunks: Sequence[Sequence[str]],
    *,
    protocols: Sequence[str] = ("paper",),
    settings: CacheSettings | None = None,
    progress: bool = True,
    overwrite: bool = False,
    device: str | torch.device | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    shard: tuple[int, int] | None = None,
    cache_root: str | os.PathLike | None = None,
    **setting_keywords,
) -> dict[str, CachedImages]:
    """Extract OLA images of a corpus for several protocols into resumable on-disk caches,
    with **one forward pass per batch for all of them** (or reuse complete caches).

    Batches are fixed by the corpus, tokenizer and ``batch_size`` (chunks bucketed by token
    length, longest first: :func:`olas_utils.extract.length_buckets`), the same for every
    protocol. Each batch runs once through :func:`olas_utils.extract.extract_ola` at subword
    level (or, for a ``attention="uniform"`` control, through uniform attention with no
    forward pass); ``"paper"`` and ``"released"`` images are made from those maps, ``"word"``
    images from the same maps pooled to words (:meth:`~olas_utils.extract.OLAMaps.to_words`,
    neutral pooling). Each protocol has its own folder, manifest and progress: after each
    batch the rows are flushed and the progress committed atomically; a protocol whose cache
    is further along simply skips the batches it has. Protocols, pre-processing, files and
    manifest: :mod:`~olas_utils.similarity.images`, :mod:`~olas_utils.similarity.imagecache.folder`,
    :mod:`~olas_utils.similarity.imagecache.manifest`.

    Args:
        model_name_or_loaded: a zoo name / folder / Hugging Face id (loaded with
            :func:`olas_utils.zoo.load_model`) or a :class:`~olas_utils.zoo.LoadedModel`
            (a control copy from :data:`olas_utils.zoo.controls.CONTROLS` included). A
            model whose weights were changed must have ``weights_sha256=None`` (then its
            state dict is hashed).
        chunks: the corpus, lists of words (e.g. :func:`olas_utils.data.corpus.build_chunks`).
        protocols: some of ``"released"``, ``"paper"``, ``"word"``.
        settings: what to compute, a :class:`~olas_utils.similarity.imagecache.plan.CacheSettings`
            (orders, baselines, image_size, batch_size, seed, cache_dir), or its fields as
            keywords (``orders=(1, 2), baselines=("rollout", "alti")``). Mixing keys are part
            of the manifest's ``keys``, so a cache with them never shares a folder with one
            without; a tokenizer-only control stores each mixing key's uniform counterpart
            (:func:`olas_utils.extract.uniform_mixing`); a word-level protocol leaves out the keys
            whose neutral pooling means nothing on the model
            (:func:`olas_utils.maths.uniform.neutral_problem`), with a warning.
        progress: show a progress bar.
        overwrite: delete any existing cache in these folders and rebuild from scratch.
        device: device for loading a model by name (``load_model(device=...)``).
        on_batch: called as ``on_batch(batches_done, n_batches)`` after each committed batch
            (an exception raised there stops the run; the caches stay resumable).
        shard: ``(index, count)`` for multi-process extraction: this process computes only
            the batches ``b`` of the full plan with ``b % count == index`` (the very same
            batches as a single-process run) into its own shard folders
            ``<root>.shard-III-of-NNN``; :func:`~olas_utils.similarity.imagecache.merge_shards`
            then assembles each cache. ``None`` or ``(0, 1)``: no sharding.
        cache_root: one protocol only: its folder instead of the default.

    Returns:
        ``{protocol: CachedImages}`` of the complete caches.

    Warns:
        UserWarning: a key left out of a word-level protocol's cache (see ``baselines``), naming
            the model, protocol, key and why.

    Raises:
        CacheMismatchError: a folder holds a cache made with other settings (the message
            names each differing field, both values, and the fixes: another folder or
            ``overwrite=True``).
        CacheBusyError: another process is writing one of the folders.
        CacheCorruptError: a file of a cache is damaged (JSON that does not parse, an
            array missing, truncated, or changed since completion: sizes and SHA-256 are
            recorded in ``progress.json`` at completion and checked on open), naming it;
            ``overwrite=True`` rebuilds. Complete, intact caches in a folder that cannot be
            written (read-only filesystem) are reused as they are.
        FileExistsError: a folder holds files that are not an OLAS cache.
        ValueError: unknown or duplicate protocols, an unknown baseline, a mixing key the model
            cannot give (an architecture without a
            :data:`~olas_utils.capture.mixing_specs.MIXING_SPECS` entry, ``"globenc"`` on a model that
            is not post-LN, an order above its layers; refused before anything is written), bad
            sizes, an empty corpus, ``cache_root`` with several protocols, or a chunk too long
            for the model.
        OSError: (same type and errno) on a failed write — permission, disk full — naming
            the path.
    """
    protocols = list(protocols)
    if cache_root is not None and len(protocols) != 1:
        raise ValueError("cache_root names one folder: give exactly one protocol with it (or use cache_dir)")
    settings = CacheSettings.of(settings, **setting_keywords)
    chunks = check_settings(settings.image_size, settings.batch_size, chunks)
    lm = loaded_model(model_name_or_loaded, device)
    check_targets(lm, protocols, settings)
    plan = _extraction_plan(lm, chunks, settings)  # the corpus tokenised once, for the plan and every batch
    targets = plan_targets(lm, chunks, protocols, settings, cache_root=cache_root, shard=shard, batches=plan.buckets)
    for t in targets:
        for key, why in t.dropped.items():
            warnings.warn(f"{lm.name}: no {t.protocol!r} images of {key!r}: {why}", UserWarning, stacklevel=2)
    try:
        with contextlib.ExitStack() as stack:
            states = {}
            for t in targets:
                with io_errors(t.root, "create the cache folder"):
                    t.root.mkdir(parents=True, exist_ok=True)
                stack.enter_context(locked(t.root))
                _prepare_folder(t.root, t.manifest, t.plan, t.keys, settings.image_size, overwrite)
                states[t.protocol] = read_json(t.root / PROGRESS)
            todo = [t for t in targets if int(states[t.protocol]["batches_done"]) < len(t.plan)]
            if todo:
                _run(todo, states, lm, plan, settings, progress=progress, on_batch=on_batch)
            return {t.protocol: CachedImages(t.root) for t in targets}
    except OSError as e:
        if overwrite or e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        return {t.protocol: _reuse_read_only(t.root, t.manifest, e) for t in targets}


def _prepare_folder(root: Path, manifest: dict, plan, keys, image_size: int, overwrite: bool) -> None:
    """Make ``root`` hold a cache for ``manifest`` that is intact so far: refuse other
    settings or damaged files (unless ``overwrite``, which clears any of them), create it
    if absent."""
    mpath = root / MANIFEST
    if mpath.is_file() and overwrite:
        try:
            stored_keys = read_json(mpath).get("keys")
        except (CacheCorruptError, AttributeError):
            stored_keys = None
        clear_folder(root, stored_keys)
    elif mpath.is_file():
        stored = read_json(mpath)
        diff = manifest_diff(stored, manifest) if isinstance(stored, dict) else {"manifest": (stored, "a dict")}
        if diff:
            raise mismatch_error(root, diff)
        state = read_json(root / PROGRESS)
        n = manifest["n_chunks"]
        shapes = {key_filename(k): (n, image_size, image_size) for k in keys} | {LENGTHS: (n,)}
        if not state.get("complete"):  # a damaged cache is refused, never resumed; a complete one is
            verify_files(root, None, shapes)  # checked against its checksums by CachedImages on return
    if not mpath.is_file():
        init_folder(root, manifest, plan, keys, image_size)


def _reuse_read_only(root: Path, manifest: dict, error: OSError) -> CachedImages:
    """A complete, intact cache with these settings in a folder OLAS cannot write to."""
    if (root / MANIFEST).is_file() and not manifest_diff(read_json(root / MANIFEST), manifest):
        cached = CachedImages(root)  # checks sizes and checksums
        if cached.complete:
            return cached
    raise type(error)(
        error.errno,
        f"{error} (the folder cannot be written: only a complete cache made with the "
        f"same settings can be reused from it; choose another cache_root)",
    ) from error


def extract_to_cache(
    model_name_or_loaded,
    chunks: Sequence[Sequence[str]],
    *,
    cache_root: str | os.PathLike | None = None,
    protocol: str = "paper",
    settings: CacheSettings | None = None,
    progress: bool = True,
    overwrite: bool = False,
    device: str | torch.device | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    shard: tuple[int, int] | None = None,
    **setting_keywords,
) -> CachedImages:
    """Extract OLA images of a corpus for one protocol into a resumable on-disk cache (or
    reuse it): :func:`extract_protocols` with ``protocols=[protocol]`` and an optional
    ``cache_root`` (default ``<cache>/ola/<model>/<protocol>-<settings hash>``). Several
    protocols of one model should be extracted together with :func:`extract_protocols`
    (one forward pass for all).

    Args:
        protocol: ``"released"``, ``"paper"`` (subword level) or ``"word"`` (word level).
        Others: see :func:`extract_protocols`.

    Returns:
        :class:`CachedImages` of the complete cache.

    Raises:
        As :func:`extract_protocols`.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    return extract_protocols(
        model_name_or_loaded,
        chunks,
        protocols=[protocol],
        settings=CacheSettings.of(settings, **setting_keywords),
        progress=progress,
        overwrite=overwrite,
        device=device,
        on_batch=on_batch,
        shard=shard,
        cache_root=cache_root,
    )[protocol]


def _extraction_plan(lm, chunks, settings: CacheSettings):
    """The corpus through :func:`olas_utils.extract_steps.plan_extraction` at subword level:
    tokenised once, bucketed by ``settings.batch_size``."""
    from olas_utils.extract_steps import plan_extraction

    orders, rollout, layers, mixing, _ = settings.keys()
    attention = getattr(lm, "attention", "model")
    return plan_extraction(
        lm,  # its facts, read once
        sentences=chunks,
        orders=orders,
        rollout=rollout,
        layers=layers,
        level="subword",
        batch_size=settings.batch_size,
        model_name=str(lm.name),
        attention=attention,
        mixing=() if attention == "uniform" else mixing,
    )


def _run(targets: list[Target], states: dict, lm, plan, settings: CacheSettings, *, progress, on_batch) -> None:
    """Every batch some target still lacks, through one capture opened for the whole run."""
    from olas_utils.extract import uniform_mixing
    from olas_utils.extract_steps import assemble, extract_batch, open_capture
    from olas_utils.infra.progress import tqdm

    batches = targets[0].plan  # the same batches for every protocol
    _, _, _, mixing, keys = settings.keys()
    word_keys = [k for k in keys if any(k in t.keys for t in targets if PROTOCOLS[t.protocol] == "word")]
    n_batches = len(batches)
    done = {t.protocol: int(states[t.protocol]["batches_done"]) for t in targets}
    start = min(done.values())
    mms: dict[str, dict] = {}
    lengths = {}
    dev = str(next(lm.model.parameters()).device)
    try:
        for t in targets:
            mms[t.protocol] = {}
            for key in t.keys:
                path = t.root / key_filename(key)
                with io_errors(path, "open"):
                    reserve_file(path, what="image cache")  # a cache made sparse before: no SIGBUS on a full disk
                    mms[t.protocol][key] = np.lib.format.open_memmap(path, mode="r+")
            with io_errors(t.root / LENGTHS, "open"):
                reserve_file(t.root / LENGTHS, what="image cache")
                lengths[t.protocol] = np.lib.format.open_memmap(t.root / LENGTHS, mode="r+")
        names = "+".join(t.protocol for t in targets)
        bar = tqdm(
            total=n_batches, initial=start, desc=f"OLA images {lm.name} ({names})", unit="batch", disable=not progress
        )
        with bar, open_capture(plan) as cap:
            for b in range(start, n_batches):
                idx = batches[b]
                res = assemble(
                    plan, [extract_batch(plan, cap, idx)], indices=idx, capture_path=getattr(cap, "path", None)
                )
                if mixing and plan.uniform:  # no forward pass: the keys' uniform counterparts
                    res = uniform_mixing(res, mixing)
                words = None
                for t in targets:
                    if b < done[t.protocol]:
                        continue
                    if PROTOCOLS[t.protocol] == "word":  # pooled once, the keys word caches store only
                        words = words if words is not None else _pooled(res, word_keys)
                        maps = words
                    else:
                        maps = res
                    _commit(
                        t, b, idx, maps, mms[t.protocol], lengths[t.protocol], t.keys, settings.image_size, states, dev
                    )
                bar.update(1)
                if on_batch is not None:
                    on_batch(b + 1, n_batches)
    finally:
        mms.clear()
        lengths.clear()


def _pooled(res, keys: list[str]):
    """``res`` with only ``keys``, pooled to words (neutral pooling)."""
    return dataclasses.replace(res, maps={k: res.maps[k] for k in keys}).to_words()


def _commit(t: Target, b, idx, maps, mms, lengths, keys, image_size, states, dev) -> None:
    """Write one batch's images into a protocol's cache and commit its progress."""
    for key in keys:
        mm = mms[key]
        for j, i in enumerate(idx):
            mm[i] = to_image(maps[key][j], causal=maps.is_causal, image_size=image_size, protocol=t.protocol).numpy()
    for j, i in enumerate(idx):
        lengths[i] = maps[keys[0]][j].shape[-1]
    for key, mm in mms.items():
        with io_errors(t.root / key_filename(key), "write"):
            mm.flush()
    with io_errors(t.root / LENGTHS, "write"):
        lengths.flush()
    state = states[t.protocol]
    devices = list(state.get("devices", []))
    if dev not in devices:
        devices.append(dev)
    last = b + 1 == len(t.plan)
    state.update(
        {
            "batches_done": b + 1,
            "n_batches": len(t.plan),
            "devices": devices,
            "updated": time.time(),
            "chunks_done": int(state.get("chunks_done", 0)) + len(idx),
            "complete": last,
        }
    )
    if last:  # sizes and SHA-256 of every array, checked when the cache is opened
        state["files"] = file_checksums(t.root, [key_filename(k) for k in keys] + [LENGTHS])
    write_json(t.root / PROGRESS, state)
