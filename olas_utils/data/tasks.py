"""The TOA tasks (``docs/method.md#tasks``: POS, NER twice, relations, dependencies) on the offline datasets, as plain per-sentence lists.

=================  ==========  ==========================  =========================  =============
task               kind        data (reader)               train / dev / test         metric
=================  ==========  ==========================  =========================  =============
``pos``            token       CoNLL-2000 (column 2)       train¹ / train⅒ / test      word accuracy
``ner-conll2003``  token       CoNLL-2003 (IOB2)           train / testa / testb      seqeval F1
``ner-uner``       token       UNER English-EWT (IOB2)     dev¹ / dev⅒ / test          seqeval F1
``relation``       relation    SemEval-2010 Task 8         train¹ / train⅒ / test      official F1
``dependency``     dependency  UD English-EWT              train / dev / test         UAS / LAS
=================  ==========  ==========================  =========================  =============

``⅒``: a held-out tenth of the reader split (every sentence whose index in the file is
9 mod 10), used for model selection and early stopping; ``¹``: the rest of that split
(the training data then never contains a dev sentence). The test split is never used for
any choice. UNER's train file is not available offline, so its adapter trains on 9/10 of
the dev split (and is tested on test). CoNLL-2003 replaces the paper's OntoNotes NER (LDC).
UNER English-EWT and UD English-EWT hold the same sentences, so their OLA maps are shared
(:mod:`olas_utils.toa.taskmaps` keys maps by the words only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from olas_utils.infra.fingerprint import legacy_json, sha256_text

#: A held-out tenth of a reader split is every sentence whose index is 9 mod this.
HELD_OUT_EVERY = 10

__all__ = ["TaskSpec", "TaskData", "TASKS", "list_tasks", "load_task", "label_vocabulary"]


@dataclass(frozen=True)
class TaskSpec:
    """How to read one task.

    Attributes:
        name: task name (key of :data:`TASKS`).
        kind: ``"token"`` (one label per word), ``"relation"`` (one label per sentence,
            two entity spans) or ``"dependency"`` (a head and a relation per word).
        dataset: display name of the data.
        splits: ``{"train": ..., "dev": ..., "test": ...}``, each a reader split name or
            ``(reader split, "rest" | "tenth")`` for nine tenths / the held-out tenth of it.
        label_field: the reader's column holding the labels.
        metric: display name of the headline metric.
    """

    name: str
    kind: str
    dataset: str
    splits: dict
    label_field: str
    metric: str


def _held_out(split: str) -> dict:
    return {"train": (split, "rest"), "dev": (split, "tenth")}


TASKS: dict[str, TaskSpec] = {
    "pos": TaskSpec("pos", "token", "CoNLL-2000", {**_held_out("train"), "test": "test"}, "pos", "accuracy"),
    "ner-conll2003": TaskSpec(
        "ner-conll2003",
        "token",
        "CoNLL-2003",
        {"train": "train", "dev": "dev", "test": "test"},
        "ner_tags",
        "entity F1",
    ),
    "ner-uner": TaskSpec(
        "ner-uner", "token", "UNER English-EWT", {**_held_out("dev"), "test": "test"}, "ner_tags", "entity F1"
    ),
    "relation": TaskSpec(
        "relation",
        "relation",
        "SemEval-2010 Task 8",
        {**_held_out("train"), "test": "test"},
        "label",
        "macro-F1 (official)",
    ),
    "dependency": TaskSpec(
        "dependency",
        "dependency",
        "UD English-EWT",
        {"train": "train", "dev": "dev", "test": "test"},
        "deprels",
        "UAS / LAS",
    ),
}


def list_tasks() -> list[str]:
    """Names of the available tasks."""
    return list(TASKS)


@dataclass
class TaskData:
    """Sentences of one task split with their gold annotation.

    Attributes:
        task: task name; kind: see :class:`TaskSpec`; split: ``"train"``, ``"dev"`` or ``"test"``.
        words: S sentences, each a list of W_i words.
        labels: token kind: per sentence, W_i tags; relation kind: one label per sentence;
            dependency kind: per sentence, W_i relation labels (deprels).
        heads: dependency kind: per sentence, W_i 1-based heads (0 = root); else None.
        upos: dependency kind: per sentence, W_i UPOS tags (for punctuation); else None.
        spans: relation kind: per sentence ``((s1, e1), (s2, e2))`` word spans ``[s, e)``.
        rows: index of each sentence in the reader's split (provenance).
        label_names: the label vocabulary (index = class id), from the *training* split.
    """

    task: str
    kind: str
    split: str
    words: list[list[str]]
    labels: list
    label_names: tuple[str, ...]
    rows: list[int]
    heads: list[list[int]] | None = None
    upos: list[list[str]] | None = None
    spans: list[tuple[tuple[int, int], tuple[int, int]]] | None = None
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.words)

    def fingerprint(self) -> str:
        """SHA-256 over the words and gold annotation (cache keys)."""
        return sha256_text(
            legacy_json([self.task, self.split, self.words, self.labels, self.heads, self.spans], default=list)
        )

    def label_ids(self, i: int) -> list[int] | int:
        """Class ids of sentence ``i`` (labels unknown to the vocabulary get -100, which the
        losses ignore)."""
        index = {n: j for j, n in enumerate(self.label_names)}
        lab = self.labels[i]
        if self.kind == "relation":
            return index.get(lab, -100)
        return [index.get(x, -100) for x in lab]


def _reader(task: str) -> Callable:
    from olas_utils.data.conll import load_conll2000, load_conll2003
    from olas_utils.data.semeval import load_semeval2010_task8
    from olas_utils.data.ud import load_ud_ewt
    from olas_utils.data.uner import load_uner_ewt

    return {
        "pos": load_conll2000,
        "ner-conll2003": load_conll2003,
        "ner-uner": load_uner_ewt,
        "relation": load_semeval2010_task8,
        "dependency": load_ud_ewt,
    }[task]


def _spec(task: str) -> TaskSpec:
    try:
        return TASKS[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; available: {list_tasks()}") from None


def label_vocabulary(task: str, data_dir=None) -> tuple[str, ...]:
    """The label set of a task, read from its training split (sorted; for ``relation`` the
    19 SemEval labels in :data:`olas_utils.data.SEMEVAL_LABELS` order).

    Raises:
        ValueError: unknown task.
    """
    spec = _spec(task)
    if spec.kind == "relation":
        from olas_utils.data.semeval import SEMEVAL_LABELS

        return tuple(SEMEVAL_LABELS)
    ds = _reader(task)(_reader_split(spec, "train")[0], data_dir=data_dir)
    return tuple(sorted({t for seq in ds[spec.label_field] for t in seq}))


def _reader_split(spec: TaskSpec, split: str) -> tuple[str, str | None]:
    """``(reader split, part)`` with part None (all), ``"rest"`` or ``"tenth"``."""
    v = spec.splits[split]
    return (v, None) if isinstance(v, str) else (v[0], v[1])


def load_task(
    task: str,
    split: str,
    *,
    n: int | None = None,
    max_words: int | None = None,
    min_words: int = 2,
    seed: int = 0,
    data_dir=None,
) -> TaskData:
    """Read a task split, optionally a seeded subset of sentences within a length range.

    Args:
        task: a name of :data:`TASKS`.
        split: ``"train"``, ``"dev"`` or ``"test"`` (mapped to the reader's split, see the
            table above; ``"dev"`` is for model selection, never for reported scores).
        n: keep at most n sentences, drawn without replacement with ``seed`` and kept in
            file order (None: all that pass the length filter).
        max_words, min_words: keep sentences with ``min_words <= W <= max_words``.
        seed: subset seed.
        data_dir: data folder (default :func:`olas_utils.infra.settings.data_dir`).

    Returns:
        A :class:`TaskData`.

    Raises:
        ValueError: unknown task or split, ``n < 1``, no sentence passes the filter, or (token
            tasks) a gold label outside ``label_names``.
        FileNotFoundError: missing data (from the readers).
    """
    spec = _spec(task)
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ValueError(f"n must be a positive number of sentences (a whole number) or None (all), got {n!r}")
    if split not in spec.splits:
        raise ValueError(f"split must be one of {sorted(spec.splits)}, got {split!r}")
    reader_split, part = _reader_split(spec, split)
    ds = _reader(task)(reader_split, data_dir=data_dir)
    words_all = ds["words"]
    in_part = {
        None: lambda i: True,
        "rest": lambda i: i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1,
        "tenth": lambda i: i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1,
    }[part]
    keep = [
        i
        for i, w in enumerate(words_all)
        if in_part(i) and len(w) >= min_words and (max_words is None or len(w) <= max_words)
    ]
    if not keep:
        raise ValueError(f"no {task}/{split} sentence has {min_words}..{max_words} words")
    if n is not None and n < len(keep):
        rng = np.random.default_rng(seed)
        keep = sorted(rng.choice(keep, size=n, replace=False).tolist())
    sub = ds.select(keep)
    out = TaskData(
        task=task,
        kind=spec.kind,
        split=split,
        words=[list(w) for w in sub["words"]],
        labels=[],
        label_names=label_vocabulary(task, data_dir),
        rows=list(keep),
        meta={
            "n": n,
            "max_words": max_words,
            "min_words": min_words,
            "seed": seed,
            "reader_split": reader_split,
            "part": part,
        },
    )
    if spec.kind == "token":
        out.labels = [list(t) for t in sub[spec.label_field]]
        known = set(out.label_names)
        for row, tags in zip(out.rows, out.labels):
            bad = [t for t in tags if t not in known]
            if bad:
                raise ValueError(
                    f"{task}/{split}: sentence {row} of the {spec.dataset} {reader_split} split has the gold label "
                    f"{bad[0]!r}, outside the task's label set (read from its training split: "
                    f"{', '.join(out.label_names)}); its score would count a class no model can predict. "
                    "Restore the original data file (data/README.md), or repair that sentence"
                )
    elif spec.kind == "relation":
        out.labels = list(sub["label"])
        out.spans = [(tuple(a), tuple(b)) for a, b in zip(sub["e1_span"], sub["e2_span"])]
    else:
        out.labels = [list(t) for t in sub["deprels"]]
        out.heads = [list(h) for h in sub["heads"]]
        out.upos = [list(u) for u in sub["upos"]]
    return out
