"""Per-sentence outcomes sum to the corpus metrics (olas_utils.toa.metrics, seqeval, the SemEval
scorer) on real task data with real predictions (the model-free baselines, and the same
predictions perturbed), and training seeds: distinct runs, reproducible, seed 0's checkpoint
key unchanged by the seeds field."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from olas_utils.data.tasks import load_task
from olas_utils.toa import metrics
from olas_utils.toa.fit import (
    AdapterSettings,
    metric_counts,
    score,
    score_outcomes,
    sentence_outcomes,
    trivial_baseline,
)


def _perturbed(data, labels, rng):
    """The same predictions with about a fifth of the labels (and heads) replaced at random."""
    names = list(data.label_names)
    if data.kind == "relation":
        return [rng.choice(names) if rng.random() < 0.2 else p for p in labels]
    if data.kind == "token":
        return [[rng.choice(names) if rng.random() < 0.2 else t for t in s] for s in labels]
    out = []
    for (h, r), n in zip(labels, (len(x) for x in data.heads)):
        h = [rng.randint(0, n) if rng.random() < 0.2 else x for x in h]
        out.append((h, [rng.choice(names) if rng.random() < 0.2 else x for x in r]))
    return out


@pytest.mark.parametrize("task", ["pos", "ner-conll2003", "ner-uner", "relation", "dependency"])
def test_sentence_outcomes_sum_to_the_corpus_metric_on_real_predictions(task):
    train, test = load_task(task, "train", n=300, seed=0), load_task(task, "test", n=150, seed=0)
    rng = random.Random(0)
    for labels in (trivial_baseline(train, test), _perturbed(test, trivial_baseline(train, test), rng)):
        want = score(test, labels)
        got = score_outcomes(test.task, test.kind, sentence_outcomes(test, labels))
        assert set(got) <= set(want) and got
        for k, v in got.items():
            assert v == pytest.approx(want[k], abs=1e-12), k


def test_entity_counts_against_seqeval_on_random_tags():
    from seqeval.metrics import f1_score, precision_score, recall_score

    rng = random.Random(1)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 9))] for _ in range(200)]
    pred = [[rng.choice(tags) if rng.random() < 0.4 else t for t in s] for s in gold]
    tp, fp, fn = np.array(metrics.entity_counts(gold, pred)).sum(axis=0)
    f = metrics.entity_f1_from_counts(tp, fp, fn)
    assert f["f1"] == pytest.approx(f1_score(gold, pred), abs=1e-12)
    assert f["precision"] == pytest.approx(precision_score(gold, pred), abs=1e-12)
    assert f["recall"] == pytest.approx(recall_score(gold, pred), abs=1e-12)


def test_semeval_counts_give_the_official_score_and_per_type_counts():
    from olas_utils.data import SEMEVAL_LABELS

    rng = random.Random(2)
    gold = [rng.choice(SEMEVAL_LABELS) for _ in range(300)]
    pred = [rng.choice(SEMEVAL_LABELS) if rng.random() < 0.5 else g for g in gold]
    ref = metrics.semeval_scores(gold, pred)
    c = metrics.semeval_counts(gold, pred).sum(axis=0)
    assert metrics.semeval_macro_f1_from_counts(c) == pytest.approx(ref["macro_f1"], abs=1e-12)
    for i, r in enumerate(metrics.SEMEVAL_RELATIONS):
        assert tuple(c[:, i]) == (ref["per_type"][r]["tp"], ref["per_type"][r]["n_pred"], ref["per_type"][r]["n_gold"])
    # vectorised over resamples: a leading axis is kept
    assert metrics.semeval_macro_f1_from_counts(np.stack([c, c]))[1] == pytest.approx(ref["macro_f1"])


def test_metric_counts_feed_the_bootstrap_and_refuse_unknown_metrics():
    from olas_utils.stats.uncertainty import interval_of

    train, test = load_task("relation", "train", n=200, seed=0), load_task("relation", "test", n=100, seed=0)
    out = sentence_outcomes(test, trivial_baseline(train, test))
    counts, stat = metric_counts("relation", "relation", "macro_f1", out)
    iv = interval_of(stat, counts, n_resamples=200)
    assert counts.shape == (100, 27) and iv.estimate == pytest.approx(
        score(test, trivial_baseline(train, test))["macro_f1"]
    )
    with pytest.raises(ValueError, match="no per-sentence counts"):
        metric_counts("relation", "relation", "uas", out)


def _examples(data, seed=0):
    """Random 2-channel images for real dependency sentences (shapes only, never results)."""
    from olas_utils.toa.features import Example

    g = torch.Generator().manual_seed(seed)
    names = {n: i for i, n in enumerate(data.label_names)}
    return [
        Example(
            image=torch.rand(2, len(w), len(w), generator=g),
            positions=torch.arange(len(w)),
            labels=torch.tensor([names[x] for x in lab]),
            heads=torch.tensor(h),
        )
        for w, lab, h in zip(data.words, data.labels, data.heads)
    ]


def test_training_seeds_give_distinct_reproducible_runs_and_keep_seed_0_keys(tmp_path):
    from olas_utils.studies.adapters import adapter_job
    from olas_utils.toa.fit import checkpoint_file, fit_adapter

    train = load_task("dependency", "train", n=12, min_words=3, max_words=8, seed=0)
    dev = load_task("dependency", "dev", n=4, min_words=3, max_words=8, seed=0)
    one = AdapterSettings(adapter="tiny", epochs=1, patience=1, batch_size=4, lr=2e-3, arc_dim=8, label_dim=4)
    three = replace(one, seeds=(0, 1, 2))
    x_tr, x_dv = _examples(train), _examples(dev, 1)

    def job(cfg, seed, folder):
        return adapter_job((x_tr, train), (x_dv, dev), cfg, seed=seed, checkpoint_dir=tmp_path / folder)

    # the seeds field is not part of any key: seed 0 of a 3-seed profile is the single-seed run
    assert checkpoint_file(**job(one, 0, "a")) == checkpoint_file(**job(three, 0, "a"))
    assert checkpoint_file(**job(three, 1, "a")) != checkpoint_file(**job(three, 0, "a"))
    # a profile's minimum dev gain reaches the run (its own checkpoint; 0, the default, keeps the old one)
    assert job(replace(one, min_gain=0.005), 0, "a")["min_gain"] == 0.005
    assert checkpoint_file(**job(replace(one, min_gain=0.005), 0, "a")) != checkpoint_file(**job(one, 0, "a"))
    w0, _ = fit_adapter(**job(three, 0, "a"), progress=False)
    w0b, _ = fit_adapter(**job(three, 0, "b"), progress=False)  # afresh in another folder
    w1, _ = fit_adapter(**job(three, 1, "a"), progress=False)
    s0, s0b, s1 = (m.state_dict() for m in (w0, w0b, w1))
    assert all(torch.equal(s0[k], s0b[k]) for k in s0)
    assert any(not torch.equal(s0[k], s1[k]) for k in s0)
    # checkpoint_file names the file fit_adapter writes: with a job's settings, and with
    # fit_adapter's own defaults (its keywords left out); a misspelt keyword is refused
    assert checkpoint_file(**job(three, 0, "b")) in set((tmp_path / "b").iterdir())
    bare = {k: job(one, 0, "c")[k] for k in ("examples", "data", "adapter", "cfg")}
    fit_adapter(**bare, checkpoint_dir=tmp_path / "c", progress=False)
    written = {f for f in (tmp_path / "c").iterdir() if f.suffix == ".pt"}
    assert written == {checkpoint_file(**bare, checkpoint_dir=tmp_path / "c")}
    with pytest.raises(TypeError, match="patiense"):
        checkpoint_file(**bare, checkpoint_dir=tmp_path / "c", patiense=3)
    # checkpoint_file's defaults are _prepare's, fit_adapter's are its own: the two must agree
    import inspect

    from olas_utils.toa.fit import _prepare

    fit_kw = inspect.signature(fit_adapter).parameters
    prep_kw = [p for p in inspect.signature(_prepare).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert prep_kw and all(fit_kw[p.name].default == p.default for p in prep_kw)
    with pytest.raises(ValueError, match="seeds"):
        replace(one, seeds=(0, 0))
    with pytest.raises(ValueError, match="seeds"):
        replace(one, seeds=())
