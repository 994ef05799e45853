"""OLA maps of task sentences, each sentence extracted once per model (and control) and
cached on disk.

The cache folder name carries a SHA-256 of everything the maps depend on besides the words
(model weights hash, control and its seed, orders, context-mixing keys if any, library
versions, torch's thread count), so maps made with other settings are never reused: they simply
are not found. Each sentence is extracted in a forward pass of its own (:data:`EXTRACTION`), so
its bytes depend on its words, the model and these settings only, never on which other
sentences happened to be missing from the cache with it: a fresh cache and one filled over
several runs hold byte-identical maps (``docs/reproducibility.md``).
Inside it, maps are stored per sentence, identified by its words only
(:mod:`olas_utils.toa.mapshards`), not by the task, its labels or the list it came in: the
same sentences of two tasks (UD English-EWT and UNER English-EWT, which list them in other
orders) or two notebooks (03 and 04) are extracted once. Shards are written atomically; an
unreadable, damaged or foreign one (a content hash or key that does not match,
:mod:`olas_utils.toa.mapshards`) is reported, set aside and its sentences extracted again.
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Sequence

import torch

from olas_utils.data.tasks import TaskData
from olas_utils.extract import OLAMaps
from olas_utils.infra.fingerprint import legacy_json, library_versions, sha256_text
from olas_utils.vocabulary import Control, MapKey

__all__ = ["ModelPool", "maps_key", "task_maps", "EXTRACTION"]

#: How :func:`task_maps` extracts, recorded in its cache key: one sentence per forward pass.
#: Batched, a sentence's maps move in the last float32 bits with its batch's padded length and
#: size (``docs/reproducibility.md``), and a cache that extracts only the sentences it lacks
#: would make them depend on the cache's history; alone, they cannot. It costs about 3x the
#: extraction time of batches of 8 on a CPU (64 EWT sentences at 2 threads: minilm-l6 0.7 s
#: against 0.2-0.3 s, smollm2-135m 6.1 s against 2.0 s).
EXTRACTION = "one sentence per forward pass"

#: The controls whose maps can be made here besides the trained model's:
#: :attr:`Control.RANDOM_WEIGHTS` (a randomly initialised copy), :attr:`Control.HALF_RANDOM` (half of the
#: layers re-initialised) and :attr:`Control.TOKENIZER_ONLY` (uniform attention through the same
#: pipeline, no forward pass).
CONTROLS = (Control.RANDOM_WEIGHTS, Control.HALF_RANDOM, Control.TOKENIZER_ONLY)
#: Controls whose copy depends on the pool's seed.
_SEEDED = (Control.RANDOM_WEIGHTS, Control.HALF_RANDOM)


def _control(control) -> Control:
    """A :class:`~olas_utils.vocabulary.Control` of :data:`CONTROLS` or the trained model
    (also from its identifier)."""
    c = Control.parse(control)
    if c is not Control.TRAINED and c not in CONTROLS:
        raise ValueError(f"unknown control {control!r}; available: {[x.ident for x in CONTROLS]}")
    return c


class ModelPool:
    """Loads models lazily and keeps only the most recent one (and its control) in memory.

    Args:
        device: device for :func:`olas_utils.zoo.load_model`.
        seed: seed of the random-initialisation control.
    """

    def __init__(self, device=None, seed: int = 0) -> None:
        self.device, self.seed = device, seed
        self._name: str | None = None
        self._models: dict = {}
        self._weights_ids: dict[str, str] = {}

    def weights_id(self, name: str) -> str:
        """SHA-256 of a zoo model's pinned weights without loading it; other models are
        loaded and their weights hashed once per pool (:func:`olas_utils.zoo.weights_fingerprint`)."""
        from olas_utils.zoo import REGISTRY

        if name in REGISTRY:
            return REGISTRY[name].sha256
        if name not in self._weights_ids:
            from olas_utils.zoo import weights_fingerprint

            self._weights_ids[name] = weights_fingerprint(self.get(name))
        return self._weights_ids[name]

    def get(self, name: str, control: Control | str = Control.TRAINED):
        """The :class:`~olas_utils.zoo.LoadedModel` for ``name``, or its control
        (random weights: :func:`olas_utils.zoo.controls.random_weights_copy` with the pool's
        seed, half-random: :func:`~olas_utils.zoo.controls.half_random_copy`; tokenizer-only: the model itself, whose attention :func:`task_maps` then replaces).

        Raises:
            ValueError: unknown control.
        """
        control = _control(control)
        if name != self._name:
            self._models.clear()
            gc.collect()
            self._name = name
        if Control.TRAINED not in self._models:
            from olas_utils.zoo import load_model

            self._models[Control.TRAINED] = load_model(name, device=self.device)
        if control is Control.TOKENIZER_ONLY:  # uniform attention needs the model's tokenizer and config only
            return self._models[Control.TRAINED]
        if control not in self._models:
            from olas_utils.zoo.controls import make_control

            self._models[control] = make_control(self._models[Control.TRAINED], control, seed=self.seed)
        return self._models[control]

    def release(self) -> None:
        """Drop every loaded model."""
        self._models.clear()
        self._name = None
        gc.collect()


def _mixing(mixing: Sequence[str]) -> list[str]:
    """Context-mixing keys as sorted canonical names, each once.

    Raises:
        ValueError: a key that is not a context-mixing key.
        TypeError: a single string instead of a collection.
    """
    if isinstance(mixing, (str, bytes)):
        raise TypeError(f"mixing must be a collection of keys, e.g. mixing=({mixing!r},)")
    out = set()
    for key in mixing:
        k = MapKey.parse(key)
        if not k.on_request:
            raise ValueError(
                f"{str(k)!r} is not a context-mixing key ('valuenorm', 'alti', 'globenc', 'alti:2', ...) or 'flow'"
            )
        out.add(str(k))
    return sorted(out)


def maps_key(
    weights_id: str,
    model: str,
    control: Control | str,
    seed: int,
    orders: Sequence[int],
    rollout: bool,
    mixing: Sequence[str] = (),
) -> str:
    """SHA-256 of everything a sentence's maps depend on besides its words (the weights,
    control and its seed, orders, rollout, context-mixing keys, library versions, how it is
    extracted (:data:`EXTRACTION`) and torch's thread count at the call, which changes the
    last bits of BLAS products): one shard folder each. ``mixing`` enters the payload only
    when it is not empty (as sorted canonical names).

    Raises:
        ValueError: an unknown control or a ``mixing`` key that is not a context-mixing key.
    """
    control = _control(control)
    payload = {
        "weights": weights_id,
        "model": model,
        "control": control.cache_id,
        "control_seed": seed if control in _SEEDED else None,
        "orders": sorted(orders),
        "rollout": rollout,
        "versions": library_versions(),
        "extraction": EXTRACTION,
        "torch_threads": torch.get_num_threads(),
    }
    mixing = _mixing(mixing)
    if mixing:
        payload["mixing"] = mixing
    return sha256_text(legacy_json(payload))


def task_maps(
    pool: ModelPool,
    model: str,
    data: TaskData,
    *,
    control: Control | str = Control.TRAINED,
    orders: Sequence[int] = (1, 2, 3),
    rollout: bool = True,
    mixing: Sequence[str] = (),
    cache_dir=None,
    progress: bool = True,
) -> OLAMaps:
    """Subword-level OLA maps of ``data.words`` for a model or its control, cached per
    sentence: only sentences that no earlier call stored are extracted
    (:mod:`olas_utils.toa.mapshards`), each in a forward pass of its own (:data:`EXTRACTION`),
    so the result is byte-identical whatever the cache held before (at one thread count).

    Args:
        pool: a :class:`ModelPool` (loads the model only if some sentences are not cached).
        model: zoo name, folder or Hugging Face id.
        data: a task split (:func:`olas_utils.data.tasks.load_task`).
        control: :attr:`Control.TRAINED` or one of :data:`CONTROLS` (or its identifier).
        orders, rollout: what to extract (see :func:`olas_utils.extract.extract_ola`).
        mixing: context-mixing keys (``"alti"``, ``"alti:1"``, ``"valuenorm"``, ...) from the same
            forward pass (``extract_ola(..., mixing=...)``); for the tokenizer-only control, which
            runs none, each key's uniform counterpart (:func:`olas_utils.extract.uniform_mixing`).
            Part of the cache key only when not empty.
        cache_dir: OLAS cache folder (default :func:`olas_utils.infra.settings.cache_dir`); maps go
            to ``<cache>/taskmaps/<model>[+control]-<settings hash>/``.
        progress: progress bar.

    Returns:
        :class:`~olas_utils.extract.OLAMaps` at subword level (``.to_words()`` for words),
        one entry per sentence of ``data`` in its order.

    Warns:
        UserWarning: the cache cannot be written (the maps are still returned) or a cached
            shard is unreadable, damaged or foreign, naming it (its sentences are extracted again).

    Raises:
        ValueError: a ``mixing`` key that is not a context-mixing key, or one the model cannot
            give (:func:`olas_utils.capture.mixing_specs.mixing_problem`: leave it out for that model,
            :func:`olas_utils.studies.depth.mixing_skips`), when its sentences are extracted;
            ``data`` without sentences.
    """
    from olas_utils.extract import extract_ola, uniform_mixing
    from olas_utils.infra.settings import cache_dir as default_cache
    from olas_utils.toa.mapshards import DamagedShardError, MapShards, sentence_id

    control = _control(control)
    mixing = _mixing(mixing)
    key = maps_key(pool.weights_id(model), model, control, pool.seed, orders, rollout, mixing)
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in model)
    suffix = f"+{control.cache_id}" if control.cache_id else ""
    shards = MapShards(Path(default_cache(cache_dir)) / "taskmaps" / f"{safe}{suffix}-{key[:24]}", key=key)
    ids = [sentence_id(w) for w in data.words]
    if not ids:
        raise ValueError(f"{data.task}/{data.split} has no sentences to extract")
    loaded: dict = {}
    for _attempt in range(2):
        index = shards.index()
        todo = list(dict.fromkeys(i for i in ids if i not in index))
        if todo:
            words = dict(zip(ids, data.words))
            lm = pool.get(model, control)
            uniform = control is Control.TOKENIZER_ONLY
            if uniform and mixing:  # a key's uniform counterpart only where the model has the key
                lm.facts.require_mixing(mixing)
            new = extract_ola(
                lm,  # its facts, read once
                sentences=[words[i] for i in todo],
                orders=orders,
                rollout=rollout,
                layers=(),
                batch_size=1,  # EXTRACTION: a sentence's bytes never depend on its neighbours
                progress=progress,
                model_name=lm.name,
                attention="uniform" if uniform else "model",
                mixing=() if uniform else mixing,
            )
            if uniform and mixing:  # no forward pass: each mixing key's uniform counterpart
                new = uniform_mixing(new, mixing)
            try:
                name = shards.write(new, todo)
            except OSError as e:  # keep the work: use the maps from memory, say why they were not cached
                warnings.warn(
                    f"could not write OLA maps to the cache {shards.folder} ({e.strerror or e}); they are "
                    "returned but will be extracted again next time. Set OLAS_CACHE_DIR to a writable "
                    "folder.",
                    stacklevel=2,
                )
                name = "in memory"
                loaded[name] = new
            index.update({sid: (name, p) for p, sid in enumerate(todo)})
        try:
            return shards.read(ids, index, loaded=loaded)
        except DamagedShardError as e:  # never trusted: set aside, its sentences extracted again
            warnings.warn(f"{e}; extracting its sentences again", stacklevel=2)
            shards.drop(e.name)
    raise RuntimeError(f"the map cache {shards.folder} keeps failing; delete it and run again")
