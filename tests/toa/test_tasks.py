"""Task readers for TOA, adapter inputs, scoring and the trivial baselines, on the real data
(and, for subword positions, a real tokenizer)."""

from __future__ import annotations

import pytest
import torch

from olas_utils.data import SEMEVAL_LABELS, load_conll2000, load_semeval2010_task8, load_ud_ewt
from olas_utils.data.tasks import TASKS, TaskData, label_vocabulary, load_task
from olas_utils.toa.fit import score, to_labels, trivial_baseline


def test_load_task_subsets_are_seeded_and_filtered():
    a = load_task("pos", "train", n=30, max_words=12, seed=1)
    b = load_task("pos", "train", n=30, max_words=12, seed=1)
    c = load_task("pos", "train", n=30, max_words=12, seed=2)
    assert a.words == b.words and a.words != c.words
    assert len(a) == 30 and all(2 <= len(w) <= 12 for w in a.words)
    full = load_conll2000("train")
    for r, w, lab in zip(a.rows, a.words, a.labels):
        assert full[r]["words"] == w and full[r]["pos"] == lab
    assert a.rows == sorted(a.rows)
    with pytest.raises(ValueError, match="unknown task"):
        load_task("sentiment", "train")
    with pytest.raises(ValueError, match="split must be"):
        load_task("pos", "validation")
    with pytest.raises(ValueError, match="no pos/train sentence"):
        load_task("pos", "train", max_words=1)


def test_task_contents_match_readers():
    rel = load_task("relation", "test", n=20, seed=0)
    src = load_semeval2010_task8("test")
    assert rel.label_names == tuple(SEMEVAL_LABELS)
    for r, sp, lab in zip(rel.rows, rel.spans, rel.labels):
        assert list(sp[0]) == src[r]["e1_span"] and list(sp[1]) == src[r]["e2_span"] and lab == src[r]["label"]
    dep = load_task("dependency", "test", n=20, seed=0)
    ewt = load_ud_ewt("test")
    for r, h, d, u in zip(dep.rows, dep.heads, dep.labels, dep.upos):
        assert ewt[r]["heads"] == h and ewt[r]["deprels"] == d and ewt[r]["upos"] == u
    uner = load_task("ner-uner", "train", n=5)
    assert uner.meta["reader_split"] == "dev"
    assert set(TASKS) == {"pos", "ner-conll2003", "ner-uner", "relation", "dependency"}
    vocab = label_vocabulary("ner-conll2003")
    assert "B-PER" in vocab and "O" in vocab and list(vocab) == sorted(vocab)


def _toy(kind, words, labels, **kw):
    names = tuple(sorted({x for s in labels for x in (s if kind != "relation" else [s])}))
    return TaskData(
        task={"token": "ner-uner", "relation": "relation", "dependency": "dependency"}[kind],
        kind=kind,
        split="train",
        words=words,
        labels=labels,
        label_names=names,
        rows=list(range(len(words))),
        **kw,
    )


def test_trivial_baseline_hand_cases():
    tr = _toy(
        "token",
        [["the", "Cat", "sat"], ["the", "cat", "ran"], ["a", "cat", "sat"]],
        [["O", "B-PER", "O"], ["O", "O", "O"], ["O", "B-PER", "O"]],
    )
    te = _toy("token", [["The", "cat", "flew"]], [["O", "O", "O"]])
    assert trivial_baseline(tr, te) == [["O", "B-PER", "O"]]  # cat: B-PER 2 vs O 1; unknown word: O
    # dependency: heads all point left -> left chain chosen
    dtr = _toy("dependency", [["a", "b", "c"]], [["root", "dep", "dep"]], heads=[[0, 1, 2]], upos=[["X", "X", "X"]])
    dte = _toy(
        "dependency", [["b", "z", "a", "c"]], [["root", "dep", "dep", "dep"]], heads=[[0, 1, 1, 3]], upos=[["X"] * 4]
    )
    assert trivial_baseline(dtr, dte) == [([0, 1, 2, 3], ["dep", "dep", "root", "dep"])]
    rtr = _toy("relation", [["x"]] * 3, ["Other", "Cause-Effect(e1,e2)", "Other"], spans=[((0, 1), (0, 1))] * 3)
    assert trivial_baseline(rtr, rtr) == ["Other"] * 3
    with pytest.raises(ValueError):
        trivial_baseline(tr, dte)


