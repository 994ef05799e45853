"""What an image-cache run will write, decided before any model runs: validated keys, the
batch plan, and each protocol's manifest and folder; :func:`cache_complete` checks whether
those caches are done without running the model (so a control copy need not be built).

Importing this module does no work.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from olas_utils.similarity.cache_folder import _MANIFEST, _PROGRESS, FORMAT_VERSION, _read_json
from olas_utils.similarity.images import PREPROCESSING, PROTOCOLS, RESIZE
from olas_utils.similarity.manifest import (
    _canonical,
    _diff,
    _sha256_text,
    _versions,
    default_cache_root,
    tokenizer_settings,
)
from olas_utils.similarity.shards import shard_root

__all__ = ["cache_complete"]


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


@dataclass
class _Target:
    """One protocol's cache folder during a run."""

    protocol: str
    root: Path
    manifest: dict
    plan: list[list[int]]


def _check_settings(image_size, batch_size, chunks) -> list[list[str]]:
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


def _loaded(model_name_or_loaded, device):
    if isinstance(model_name_or_loaded, (str, os.PathLike)):
        from olas_utils.zoo import load_model

        return load_model(model_name_or_loaded, device=device)
    return model_name_or_loaded


def _targets(lm, chunks, protocols, *, orders, layers, keys, image_size, batch_size, seed, cache_dir,
             cache_root=None, shard=None) -> list[_Target]:
    """Manifest, folder and batch plan of each protocol's cache (nothing is written)."""
    from olas_utils.architecture import is_causal_model, num_attention_layers
    from olas_utils.data.corpus import corpus_hash
    from olas_utils.extract import parse_key
    from olas_utils.ola import check_orders
    from olas_utils.zoo import weights_fingerprint

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
        parse_key(f"layer:{i}", n_layers)
    plan = _plan(tokenizer, model, chunks, batch_size)
    common = {
        "format": FORMAT_VERSION,
        "model": str(lm.name),
        "weights_sha256": weights_fingerprint(lm),
        "attention": getattr(lm, "attention", "model"),
        "is_causal": bool(is_causal_model(model)),  # what the images are made with (to_image)
        "num_layers": int(n_layers),
        "model_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "orders": orders,
        "keys": keys,
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
    out = []
    for protocol in protocols:
        manifest = dict(common, protocol=protocol, level=PROTOCOLS[protocol],
                        preprocessing=PREPROCESSING[protocol], resize=RESIZE[protocol])
        root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root(manifest, cache_dir)
        p = plan
        if shard is not None and shard[1] > 1:
            index, count = shard
            if not 0 <= index < count:
                raise ValueError(f"shard index {index} is outside 0..{count - 1}")
            root = shard_root(root, index, count)
            manifest["shard"] = [index, count]
            p = [batch for b, batch in enumerate(plan) if b % count == index]
        out.append(_Target(protocol, root, manifest, p))
    return out


def _is_complete(target: _Target) -> bool:
    mpath, ppath = target.root / _MANIFEST, target.root / _PROGRESS
    if not (mpath.is_file() and ppath.is_file()):
        return False
    try:
        if _diff(_read_json(mpath), target.manifest):
            return False
        return int(_read_json(ppath)["batches_done"]) >= len(target.plan)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def cache_complete(
    loaded,
    chunks: Sequence[Sequence[str]],
    *,
    protocols: Sequence[str],
    orders: Iterable[int] = (1, 2, 3),
    baselines: Iterable[str] = ("rollout", "layer:0", "layer:-1"),
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
    """
    chunks = _check_settings(image_size, batch_size, chunks)
    orders, _, layers, keys = _keys(orders, baselines)
    targets = _targets(loaded, chunks, list(protocols), orders=orders, layers=layers, keys=keys,
                       image_size=image_size, batch_size=batch_size, seed=seed, cache_dir=cache_dir)
    return all(_is_complete(t) for t in targets)


