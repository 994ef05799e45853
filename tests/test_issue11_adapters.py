"""Issue #11 mechanics against hand-computed cases: dev splits, early stopping on dev data,
the adapter-input controls and normalisation, greedy heads, the temperature augmentation,
and shared task maps."""

from __future__ import annotations

import pytest
import torch
from test_toa_model import TINY, _examples

from olas_utils.augment import apply_temperature
from olas_utils.toa.decoding import decode_tree
from olas_utils.toa.features import position_image, rank_rows
from olas_utils.toa.heads import TOAModel
from olas_utils.toa.train import Selection, TrainConfig, train_model


def test_held_out_tenth_is_every_tenth_sentence_and_disjoint_from_train():
    from olas_utils.data.conll import load_conll2000
    from olas_utils.data.tasks import load_task

    full = load_conll2000("train")
    dev, train = load_task("pos", "dev", min_words=1), load_task("pos", "train", min_words=1)
    assert dev.rows == list(range(9, len(full), 10))  # every index 9 mod 10
    assert set(dev.rows).isdisjoint(train.rows) and len(dev) + len(train) == len(full)
    assert dev.words[0] == full[9]["words"] and dev.label_names == train.label_names
    ewt_dev = load_task("dependency", "dev", min_words=1)
    assert len(ewt_dev) == 2001 and ewt_dev.meta["reader_split"] == "dev"  # UD EWT's own dev file
    assert load_task("ner-conll2003", "dev", min_words=1).meta["reader_split"] == "dev"  # testa
    uner_tr, uner_dev = load_task("ner-uner", "train", min_words=1), load_task("ner-uner", "dev", min_words=1)
    assert len(uner_tr) + len(uner_dev) == 2001 and set(uner_tr.rows).isdisjoint(uner_dev.rows)


def test_the_same_sentences_of_two_tasks_share_one_extraction(tmp_path):
    from dataclasses import replace

    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps
    from olas_utils.vocabulary import Control

    ewt = load_task("dependency", "test", n=5, max_words=12, min_words=3, seed=0)
    other = replace(ewt, task="ner-uner", labels=[["O"] * len(w) for w in ewt.words], heads=None)
    calls = []

    class Pool(taskmaps.ModelPool):
        def get(self, name, control=Control.TRAINED):
            calls.append(name)
            return super().get(name, control)

    pool = Pool(seed=0)
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, orders=(1,), cache_dir=tmp_path, progress=False)
    b = taskmaps.task_maps(pool, "minilm-l6", other, orders=(1,), cache_dir=tmp_path, progress=False)
    assert calls == ["minilm-l6"] and len(list((tmp_path / "taskmaps").rglob("*.pt"))) == 1
    torch.testing.assert_close(a["ola:1"][0], b["ola:1"][0], rtol=0, atol=0)
    u = taskmaps.task_maps(
        pool, "minilm-l6", ewt, control="uniform", orders=(1,), cache_dir=tmp_path, progress=False
    ).to_words()
    for m, ws in zip(u["ola:1"], ewt.words):  # tokenizer-only at word level: exactly 1 everywhere
        assert torch.equal(m, torch.ones(len(ws), len(ws), dtype=m.dtype))


def test_rank_rows_hand_case_and_causal_visibility():
    x = torch.tensor([[[0.5, 0.2, 0.2, 0.1]] * 4])
    torch.testing.assert_close(rank_rows(x, causal=False)[0, 0], torch.tensor([1.0, 0.625, 0.625, 0.25]))
    c = torch.tensor([[[1.0, 0, 0], [0.3, 0.7, 0], [0.2, 0.2, 0.6]]])
    torch.testing.assert_close(
        rank_rows(c, causal=True)[0], torch.tensor([[1.0, 0, 0], [0.5, 1.0, 0], [0.5, 0.5, 1.0]])
    )
    scaled = rank_rows(c * 7 + 0.0, causal=True)  # scale-free
    torch.testing.assert_close(scaled, rank_rows(c, causal=True))


def test_position_image_hand_case():
    p = position_image(3, 2, causal=False)
    torch.testing.assert_close(p[0], torch.tensor([[1, 0, 0], [1 / 2, 1, 0], [1 / 3, 1 / 2, 1]], dtype=torch.float64))
    torch.testing.assert_close(p[1], p[0].T)
    q = position_image(3, 3, causal=True)
    torch.testing.assert_close(q[1], torch.tril(torch.ones(3, 3, dtype=torch.float64)))
    assert torch.equal(q[2], q[0])


