"""OLA maps of task sentences, extracted once per model (and control) and cached on disk.

The cache file name carries a SHA-256 of everything the maps depend on (model weights
hash, control and its seed, the sentences' words, orders, library versions), so maps made
with other settings are never reused: they simply are not found. Only the words enter the
key, not the task or its labels: the same sentences of two tasks (UD English-EWT and UNER
English-EWT) or two notebooks (03 and 04) share one extraction. Files are written atomically
(:meth:`olas_utils.extract.OLAMaps.save`); an unreadable file is reported and re-extracted.
"""

from __future__ import annotations

import gc
import hashlib
import json
import warnings
from pathlib import Path
from typing import Sequence

from olas_utils.extract import OLAMaps
from olas_utils.data.tasks import TaskData

__all__ = ["ModelPool", "maps_key", "task_maps"]

#: ``"random"``: a randomly initialised copy; ``"uniform"``: the tokenizer-only control
#: (uniform attention through the same pipeline, no forward pass).
CONTROLS = ("random", "uniform")


def _versions() -> dict:
    import torch
    import transformers

    from olas_utils import __version__

    return {"olas": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


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

    def get(self, name: str, control: str | None = None):
        """The :class:`~olas_utils.zoo.LoadedModel` for ``name``, or its control
        (``"random"``: :func:`olas_utils.zoo.controls.random_weights_copy` with the pool's seed;
        ``"uniform"``: the model itself, whose attention :func:`task_maps` then replaces).

        Raises:
            ValueError: unknown control.
        """
        if control is not None and control not in CONTROLS:
            raise ValueError(f"unknown control {control!r}; available: {CONTROLS}")
        if name != self._name:
            self._models.clear()
            gc.collect()
            self._name = name
        if None not in self._models:
            from olas_utils.zoo import load_model

            self._models[None] = load_model(name, device=self.device)
        if control == "uniform":
            return self._models[None]  # uniform attention needs the model's tokenizer and config only
        if control not in self._models:
            from olas_utils.zoo.controls import random_weights_copy

            self._models[control] = random_weights_copy(self._models[None], seed=self.seed)
        return self._models[control]

    def release(self) -> None:
        """Drop every loaded model."""
        self._models.clear()
        self._name = None
        gc.collect()


def maps_key(weights_id: str, model: str, control: str | None, seed: int, data: TaskData,
             orders: Sequence[int], rollout: bool) -> str:
    """SHA-256 of everything the maps of ``data`` depend on."""
    payload = {"weights": weights_id, "model": model, "control": control,
               "control_seed": seed if control == "random" else None,
               "words": hashlib.sha256(json.dumps(data.words).encode()).hexdigest(),
               "orders": sorted(orders), "rollout": rollout, "versions": _versions()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def task_maps(pool: ModelPool, model: str, data: TaskData, *, control: str | None = None,
              orders: Sequence[int] = (1, 2, 3), rollout: bool = True, batch_size: int = 8,
              cache_dir=None, progress: bool = True) -> OLAMaps:
    """Subword-level OLA maps of ``data.words`` for a model or its control, cached.

    Args:
        pool: a :class:`ModelPool` (loads the model only if the maps are not cached).
        model: zoo name, folder or Hugging Face id.
        data: a task split (:func:`olas_utils.data.tasks.load_task`).
        control: None, ``"random"`` or ``"uniform"`` (see :data:`CONTROLS`).
        orders, rollout: what to extract (see :func:`olas_utils.extract.extract_ola`).
        batch_size: sentences per forward pass.
        cache_dir: OLAS cache folder (default :func:`olas_utils.settings.cache_dir`); maps go
            to ``<cache>/taskmaps``.
        progress: progress bar.

    Returns:
        :class:`~olas_utils.extract.OLAMaps` at subword level (``.to_words()`` for words).

    Warns:
        UserWarning: the cache cannot be written (the maps are still returned) or a cached
            file is unreadable (it is extracted again).
    """
    from olas_utils.extract import extract_ola
    from olas_utils.settings import cache_dir as default_cache

    key = maps_key(pool.weights_id(model), model, control, pool.seed, data, orders, rollout)
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in model)
    path = Path(default_cache(cache_dir)) / "taskmaps" / f"{safe}{'+' + control if control else ''}-{key[:24]}.pt"
    if path.exists():
        try:
            return OLAMaps.load(path)
        except Exception as e:  # noqa: BLE001 - a damaged file is re-extracted, never trusted
            warnings.warn(f"cached maps {path} are unreadable ({e}); extracting again", stacklevel=2)
    lm = pool.get(model, control)
    maps = extract_ola(lm.model, lm.tokenizer, data.words, orders=orders, rollout=rollout, layers=(),
                       batch_size=batch_size, progress=progress, model_name=lm.name,
                       attention="uniform" if control == "uniform" else "model")
    try:
        maps.save(path)
    except OSError as e:  # keep the work: return the maps, say why they were not cached
        warnings.warn(f"could not write OLA maps to the cache {path} ({e.strerror or e}); they are returned but "
                      "will be extracted again next time. Set OLAS_CACHE_DIR to a writable folder.", stacklevel=2)
    return maps
