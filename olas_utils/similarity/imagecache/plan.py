"""What an image-cache run will write, decided before any model runs: validated settings and
keys, the batch plan, and each protocol's manifest and folder (:class:`Target`);
:func:`cache_complete` checks whether those caches are done without running the model (so
a control copy need not be built).

Importing this module does no work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterable, Sequence

from olas_utils.similarity.imagecache.folder import MANIFEST, PROGRESS, read_json
from olas_utils.similarity.imagecache.manifest import (
    RECORDED,
    default_cache_root,
    manifest_diff,
    protocol_manifest,
    run_manifest,
)
from olas_utils.similarity.imagecache.shards import shard_root
from olas_utils.similarity.images import PROTOCOLS
from olas_utils.vocabulary import DEFAULT_BASELINES, KEY_METHODS, MapKey

__all__ = [
    "CacheSettings",
    "Target",
    "check_settings",
    "validate_keys",
    "batch_plan",
    "loaded_model",
    "check_targets",
    "plan_targets",
    "is_complete",
    "cache_complete",
]


def validate_keys(
    orders: Iterable[int], baselines: Iterable[str]
) -> tuple[list[int], bool, list[int], list[str], list[str]]:
    """Validate orders and baselines.

    Args:
        orders: OLA orders, stored as ``"ola:k"``.
        baselines: ``"rollout"``, ``"layer:i"`` and/or context-mixing keys (``"valuenorm"``,
            ``"alti"``, ``"globenc"``, each also with an order, ``"alti:1"``; methods with
            :attr:`olas_utils.vocabulary.KeyMethod.mixing`), stored in the given order.

    Returns:
        ``(orders, rollout, layers, mixing, keys)``: the orders as ints, whether rollout is
        asked for, the layer indices, the mixing keys (canonical names, as
        :func:`olas_utils.extract.extract_ola` stores them) and the keys in storage order
        (orders, then baselines). Without mixing keys, ``keys`` is exactly what it was before
        they were accepted, so existing caches keep their manifests and folders.

    Raises:
        ValueError: duplicates, an unknown baseline (the message lists what is accepted), or
            nothing to extract.
    """
    orders = [int(k) for k in orders]
    if len(set(orders)) != len(orders):
        raise ValueError(f"orders has duplicates: {orders}")
    rollout, layers, mixing = False, [], []
    base = list(baselines)
    if len(set(base)) != len(base):
        raise ValueError(f"baselines has duplicates: {base}")
    for n, b in enumerate(base):
        try:
            key = MapKey.parse(b)
        except ValueError:
            key = None
        if key is not None and key.method == "rollout":
            rollout = True
        elif key is not None and key.method == "layer":  # the index is checked against the model by parse_key
            layers.append(key.index)
        elif key is not None and key.on_request:  # the order and the architecture are checked by plan_targets
            base[n] = str(key)
            mixing.append(str(key))
        else:
            raise ValueError(
                f"unknown baseline {b!r}: use 'rollout', 'layer:I', 'flow' or a context-mixing key "
                f"({', '.join(repr(m) for m, spec in KEY_METHODS.items() if spec.mixing)}, each also as "
                "'<method>:K'); OLA orders go in orders="
            )
    if len(set(base)) != len(base):
        raise ValueError(f"baselines has duplicates: {base}")
    keys = [str(MapKey.ola(k)) for k in orders] + list(base)
    if not keys:
        raise ValueError("nothing to extract: orders and baselines are both empty")
    return orders, rollout, layers, mixing, keys


def batch_plan(tokenizer, model, chunks: Sequence[Sequence[str]], batch_size: int) -> list[list[int]]:
    """The batches (lists of chunk indices) in processing order: chunks bucketed by token
    length, longest first (:func:`olas_utils.extract.length_buckets`)."""
    from olas_utils.align import tokenize_words
    from olas_utils.extract import length_buckets, max_tokens

    lengths = tokenize_words(tokenizer, chunks, max_length=max_tokens(model, tokenizer)).lengths
    return length_buckets(lengths, batch_size)


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


@dataclass(frozen=True)
class CacheSettings:
    """What an image-cache run computes, one value carried through every function of the cache.

    Attributes:
        orders: OLA orders, stored as ``"ola:k"``.
        baselines: ``"rollout"``, ``"layer:i"``, context-mixing keys and ``"flow"``
            (:func:`validate_keys`).
        image_size: S, images are S × S pixels.
        batch_size: sentences per forward pass (fixes the batches, so the exact floats).
        seed: the seed the corpus was drawn with (provenance).
        cache_dir: the OLAS cache folder of default cache folders (:func:`default_cache_root`).
        torch_threads: ``torch.get_num_threads()`` when the value was made; written to each
            manifest's ``recorded`` field, which is not part of a cache's identity
            (:func:`~olas_utils.similarity.imagecache.manifest.manifest_diff`).

    Raises:
        ValueError, TypeError: on construction, for bad sizes or keys (:func:`check_settings`,
            :func:`validate_keys`).
    """

    orders: tuple[int, ...] = (1, 2, 3)
    baselines: tuple[str, ...] = tuple(DEFAULT_BASELINES)
    image_size: int = 50
    batch_size: int = 8
    seed: int = 0
    cache_dir: str | os.PathLike | None = None
    torch_threads: int = field(default_factory=_torch_threads)

    def __post_init__(self) -> None:
        check_settings(self.image_size, self.batch_size, [[]])
        object.__setattr__(self, "orders", tuple(int(k) for k in self.orders))
        object.__setattr__(self, "baselines", tuple(self.baselines))
        validate_keys(self.orders, self.baselines)

    @classmethod
    def of(cls, settings: "CacheSettings | None", **kw) -> "CacheSettings":
        """``settings``, or one made from keywords (the cache functions' former arguments).

        Raises:
            TypeError: both, or an unknown keyword.
        """
        if settings is not None and kw:
            raise TypeError(f"give settings=CacheSettings(...) or the keywords {sorted(kw)}, not both")
        if settings is not None:
            return settings
        names = {f.name for f in fields(cls)}
        bad = sorted(set(kw) - names)
        if bad:
            raise TypeError(f"unknown cache setting(s) {bad}: the settings are {sorted(names)}")
        return cls(**kw)

    def keys(self) -> tuple[list[int], bool, list[int], list[str], list[str]]:
        """:func:`validate_keys` of ``orders`` and ``baselines``."""
        return validate_keys(self.orders, self.baselines)


@dataclass
class Target:
    """One protocol's cache folder during a run.

    Attributes:
        protocol: a key of :data:`olas_utils.similarity.images.PROTOCOLS`.
        root: the folder (a shard's for a sharded run).
        manifest: what the folder's ``manifest.json`` must hold.
        plan: the batches this folder computes (a shard's share for a sharded run).
        keys: the keys this folder stores (``manifest["keys"]``): the run's keys, less, for a
            word-level protocol, those whose neutral pooling means nothing on the model
            (:func:`olas_utils.maths.uniform.neutral_problem`).
        dropped: ``{key: why}`` of the run's keys this folder leaves out.
    """

    protocol: str
    root: Path
    manifest: dict
    plan: list[list[int]]
    keys: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)


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


def check_targets(lm, protocols, settings: CacheSettings) -> int:
    """Refuse, before anything is tokenised or written, what a run of ``settings`` on ``lm`` cannot do.

    Returns:
        N, the model's number of attention layers.

    Raises:
        ValueError: unknown or duplicate protocols, an order or layer outside the model, a
            mixing key the model cannot give (an order above its layers, or
            :meth:`olas_utils.capture.facts.ModelFacts.require_mixing`; a tokenizer-only control
            too: its maps of a key are defined where the model has the key).
        RuntimeError: the model is in training mode.
    """
    from olas_utils.capture.facts import model_facts
    from olas_utils.extract_steps import parse_key
    from olas_utils.maths.ola import check_orders

    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or not protocols:
        raise ValueError(f"protocols must be some of {list(PROTOCOLS)}, got {list(protocols)!r}")
    if len(set(protocols)) != len(protocols):
        raise ValueError(f"protocols has duplicates: {list(protocols)}")
    orders, _, layers, mixing, _ = settings.keys()
    model = lm.model
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    facts = model_facts(lm)
    n_layers = facts.num_layers
    check_orders(orders, n_layers)
    for i in layers:
        parse_key(str(MapKey.layer(i)), n_layers)
    for key in mixing:  # refused before anything is written
        parse_key(key, n_layers)
    facts.require_mixing(mixing)
    return n_layers


def plan_targets(
    lm,
    chunks,
    protocols,
    settings: CacheSettings,
    *,
    cache_root=None,
    shard=None,
    batches: list[list[int]] | None = None,
) -> list[Target]:
    """Manifest, folder and batch plan of each protocol's cache (nothing is written).

    Args:
        lm: the model (:func:`loaded_model`) or a control identity stand-in.
        chunks: the corpus (:func:`check_settings`).
        protocols: some of :data:`~olas_utils.similarity.images.PROTOCOLS`.
        settings: the run's :class:`CacheSettings` (the mixing keys are part of its keys, and
            so of the manifest: a cache with them is another folder).
        cache_root: one folder instead of the default.
        shard: ``(index, count)``: this process's share of the batches, in its shard folder.
        batches: the batch plan when the caller has tokenised the corpus already
            (the ``buckets`` of :class:`olas_utils.extract_steps.ExtractionPlan`); default
            :func:`batch_plan`.

    Returns:
        One :class:`Target` per protocol, in the given order. A word-level protocol leaves out
        the keys whose neutral pooling means nothing on the model
        (:func:`olas_utils.maths.uniform.neutral_problem`; :attr:`Target.dropped` says why), and
        its manifest's ``keys`` are those it stores. Each manifest's ``recorded`` field holds
        ``settings.torch_threads``; it is not part of the folder's hash.

    Raises:
        ValueError, RuntimeError: those of :func:`check_targets`; a shard index outside
            ``0..count-1``.
    """
    from olas_utils.capture.facts import model_facts

    n_layers = check_targets(lm, protocols, settings)
    orders, _, _, _, keys = settings.keys()
    plan = batches if batches is not None else batch_plan(lm.tokenizer, lm.model, chunks, settings.batch_size)
    common = run_manifest(
        lm,
        chunks,
        plan=plan,
        orders=orders,
        keys=keys,
        image_size=settings.image_size,
        batch_size=settings.batch_size,
        seed=settings.seed,
        num_layers=n_layers,
    )
    out = []
    for protocol in protocols:
        manifest = protocol_manifest(common, protocol)
        # the keys are valid for the model (check_targets): at word level only neutral pooling drops one
        dropped = model_facts(lm).map_keys(keys, level="word").dropped if PROTOCOLS[protocol] == "word" else {}
        mine = [k for k in keys if k not in dropped]
        if dropped:  # only then (the OLA orders always stay): every other manifest is the one it always was
            manifest["keys"] = mine
        if cache_root is not None:
            root = Path(cache_root).expanduser()
        else:
            root = default_cache_root(manifest, settings.cache_dir)
        p = plan
        if shard is not None and shard[1] > 1:
            index, count = shard
            if not 0 <= index < count:
                raise ValueError(f"shard index {index} is outside 0..{count - 1}")
            root = shard_root(root, index, count)
            manifest["shard"] = [index, count]
            p = [batch for b, batch in enumerate(plan) if b % count == index]
        manifest[RECORDED] = {"torch_threads": int(settings.torch_threads)}
        out.append(Target(protocol, root, manifest, p, mine, dropped))
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
    settings: CacheSettings | None = None,
    **setting_keywords,
) -> bool:
    """Whether the default-folder caches of every protocol are complete with these settings.

    Runs no model: the manifests are computed from ``loaded``'s name, weight fingerprint,
    config and tokenizer (so ``loaded`` may be a :func:`olas_utils.zoo.controls.control_identity`
    stand-in for a control copy that was never built).

    Args:
        settings: a :class:`CacheSettings`, or its fields as keywords.

    Returns:
        True if every protocol's cache exists with exactly these settings and all its
        batches are committed.

    Raises:
        ValueError, TypeError: as :func:`~olas_utils.similarity.imagecache.extract_protocols`
            for bad settings.
    """
    settings = CacheSettings.of(settings, **setting_keywords)
    chunks = check_settings(settings.image_size, settings.batch_size, chunks)
    targets = plan_targets(loaded, chunks, list(protocols), settings)
    return all(is_complete(t) for t in targets)
