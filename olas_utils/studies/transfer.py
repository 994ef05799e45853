"""Transferable OLA Adapter across LMs (notebook 04; ``docs/method.md#toa-tasks-and-metrics``).

Within each family an adapter is trained on every model's OLA for every task and evaluated,
unchanged, on every model of the family, under the conditions of :data:`CONDITIONS`
(``docs/method.md#transfer-conditions``).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations
from typing import Sequence

import pandas as pd

from olas_utils.data.tasks import TaskData, load_task
from olas_utils.studies.profiles import (
    PAPER_TRAINING,
    QUICK_TRANSFER_SEEDS,
    SHARED_SIZES,
    SHARED_TRAINING,
    VARIANTS,
    SplitSizes,
    TransferProfile,
)
from olas_utils.vocabulary import Control

__all__ = [
    "PROFILES",
    "WIDE_SIZES",
    "PAPER_CLAIMS",
    "CONDITIONS",
    "VARIANTS",  # the single-source training variants, defined with the profiles (profiles.VARIANTS)
    "CONTROLS",
    "TRANSFER_CONTROLS",
    "load_splits",
    "run_transfer",
    "transfer_condition",
    "score_keys",
    "transfer_matrix",
]

#: Controls of every transfer table, in display order (their condition names are :data:`CONTROLS`); the
#: trained random-weights and half-random inputs appear where a profile's ``input_controls`` has them.
TRANSFER_CONTROLS = (
    Control.RANDOM_INIT_TARGET,
    Control.RANDOM_WEIGHTS,
    Control.HALF_RANDOM,
    Control.TOKENIZER_ONLY,
    Control.POSITION_ONLY,
    Control.BASELINE,
)
#: Condition names of :data:`TRANSFER_CONTROLS` (the ``condition`` column).
CONTROLS = tuple(c.condition for c in TRANSFER_CONTROLS)
#: Table conditions, in display order.
CONDITIONS = (
    "self",
    "transfer",
    "transfer (rank)",
    "transfer (augmented)",
    "transfer (multi-source)",
    "TOA (headline)",
) + CONTROLS

#: Notebook 04 sizes (``models=None``: the default zoo; ``tasks=None``: all of
#: :data:`olas_utils.data.tasks.TASKS`). ``keys``: the OLA maps stacked as channels (each raw
#: and sink-removed, as in the paper). ``n_train / n_dev / n_test`` sentences per task
#: (dev: the task's dev split or a held-out tenth of its training split); ``workers``:
#: adapters trained at the same time on a CPU (:func:`olas_utils.toa.parallel.fit_many`).
#: The quick profile fits the 2-core budget with one task, dependency (the task self-trained
#: adapters learn best, so transfer can be tested), on four encoders: three of the MiniLM lineage
#: and distilbert-gector (DistilBERT from bert-base-cased), so that transfer between independent
#: lineages is tested beside transfer within one (``04_lineage``); its sentences and training
#: settings are notebook 03's (:data:`~olas_utils.studies.profiles.SHARED_SIZES`,
#: ``SHARED_TRAINING``) but for the stopping rule of 03's parsers
#: (:data:`~olas_utils.studies.profiles.QUICK_PARSER_TRAINING`), so since 2026-12-07 minilm-l6's
#: dependency adapters and the controls are trained for each notebook (shared at smoke).
#: The ``wide`` profile (``reproduce --profile wide`` writes ``results/wide/``) runs the whole
#: default zoo, every encoder (three of the MiniLM lineage, distilbert-gector, mpnet-base and
#: splade-tiny: four lineages) and the causal family, on dependency and relation, with quick's
#: training settings and controls on :data:`WIDE_SIZES` (fewer, shorter sentences than quick's, so
#: that its 294 adapters fit one working session: 76 min from empty caches on 2 cores, measured 2026-12-05). The ``tagging`` profile (``results/tagging/``;
#: quick's with other models and tasks) measures the paper's other two tasks, POS (CoNLL-2000) and
#: NER (CoNLL-2003, seqeval entity F1), with the quick sizes, settings, remedies and controls, on
#: two MiniLM encoders (a within-lineage pair) and distilbert-gector (DistilBERT from
#: bert-base-cased: two across-lineage pairs per target); the causal family and the other encoders
#: are left out to fit one working session on 2 cores.
#: Every task on the full zoo runs in the paper profile (or pass ``models`` / ``tasks``).
#: The ``wide`` profile's sentences: half quick's training set, of at most 15 words against quick's 20
#: (its adapters share nothing with quick's cache).
WIDE_SIZES = SplitSizes(n_train=200, n_dev=100, n_test=300, min_words=3, max_words=15)

PROFILES: dict[str, TransferProfile] = {
    "smoke": TransferProfile(
        models=("minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m"),
        tasks=("pos", "relation"),
        sizes=SHARED_SIZES["smoke"],
        keys=("ola:1", "ola:2"),
        level="word",
        training=SHARED_TRAINING["smoke"],
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS),
    ),
    "quick": TransferProfile(
        models=("minilm-l6", "paraphrase-minilm-l3", "e5-small", "distilbert-gector"),
        tasks=("dependency",),
        sizes=SHARED_SIZES["quick"],
        keys=("ola:1",),
        level="word",
        training=replace(SHARED_TRAINING["quick"], seeds=QUICK_TRANSFER_SEEDS),  # 8: see QUICK_TRANSFER_SEEDS
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS),
    ),
    "wide": TransferProfile(
        models=(
            "minilm-l6",
            "paraphrase-minilm-l3",
            "e5-small",
            "distilbert-gector",
            "mpnet-base",
            "splade-tiny",
            "smollm2-135m",
            "gemma3-270m",
            "qwen2.5-0.5b",
        ),
        tasks=("dependency", "relation"),
        sizes=WIDE_SIZES,
        keys=("ola:1",),
        level="word",
        training=SHARED_TRAINING["quick"],
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS),
    ),
    "paper": TransferProfile(
        models=None,
        tasks=None,
        sizes=SplitSizes(n_train=None, n_dev=None, n_test=None, max_words=None, min_words=1),
        keys=("ola:1", "ola:2"),
        level="subword",
        training=replace(PAPER_TRAINING, lr=1e-5),
        input_controls=(Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_WEIGHTS, Control.HALF_RANDOM),
    ),
}
PROFILES["tagging"] = replace(
    PROFILES["quick"],
    models=("minilm-l6", "paraphrase-minilm-l3", "distilbert-gector"),
    tasks=("pos", "ner-conll2003"),
    training=SHARED_TRAINING["quick"],  # three seeds, as its committed run (see QUICK_TRANSFER_SEEDS)
)

#: What the paper reports (``docs/method.md#reported-transfer-numbers``), for the closing comparison.
PAPER_CLAIMS = (
    "On SemEval relation classification, TOA trained on Llama-3.2-3B gives 30–33 % accuracy on "
    "unseen Qwen2-1.5B / Gemma-2-2B (5–8 % for zero-shot prompting); gains hold for POS, NER and "
    "parsing, largest for small models and syntax-heavy tasks."
)


def load_splits(
    tasks: Sequence[str], cfg: TransferProfile, seed: int = 0, data_dir=None
) -> dict[str, tuple[TaskData, TaskData, TaskData]]:
    """``{task: (train, dev, test)}`` subsets per the profile's :class:`SplitSizes`
    (the paper profile keeps every sentence)."""
    sizes = cfg.sizes
    kw = {"max_words": sizes.max_words, "min_words": sizes.min_words, "seed": seed, "data_dir": data_dir}
    n = {"train": sizes.n_train, "dev": sizes.n_dev, "test": sizes.n_test}
    return {t: tuple(load_task(t, split, n=n[split], **kw) for split in ("train", "dev", "test")) for t in tasks}


def run_transfer(
    models: Sequence[str],
    splits: dict[str, tuple[TaskData, TaskData, TaskData]],
    cfg: TransferProfile,
    pool,
    *,
    seeds: Sequence[int] | None = None,
    device="cpu",
    checkpoint_dir=None,
    progress: bool = True,
    store=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train every (model, task, variant, seed) adapter with early stopping on the model's dev
    data and evaluate it on every model of its family, with the remedies, controls and
    baseline of ``docs/method.md#transfer-conditions``.

    Args:
        models: model names (families read from their configs).
        splits: from :func:`load_splits`.
        cfg: a profile of :data:`PROFILES`.
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool` (its seed seeds the random copies).
        seeds: training seeds (default ``cfg.training.seeds``): every adapter is trained once
            per seed. The headline variant of a target is chosen once, on the dev transfer
            between the other models averaged over seeds.
        device: where to train and predict.
        checkpoint_dir: resumable checkpoints (default ``<cache>/toa``).
        progress: bars.
        store: a :class:`~olas_utils.studies.adapters.MapStore` shared with other studies.

    Returns:
        ``(frame, items)``. ``frame``, the long table: ``task, metric, family, source, target,
        condition, variant, seed, score`` and every metric of :func:`olas_utils.toa.fit.score`
        as its own column (fractions), plus ``best_epoch`` / ``epochs_run`` / ``stopped_early`` of the
        adapter (``stopped_early``: patience on dev, not the epoch cap, ended its training).
        ``source`` is ``"-"`` for the baseline (``seed`` 0: it is deterministic), ``"others"``
        for multi-source and ``"chosen"`` for the headline rows (one per seed, the mean over
        the other models of the chosen variant; ``variant`` names the choice and
        ``dev_choice`` its dev score). ``items``: per evaluated run (every row but the
        headline's) and test sentence (``sentence``), the run's columns and the outcomes of
        :func:`olas_utils.toa.fit.sentence_outcomes`.
    """
    from olas_utils.studies.adapters import MapStore, adapter_job, provenance, train_adapters
    from olas_utils.studies.outcomes import item_rows
    from olas_utils.toa.fit import HEADLINE, evaluate, evaluate_outcomes, score, sentence_outcomes, trivial_baseline

    seeds = tuple(cfg.training.seeds if seeds is None else seeds)
    store = store or MapStore(pool, level=cfg.level, progress=progress)
    keys = list(cfg.keys)
    variants = cfg.variants  # in VARIANTS' order, "plain" first
    # 1. maps, model-major (each model and its random copy loaded once)
    for name in models:
        for train, dev, test in splits.values():
            for data in (train, dev, test):
                store.maps(name, data)
                store.maps(name, data, Control.TOKENIZER_ONLY)
                for control in cfg.input_controls:
                    if control.maps not in (None, Control.TRAINED, Control.TOKENIZER_ONLY):
                        store.maps(name, data, control.maps)
            store.maps(name, test, Control.RANDOM_INIT_TARGET.maps)
        store.release()
    family = {m: store.family(m) for m in models}
    rows, items = [], []

    def add(task, source, target, condition, variant, seed, scores, info=None, outcomes=None, **extra):
        run = {
            "task": task,
            "metric": HEADLINE[task],
            "family": family.get(target, "-"),
            "source": source,
            "target": target,
            "condition": condition,
            "variant": variant,
            "seed": seed,
        }
        rows.append(
            {
                **run,
                "score": scores[HEADLINE[task]],
                **scores,
                "best_epoch": (info or {}).get("best_epoch"),
                "epochs_run": (info or {}).get("epochs_run"),
                "stopped_early": (info or {}).get("stopped_early"),
                **extra,
            }
        )
        if outcomes is not None:
            items.extend(item_rows(run, outcomes))

    for task, (train, dev, test) in splits.items():
        metric = HEADLINE[task]

        def ex(name, data, variant="plain", inputs=Control.TRAINED, control=Control.TRAINED):
            return store.examples(name, data, keys, inputs=inputs, control=control, normalize=VARIANTS[variant][0])

        def ev(model, target, x):  # test scores; POS also as the released code counts it (docs/method.md#released-code)
            wid = store.maps(target, test).word_ids if task == "pos" else None
            return evaluate_outcomes(model, x, test, device=device, word_ids=wid)

        def job(names, seed, variant="plain", inputs=Control.TRAINED):
            x_tr, x_dv = (_interleave([ex(n, d, variant, inputs) for n in names]) for d in (train, dev))
            return adapter_job(
                (x_tr, train),
                (x_dv, dev),
                cfg.training,
                seed=seed,
                augment=VARIANTS[variant][1],
                provenance=provenance(names, keys, cfg.level, inputs=inputs, variant=variant),
                device=device,
                checkpoint_dir=checkpoint_dir,
                desc=f"{task} on {'+'.join(names)} {variant} {inputs.condition} seed {seed}",
            )

        plan = {("single", s, v, k): job([s], k, v) for s in models for v in variants for k in seeds}
        for target in models:
            others = [s for s in models if s != target and family[s] == family[target]]
            for k in seeds:
                if others:
                    plan["multi", target, "plain", k] = job(others, k)
                for inputs in cfg.input_controls:
                    plan[inputs, target, "plain", k] = job([target], k, "plain", inputs)
        trained = train_adapters(plan, cfg.training, progress=progress)  # every distinct run once, in parallel on a CPU
        adapters = {(s, v, k): trained["single", s, v, k] for s in models for v in variants for k in seeds}
        dev_transfer = {  # the mean over seeds of each ordered pair's dev transfer
            (s, t, v): sum(evaluate(adapters[s, v, k][0], ex(t, dev, v), dev, device=device)[metric] for k in seeds)
            / len(seeds)
            for s in models
            for v in variants
            for t in models
            if t != s and family[t] == family[s]
        }
        for target in models:
            peers = [s for s in models if family[s] == family[target]]
            others = [s for s in peers if s != target]
            choice = _choose_variant(dev_transfer, others, variants) if others else None
            for k in seeds:
                model, info = adapters[target, "plain", k]
                sc, out = ev(model, target, ex(target, test))
                add(task, target, target, "self", "plain", k, sc, info, out)
                for source in peers:
                    model, info = adapters[source, "plain", k]
                    sc, out = ev(model, target, ex(target, test, control=Control.RANDOM_INIT_TARGET))
                    add(task, source, target, Control.RANDOM_INIT_TARGET.condition, "plain", k, sc, info, out)
                for source in others:
                    for v in variants:
                        model, info = adapters[source, v, k]
                        sc, out = ev(model, target, ex(target, test, v))
                        add(task, source, target, transfer_condition(v), v, k, sc, info, out)
                if others:
                    model, info = trained["multi", target, "plain", k]
                    sc, out = ev(model, target, ex(target, test))
                    add(task, "others", target, "transfer (multi-source)", "plain", k, sc, info, out)
                    chosen = [
                        r
                        for r in rows
                        if r["task"] == task
                        and r["target"] == target
                        and r["seed"] == k
                        and r["condition"] == transfer_condition(choice[0])
                        and r["source"] in others
                    ]
                    mean = {c: sum(r[c] for r in chosen) / len(chosen) for c in score_keys(chosen[0])}
                    add(task, "chosen", target, "TOA (headline)", choice[0], k, mean, dev_choice=choice[1])
                for inputs in cfg.input_controls:
                    model, info = trained[inputs, target, "plain", k]
                    sc, out = ev(model, target, ex(target, test, inputs=inputs))
                    add(task, target, target, inputs.condition, "plain", k, sc, info, out)
        base = trivial_baseline(train, test)
        add(
            task,
            "-",
            "-",
            Control.BASELINE.condition,
            "-",
            0,
            score(test, base),
            outcomes=sentence_outcomes(test, base),
        )
    return pd.DataFrame(rows), pd.DataFrame(items)


