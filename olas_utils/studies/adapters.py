"""Adapter runs shared by notebooks 03 and 04: each (model, control, sentences) extracted
once, adapter inputs per condition, training with early stopping on a dev split.

Conditions of a trained adapter (:data:`INPUTS`, :class:`~olas_utils.vocabulary.Control`
members; ``docs/method.md#controls``):

* ``Control.TRAINED`` — the model's OLA maps (the claim under test);
* ``Control.TOKENIZER_ONLY`` — uniform attention through the same pipeline
  (:func:`olas_utils.toa.taskmaps.task_maps` with that control): what tokenisation
  and sentence length alone give. At word level with neutral pooling every visible word
  pair is exactly 1, so this control sees the sentence length (and, for causal models,
  the causal mask) and nothing else;
* ``Control.POSITION_ONLY`` — the same adapter given relative-position channels instead
  of OLA (:func:`olas_utils.toa.features.position_image`): what word order alone gives;
* ``Control.RANDOM_WEIGHTS`` / ``Control.HALF_RANDOM`` — the same adapter *trained and tested* on the
  maps of the model's randomly initialised (or half re-initialised,
  :func:`olas_utils.zoo.controls.half_random_copy`) copy: what the architecture and tokenizer
  give without (or with half of) the trained attention.

A model-free baseline (:func:`olas_utils.toa.fit.trivial_baseline`) and the random-init
target (an adapter trained on the real model's maps, applied unchanged to a randomly
initialised copy's maps: out of distribution, so it says how the adapter fails, not what a
random model's maps carry) complete the controls. Control inputs that do not depend on the model (both controls at word level)
give byte-identical examples, hence one checkpoint: they are trained once and reused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from olas_utils.data.tasks import TaskData
from olas_utils.vocabulary import Control, family_of

if TYPE_CHECKING:
    from olas_utils.toa.fit import AdapterSettings

__all__ = ["INPUTS", "MapStore", "provenance", "adapter_job", "train_adapters", "resources", "stopping"]

#: Adapter inputs by condition name: each reads the maps of its :attr:`Control.maps` (for
#: :func:`~olas_utils.toa.taskmaps.task_maps`), or relative-position channels where
#: :attr:`Control.positions` (``source`` of :func:`~olas_utils.toa.features.build_examples`).
INPUTS: dict[str, Control] = {
    c.condition: c
    for c in (
        Control.TRAINED,
        Control.TOKENIZER_ONLY,
        Control.POSITION_ONLY,
        Control.RANDOM_WEIGHTS,
        Control.HALF_RANDOM,
    )
}
#: Inputs whose examples depend on the model they are read from (its maps or its control copy's).
_MODEL_INPUTS = (Control.TRAINED, Control.RANDOM_WEIGHTS, Control.HALF_RANDOM)


def _input(inputs) -> Control:
    c = Control.parse(inputs)
    if c not in INPUTS.values():
        raise ValueError(f"inputs must be one of {list(INPUTS)}, got {inputs!r}")
    return c


class MapStore:
    """Adapter inputs of (model, sentences, control), each map extracted once per process
    (and cached on disk across processes by :func:`~olas_utils.toa.taskmaps.task_maps`).

    Args:
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool`.
        level: ``"word"`` (neutral pooling) or ``"subword"``.
        orders: OLA orders to extract (per model, those it has).
        mixing: context-mixing keys to extract in the same pass (``"alti:1"``, ...; per model,
            those it can give: :meth:`mixing_for`). With none, the maps and their disk cache
            are exactly those of a store without the argument.
        progress: bars.

    Raises:
        ValueError: an unknown level, or a ``mixing`` key that is not a context-mixing key.
    """

    def __init__(
        self,
        pool,
        *,
        level: str = "word",
        orders: Sequence[int] = (1, 2, 3),
        mixing: Sequence[str] = (),
        progress: bool = True,
    ) -> None:
        from olas_utils.studies.depth import mixing_keys

        if level not in ("word", "subword"):
            raise ValueError(f"level must be 'word' or 'subword', got {level!r}")
        self.pool, self.level, self.orders, self.progress = pool, level, tuple(orders), progress
        if isinstance(mixing, (str, bytes)) or len(mixing_keys(mixing)) != len(tuple(mixing)):
            raise ValueError(f"mixing takes context-mixing keys ('alti', 'alti:1', 'valuenorm', ...), got {mixing!r}")
        self.mixing = tuple(dict.fromkeys(mixing_keys(mixing)))
        self._maps: dict = {}
        self._mixing: dict[str, tuple[str, ...]] = {}
        self.causal: dict[str, bool] = {}

    def mixing_for(self, model: str) -> tuple[str, ...]:
        """The store's mixing keys that ``model`` can give at the store's level
        (:func:`olas_utils.studies.depth.mixing_skips`; each other one is left out with a
        ``UserWarning``). Asked once per model; with mixing
        keys, the first question loads the trained model (its modules say what it has)."""
        from olas_utils.studies.depth import drop_skipped, mixing_skips

        if not self.mixing:
            return ()
        if model not in self._mixing:
            skips = mixing_skips(self.pool.get(model), self.mixing, level=self.level)
            self._mixing[model] = tuple(drop_skipped(model, self.mixing, skips))
        return self._mixing[model]

    def keys_for(self, model: str, keys: Sequence[str]) -> list[str]:
        """The ``keys`` that ``model`` has: by its depth (:func:`olas_utils.studies.depth.keys_for`)
        and, for context-mixing keys, by :meth:`mixing_for`.

        Raises:
            ValueError: a mixing key of ``keys`` that the store was not made with (pass it in
                ``MapStore(..., mixing=...)``).
        """
        from olas_utils.studies.depth import keys_for, mixing_keys

        missing = [k for k in mixing_keys(keys) if k not in self.mixing]
        if missing:
            raise ValueError(
                f"the map store extracts the mixing keys {list(self.mixing)}, not {missing}: make it with "
                f"MapStore(pool, ..., mixing={mixing_keys(keys)!r})"
            )
        have = self.mixing_for(model)
        return [k for k in keys_for(model, keys) if k not in self.mixing or k in have]

    def maps(self, model: str, data: TaskData, control: Control | str = Control.TRAINED):
        """:class:`~olas_utils.maps.OLAMaps` of ``data.words`` at the store's level, for the
        trained model or one of :data:`olas_utils.toa.taskmaps.CONTROLS`."""
        from olas_utils.studies.depth import orders_for
        from olas_utils.toa.taskmaps import task_maps

        control = Control.parse(control)
        k = (model, control, data.fingerprint())
        if k not in self._maps:
            m = task_maps(
                self.pool,
                model,
                data,
                control=control,
                orders=orders_for(model, self.orders),
                mixing=self.mixing_for(model),
                progress=self.progress,
            )
            self._maps[k] = m.to_words() if self.level == "word" else m
            self.causal[model] = bool(m.is_causal)
        return self._maps[k]

    def family(self, model: str) -> str:
        """``"causal"`` or ``"encoder"`` (read from the maps, so after a first :meth:`maps`)."""
        return family_of(self.causal[model])

    def examples(
        self,
        model: str,
        data: TaskData,
        keys: Sequence[str],
        *,
        inputs: Control | str = Control.TRAINED,
        control: Control | str = Control.TRAINED,
        normalize: str = "none",
    ) -> list:
        """Adapter examples of ``data`` for one of :data:`INPUTS`, read from the maps of
        ``control``'s :attr:`~olas_utils.vocabulary.Control.maps` (e.g.
        ``Control.RANDOM_INIT_TARGET``: the random-weights copy's), for the trained input only.

        Raises:
            ValueError: unknown input, or a control combined with a control input.
        """
        from olas_utils.toa.features import build_examples

        inp, control = _input(inputs), Control.parse(control)
        if control is not Control.TRAINED and inp is not Control.TRAINED:
            raise ValueError(f"control={control.ident!r} cannot be combined with the {inp.condition!r} input")
        if control.maps is None:
            raise ValueError(f"the {control.condition!r} control reads no maps")
        maps = self.maps(model, data, control.maps if control is not Control.TRAINED else inp.maps)
        return build_examples(maps, data, keys, source="position" if inp.positions else "ola", normalize=normalize)

    def release(self) -> None:
        """Drop the loaded models (the maps stay)."""
        self.pool.release()


def provenance(
    models: Sequence[str],
    keys: Sequence[str],
    level: str,
    *,
    inputs: Control | str = Control.TRAINED,
    variant: str = "plain",
) -> dict:
    """What identifies an adapter run beyond its examples, the same in notebooks 03 and 04
    (so that the same run in both is trained once): the source models, map keys, level and
    training variant (and the input's condition name for a random or half-random copy's maps);
    for the tokenizer-only and position-only inputs only the input and level (their examples
    do not depend on the model). It feeds checkpoint keys."""
    inp = _input(inputs)
    if inp not in _MODEL_INPUTS:
        return {"inputs": inp.condition, "level": level}
    out = {"models": list(models), "keys": list(keys), "level": level, "variant": variant}
    return out if inp is Control.TRAINED else {**out, "inputs": inp.condition}


def adapter_job(
    train: tuple[list, TaskData],
    dev: tuple[list, TaskData],
    cfg: AdapterSettings,
    *,
    seed: int = 0,
    provenance: dict | None = None,
    augment: bool = False,
    device="cpu",
    checkpoint_dir=None,
    desc: str = "train",
) -> dict:
    """Keyword arguments of :func:`olas_utils.toa.fit.fit_adapter` for one adapter of a
    notebook profile with early stopping on ``dev``.

    Args:
        train, dev: ``(examples, data)`` (dev: a dev split or a held-out tenth, never test).
        cfg: a profile's :class:`~olas_utils.toa.fit.AdapterSettings` (its ``training``).
        seed: initialisation and batch-order seed.
        provenance: identifies the run beyond its examples (:func:`provenance`).
        augment: the paper's augmentations (highlighted sink columns p 0.3, temperature p 0.3,
            besides the noise every run has).
        device, checkpoint_dir, desc: see :func:`olas_utils.toa.fit.fit_adapter`
            (``checkpoint_dir`` default ``<cache>/toa``).
    """
    from dataclasses import replace

    from olas_utils.infra.settings import cache_dir
    from olas_utils.toa.fit import adapter_config, profile_training

    x_tr, d_tr = train
    tcfg, heads = profile_training(cfg, seed, d_tr.kind)
    if augment:
        tcfg = replace(tcfg, sink_p=0.3, temperature_p=0.3)
    return {
        "examples": x_tr,
        "data": d_tr,
        "adapter": adapter_config(cfg.adapter, int(x_tr[0].image.shape[0])),
        "cfg": tcfg,
        "checkpoint_dir": checkpoint_dir or (cache_dir() / "toa"),
        "provenance": provenance,
        "head_kwargs": heads,
        "dev": dev,
        "patience": cfg.patience,
        "min_epochs": cfg.min_epochs,
        "min_gain": cfg.min_gain,
        "device": device,
        "desc": desc,
    }


def train_adapters(jobs: dict, cfg: AdapterSettings, *, progress: bool = True) -> dict:
    """Train the :func:`adapter_job` runs in ``jobs`` (name → job), ``cfg.workers`` at a
    time on a CPU (:func:`olas_utils.toa.parallel.fit_many`; default one per core; one at a
    time on an accelerator), each distinct run once. Returns name → ``(model, info)``."""
    from olas_utils.toa.parallel import fit_many

    device = next((j.get("device", "cpu") for j in jobs.values()), "cpu")
    return fit_many(jobs, workers=_workers(cfg, device), progress=progress)


def _workers(cfg: AdapterSettings, device) -> int:
    """Adapters a profile trains at a time: ``cfg.workers`` (default one per core) on the
    CPU, 1 on an accelerator (the profile's setting is a CPU setting)."""
    from olas_utils.toa.parallel import default_workers

    return 1 if str(device) != "cpu" else int(cfg.workers or default_workers(device))


def stopping(cfg: AdapterSettings, score: str = "dev") -> str:
    """The early-stopping rule of a profile's adapters, for the sizes line beside every table,
    e.g. ``"patience 4, minimum gain 0.5 points, on dev UAS"`` (``score``: what dev measures)."""
    gain = f", minimum gain {100 * cfg.min_gain:g} points," if cfg.min_gain else ""
    return f"patience {cfg.patience}{gain} on {score}"


def resources(cfg: AdapterSettings, device="cpu") -> str:
    """How a profile's adapters are trained, for the sizes line beside every table: threads,
    and on a CPU how many adapters train at a time (``cfg.workers``, default one per core)."""
    import torch

    threads = torch.get_num_threads()
    workers = _workers(cfg, device)
    if workers > 1:
        return f"{workers} adapters trained at a time, {max(1, threads // workers)} thread each ({threads} threads)"
    return f"{threads} thread{'s' * (threads > 1)}"