def test_greedy_heads_take_each_rows_argmax_without_tree_constraints():
    s = torch.tensor([[0, 0, 0, 0], [5, 9, 1, 2], [0, 3, 9, 1], [0, 4, 1, 9]], dtype=torch.float64)
    # word 1: ROOT (5) beats words 2,3 (self ignored); word 2 → word 1 (3); word 3 → word 1 (4): a tree here
    assert decode_tree(s, "greedy") == [0, 1, 1]
    cyc = torch.tensor([[0, 0, 0], [0, 0, 5], [0, 5, 0]], dtype=torch.float64)
    assert decode_tree(cyc, "greedy") == [2, 1]  # a cycle: greedy keeps it, the MST does not
    assert sorted(decode_tree(cyc, "mst")) != [1, 2]


def test_temperature_keeps_row_sums_and_identity_at_one():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 4, 4)
    torch.testing.assert_close(apply_temperature(x, g, low=1.0, high=1.0), x)
    y = apply_temperature(x, torch.Generator().manual_seed(1), low=0.5, high=0.5)  # τ = 0.5: squares, rescaled
    ref = x**2 * x.sum(-1, keepdim=True) / (x**2).sum(-1, keepdim=True)
    torch.testing.assert_close(y, ref)
    with pytest.raises(ValueError, match="non-negative"):
        apply_temperature(-x, g)


def test_early_stopping_keeps_the_best_epoch_and_stops_after_patience(tmp_path):
    ex = _examples("token", n=12)
    cfg = TrainConfig(epochs=6, batch_size=4, lr=1e-2, seed=0)
    scores = iter([0.2, 0.5, 0.4, 0.3, 0.9, 0.9])  # best at epoch 2, then 2 epochs without improvement
    snapshots = []

    def score(m):
        snapshots.append({k: v.clone() for k, v in m.state_dict().items()})
        return next(scores)

    torch.manual_seed(0)
    model = TOAModel(TINY, "token", 3)
    info = train_model(
        model, ex, cfg, selection=Selection(score=score, patience=2), progress=False, checkpoint=tmp_path / "c.pt"
    )
    assert info["curve"] == [0.2, 0.5, 0.4, 0.3] and info["best_epoch"] == 2 and info["epochs_run"] == 4
    assert info["stopped_early"] and len(info["losses"]) == 4
    for k, v in model.state_dict().items():  # the model holds epoch 2's weights, not the last ones
        assert torch.equal(v, snapshots[1][k])
    # a finished run is loaded, not retrained, and ends with the same best weights
    torch.manual_seed(0)
    again = TOAModel(TINY, "token", 3)
    info2 = train_model(
        again,
        ex,
        cfg,
        selection=Selection(score=lambda m: 1 / 0, patience=2),
        progress=False,
        checkpoint=tmp_path / "c.pt",
    )
    assert info2["best_epoch"] == 2 and info2["curve"] == info["curve"]
    for k, v in again.state_dict().items():
        assert torch.equal(v, snapshots[1][k])
    # without selection: every epoch, last weights
    torch.manual_seed(0)
    full = train_model(TOAModel(TINY, "token", 3), ex, cfg, progress=False)
    assert full["epochs_run"] == 6 and full["best_epoch"] == 6 and full["curve"] == []


def test_selection_is_part_of_the_checkpoint_key(tmp_path):
    from olas_utils.toa.train import checkpoint_key

    ex = _examples("token", n=4)
    m = TOAModel(TINY, "token", 3)
    cfg = TrainConfig(epochs=1)
    a = checkpoint_key(m, cfg, ex, {}, Selection(score=len, identity="dev-a"))
    assert a != checkpoint_key(m, cfg, ex, {}, Selection(score=len, identity="dev-b"))
    assert a != checkpoint_key(m, cfg, ex, {})
    with pytest.raises(ValueError, match="patience"):
        Selection(score=len, patience=0)


def test_sink_and_temperature_augmentations_change_training_inputs_only_when_asked():
    from olas_utils.augment import augment_batch

    x = torch.rand(3, 2, 5, 5)
    off = TrainConfig(noise_p=0.0)
    assert torch.equal(augment_batch(x, torch.Generator().manual_seed(0), off.augmentation), x)
    on = TrainConfig(noise_p=0.0, sink_p=1.0, temperature_p=1.0)
    y = augment_batch(x, torch.Generator().manual_seed(0), on.augmentation)
    assert y.shape == x.shape and not torch.equal(y, x)
    with pytest.raises(ValueError, match="sink_p"):
        TrainConfig(sink_p=1.5)


