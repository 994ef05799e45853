"""One TOA experiment step: fit an adapter on a model's OLA for a task, predict, score with
the standard word-level metric, and the trivial baselines every table is read against.

Metrics: :mod:`olas_utils.toa.metrics` (``docs/method.md#metrics``); per-sentence outcomes
(:func:`sentence_outcomes`) feed :func:`olas_utils.stats.uncertainty.interval_of` through
:func:`metric_counts` (``docs/method.md#uncertainty``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from olas_utils.data.tasks import TaskData
from olas_utils.toa.adapter import ADAPTER_SIZES, AdapterConfig
from olas_utils.toa.features import Example, check_examples
from olas_utils.toa.heads import TOAModel
from olas_utils.toa.train import (
    SCHEDULES,
    Selection,
    TrainConfig,
    checkpoint_key,
    examples_digest,
    predict_trees,
    train_model,
)

__all__ = [
    "HEADLINE",
    "to_labels",
    "score",
    "OUTCOMES",
    "sentence_outcomes",
    "metric_counts",
    "score_outcomes",
    "trivial_baseline",
    "fit_adapter",
    "checkpoint_file",
    "adapter_config",
    "AdapterSettings",
    "profile_training",
]

#: The metric each task's tables lead with (key of :func:`score`'s result). Dependency leads
#: with UAS: OLA carries structure but no word identity, and LAS also needs relation labels
#: (LAS and the no-punctuation scores are in every table's CSV).
HEADLINE: dict[str, str] = {
    "pos": "accuracy",
    "ner-conll2003": "f1",
    "ner-uner": "f1",
    "relation": "macro_f1",
    "dependency": "uas",
}


def to_labels(data: TaskData, preds: Sequence) -> list:
    """Class ids from :func:`olas_utils.toa.train.predict` → label strings (per the data's
    vocabulary): per word for token tasks, one per sentence for relations, and
    ``(heads, relation strings)`` per sentence for dependencies."""
    names = data.label_names
    if data.kind == "token":
        return [[names[j] for j in p] for p in preds]
    if data.kind == "relation":
        return [names[p] for p in preds]
    return [(list(h), [names[j] for j in r]) for h, r in preds]


def score(data: TaskData, labels: Sequence) -> dict:
    """The task's metrics for predicted labels (strings, as from :func:`to_labels`).

    Returns:
        pos: ``{"accuracy"}``; NER: ``{"precision", "recall", "f1"}``; relation:
        ``{"macro_f1", "accuracy", "macro_f1_18"}``; dependency: ``{"uas", "las",
        "uas_nopunct", "las_nopunct"}`` (the last two only when ``data.upos`` is known). All
        fractions in [0, 1].

    Raises:
        ValueError: predictions that do not match the data's shape (from the metrics).
    """
    from olas_utils.toa import metrics

    if len(labels) != len(data):
        raise ValueError(f"{len(labels)} predictions for {len(data)} sentences")
    if data.task == "pos":
        return {"accuracy": metrics.pos_accuracy(data.labels, labels)}
    if data.kind == "token":
        return metrics.entity_f1(data.labels, labels)
    if data.kind == "relation":
        s = metrics.semeval_scores(data.labels, labels)
        return {"macro_f1": s["macro_f1"], "accuracy": s["accuracy"], "macro_f1_18": s["macro_f1_18"]}
    heads = [h for h, _ in labels]
    rels = [r for _, r in labels]
    out = {}
    for punct, suffix in ((True, ""), (False, "_nopunct")) if data.upos is not None else ((True, ""),):
        s = metrics.attachment_scores(data.heads, heads, data.labels, rels, upos=data.upos, punct=punct)
        out["uas" + suffix], out["las" + suffix] = s["uas"], s["las"]
    return out


#: Per-sentence outcome columns of :func:`sentence_outcomes`, by task kind (``"pos"`` and
#: ``"ner"`` for the two token tasks): their sums give :func:`score`'s metrics.
OUTCOMES: dict[str, tuple[str, ...]] = {
    "pos": ("correct", "words"),
    "ner": ("tp", "fp", "fn"),
    "relation": ("gold", "pred", "correct"),
    "dependency": ("arcs", "labels", "words", "arcs_nopunct", "labels_nopunct", "words_nopunct"),
}


def _outcome_kind(task: str, kind: str) -> str:
    return "pos" if task == "pos" else "ner" if kind == "token" else kind


def sentence_outcomes(data: TaskData, labels: Sequence) -> dict[str, list]:
    """Per-sentence outcomes of predicted labels (strings, as from :func:`to_labels`), one list
    per column of :data:`OUTCOMES`: POS correct words and words; NER entity ``tp, fp, fn``;
    relation the gold and predicted label and whether they match; dependency correct heads
    (``arcs``), correct heads and relations (``labels``) and words, with and without
    punctuation (the ``_nopunct`` columns only when ``data.upos`` is known). Summed, they
    give :func:`score` exactly (:func:`score_outcomes`).

    Raises:
        ValueError: as :func:`score`.
    """
    from olas_utils.toa import metrics

    if len(labels) != len(data):
        raise ValueError(f"{len(labels)} predictions for {len(data)} sentences")
    kind = _outcome_kind(data.task, data.kind)
    if kind == "pos":
        rows = metrics.pos_counts(data.labels, labels)
    elif kind == "ner":
        rows = metrics.entity_counts(data.labels, labels)
    elif kind == "relation":
        metrics.semeval_counts(data.labels, labels)  # validates
        rows = [(g, p, int(g == p)) for g, p in zip(data.labels, labels)]
    else:
        heads, rels = [h for h, _ in labels], [r for _, r in labels]
        rows = metrics.attachment_counts(data.heads, heads, data.labels, rels)
        if data.upos is not None:
            nop = metrics.attachment_counts(data.heads, heads, data.labels, rels, upos=data.upos, punct=False)
            rows = [a + b for a, b in zip(rows, nop)]
    cols = OUTCOMES[kind][: len(rows[0])] if rows else OUTCOMES[kind]
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


def _ratio_columns(kind: str, metric: str) -> tuple[str, str] | None:
    if kind == "pos" and metric == "accuracy":
        return "correct", "words"
    if kind == "relation" and metric == "accuracy":
        return "correct", None
    if kind == "dependency" and metric.split("_")[0] in ("uas", "las"):
        head, _, suffix = metric.partition("_")
        suffix = f"_{suffix}" if suffix else ""
        return ("arcs" if head == "uas" else "labels") + suffix, "words" + ("_nopunct" if suffix == "_nopunct" else "")
    return None


def metric_counts(task: str, kind: str, metric: str, outcomes) -> tuple:
    """Count columns and statistic of one metric, for :func:`olas_utils.stats.uncertainty.interval_of`.

    Args:
        task, kind: the task (``TaskData.task`` / ``.kind``).
        metric: a key of :func:`score`'s result (``"uas"``, ``"las_nopunct"``, ``"f1"``,
            ``"macro_f1"``, ``"accuracy"``, ...).
        outcomes: per-sentence outcomes (:func:`sentence_outcomes`: a mapping of column →
            sequence, e.g. a DataFrame of one run's sentences, in order).

    Returns:
        ``(counts, statistic)``: ``counts`` an ``(n, k)`` float array, one row per sentence;
        ``statistic`` maps summed counts ``(..., k)`` to the metric ``(...)``.

    Raises:
        ValueError: a metric the task does not have.
    """
    import numpy as np

    from olas_utils.toa import metrics

    k = _outcome_kind(task, kind)
    cols = _ratio_columns(k, metric)
    if cols is not None:
        num = np.asarray(outcomes[cols[0]], dtype=np.float64)
        den = np.ones_like(num) if cols[1] is None else np.asarray(outcomes[cols[1]], dtype=np.float64)
        return np.stack([num, den], axis=-1), lambda s: _safe_ratio(s[..., 0], s[..., 1])
    if k == "ner" and metric in ("precision", "recall", "f1"):
        c = np.stack([np.asarray(outcomes[n], dtype=np.float64) for n in ("tp", "fp", "fn")], axis=-1)
        return c, lambda s: metrics.entity_f1_from_counts(s[..., 0], s[..., 1], s[..., 2])[metric]
    if k == "relation" and metric == "macro_f1":
        c = metrics.semeval_counts(list(outcomes["gold"]), list(outcomes["pred"])).astype(np.float64)
        n_types = c.shape[-1]
        return c.reshape(len(c), -1), lambda s: metrics.semeval_macro_f1_from_counts(
            s.reshape(s.shape[:-1] + (3, n_types))
        )
    raise ValueError(f"no per-sentence counts for metric {metric!r} of task {task!r}")


def _safe_ratio(num, den):
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def score_outcomes(task: str, kind: str, outcomes) -> dict:
    """:func:`score`'s headline metrics recomputed from summed per-sentence outcomes
    (:func:`sentence_outcomes`): the same values, which the tests check on real predictions."""
    import numpy as np

    names = {
        "pos": ("accuracy",),
        "ner": ("precision", "recall", "f1"),
        "relation": ("macro_f1", "accuracy"),
        "dependency": tuple(
            m for m in ("uas", "las", "uas_nopunct", "las_nopunct") if "words_nopunct" in outcomes or "nopunct" not in m
        ),
    }[_outcome_kind(task, kind)]
    out = {}
    for m in names:
        counts, stat = metric_counts(task, kind, m, outcomes)
        out[m] = float(np.asarray(stat(counts.sum(axis=0)[None]))[0])
    return out


def trivial_baseline(train: TaskData, test: TaskData) -> list:
    """Predictions (label strings, see :func:`to_labels`) of the model-free baseline fitted on
    ``train``: the most frequent tag per word form (token tasks), the most frequent label of the
    entity word pair with back-offs (relation), the better neighbour chain on train
    (dependency); ``docs/method.md#controls``.

    Raises:
        ValueError: ``train`` and ``test`` are different tasks.
    """
    if train.task != test.task:
        raise ValueError(f"train is {train.task}, test is {test.task}")
    if not len(train):
        raise ValueError("the training split is empty")
    if train.kind == "relation":

        def ents(words, spans):
            return words[spans[0][1] - 1].lower(), words[spans[1][1] - 1].lower()

        tables: list[dict[object, Counter]] = [defaultdict(Counter) for _ in range(3)]
        for ws, sp, lab in zip(train.words, train.spans, train.labels):
            e1, e2 = ents(ws, sp)
            for table, k in zip(tables, ((e1, e2), e2, e1)):
                table[k][lab] += 1
        top = Counter(train.labels).most_common(1)[0][0]
        out = []
        for ws, sp in zip(test.words, test.spans):
            e1, e2 = ents(ws, sp)
            hit = next((t[k] for t, k in zip(tables, ((e1, e2), e2, e1)) if k in t), None)
            out.append(hit.most_common(1)[0][0] if hit else top)
        return out
    per_word: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for ws, ls in zip(train.words, train.labels):
        for w, lab in zip(ws, ls):
            per_word[w.lower()][lab] += 1
            overall[lab] += 1
    top = overall.most_common(1)[0][0]

    def tags(ws):
        return [per_word[w.lower()].most_common(1)[0][0] if w.lower() in per_word else top for w in ws]

    if train.kind == "token":
        return [tags(ws) for ws in test.words]

    def chain(n, left):
        return [i for i in range(n)] if left else [i + 2 for i in range(n - 1)] + [0]

    def uas(data, left):
        hits = sum(h == p for hs in data.heads for h, p in zip(hs, chain(len(hs), left)))
        return hits / sum(len(hs) for hs in data.heads)

    left = uas(train, True) >= uas(train, False)
    return [(chain(len(ws), left), tags(ws)) for ws in test.words]


def adapter_config(size: str | dict, in_channels: int) -> AdapterConfig:
    """An :class:`~olas_utils.toa.adapter.AdapterConfig` from a named size of
    :data:`olas_utils.toa.adapter.ADAPTER_SIZES` (or a dict of its fields).

    Raises:
        ValueError: unknown size name.
    """
    if isinstance(size, str):
        if size not in ADAPTER_SIZES:
            raise ValueError(f"unknown adapter size {size!r}; available: {sorted(ADAPTER_SIZES)}")
        size = ADAPTER_SIZES[size]
    return AdapterConfig(in_channels=in_channels, **size)


@dataclass(frozen=True)
class AdapterSettings:
    """How a notebook profile trains its adapters (notebooks 03 and 04).

    Attributes:
        adapter: a size of :data:`olas_utils.toa.adapter.ADAPTER_SIZES`.
        epochs: the epoch cap; patience: epochs without a dev gain before stopping.
        min_gain: the smallest dev gain that counts for stopping (a fraction, e.g. 0.005 = 0.5 UAS
            points; 0: any rise; :class:`olas_utils.toa.train.Selection`).
        batch_size, lr: optimisation.
        arc_dim, label_dim: biaffine head sizes (dependency parsing).
        workers: adapters trained at the same time on a CPU (None: one per core).
        min_epochs: epochs always run.
        schedule: ``"linear"`` or ``"plateau"`` (:data:`olas_utils.toa.train.SCHEDULES`;
            ``docs/method.md#training``).
        seeds: the training seeds, one run per seed (``TrainConfig.seed``, part of the
            checkpoint key; seed 0 is a single-seed profile's run).
    """

    adapter: str
    epochs: int
    patience: int
    batch_size: int
    lr: float
    arc_dim: int
    label_dim: int
    workers: int | None = None
    min_epochs: int = 1
    seeds: tuple[int, ...] = (0,)
    schedule: str = "linear"
    min_gain: float = 0.0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 1 <= self.min_epochs <= self.epochs:
            raise ValueError(f"min_epochs must be in 1..epochs ({self.epochs}), got {self.min_epochs}")
        seeds = tuple(self.seeds)
        if not seeds or len(set(seeds)) != len(seeds) or any(int(x) != x or x < 0 for x in seeds):
            raise ValueError(f"seeds must be distinct non-negative integers, at least one, got {self.seeds!r}")
        object.__setattr__(self, "seeds", tuple(int(x) for x in seeds))


def profile_training(settings: AdapterSettings, seed: int, kind: str) -> tuple[TrainConfig, dict]:
    """Training settings of a notebook profile: ``(TrainConfig, head_kwargs)``; the head
    arguments are the biaffine sizes for the dependency kind and empty otherwise."""
    tcfg = TrainConfig(
        epochs=settings.epochs, batch_size=settings.batch_size, lr=settings.lr, seed=seed, schedule=settings.schedule
    )
    heads = {"arc_dim": settings.arc_dim, "label_dim": settings.label_dim} if kind == "dependency" else {}
    return tcfg, heads


def fit_adapter(
    examples: Sequence[Example],
    data: TaskData,
    adapter: AdapterConfig,
    cfg: TrainConfig,
    *,
    checkpoint_dir: str | Path | None = None,
    provenance: dict | None = None,
    head_kwargs: dict | None = None,
    dev: tuple[Sequence[Example], TaskData] | None = None,
    patience: int = 2,
    min_epochs: int = 1,
    min_gain: float = 0.0,
    device="cpu",
    progress: bool = True,
    desc: str = "train",
) -> tuple[TOAModel, dict]:
    """Build a :class:`~olas_utils.toa.heads.TOAModel` (initialised under ``cfg.seed``) and train
    it on ``examples`` (resumably when ``checkpoint_dir`` is given; a finished run with the
    same settings is loaded instead of retrained).

    Args:
        examples: training examples of ``data`` (:func:`olas_utils.toa.features.build_examples`).
        data: the training split (kind and label vocabulary).
        adapter, cfg: adapter size and optimisation settings.
        checkpoint_dir: folder of checkpoints, one file per run (named by a hash of the
            settings and ``provenance``).
        provenance: what identifies the run beyond the examples (source model, keys, ...).
        head_kwargs: extra head arguments (e.g. ``arc_dim`` for the biaffine head).
        dev: ``(examples, data)`` of held-out sentences (a dev split, never test): after
            each epoch the task's :data:`HEADLINE` metric is computed on them, the best
            epoch's weights are kept and training stops after ``patience`` epochs without a
            gain of more than ``min_gain`` (not before ``min_epochs``;
            :class:`~olas_utils.toa.train.Selection`). None: all ``cfg.epochs``, last weights.
        device, progress, desc: see :func:`olas_utils.toa.train.train_model`.

    Returns:
        ``(model, info)`` with ``info`` from :func:`~olas_utils.toa.train.train_model`
        (``curve``: the dev metric after each epoch, ``best_epoch``, ``epochs_run``).

    Raises:
        ValueError: ``examples`` that do not match ``data`` (another task or kind, another
            number of sentences or words); ``dev`` data of another task
            than ``data``, or dev examples that do not match the dev data or have NaN / infinite
            images (all-NaN dev data could not choose an epoch); each names both arguments and
            the task split. Raised before any training step.
        FloatingPointError: NaN / infinite training images, at the first step (a non-finite
            loss; see :func:`olas_utils.toa.train.train_model`).
        OSError: ``checkpoint_dir`` cannot be created or written (names the folder), before
            any training step.
        CheckpointMismatchError: see :func:`olas_utils.toa.train.train_model`.
    """
    model, extra, selection, ckpt = _prepare(
        examples,
        data,
        adapter,
        cfg,
        checkpoint_dir=checkpoint_dir,
        provenance=provenance,
        head_kwargs=head_kwargs,
        dev=dev,
        patience=patience,
        min_epochs=min_epochs,
        min_gain=min_gain,
        device=device,
    )
    info = train_model(
        model,
        examples,
        cfg,
        checkpoint=ckpt,
        extra=extra,
        selection=selection,
        device=device,
        progress=progress,
        desc=desc,
    )
    return model, info


def _prepare(
    examples,
    data,
    adapter,
    cfg,
    *,
    checkpoint_dir=None,
    provenance=None,
    head_kwargs=None,
    dev=None,
    patience=2,
    min_epochs=1,
    min_gain=0.0,
    device="cpu",
):
    """The model (initialised under ``cfg.seed``), provenance, selection rule and checkpoint
    file of one :func:`fit_adapter` run (the keyword defaults are :func:`fit_adapter`'s; a test
    holds them equal)."""
    selection = None
    # non-finite training images stop training at its first step (a non-finite loss, named there)
    check_examples(examples, data, names=("examples", "data"), finite=False)
    if dev is not None:
        dev_ex, dev_data = dev
        if dev_data.task != data.task or len(dev_ex) != len(dev_data):
            raise ValueError(
                f"dev must be examples of the {data.task} task with one example per sentence, got "
                f"{len(dev_ex)} examples of {dev_data.task}/{dev_data.split} ({len(dev_data)} sentences)"
            )
        check_examples(dev_ex, dev_data, names=("dev examples", "dev data"))
        metric = HEADLINE[data.task]
        selection = Selection(
            score=lambda m: evaluate(m, dev_ex, dev_data, device=device)[metric],
            patience=patience,
            min_epochs=min_epochs,
            min_gain=min_gain,
            identity=f"{metric}:{dev_data.fingerprint()}:{examples_digest(dev_ex)}",
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = TOAModel(adapter, data.kind, len(data.label_names), **(head_kwargs or {}))
    extra = {
        **(provenance or {}),
        "task": data.task,
        "labels": list(data.label_names),
        "data": data.fingerprint(),
        "head_kwargs": head_kwargs or {},
    }
    ckpt = None
    if checkpoint_dir is not None:
        # named by the run's full key (settings + the examples' bytes): another model, other channels,
        # level or library versions give another file, never a clash or a silent reuse
        ckpt = Path(checkpoint_dir) / f"{data.task}-{checkpoint_key(model, cfg, examples, extra, selection)[:32]}.pt"
    return model, extra, selection, ckpt


def checkpoint_file(
    examples: Sequence[Example],
    data: TaskData,
    adapter: AdapterConfig,
    cfg: TrainConfig,
    *,
    checkpoint_dir: str | Path,
    progress: bool = True,
    desc: str = "train",
    **settings,
) -> Path:
    """The checkpoint :func:`fit_adapter` would write for these arguments (same key, nothing
    trained): ``settings`` are :func:`fit_adapter`'s keywords (``provenance``, ``dev``,
    ``patience``, ...); ``progress`` and ``desc`` are accepted and ignored. Two calls with the same
    file are the same run: :mod:`olas_utils.toa.parallel` uses it to train each distinct run once.

    Raises:
        ValueError: as :func:`fit_adapter`.
        TypeError: a keyword :func:`fit_adapter` does not take.
    """
    return _prepare(examples, data, adapter, cfg, checkpoint_dir=checkpoint_dir, **settings)[3]


def evaluate(
    model: TOAModel, examples: Sequence[Example], data: TaskData, *, device="cpu", tree: str = "mst", word_ids=None
) -> dict:
    """Predict ``examples`` (of ``data``) and :func:`score` them.

    ``word_ids`` (per sentence, each subword's word index, −1 for special tokens; e.g.
    ``OLAMaps.word_ids`` (:class:`olas_utils.maps.OLAMaps`) of the target model) adds, for POS,
    ``accuracy_released``: the released code's count over subwords and special tokens
    (:func:`olas_utils.toa.metrics.released_pos_accuracy`).

    Raises:
        ValueError: the model was built for another kind of task or another label set, or
            the examples are not those of ``data`` (:func:`olas_utils.toa.features.check_examples`:
            number, kind, words per sentence, finite images; names both arguments).
    """
    return evaluate_outcomes(model, examples, data, device=device, tree=tree, word_ids=word_ids)[0]


def evaluate_outcomes(
    model: TOAModel, examples: Sequence[Example], data: TaskData, *, device="cpu", tree: str = "mst", word_ids=None
) -> tuple[dict, dict]:
    """:func:`evaluate` and the per-sentence outcomes of the same predictions
    (:func:`sentence_outcomes`): ``(scores, outcomes)``.

    Raises:
        ValueError: as :func:`evaluate`.
    """
    return evaluate_trees(model, examples, data, (tree,), device=device, word_ids=word_ids)[tree]


def evaluate_trees(
    model: TOAModel, examples: Sequence[Example], data: TaskData, trees: Sequence[str], *, device="cpu", word_ids=None
) -> dict[str, tuple[dict, dict]]:
    """:func:`evaluate_outcomes` under several tree decoders (e.g. ``("mst", "greedy")``) from one
    forward pass (:func:`olas_utils.toa.train.predict_trees`): ``{tree: (scores, outcomes)}``, each
    equal to ``evaluate_outcomes(..., tree=tree)``.

    Raises:
        ValueError: as :func:`evaluate`, or no / repeated ``trees``.
    """
    if model.kind != data.kind or model.n_classes != len(data.label_names):
        raise ValueError(
            f"the model is a {model.kind} model with {model.n_classes} classes but {data.task} is a "
            f"{data.kind} task with {len(data.label_names)} labels; evaluate it on the task it was "
            "trained for"
        )
    check_examples(examples, data, names=("examples", "data"))
    out = {}
    for tree, pred in predict_trees(model, examples, trees, device=device).items():
        labels = to_labels(data, pred)
        scores = score(data, labels)
        if word_ids is not None and data.task == "pos":
            from olas_utils.toa.metrics import released_pos_accuracy

            scores["accuracy_released"] = released_pos_accuracy(data.labels, labels, word_ids)
        out[tree] = (scores, sentence_outcomes(data, labels))
    return out


__all__ += ["evaluate", "evaluate_outcomes", "evaluate_trees"]