def transfer_condition(variant: str) -> str:
    """The condition name of single-source transfer with a training variant of :data:`VARIANTS`."""
    return "transfer" if variant == "plain" else f"transfer ({variant})"


def score_keys(row: dict) -> list[str]:
    """The metric columns of a result row (those :func:`olas_utils.toa.fit.score` returns)."""
    skip = {
        "task",
        "metric",
        "family",
        "source",
        "target",
        "condition",
        "variant",
        "best_epoch",
        "epochs_run",
        "stopped_early",
        "dev_choice",
        "seed",
    }
    return [k for k, v in row.items() if k not in skip and isinstance(v, float)]


def _interleave(per_source: Sequence[list]) -> list:
    """Multi-source examples with the budget of one source: sentence ``i`` seen through
    source ``i mod k`` (``per_source``: k example lists of the same sentences, in order)."""
    return [per_source[i % len(per_source)][i] for i in range(len(per_source[0]))]


def _choose_variant(
    dev_transfer: dict, sources: Sequence[str], variants: Sequence[str] = tuple(VARIANTS)
) -> tuple[str, float | None]:
    """The variant of ``variants`` with the best mean dev transfer between ``sources`` (ordered
    pairs, each the dev data of a model that is not the target); ``"plain"`` if fewer than two."""
    if len(sources) < 2:
        return "plain", None
    means = {
        v: sum(dev_transfer[s, t, v] for s, t in permutations(sources, 2)) / (len(sources) * (len(sources) - 1))
        for v in variants
    }
    best = max(variants, key=lambda v: (means[v], v == "plain"))
    return best, means[best]


def transfer_matrix(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """Headline score (%) of ``task``, the mean over training seeds: rows = source adapter,
    columns = target model (``self`` on the diagonal), families side by side. Which pairs
    transfer well is read off after seeing it: exploratory, no verdict."""
    d = frame[(frame.task == task) & frame.condition.isin(["self", "transfer"])]
    return (d.pivot_table(index=["family", "source"], columns="target", values="score", sort=False) * 100).round(1)