def test_parser_table_names_the_strongest_control_and_the_margin():
    import pandas as pd

    from olas_utils.studies.syntax import parser_table

    rows = [
        {"model": "m", "family": "encoder", "key": "ola:1", "condition": c, "uas": u, "best_epoch": 3, "epochs_run": 5}
        for c, u in (("ola", 0.60), ("tokenizer-only", 0.20), ("position-only", 0.45), ("random-init target", 0.10))
    ]
    rows.append({"model": "baseline: neighbour chain", "family": "-", "key": "-", "condition": "baseline", "uas": 0.30})
    t = parser_table(pd.DataFrame(rows)).iloc[0]
    assert t["strongest control"] == "position-only" and t.margin == pytest.approx(15.0)
    assert t.baseline == pytest.approx(30.0) and t.best_epoch == 3


def test_transfer_summary_and_verdict_count_pairs_beating_the_strongest_control():
    import pandas as pd

    from olas_utils.studies import transfer_report

    def row(cond, target, score, source="a", variant="plain"):
        return {
            "task": "pos",
            "metric": "accuracy",
            "family": "encoder",
            "source": source,
            "target": target,
            "condition": cond,
            "variant": variant,
            "score": score,
        }

    rows = [
        row("self", "b", 0.9),
        row("transfer", "b", 0.5),
        row("TOA (headline)", "b", 0.5, "chosen"),
        row("random-init target", "b", 0.2),
        row("random-init target", "b", 0.4, source="b"),
        row("tokenizer-only", "b", 0.1),
        row("position-only", "b", 0.55),
        row("self", "c", 0.8),
        row("transfer", "c", 0.7),
        row("TOA (headline)", "c", 0.7, "chosen"),
        row("random-init target", "c", 0.1),
        row("tokenizer-only", "c", 0.1),
        row("position-only", "c", 0.3),
        {**row("baseline", "-", 0.35, "-", "-"), "family": "-"},
    ]
    s = transfer_report.task_summary(pd.DataFrame(rows)).set_index("target")
    assert s.loc["b", "random-init target"] == pytest.approx(30.0)  # mean over sources
    assert s.loc["b", "strongest control"] == "position-only" and s.loc["c", "strongest control"] == "baseline"
    v = transfer_report.verdict_frame(s.reset_index()).iloc[0]
    assert v["TOA > strongest control"] == 1 and v["self > strongest control"] == 2  # b: 50 < 55; c: 70 > 35
    assert v["mean TOA − strongest"] == pytest.approx(((50 - 55) + (70 - 35)) / 2)


def test_headline_variant_is_chosen_on_transfer_between_non_target_models_only():
    from olas_utils.studies.transfer import _choose_variant

    dev = {
        ("a", "b", "plain"): 0.3,
        ("b", "a", "plain"): 0.5,
        ("a", "b", "rank"): 0.6,
        ("b", "a", "rank"): 0.4,
        ("a", "b", "augmented"): 0.1,
        ("b", "a", "augmented"): 0.2,
        ("a", "t", "augmented"): 1.0,
        ("t", "a", "augmented"): 1.0,
    }  # the target's pairs must not count
    assert _choose_variant(dev, ["a", "b"]) == ("rank", pytest.approx(0.5))
    assert _choose_variant(dev, ["a"]) == ("plain", None)


def _subset(data, idx):
    from dataclasses import replace

    pick = lambda v: None if v is None else [v[i] for i in idx]  # noqa: E731
    return replace(
        data,
        words=pick(data.words),
        labels=pick(data.labels),
        rows=pick(data.rows),
        heads=pick(data.heads),
        upos=pick(data.upos),
        spans=pick(data.spans),
    )


def test_uner_sentences_already_extracted_for_ewt_are_not_extracted_again(tmp_path, monkeypatch):
    from olas_utils import extract
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=6, max_words=12, min_words=3, seed=0)
    uner = load_task("ner-uner", "test", min_words=1)
    where = {tuple(w): i for i, w in enumerate(uner.words)}
    shared = [where[tuple(w)] for w in ewt.words[:4] if tuple(w) in where]
    fresh = [
        i
        for i in range(len(uner))
        if len(uner.words[i]) <= 12 and tuple(uner.words[i]) not in {tuple(w) for w in ewt.words}
    ][:2]
    assert len(shared) == 4 and len(fresh) == 2
    mixed = _subset(uner, [fresh[0], shared[2], shared[0], fresh[1], shared[3], shared[1]])  # UNER's own order
    seen = []
    real = extract.extract_ola
    monkeypatch.setattr(
        extract,
        "extract_ola",
        lambda m, t, sentences, **kw: seen.append(list(sentences)) or real(m, t, sentences, **kw),
    )
    pool = taskmaps.ModelPool(seed=0)
    kw = {"orders": (1,), "rollout": False, "cache_dir": tmp_path, "progress": False}
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    b = taskmaps.task_maps(pool, "minilm-l6", mixed, **kw)
    assert seen[1] == [mixed.words[0], mixed.words[3]]  # only the two sentences EWT did not have
    assert b.words == mixed.words and taskmaps.task_maps(pool, "minilm-l6", mixed, **kw).words == mixed.words
    assert len(seen) == 2  # the third call extracted nothing
    direct = real(
        pool.get("minilm-l6").model,
        pool.get("minilm-l6").tokenizer,
        mixed.words,
        orders=(1,),
        rollout=False,
        layers=(),
        progress=False,
    )
    for got, want in zip(b["ola:1"], direct["ola:1"]):  # the stored maps are those of a direct extraction
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert [t for t in b.tokens] == direct.tokens
    for i, j in ((1, 2), (2, 0)):  # mixed[1] = ewt[2], mixed[2] = ewt[0]: the same tensors
        assert torch.equal(b["ola:1"][i], a["ola:1"][j])


