"""OLA and syntax (notebook 03; ``docs/method.md#ola-and-syntax``): training-free probes of word-level OLA and a
biaffine dependency parser trained on each model's OLA, per order and for rollout.

Sizes live in :data:`PROFILES`; the notebook calls :func:`probe_frame` and :func:`parser_frame`
(each returns its table and the per-sentence outcomes it is computed from), then the tables,
figure and text of :mod:`olas_utils.studies.syntax_report`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import pandas as pd

from olas_utils.data.tasks import TaskData
from olas_utils.maths.sinks import preprocess
from olas_utils.studies.depth import drop_skipped, keys_for, mixing_keys, mixing_skips, orders_for
from olas_utils.studies.profiles import (
    PAPER_TRAINING,
    QUICK_PARSER_TRAINING,
    SHARED_SIZES,
    SHARED_TRAINING,
    SplitSizes,
    SyntaxProfile,
)
from olas_utils.vocabulary import CAUSAL, ENCODER, Control, MapKey, family_of

__all__ = [
    "PROFILES",
    "PAPER_PARSER",
    "MIN_MARGIN",
    "PROBE_VARIANTS",
    "PROBE_COUNTS",
    "PROBE_RATES",
    "PARSER_CONTROLS",
    "BASELINE_MODEL",
    "probe_maps",
    "probe_frame",
    "probe_rates",
    "parser_frame",
]


#: Notebook 03 sizes (``models=None``: the default zoo; a model shallower than an order skips
#: that order's key, see :mod:`olas_utils.studies.depth`). ``n_*`` are sentences of UD
#: English-EWT train / dev / test with ``min_words..max_words`` words (dev chooses the epoch); ``level`` is the adapter's
#: input level; ``adapter`` a size of :data:`olas_utils.toa.adapter.ADAPTER_SIZES`; ``workers``
#: adapters trained at the same time, one thread each (:func:`olas_utils.toa.parallel.fit_many`;
#: None: one per core). The smoke and quick sizes are notebook 04's
#: (:data:`~olas_utils.studies.profiles.SHARED_SIZES`); smoke's training settings too
#: (``SHARED_TRAINING``), so its dependency adapters and controls are trained once for both; quick's
#: parsers stop by their own rule (:data:`~olas_utils.studies.profiles.QUICK_PARSER_TRAINING`).
PROFILES: dict[str, SyntaxProfile] = {
    "smoke": SyntaxProfile(
        models=("minilm-l6", "smollm2-135m"),
        sizes=SHARED_SIZES["smoke"],
        keys=("ola:1", "rollout", "alti"),
        level="word",
        training=SHARED_TRAINING["smoke"],
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS),
    ),
    "quick": SyntaxProfile(
        models=("minilm-l6", "smollm2-135m"),
        sizes=SHARED_SIZES["quick"],
        keys=("ola:1", "ola:2", "ola:3", "rollout"),
        level="word",
        training=QUICK_PARSER_TRAINING,  # 9 seeds, patience 4 with a 0.5-point gain: see QUICK_PARSER_TRAINING
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS),
    ),
    "paper": SyntaxProfile(
        models=None,
        sizes=SplitSizes(n_train=None, n_dev=None, n_test=None, max_words=None, min_words=1),
        keys=("ola:1", "ola:2", "ola:3", "rollout", "alti:1"),
        level="subword",
        training=PAPER_TRAINING,
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS, Control.HALF_RANDOM),
    ),
}

#: ``mixing``: quick's models, sizes, settings and controls with the context-mixing baselines beside
#: OLA order 1 and rollout (``docs/method.md#context-mixing``): ALTI and value-norm decomposed by
#: order (``alti:1``, ``valuenorm:1``: the OLA recurrence on their per-layer matrices — is what a
#: parser reads an attention property or a context-mixing one?). Orders 2–3 are left to quick. The
#: task maps are extracted again with the mixing keys and a parser's checkpoint is keyed by its
#: maps' bytes: an OLA or rollout parser is quick's where the maps come out byte-identical
#: (minilm-l6 on 2026-12-05) and is trained again where they do not (smollm2-135m). Results in
#: ``results/mixing/``.
PROFILES["mixing"] = replace(PROFILES["quick"], keys=("ola:1", "rollout", "alti:1", "valuenorm:1"))
#: ``flow``: quick's models, sizes, settings and controls with attention flow (Abnar & Zuidema 2020,
#: ``docs/method.md#attention-flow``) beside OLA order 1 and rollout, the paper's other aggregation of
#: every layer's attention: T² max-flows per sentence, which quick's sentences (3–20 words) keep to
#: minutes on a CPU. The tokenizer-only control's flow is that of uniform attention. Results in
#: ``results/flow/``.
PROFILES["flow"] = replace(PROFILES["quick"], keys=("ola:1", "rollout", "flow"))

#: Condition names of the trained parser and of the model-free baseline.
_BASELINE = Control.BASELINE.condition

#: What acceptance asks of the OLA parser (issue #11): ola:1 UAS above the neighbour chain by
#: at least this many points, per family.
MIN_MARGIN = {ENCODER: 20.0, CAUSAL: 15.0}

#: Reported UAS / LAS (%) of the paper's OLA parser (``docs/method.md#reported-parser-numbers``, BERT-base).
PAPER_PARSER: dict[str, tuple[float, float]] = {
    "ola:1": (81.3, 72.2),
    "ola:2": (72.9, 61.1),
    "ola:3": (66.4, 53.2),
    "rollout": (46.2, 30.7),
}


#: Map variants the probes are run on: ``"raw"`` (the word map as extracted) and
#: ``"sinks removed"`` (:func:`olas_utils.maths.sinks.outlier_mask` zeroed). The outlier rule
#: always includes each row's maximum, so the second variant asks about the strongest word
#: *after* the row's top entry (often an attention sink) is gone; both are reported.
PROBE_VARIANTS = ("raw", "sinks removed")


def probe_maps(maps, key: str, *, remove_sinks: bool = True) -> list:
    """Word-level maps of ``key`` prepared for the probes: optionally attention-sink
    outliers removed (which includes each row's maximum), rows renormalised, causal maps
    symmetrised (:func:`olas_utils.maths.sinks.preprocess`).

    Args:
        maps: :class:`~olas_utils.extract.OLAMaps` at word level.
        key: e.g. ``"ola:1"``.
        remove_sinks: zero the outliers first.

    Returns:
        One ``(W, W)`` tensor per sentence.

    Raises:
        ValueError: subword-level maps.
    """
    if maps.level != "word":
        raise ValueError("the probes need word-level maps (OLAMaps.to_words())")
    return [
        preprocess(m[None], causal=maps.is_causal, remove_sinks=remove_sinks, renormalize=True, symmetrize=True)[0]
        for m in maps[key]
    ]


def probe_frame(
    models: Sequence[str], test: TaskData, pool, *, keys: Sequence[str], progress: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training-free probes (:func:`olas_utils.toa.probes.probe_sentence`) per model and key, plus
    the neighbouring-word baselines (:func:`olas_utils.toa.probes.adjacent_counts`), per sentence.

    Args:
        models: model names.
        test: the EWT split to probe (``load_task("dependency", "test", ...)``).
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool`.
        keys: maps to probe (a model shallower than an order skips its key; a context-mixing key
            such as ``"alti:1"`` is extracted in the same pass, and skipped with a warning by a
            model that cannot give it, :func:`olas_utils.studies.depth.mixing_skips`).
        progress: progress bars (maps are extracted by :func:`olas_utils.toa.taskmaps.task_maps`).

    Returns:
        ``(probes, items)``. ``probes``: rows ``model, family, maps, key, head_acc,
        dependent_acc, either_acc, uuas`` (``maps``: one of :data:`PROBE_VARIANTS`), computed
        from ``items``; the baseline rows have ``model="baseline: next word"`` (and
        ``"previous word"``) and ``maps = key = "-"`` (their ``uuas`` is the neighbour
        chain's). ``items``: the same columns but the rates, plus ``sentence`` and the counts
        ``n, n_head, head, dependent, either, correct, total`` (the rates are
        ``head / n_head``, ``dependent / n``, ``either / n``, ``correct / total``).
    """
    from olas_utils.studies.outcomes import item_rows
    from olas_utils.toa.probes import adjacent_counts, probe_sentence
    from olas_utils.toa.taskmaps import task_maps

    items = []
    for name in models:
        mixing = mixing_keys(keys)
        if mixing:  # asks the loaded model which it can give
            mixing = drop_skipped(name, mixing, mixing_skips(pool.get(name).model, mixing, level="word"))
        maps = task_maps(
            pool,
            name,
            test,
            orders=orders_for(name, (1, 2, 3)),
            mixing=mixing,
            progress=progress,
        ).to_words()
        for variant in PROBE_VARIANTS:
            for key in keys_for(name, keys):
                if MapKey.parse(key).mixing and str(MapKey.parse(key)) not in mixing:
                    continue
                per = [
                    probe_sentence(m, h)
                    for m, h in zip(probe_maps(maps, key, remove_sinks=variant == "sinks removed"), test.heads)
                ]
                run = {"model": name, "family": family_of(maps.is_causal), "maps": variant, "key": key}
                items += item_rows(run, {c: [r[c] for r in per] for c in PROBE_COUNTS})
    adj = [adjacent_counts(h) for h in test.heads]
    for side, label in (("next", "next word"), ("prev", "previous word")):
        cols = {"n": "n", "n_head": "n_head", "head": f"{side}_head", "dependent": f"{side}_dependent"}
        cols.update(either=f"{side}_either", correct="chain", total="total")
        run = {"model": f"baseline: {label}", "family": "-", "maps": "-", "key": "-"}
        items += item_rows(run, {c: [r[src] for r in adj] for c, src in cols.items()})
    items = pd.DataFrame(items)
    return probe_rates(items), items


#: Per-sentence count columns of the probes' items, and each rate's (numerator, denominator).
PROBE_COUNTS = ("n", "n_head", "head", "dependent", "either", "correct", "total")
PROBE_RATES = {
    "head_acc": ("head", "n_head"),
    "dependent_acc": ("dependent", "n"),
    "either_acc": ("either", "n"),
    "uuas": ("correct", "total"),
}


def probe_rates(items: pd.DataFrame) -> pd.DataFrame:
    """The probes' rates per (model, maps, key) from their per-sentence counts (:func:`probe_frame`)."""
    g = items.groupby(["model", "family", "maps", "key"], sort=False)[list(PROBE_COUNTS)].sum().reset_index()
    for rate, (num, den) in PROBE_RATES.items():
        g[rate] = (g[num] / g[den].where(g[den] > 0)).fillna(0.0)
    return g[["model", "family", "maps", "key", *PROBE_RATES]]


def parser_frame(
    models: Sequence[str],
    train: TaskData,
    dev: TaskData,
    test: TaskData,
    pool,
    cfg: SyntaxProfile,
    *,
    seeds: Sequence[int] | None = None,
    device="cpu",
    checkpoint_dir=None,
    progress: bool = True,
    store=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The biaffine OLA parser trained per model, key and seed (``docs/method.md#ola-and-syntax``)
    beside its controls, with early stopping on EWT dev.

    Each key is one adapter with 2 channels (the map raw and sink-removed), trained on
    ``train`` with the epoch chosen on ``dev`` (never on ``test``), once per training seed.
    Rows per model, key and seed:

    * ``ola`` — trained and tested on the model's maps;
    * ``random-init target`` — that adapter tested on a randomly initialised copy's maps;
    * ``tokenizer-only`` / ``position-only`` — the same adapter trained and tested on
      uniform-attention maps / relative-position channels
      (:mod:`olas_utils.studies.adapters`; at word level they are the same for every model
      and key of a family, so each is trained once per family and seed);
    * ``random-weights`` / ``half-random`` (when in ``cfg.input_controls``) — the same adapter
      trained and tested on the key's maps of the model's randomly initialised / half
      re-initialised copy;

    and one ``baseline`` row (:func:`olas_utils.toa.fit.trivial_baseline`, the neighbour
    chain; deterministic, ``seed`` 0).

    Args:
        models: model names.
        train, dev, test: EWT splits (``load_task("dependency", "train" | "dev" | "test", ...)``).
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool`.
        cfg: a profile of :data:`PROFILES` (its keys, level and training settings;
            ``training.workers``: adapters trained at the same time on a CPU, see
            :func:`olas_utils.toa.parallel.fit_many`); a model shallower than an order skips its key.
        seeds: training seeds (default ``cfg.training.seeds``).
        device: where to train.
        checkpoint_dir: resumable checkpoints (default ``<cache>/toa``).
        progress: bars.
        store: a :class:`~olas_utils.studies.adapters.MapStore` to share maps with other
            studies (default: a new one on ``pool`` extracting ``cfg.keys``' context-mixing keys);
            it must extract those keys (``MapStore(..., mixing=...)``).

    Returns:
        ``(parser, items)``. ``parser``: rows ``model, family, key, condition, seed, uas, las,
        uas_nopunct, las_nopunct, uas_greedy, las_greedy`` (fractions; ``*_greedy``: heads by
        greedy argmax as the released code scores them, ``docs/method.md#released-code``; the
        others use Chu–Liu/Edmonds trees) and ``best_epoch, epochs_run, stopped_early, dev_curve``
        (``stopped_early``: patience on dev, not the epoch cap, ended training; ``dev_curve``: the
        dev UAS after each epoch). ``items``: per row of ``parser`` and test sentence
        (``sentence``), the outcomes of :func:`olas_utils.toa.fit.sentence_outcomes` (``arcs,
        labels, words`` and their ``_nopunct`` forms) and ``arcs_greedy, labels_greedy``.
    """
    from olas_utils.studies.adapters import MapStore, adapter_job, provenance, train_adapters
    from olas_utils.studies.outcomes import item_rows
    from olas_utils.toa.fit import evaluate_trees, score, sentence_outcomes, trivial_baseline

    seeds = tuple(cfg.training.seeds if seeds is None else seeds)
    store = store or MapStore(pool, level=cfg.level, mixing=mixing_keys(cfg.keys), progress=progress)
    plan = {}
    for name in models:  # 1. maps, model-major (each model and its random copy loaded once), and the runs
        for data in (train, dev, test):
            store.maps(name, data)
            store.maps(name, data, Control.TOKENIZER_ONLY)
            for control in cfg.input_controls:
                if control.maps not in (None, Control.TRAINED, Control.TOKENIZER_ONLY):
                    store.maps(name, data, control.maps)
        store.maps(name, test, Control.RANDOM_INIT_TARGET.maps)
        store.release()
        for key in store.keys_for(name, cfg.keys):  # a mixing key the model cannot give is skipped (warned)
            for inputs in (Control.TRAINED, *cfg.input_controls):
                x = {s: store.examples(name, d, [key], inputs=inputs) for s, d in (("train", train), ("dev", dev))}
                for seed in seeds:
                    plan[name, key, inputs, seed] = adapter_job(
                        (x["train"], train),
                        (x["dev"], dev),
                        cfg.training,
                        seed=seed,
                        device=device,
                        provenance=provenance([name], [key], cfg.level, inputs=inputs),
                        checkpoint_dir=checkpoint_dir,
                        desc=f"parser {name} {key} {inputs.condition} seed {seed}",
                    )
    trained = train_adapters(plan, cfg.training, progress=progress)  # 2. every distinct run once, in parallel on a CPU

    rows, items = [], []

    def add(name, key, condition, seed, model, info, x_test):
        # one forward pass, decoded twice (the MST tree and each word's best head)
        both = evaluate_trees(model, x_test, test, ("mst", "greedy"), device=device)
        (r, out), (g, greedy) = both["mst"], both["greedy"]
        run = {"model": name, "family": store.family(name), "key": key, "condition": condition, "seed": seed}
        rows.append(
            {
                **run,
                **r,
                "uas_greedy": g["uas"],
                "las_greedy": g["las"],
                "best_epoch": info["best_epoch"],
                "epochs_run": info["epochs_run"],
                "stopped_early": bool(info["stopped_early"]),
                "dev_curve": " ".join(f"{v:.3f}" for v in info["curve"]),
            }
        )
        items.extend(item_rows(run, {**out, "arcs_greedy": greedy["arcs"], "labels_greedy": greedy["labels"]}))

    for (name, key, inputs, seed), (model, info) in trained.items():  # 3. test
        add(name, key, inputs.condition, seed, model, info, store.examples(name, test, [key], inputs=inputs))
        if inputs is Control.TRAINED:
            add(
                name,
                key,
                Control.RANDOM_INIT_TARGET.condition,
                seed,
                model,
                info,
                store.examples(name, test, [key], control=Control.RANDOM_INIT_TARGET),
            )
    base = trivial_baseline(train, test)
    run = {"model": BASELINE_MODEL, "family": "-", "key": "-", "condition": _BASELINE, "seed": 0}
    rows.append({**run, **score(test, base)})
    out = sentence_outcomes(test, base)
    items.extend(item_rows(run, {**out, "arcs_greedy": out["arcs"], "labels_greedy": out["labels"]}))
    return pd.DataFrame(rows), pd.DataFrame(items)


#: The ``model`` of the parser table's model-free baseline row.
BASELINE_MODEL = "baseline: neighbour chain"


#: Controls of the parser table, in display order (condition names of
#: :class:`~olas_utils.vocabulary.Control`).
PARSER_CONTROLS = tuple(
    c.condition
    for c in (
        Control.TOKENIZER_ONLY,
        Control.POSITION_ONLY,
        Control.RANDOM_WEIGHTS,
        Control.HALF_RANDOM,
        Control.RANDOM_INIT_TARGET,
        Control.BASELINE,
    )
)