def test_score_dispatches_to_the_standard_metrics():
    dep = load_task("dependency", "test", n=15, seed=3)
    pred = trivial_baseline(load_task("dependency", "train", n=50, seed=3), dep)
    s = score(dep, pred)
    heads = [h for h, _ in pred]
    # independent count: UAS with punctuation
    hits = sum(a == b for g, p in zip(dep.heads, heads) for a, b in zip(g, p))
    assert s["uas"] == pytest.approx(hits / sum(map(len, dep.heads)))
    np_hits = sum(a == b for g, p, u in zip(dep.heads, heads, dep.upos) for a, b, t in zip(g, p, u) if t != "PUNCT")
    assert s["uas_nopunct"] == pytest.approx(np_hits / sum(t != "PUNCT" for u in dep.upos for t in u))
    rel = load_task("relation", "test", n=40, seed=0)
    s = score(rel, rel.labels)
    assert s["macro_f1"] == 1.0 and s["accuracy"] == 1.0
    ids = [rel.label_ids(i) for i in range(len(rel))]
    assert to_labels(rel, ids) == rel.labels
    with pytest.raises(ValueError, match="predictions"):
        score(rel, rel.labels[:-1])


@pytest.mark.real_model
def test_word_positions_are_first_subwords(zoo_model):
    from olas_utils.extract import extract_ola
    from olas_utils.toa.features import adapter_image, build_examples, word_positions

    lm = zoo_model("minilm-l6")
    data = load_task("relation", "test", n=4, seed=0)
    maps = extract_ola(lm.model, lm.tokenizer, data.words, orders=(1, 2), rollout=False, layers=(), progress=False)
    for i, words in enumerate(data.words):
        pos = word_positions(maps, i)
        enc = lm.tokenizer(words, is_split_into_words=True)
        first = {}
        for t, w in enumerate(enc.word_ids()):
            if w is not None:
                first.setdefault(w, t)
        assert pos.tolist() == [first[w] for w in range(len(words))]
    ex = build_examples(maps, data, ["ola:1", "ola:2"])
    x = ex[0].image
    assert x.shape[0] == 4
    t = x.shape[-1]
    torch.testing.assert_close(x[0].sum(-1), torch.full((t,), float(t)))  # rows renormalised, scaled by L
    torch.testing.assert_close(x[0] / t, maps["ola:1"][0] / maps["ola:1"][0].sum(-1, keepdim=True))
    assert (x[2] == 0).sum() > (x[0] == 0).sum()  # sink-removed channel has the outliers zeroed
    words = maps.to_words()
    assert word_positions(words, 0).tolist() == list(range(len(data.words[0])))
    with pytest.raises(ValueError, match="were not extracted from this"):
        build_examples(maps, load_task("relation", "test", n=4, seed=1), ["ola:1"])
    assert adapter_image(words, 0, ["ola:1"], keep_raw=False).shape[0] == 1


