"""Cross-LM OLA similarity (notebook 02), the computation: extraction of every model and
control into the image cache, the per-item outcomes of SSIM/Pearson retrieval (the rank of
every chunk's true match, per ordered model pair) and of the visual classifier (the rank of
every test image's true chunk, per seed). Every table is computed from these items by
:mod:`olas_utils.studies.crosslm_stats` (intervals, verdicts); figures and the comparison
with the paper are in :mod:`olas_utils.studies.crosslm_report`.

The notebook calls these functions in order (then those two modules'); profiles (sizes)
live in :data:`PROFILES`.
Families are compared among themselves, as in the paper (encoders with encoders, causal
LMs with causal LMs); a model's family is read from its config (``LoadedModel.is_causal``).
Beyond the paper, :mod:`olas_utils.studies.crossfamily` compares encoders with causal LMs.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd

from olas_utils.studies.depth import drop_skipped, mixing_skips, orders_for
from olas_utils.studies.profiles import ClassifierSettings, CrossLMProfile
from olas_utils.vocabulary import FAMILIES, Control, MapKey
from olas_utils.zoo.registry import DEFAULT_MODELS, same_lineage, zoo_family

__all__ = [
    "PROFILES",
    "RETRIEVAL_ITEM_COLUMNS",
    "CLASSIFIER_ITEM_COLUMNS",
    "CLASSIFIER_DESIGNS",
    "ImageSet",
    "extract_images",
    "retrieval_items",
    "items_frame",
    "add_retrieval_ranks",
    "classifier_frame",
]


_U, _R, _H, _S = Control.TOKENIZER_ONLY, Control.RANDOM_WEIGHTS, Control.HALF_RANDOM, Control.SHUFFLED_LAYERS
_BASELINES = ("rollout", "layer:0", "layer:-1")
#: The context-mixing baselines of the paper profile (``docs/method.md#context-mixing``): ALTI (the
#: paper's), value-norm rollout and ALTI order 1 (beside OLA order 1: is the similarity an
#: attention property or a context-mixing one?). They cost about 2.6× the extraction of OLA
#: alone (``alti`` + ``valuenorm`` on minilm-l6 and smollm2-135m, one thread), so the quick
#: profile has none and the smoke profile only ``alti``. The word protocol has no ``alti`` images of
#: the causal models (:func:`olas_utils.maths.uniform.neutral_problem`); ``alti:1`` it has.
_MIXING = ("alti", "valuenorm", "alti:1")
_PROTOCOLS = ("released", "paper", "word")

#: Columns of :func:`retrieval_items`: one row per (…, target, source, chunk); ``rank`` is the
#: 0-based rank of the chunk's true match among the source's images (a hit@k when < k).
RETRIEVAL_ITEM_COLUMNS = ("family", "control", "protocol", "key", "metric", "target", "source", "chunk", "rank")
#: Columns of the classifier's items (:func:`classifier_frame`): one row per test image of
#: the unseen target and seed; ``rank`` is the true chunk's 0-based rank among the classes.
CLASSIFIER_ITEM_COLUMNS = ("family", "control", "target", "key", "protocol", "seed", "chunk", "rank")

#: Visual-classifier designs of :func:`classifier_frame` (``benchmarks/classifier_designs.py`` compares
#: them, and more, on held-out-source accuracy).
CLASSIFIER_DESIGNS = ("resnet18", "logistic")
#: What a classifier target keeps out of its sources: itself (leave-one-model-out) or its lineage.
HELD_OUT = ("model", "lineage")

#: Notebook 02 sizes per profile (``models=None``: the default zoo). Every control runs on
#: every protocol; the uniform control costs no forward pass, and each model (and control
#: copy) runs once for all protocols. Retrieval of the controls uses SSIM only (the paper's
#: metric); the trained models also get Pearson. A model shallower than an order has no
#: images of it and is left out of that order's comparisons. The classifier trains every
#: network (the trained models' and each control's) once per seed of ``classifier.seeds``.
#: The quick (and smoke) profile's classifier is the logistic design, chosen on held-out-source
#: accuracy (``benchmarks/classifier_designs.py``: the ResNet-18 reached 2–13 % on its held-out
#: source with 1–3 images per class), leave-one-model-out over every target of a family, every
#: key of the paper's table and every control; the paper profile keeps the paper's ResNet-18.
PROFILES: dict[str, CrossLMProfile] = {
    "smoke": CrossLMProfile(
        models=("minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m"),
        n_chunks=12,
        orders=(1, 2),
        baselines=("rollout", "alti"),
        protocols=_PROTOCOLS,
        controls=(_U, _R, _H),
        classifier=ClassifierSettings(
            keys=("ola:1",),
            epochs=2,
            patience=1,
            controls=(_U,),
            protocol="paper",
            targets="last",
            refit=False,
            seeds=(0, 1),
            design="logistic",
        ),
        batch_size=4,
    ),
    "quick": CrossLMProfile(
        models=None,
        n_chunks=128,
        orders=(1, 2, 3),
        baselines=_BASELINES,
        protocols=_PROTOCOLS,
        controls=(_U, _R, _H, _S),
        classifier=ClassifierSettings(
            keys=("ola:1", "ola:2", "ola:3") + _BASELINES,
            epochs=10,
            patience=3,
            controls=(_U, _R, _H, _S),
            protocol="paper",
            targets="all",
            refit=True,
            seeds=(0, 1, 2),
            design="logistic",
        ),
        batch_size=8,
    ),
    "paper": CrossLMProfile(
        models=None,
        n_chunks=1000,
        orders=(1, 2, 3),
        baselines=_BASELINES + _MIXING,
        protocols=_PROTOCOLS,
        controls=(_U, _R, _H, _S),
        classifier=ClassifierSettings(
            keys=("ola:1", "ola:2", "ola:3") + _BASELINES + _MIXING,
            epochs=60,
            patience=8,
            controls=(_U, _R, _H, _S),
            protocol="paper",
            targets="all",
            refit=True,
            seeds=(0, 1, 2),
        ),
        batch_size=16,
    ),
}

#: ``gemma``: every offline model — quick's settings, sizes and controls on the default zoo plus the
#: two optional models: ``embeddinggemma-300m`` (a bidirectional encoder trained from Gemma 3: the
#: encoder sibling of the gemma3-270m decoder, with the same tokenizer), so that the cross-family rows
#: compare one lineage on both sides, and ``qwen2.5-1.5b`` (a fourth causal model, a sibling of
#: qwen2.5-0.5b). 7 encoders and 4 causal models, the most units this machine has for the
#: across-models reading. Both are prepared on first use (``make models-optional``). Results in
#: ``results/gemma/``.
PROFILES["gemma"] = replace(PROFILES["quick"], models=(*DEFAULT_MODELS, "embeddinggemma-300m", "qwen2.5-1.5b"))
#: ``mixing``: quick's models, settings and controls with the paper profile's context-mixing baselines
#: (:data:`_MIXING`: ALTI, value-norm rollout, ALTI order 1) in retrieval and in the classifier — the
#: paper's OLA / rollout / ALTI comparison — on 64 chunks instead of 128 (they cost about 2.6× the
#: extraction: the cut is in size, not in controls). Results in ``results/mixing/``.
PROFILES["mixing"] = replace(
    PROFILES["quick"],
    n_chunks=64,
    baselines=_BASELINES + _MIXING,
    classifier=replace(PROFILES["quick"].classifier, keys=PROFILES["quick"].classifier.keys + _MIXING),
)

#: ``flow``: attention flow (Abnar & Zuidema 2020, ``docs/method.md#attention-flow``) beside OLA and
#: rollout, with quick's models, protocols and controls, on 64 chunks of 20 words. Its max-flows cost
#: about the fourth power of the tokens a chunk has (:func:`olas_utils.maths.flow.flow_cost`): on the paper's
#: 50-word chunks (about 65 tokens) they take about 80 s per chunk for the nine models on one core, on
#: 20-word chunks about 2–3 s, so the cut is in chunk length, not in models or controls. Results in
#: ``results/flow/`` beside notebook 03's.
PROFILES["flow"] = replace(
    PROFILES["quick"],
    n_chunks=64,
    chunk_words=20,
    baselines=("rollout", "flow"),
    classifier=replace(PROFILES["quick"].classifier, keys=("ola:1", "rollout", "flow")),
)

#: ``paper-size``: retrieval at the paper's test size — 1,000 chunks of 50 words (``docs/method.md#paper-size``)
#: — on the default zoo's causal family (smollm2-135m, gemma3-270m, qwen2.5-0.5b) with every control and
#: every protocol, OLA orders 1–3 only, no classifier (retrieval only), so that Hit@1 / Hit@5 stand beside
#: the paper's 84–96 % / 89–97 % among the same number of candidates. Sized to 2 CPU cores (92 minutes measured,
#: ``docs/profiles.md``): the forward passes of the three models and their three control copies at 1,000 chunks
#: (about 70 tokens each) took 59 minutes, its 270 SSIM matrices of 1,000 × 1,000 (3 orders × 3 protocols × 5
#: conditions × 6 ordered pairs) and the Pearson ones 32; qwen2.5-1.5b alone would add four forward passes of
#: about 30 minutes each, and the six encoders 30 ordered pairs per key, so neither fits 150 minutes. Results in
#: ``results/paper-size/``.
PROFILES["paper-size"] = replace(
    PROFILES["quick"],
    models=tuple(m for m in DEFAULT_MODELS if zoo_family(m) == "causal"),
    n_chunks=1000,
    baselines=(),
    classifier=None,
)


@dataclass
class ImageSet:
    """Cached images of every model, per (control, protocol).

    Attributes:
        caches: ``{(control, protocol): {model: CachedImages}}``; control is the
            :attr:`~olas_utils.vocabulary.Control.ident` of the trained model or of a
            control copy (tokenizer-only, random weights, shuffled layers).
        families: ``{model: "encoder" | "causal"}``.
        keys: the map keys stored.
        built: ``(model, control identifier)`` of every control copy that had to be built (its caches
            were incomplete); a complete cache is read without building the copy.
        model_keys: ``{model: keys}`` where a model lacks some of ``keys`` (an OLA order
            above its number of layers, a context-mixing key its architecture cannot give);
            a model not listed has them all. A word-level cache may hold fewer (its
            ``.keys``; :meth:`with_key` with the protocol reads them).
    """

    caches: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    built: list[tuple[str, str]] = field(default_factory=list)
    model_keys: dict[str, list[str]] = field(default_factory=dict)

    def with_key(self, key: str, models: Sequence[str], protocol: str | None = None) -> list[str]:
        """The ``models`` that have images of ``key`` (of ``protocol``, if given: a word-level
        cache leaves out the keys whose neutral pooling means nothing on its model,
        :func:`olas_utils.maths.uniform.neutral_problem`), in the given order."""
        out = [m for m in models if key in self.model_keys.get(m, self.keys)]
        if protocol is not None:
            caches = self.caches.get((Control.TRAINED.ident, protocol), {})
            out = [m for m in out if m not in caches or key in caches[m].keys]
        return out

    def images(
        self, control: Control | str, protocol: str, key: str, models: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """``{model: (n, S, S) array}`` for one control (or its identifier), protocol and key."""
        caches = self.caches[(Control.parse(control).ident, protocol)]
        return {m: np.asarray(caches[m].images(key)) for m in (models or caches)}

    def family_models(self, family: str) -> list[str]:
        """Models of a family, in extraction order."""
        return [m for m, f in self.families.items() if f == family]


def extract_images(
    models: Sequence[str],
    chunks: Sequence[Sequence[str]],
    *,
    orders: Sequence[int],
    baselines: Sequence[str],
    protocols: Sequence[str],
    controls: Sequence[Control | str] = (),
    batch_size: int = 8,
    seed: int = 0,
    device=None,
    progress: bool = True,
    cache_dir=None,
) -> ImageSet:
    """Extract (or reuse from the cache) OLA images of every model, protocol and control.

    Each model is loaded once and runs **one forward pass per batch for all protocols and
    keys** (:func:`olas_utils.similarity.imagecache.extract_protocols`); so does each control copy
    (:data:`olas_utils.zoo.controls.CONTROLS`: tokenizer-only runs no forward pass at all,
    random weights and shuffled layers are built with the fixed ``seed``). A control copy is
    built only when its caches are incomplete (:func:`~olas_utils.similarity.imagecache.cache_complete`
    on its :func:`~olas_utils.zoo.controls.control_identity`). Caches are resumable and
    settings-checked.

    Args:
        models: zoo names / folders / Hugging Face ids.
        chunks: the corpus (:func:`olas_utils.data.corpus.build_chunks`).
        orders, baselines: what to store (``"ola:k"`` per order, plus e.g. ``"rollout"``,
            ``"layer:-1"`` and context-mixing keys such as ``"alti"``, ``"alti:1"``); a model gets
            the orders it has (:func:`olas_utils.studies.depth.orders_for`) and the mixing keys
            its architecture and depth give (:func:`olas_utils.studies.depth.mixing_skips`: the
            others are left out for that model with a ``UserWarning`` naming key and reason,
            and recorded in :attr:`ImageSet.model_keys`). The tokenizer-only control's image
            of a mixing key is the key's uniform counterpart
            (:func:`olas_utils.extract.uniform_mixing`).
        protocols: some of ``"released"``, ``"paper"``, ``"word"``, for the models and
            every control.
        controls: some of :data:`olas_utils.zoo.controls.CONTROLS` (or their
            :attr:`~olas_utils.vocabulary.Control.ident`).
        batch_size, seed, device, progress, cache_dir: see
            :func:`~olas_utils.similarity.imagecache.extract_protocols`.

    Returns:
        An :class:`ImageSet`.

    Raises:
        ValueError: on an unknown control or protocol.
    """
    from olas_utils.similarity.imagecache import CacheSettings, cache_complete, extract_protocols
    from olas_utils.zoo import load_model
    from olas_utils.zoo.controls import CONTROLS, control_identity

    bad = [c for c in controls if _as_control(c) not in CONTROLS]
    if bad:
        raise ValueError(f"unknown control(s) {bad}; use {sorted(c.ident for c in CONTROLS)}")
    baselines = [str(MapKey.parse(b)) if MapKey.parse(b).mixing else b for b in baselines]
    out = ImageSet(keys=[str(MapKey.ola(k)) for k in orders] + list(baselines))
    for name in models:
        lm = load_model(name, device=device)
        out.families[name] = lm.family
        mine = orders_for(name, orders, lm.num_layers)
        base = drop_skipped(name, baselines, mixing_skips(lm, baselines))  # warns for each key it drops
        if len(mine) < len(orders) or len(base) < len(baselines):
            out.model_keys[name] = [str(MapKey.ola(k)) for k in mine] + base
        settings = CacheSettings(orders=mine, baselines=base, batch_size=batch_size, seed=seed, cache_dir=cache_dir)
        for control in [Control.TRAINED, *map(Control.parse, controls)]:
            if control is Control.TRAINED:
                model = lm
            else:
                ident = control_identity(lm, control, seed)
                if ident is not None and cache_complete(ident, chunks, protocols=protocols, settings=settings):
                    model = ident  # complete: only read, never run
                else:
                    model = CONTROLS[control](lm, seed=seed)
                    if control is not Control.TOKENIZER_ONLY:  # a uniform "copy" is only a label: nothing is built
                        out.built.append((name, control.ident))
            cached = extract_protocols(model, chunks, protocols=protocols, settings=settings, progress=progress)
            for protocol, c in cached.items():
                out.caches.setdefault((control.ident, protocol), {})[name] = c
            if control is not Control.TRAINED:
                del model
                gc.collect()
        del lm
        gc.collect()
    return out


def _as_control(c) -> Control | None:
    """``c`` as a :class:`~olas_utils.vocabulary.Control`, None if it names none."""
    try:
        return Control.parse(c)
    except ValueError:
        return None


def items_frame(columns: dict[str, list], names: Sequence[str]) -> pd.DataFrame:
    """A long items frame from ``{column: values}``, columns in the order of ``names``: string
    columns categorical (small in memory and on disk), ``chunk``, ``rank`` and ``seed`` int32."""
    df = pd.DataFrame(columns, columns=list(names))
    for c in names:
        if c in ("chunk", "rank", "seed"):
            df[c] = df[c].astype(np.int32)
        else:
            df[c] = df[c].astype("category")
    return df


def retrieval_items(
    images: ImageSet,
    *,
    metrics: Sequence[str] = ("ssim", "pearson"),
    control_metrics: Sequence[str] = ("ssim",),
    progress: bool = True,
) -> pd.DataFrame:
    """The rank of every chunk's true match, for every ordered model pair within each
    family, control, protocol, key and metric (``metrics`` for the trained models,
    ``control_metrics`` for the controls): the per-item outcomes every retrieval table is
    computed from (:mod:`olas_utils.studies.crosslm_stats`). Ranks come from
    :func:`olas_utils.similarity.retrieval_ranks`, the code path of Hit@k; ties follow each
    protocol's rule (:data:`olas_utils.similarity.images.TIES`: pessimistic, or
    first-index-wins for ``"released"``). Only pairs of models that have the key.

    Returns:
        A DataFrame with :data:`RETRIEVAL_ITEM_COLUMNS` (strings as categoricals, ``chunk``
        and ``rank`` int32), one row per (…, target, source, chunk).
    """
    from olas_utils.similarity import retrieval_ranks
    from olas_utils.similarity.images import TIES

    cols: dict[str, list] = {c: [] for c in RETRIEVAL_ITEM_COLUMNS}
    for (control, protocol), caches in images.caches.items():
        for family in FAMILIES:
            fam = [m for m in images.family_models(family) if m in caches]
            if len(fam) < 2:
                continue
            for key in images.keys:
                have = images.with_key(key, fam, protocol)
                if len(have) < 2:
                    continue
                imgs = images.images(control, protocol, key, have)
                for metric in metrics if control == Control.TRAINED.ident else control_metrics:
                    for r in retrieval_ranks(imgs, metric=metric, ties=TIES[protocol], progress=False):
                        add_retrieval_ranks(cols, r, family=family, control=control, protocol=protocol, key=key)
    return items_frame(cols, RETRIEVAL_ITEM_COLUMNS)


def add_retrieval_ranks(cols: dict[str, list], r: dict, *, family: str, control: str, protocol: str, key: str) -> None:
    """Append one ordered pair's ranks (a dict of :func:`olas_utils.similarity.retrieval_ranks`: target,
    source, metric, ranks) to ``cols`` (``{column: values}`` of :data:`RETRIEVAL_ITEM_COLUMNS`), one row
    per chunk, labelled with ``family``, ``control``, ``protocol`` and ``key``."""
    n = len(r["ranks"])
    labels = {"family": family, "control": control, "protocol": protocol, "key": key, "metric": r["metric"]}
    for c, v in (*labels.items(), ("target", r["target"]), ("source", r["source"])):
        cols[c].extend([v] * n)
    cols["chunk"].extend(range(n))
    cols["rank"].extend(r["ranks"].tolist())


def classifier_frame(
    images: ImageSet,
    *,
    keys: Sequence[str],
    epochs: int,
    protocol: str = "paper",
    targets: str = "all",
    refit: bool = True,
    patience: int | None = None,
    controls: Sequence[Control | str] = (),
    seeds: Sequence[int] = (0,),
    progress: bool = True,
    design: str = "resnet18",
    min_epochs: int = 1,
    workers: int | None = None,
    held_out: str = "model",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The visual classifier: for each family and each target model, a classifier (``design``) trained on
    the other models of the family (the sources) is tested on the unseen target, one map key
    (one channel) at a time — for the trained models and for each control (trained and
    tested on that control's images), once per seed. A key is skipped for a target that
    lacks it, and models that lack it are not sources.

    Early stopping never uses the target: with two or more sources, the last source is held
    out and training stops once its accuracy has not improved for ``patience`` epochs (then,
    with ``refit``, a fresh network is trained on all sources for the chosen number of
    epochs); with one source, a fixed augmented copy of it is the held-out set (see
    :func:`olas_utils.similarity.classifier.train_classifier`).

    Args:
        targets: ``"all"`` (every model of a family in turn) or ``"last"`` (only the last
            model of each family: the quick profile's CPU budget).
        refit: retrain on all sources after leave-one-source-out selection.
        patience: early-stopping patience in epochs (None: train all ``epochs``).
        controls: controls to train and test the same way (e.g. ``[Control.TOKENIZER_ONLY,
            Control.RANDOM_WEIGHTS]``, or their identifiers).
        seeds: training seeds; every network is trained once per seed (the same seeds for
            the trained models and the controls, so their margins pair by seed).
        design: one of :data:`CLASSIFIER_DESIGNS`: ``"resnet18"`` (the paper's network,
            :func:`olas_utils.similarity.classifier.train_classifier`) or ``"logistic"``
            (:func:`olas_utils.similarity.logistic.train_logistic`: regularisation chosen on the
            held-out source the way the epoch is; its fit is deterministic, so with two or more
            sources it is fitted once and its outcome repeated for every seed (seeds only change
            a single source's augmented selection copy); ``epochs``, ``patience`` and
            ``min_epochs`` do not apply, and the epoch columns hold lbfgs iterations).
        min_epochs: ResNet-18 only: never stop before this many epochs.
        workers: logistic only: fits run side by side, one BLAS thread each
            (:func:`olas_utils.similarity.logistic.train_logistic_many`; default
            :func:`~olas_utils.similarity.logistic.logistic_workers`: one per core, at most 8).
        held_out: ``"model"`` (leave-one-model-out: every other model of the family is a
            source) or ``"lineage"`` (leave-one-lineage-out: no model of the target's lineage,
            :func:`olas_utils.zoo.registry.same_lineage`, is a source; only targets that have such a
            sibling in the family are run, the others' sources would not change).

    Returns:
        ``(runs, items)``. ``runs``: one row per (family, control, target, key, seed) with
        columns ``family, control, target, held_out, sources, key, protocol, seed, source_top1`` (the
        chosen network on its own training images, no augmentation), ``heldout_source,
        heldout_top1`` (the held-out source at the chosen epoch), ``top1, top5`` (the
        unseen target), ``n, chance, max_epochs, epochs_run, chosen_epoch, capped`` (the
        epoch cap stopped it while the held-out accuracy was still at its best: a lower
        bound; for the logistic design lbfgs iterations, its cap and whether it reached it),
        ``design``, ``chosen`` (``"epoch 8"``, ``"C=0.1"``), ``selection``, ``curve`` (held-out
        accuracy per epoch, or per ``C`` tried, ``;``-joined) and ``fit_workers`` (processes the
        logistic fits ran in, one BLAS thread each; 1 for the ResNet-18).
        ``items``: :data:`CLASSIFIER_ITEM_COLUMNS`, the rank of every target image's true
        chunk per seed (``top1``/``top5`` are its fractions below 1 and 5).

    Raises:
        ValueError: no seed, or a repeated one; an unknown design or ``held_out``; ``workers``
            not a positive integer (logistic).
    """
    from olas_utils.similarity.classifier import train_classifier
    from olas_utils.similarity.evaluation import evaluate, predict_ranks
    from olas_utils.similarity.logistic import logistic_workers, train_logistic_many

    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be one or more different integers, got {seeds}")
    if design not in CLASSIFIER_DESIGNS:
        raise ValueError(f"design must be one of {CLASSIFIER_DESIGNS}, got {design!r}")
    if held_out not in HELD_OUT:
        raise ValueError(f"held_out must be one of {HELD_OUT}, got {held_out!r}")

    def siblings(target: str, fam: Sequence[str]) -> list[str]:
        """The models of ``fam`` that share ``target``'s lineage (unknown lineages share none)."""
        return [m for m in fam if m != target and same_lineage(m, target)]

    def cells():
        """(control, family, target, key, sources, images) of every classifier cell, in table order."""
        for control in [Control.TRAINED.ident, *(Control.parse(c).ident for c in controls)]:
            for family in FAMILIES:
                fam = images.family_models(family)
                if len(fam) < 2 or (control, protocol) not in images.caches:
                    continue
                for target in fam if targets == "all" else fam[-1:]:
                    if held_out == "lineage" and not siblings(target, fam):
                        continue  # its sources would be leave-one-model-out's
                    for key in keys:
                        have = images.with_key(key, fam, protocol)
                        gone = {target, *(siblings(target, fam) if held_out == "lineage" else ())}
                        sources = [m for m in have if m not in gone]
                        if target not in have or not sources:
                            continue  # the target (or every source) is shallower than this order
                        yield control, family, target, key, sources, images.images(control, protocol, key, have)

    def fit_seeds(sources):
        # the logistic fit with a held-out source does not depend on the seed: one fit serves them all
        return seeds if len(sources) < 2 else seeds[:1]

    logistic: dict[tuple, object] = {}
    fit_workers = 1
    if design == "logistic":  # every fit first, side by side; then the table, in order
        ids, jobs = [], []
        for control, family, target, key, sources, imgs in cells():
            for seed in fit_seeds(sources):
                ids.append((control, family, target, key, seed))
                jobs.append(
                    {
                        "train_images": {m: imgs[m] for m in sources},
                        "seed": seed,
                        "refit": refit and len(sources) >= 2,
                    }
                )
        fit_workers = logistic_workers(workers, len(jobs))
        logistic = dict(zip(ids, train_logistic_many(jobs, workers=fit_workers, progress=progress)))
    rows = []
    cols: dict[str, list] = {c: [] for c in CLASSIFIER_ITEM_COLUMNS}
    for control, family, target, key, sources, imgs in cells():
        for seed in seeds:
            if design == "logistic":
                fit_seed = seed if seed in fit_seeds(sources) else fit_seeds(sources)[0]
                res = logistic[(control, family, target, key, fit_seed)]
                cap, run, chosen, capped = res.max_iter, res.n_iter, res.n_iter, res.capped
                label = f"C={res.c:g}"
                held_top1 = res.selection_top1[res.chosen_index - 1]
            else:
                res = train_classifier(
                    {m: imgs[m] for m in sources},
                    epochs=epochs,
                    seed=seed,
                    refit=refit and len(sources) >= 2,
                    patience=patience,
                    min_epochs=min_epochs if patience is not None else 1,
                    progress=progress,
                )
                cap, run, chosen = epochs, len(res.train_loss), res.chosen_epoch
                capped, label = bool(run == epochs and chosen == run), f"epoch {chosen}"
                held_top1 = res.selection_top1[chosen - 1] if res.selection_top1 else float("nan")
            src = float(np.mean([evaluate(res, imgs[m]).top1 for m in res.train_models]))
            ranks = predict_ranks(res, imgs[target])
            n = int(ranks.shape[0])
            held = res.selection.split(":", 1)[1] if res.selection.startswith("source:") else res.selection
            rows.append(
                {
                    "family": family,
                    "control": control,
                    "target": target,
                    "held_out": held_out,
                    "sources": ", ".join(sources),
                    "key": key,
                    "protocol": protocol,
                    "seed": seed,
                    "source_top1": src,
                    "heldout_source": held,
                    "heldout_top1": held_top1,
                    "top1": float((ranks < 1).mean()),
                    "top5": float((ranks < 5).mean()),
                    "n": n,
                    "chance": 1.0 / n,
                    "max_epochs": cap,
                    "epochs_run": run,
                    "chosen_epoch": chosen,
                    "capped": capped,
                    "design": design,
                    "chosen": label,
                    "selection": res.selection,
                    "curve": ";".join(f"{v:.3f}" for v in res.selection_top1),
                    "fit_workers": fit_workers,
                }
            )
            for c, v in (
                ("family", family),
                ("control", control),
                ("target", target),
                ("key", key),
                ("protocol", protocol),
                ("seed", seed),
            ):
                cols[c].extend([v] * n)
            cols["chunk"].extend(range(n))
            cols["rank"].extend(ranks.tolist())
    return pd.DataFrame(rows), items_frame(cols, CLASSIFIER_ITEM_COLUMNS)