def test_a_damaged_shard_is_set_aside_and_its_sentences_extracted_again(tmp_path):
    from olas_utils.data.tasks import load_task
    from olas_utils.toa import taskmaps

    ewt = load_task("dependency", "test", n=3, max_words=10, min_words=3, seed=0)
    pool = taskmaps.ModelPool(seed=0)
    kw = {"orders": (1,), "rollout": False, "cache_dir": tmp_path, "progress": False}
    a = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    (shard,) = (tmp_path / "taskmaps").rglob("*.pt")
    shard.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match="cannot be read"):
        b = taskmaps.task_maps(pool, "minilm-l6", ewt, **kw)
    for x, y in zip(a["ola:1"], b["ola:1"]):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert len(list(shard.parent.glob("*.json.bad"))) == 1 and len(list(shard.parent.glob("*.json"))) == 1


def test_released_pos_accuracy_counts_subwords_and_special_tokens_by_hand():
    from olas_utils.toa.metrics import pos_accuracy, released_pos_accuracy

    gold, pred = [["DT", "NN", "VB"]], [["DT", "VB", "VB"]]
    # [CLS] the dog(2 subwords) barks [SEP]: tokens 6, correct = CLS + the + barks + SEP = 4
    assert released_pos_accuracy(gold, pred, [[-1, 0, 1, 1, 2, -1]]) == pytest.approx(4 / 6)
    assert pos_accuracy(gold, pred) == pytest.approx(2 / 3)
    assert released_pos_accuracy(gold, pred, [[0, 1]]) == pytest.approx(1 / 2)  # cut: barks has no token
    with pytest.raises(ValueError, match="word ids"):
        released_pos_accuracy(gold, pred, [[-1, 0, 3, -1]])


def test_closing_text_counts_each_family_and_names_task_and_target_with_several_tasks():
    import pandas as pd

    from olas_utils.studies import transfer_report

    def row(task, fam, cond, target, score, source="a", variant="plain"):
        return {
            "task": task,
            "metric": "m",
            "family": fam,
            "source": source,
            "target": target,
            "condition": cond,
            "variant": variant,
            "score": score,
        }

    rows = []
    for task in ("dependency", "relation"):
        # encoder e1: TOA 0.6 beats every control (best 0.3); causal c1: TOA 0.2 under position-only 0.4
        for fam, t, toa in (("encoder", "e1", 0.6), ("causal", "c1", 0.2)):
            rows += [
                row(task, fam, "self", t, 0.7),
                row(task, fam, "transfer", t, toa),
                row(task, fam, "TOA (headline)", t, toa, "chosen"),
                row(task, fam, "random-init target", t, 0.1),
                row(task, fam, "tokenizer-only", t, 0.1),
                row(task, fam, "position-only", t, 0.4 if fam == "causal" else 0.3),
                row(task, fam, "transfer (multi-source)", t, 0.65, "others"),
            ]
        rows.append({**row(task, "-", "baseline", "-", 0.05, "-", "-")})
    text = transfer_report.comparison_markdown(transfer_report.task_summary(pd.DataFrame(rows)), sizes="s")
    assert "**2/4** (task, target) pairs" in text
    assert "By family: encoder TOA 2/2, self 2/2; causal TOA 0/2, self 2/2" in text
    assert "dependency/e1 65.0 vs 60.0" in text and "relation/c1 65.0 vs 20.0" in text
    one = transfer_report.task_summary(
        pd.DataFrame([r for r in rows if r["task"] == "dependency" and r["target"] in ("e1", "-")])
    )
    text1 = transfer_report.comparison_markdown(one, sizes="s")
    assert "By family" not in text1 and ": e1 65.0 vs 60.0" in text1