@pytest.mark.real_model
@pytest.mark.parametrize("level", ["subword", "word"])
def test_dependency_adapter_runs_at_both_levels(zoo_model, level, tmp_path):
    from olas_utils.extract import extract_ola
    from olas_utils.toa.features import build_examples, n_channels
    from olas_utils.toa.fit import adapter_config, evaluate, fit_adapter
    from olas_utils.toa.train import TrainConfig

    lm = zoo_model("smollm2-135m")
    tr = load_task("dependency", "train", n=8, max_words=12, seed=0)
    te = load_task("dependency", "test", n=6, max_words=12, seed=0)
    ex = {}
    for d in (tr, te):
        maps = extract_ola(
            lm.model, lm.tokenizer, d.words, orders=(1,), rollout=False, layers=(), progress=False, level=level
        )
        ex[d.split] = build_examples(maps, d, ["ola:1"])
    if level == "subword":  # the image axis holds every token, the targets one per word
        assert any(e.image.shape[-1] > len(e.positions) for e in ex["train"])
    model, info = fit_adapter(
        ex["train"],
        tr,
        adapter_config("tiny", n_channels(["ola:1"])),
        TrainConfig(epochs=2, batch_size=4),
        checkpoint_dir=tmp_path,
        head_kwargs={"arc_dim": 16, "label_dim": 8},
        progress=False,
    )
    assert info["steps"] > 0 and len(list(tmp_path.glob("dependency-*.pt"))) == 1
    s = evaluate(model, ex["test"], te)
    assert set(s) == {"uas", "las", "uas_nopunct", "las_nopunct"}
    assert all(0.0 <= v <= 1.0 for v in s.values()) and s["las"] <= s["uas"]


def test_relation_baseline_backs_off_from_entity_pair_to_words():
    words = [["a", "b"], ["a", "c"], ["d", "b"], ["e", "f"], ["e", "f"]]
    labels = ["Cause-Effect(e1,e2)", "Other", "Message-Topic(e1,e2)", "Other", "Other"]
    tr = _toy("relation", words, labels, spans=[((0, 1), (1, 2))] * 5)
    te = _toy("relation", [["A", "B"], ["q", "c"], ["q", "z"], ["d", "z"]], ["Other"] * 4, spans=[((0, 1), (1, 2))] * 4)
    # (a,b) pair seen -> Cause-Effect; c as e2 -> Other; nothing known -> majority Other; d as e1 -> Message-Topic
    assert trivial_baseline(tr, te) == ["Cause-Effect(e1,e2)", "Other", "Other", "Message-Topic(e1,e2)"]


def test_load_task_rejects_non_positive_n():
    with pytest.raises(ValueError, match="positive number"):
        load_task("pos", "train", n=0)


@pytest.mark.real_model
def test_adapters_for_two_models_get_their_own_checkpoints_and_kinds_are_checked(zoo_model, tmp_path, monkeypatch):
    import warnings

    from olas_utils.extract import OLAMaps
    from olas_utils.toa.features import build_examples, n_channels
    from olas_utils.toa.fit import adapter_config, evaluate, fit_adapter
    from olas_utils.toa.taskmaps import ModelPool, task_maps
    from olas_utils.toa.train import TrainConfig

    monkeypatch.setenv("OLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("olas_utils.zoo.load_model", lambda name, device=None: zoo_model(name))
    rel = load_task("relation", "train", n=6, max_words=12)
    pos = load_task("pos", "train", n=4, max_words=12)
    pool = ModelPool(device="cpu")
    models = {}
    for name in ("minilm-l6", "smollm2-135m"):
        x = build_examples(task_maps(pool, name, rel, progress=False).to_words(), rel, ["ola:1", "ola:2"])
        models[name], _ = fit_adapter(
            x,
            rel,
            adapter_config("tiny", n_channels(["ola:1", "ola:2"])),
            TrainConfig(epochs=1),
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )
    assert len(list((tmp_path / "ck").glob("relation-*.pt"))) == 2
    x_pos = build_examples(task_maps(pool, "minilm-l6", pos, progress=False).to_words(), pos, ["ola:1", "ola:2"])
    with pytest.raises(ValueError, match="relation model"):
        evaluate(models["minilm-l6"], x_pos, pos)

    def full(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(OLAMaps, "save", full)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        maps = task_maps(pool, "minilm-l6", load_task("pos", "test", n=3, max_words=10), progress=False)
    assert len(maps) == 3 and any("could not write OLA maps" in str(x.message) for x in w)
