"""What an image-cache run will write, decided before any model runs: validated settings and
keys, the batch plan, and each protocol's manifest and folder (:class:`Target`);
:func:`cache_complete` checks whether those caches are done without running the model (so
a control copy need not be built).

Importing this module does no work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from olas_utils.similarity.imagecache.folder import MANIFEST, PROGRESS, read_json
from olas_utils.similarity.imagecache.manifest import (
    default_cache_root,
    manifest_diff,
    protocol_manifest,
    run_manifest,
)
from olas_utils.similarity.imagecache.shards import shard_root
from olas_utils.similarity.images import PROTOCOLS
from olas_utils.vocabulary import DEFAULT_BASELINES, MapKey

__all__ = [
    "Target",
    "check_settings",
    "validate_keys",
    "batch_plan",
    "loaded_model",
    "plan_targets",
    "is_complete",
    "cache_complete",
]


def validate_keys(orders: Iterable[int], baselines: Iterable[str]) -> tuple[list[int], bool, list[int], list[str]]:
    """Validate orders and baselines.

    Args:
        orders: OLA orders, stored as ``"ola:k"``.
        baselines: ``"rollout"`` and/or ``"layer:i"``.

    Returns:
        ``(orders, rollout, layers, keys)``: the orders as ints, whether rollout is asked
        for, the layer indices, and the keys in storage order (orders, then baselines).

    Raises:
        ValueError: duplicates, an unknown baseline, or nothing to extract.
    """
    orders = [int(k) for k in orders]
    if len(set(orders)) != len(orders):
        raise ValueError(f"orders has duplicates: {orders}")
    rollout, layers = False, []
    base = list(baselines)
    if len(set(base)) != len(base):
        raise ValueError(f"baselines has duplicates: {base}")
    for b in base:
        try:
            key = MapKey.parse(b)
        except ValueError:
            key = None
        if key is not None and key.method == "rollout":
            rollout = True
        elif key is not None and key.method == "layer":  # the index is checked against the model by parse_key
            layers.append(key.index)
        else:
            raise ValueError(f"unknown baseline {b!r}: use 'rollout' or 'layer:I' (OLA orders go in orders=)")
    keys = [str(MapKey.ola(k)) for k in orders] + list(base)
    if not keys:
        raise ValueError("nothing to extract: orders and baselines are both empty")
    return orders, rollout, layers, keys


def batch_plan(tokenizer, model, chunks: Sequence[Sequence[str]], batch_size: int) -> list[list[int]]:
    """The batches (lists of chunk indices) in processing order: chunks bucketed by token
    length, longest first (:func:`olas_utils.extract.length_buckets`)."""
    from olas_utils.align import tokenize_words
    from olas_utils.extract import length_buckets, max_tokens

    lengths = tokenize_words(tokenizer, chunks, max_length=max_tokens(model, tokenizer)).lengths
    return length_buckets(lengths, batch_size)


@dataclass
class Target:
    """One protocol's cache folder during a run.

    Attributes:
        protocol: a key of :data:`olas_utils.similarity.images.PROTOCOLS`.
        root: the folder (a shard's for a sharded run).
        manifest: what the folder's ``manifest.json`` must hold.
        plan: the batches this folder computes (a shard's share for a sharded run).
    """

    protocol: str
    root: Path
    manifest: dict
    plan: list[list[int]]


def check_settings(image_size, batch_size, chunks) -> list[list[str]]:
    """Check the sizes and the corpus; returns the chunks as lists of words.

    Raises:
        ValueError: a size that is not a positive integer, or an empty corpus.
        TypeError: ``chunks`` is not a list of chunks.
    """
    if not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if chunks is None or isinstance(chunks, (str, bytes, int)):
        raise TypeError(f"chunks must be a list of chunks, each a list of words, got {type(chunks).__name__}")
    chunks = [list(c) for c in chunks]
    if not chunks:
        raise ValueError("the corpus is empty")
    return chunks


def loaded_model(model_name_or_loaded, device):
    """A :class:`~olas_utils.zoo.LoadedModel`: a name or folder is loaded
    (:func:`olas_utils.zoo.load_model`), anything else returned as it is."""
    if isinstance(model_name_or_loaded, (str, os.PathLike)):
        from olas_utils.zoo import load_model

        return load_model(model_name_or_loaded, device=device)
    return model_name_or_loaded


def plan_targets(
    lm, chunks, protocols, *, orders, layers, keys, image_size, batch_size, seed, cache_dir, cache_root=None, shard=None
) -> list[Target]:
    """Manifest, folder and batch plan of each protocol's cache (nothing is written).

    Args:
        lm: the model (:func:`loaded_model`) or a control identity stand-in.
        chunks: the corpus (:func:`check_settings`).
        protocols: some of :data:`~olas_utils.similarity.images.PROTOCOLS`.
        orders, layers, keys: from :func:`validate_keys`.
        image_size, batch_size, seed: the settings.
        cache_dir: the OLAS cache folder for default folders (:func:`default_cache_root`).
        cache_root: one folder instead of the default.
        shard: ``(index, count)``: this process's share of the batches, in its shard folder.

    Returns:
        One :class:`Target` per protocol, in the given order.

    Raises:
        ValueError: unknown or duplicate protocols, an order or layer outside the model, or
            a shard index outside ``0..count-1``.
        RuntimeError: the model is in training mode.
    """
    from olas_utils.architecture import num_attention_layers
    from olas_utils.extract import parse_key
    from olas_utils.ola import check_orders

    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or not protocols:
        raise ValueError(f"protocols must be some of {list(PROTOCOLS)}, got {list(protocols)!r}")
    if len(set(protocols)) != len(protocols):
        raise ValueError(f"protocols has duplicates: {list(protocols)}")
    model, tokenizer = lm.model, lm.tokenizer
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    n_layers = num_attention_layers(model)
    check_orders(orders, n_layers)
    for i in layers:
        parse_key(str(MapKey.layer(i)), n_layers)
    plan = batch_plan(tokenizer, model, chunks, batch_size)
    common = run_manifest(
        lm,
        chunks,
        plan=plan,
        orders=orders,
        keys=keys,
        image_size=image_size,
        batch_size=batch_size,
        seed=seed,
        num_layers=n_layers,
    )
    out = []
    for protocol in protocols:
        manifest = protocol_manifest(common, protocol)
        root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root(manifest, cache_dir)
        p = plan
        if shard is not None and shard[1] > 1:
            index, count = shard
            if not 0 <= index < count:
                raise ValueError(f"shard index {index} is outside 0..{count - 1}")
            root = shard_root(root, index, count)
            manifest["shard"] = [index, count]
            p = [batch for b, batch in enumerate(plan) if b % count == index]
        out.append(Target(protocol, root, manifest, p))
    return out


def is_complete(target: Target) -> bool:
    """Whether ``target``'s folder holds a cache with exactly its manifest and every batch of
    its plan committed (False for a missing, unreadable or damaged one; never raises)."""
    mpath, ppath = target.root / MANIFEST, target.root / PROGRESS
    if not (mpath.is_file() and ppath.is_file()):
        return False
    try:
        if manifest_diff(read_json(mpath), target.manifest):
            return False
        return int(read_json(ppath)["batches_done"]) >= len(target.plan)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def cache_complete(
    loaded,
    chunks: Sequence[Sequence[str]],
    *,
    protocols: Sequence[str],
    orders: Iterable[int] = (1, 2, 3),
    baselines: Iterable[str] = DEFAULT_BASELINES,
    image_size: int = 50,
    batch_size: int = 8,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
) -> bool:
    """Whether the default-folder caches of every protocol are complete with these settings.

    Runs no model: the manifests are computed from ``loaded``'s name, weight fingerprint,
    config and tokenizer (so ``loaded`` may be a :func:`olas_utils.zoo.controls.control_identity`
    stand-in for a control copy that was never built).

    Returns:
        True if every protocol's cache exists with exactly these settings and all its
        batches are committed.

    Raises:
        ValueError, TypeError: as :func:`~olas_utils.similarity.imagecache.extract_protocols`
            for bad settings.
    """
    chunks = check_settings(image_size, batch_size, chunks)
    orders, _, layers, keys = validate_keys(orders, baselines)
    targets = plan_targets(
        loaded,
        chunks,
        list(protocols),
        orders=orders,
        layers=layers,
        keys=keys,
        image_size=image_size,
        batch_size=batch_size,
        seed=seed,
        cache_dir=cache_dir,
    )
    return all(is_complete(t) for t in targets)
