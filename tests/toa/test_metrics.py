"""Word-level metrics on hand-computed cases (and independent references where one exists)."""

from __future__ import annotations

import random

import pytest

from olas_utils.data import SEMEVAL_LABELS
from olas_utils.toa.metrics import (
    SEMEVAL_RELATIONS,
    attachment_scores,
    entity_f1,
    pos_accuracy,
    semeval_scores,
)

# ---------------------------------------------------------------------------------------
# POS
# ---------------------------------------------------------------------------------------


def test_pos_accuracy_hand():
    gold = [["DT", "NN", "VBZ"], ["UH"]]
    pred = [["DT", "NNS", "VBZ"], ["NN"]]
    assert pos_accuracy(gold, pred) == 2 / 4  # words 1 and 3 of sentence 1 right
    assert pos_accuracy(gold, gold) == 1.0


def test_pos_accuracy_errors():
    with pytest.raises(ValueError, match="sentence 0 has 2 gold items but 1 predicted"):
        pos_accuracy([["A", "B"]], [["A"]])
    with pytest.raises(ValueError, match="1 sentences but pred has 2"):
        pos_accuracy([["A"]], [["A"], ["B"]])
    with pytest.raises(ValueError, match="empty"):
        pos_accuracy([], [])
    with pytest.raises(ValueError, match="string"):
        pos_accuracy(["AB"], ["AB"])


# ---------------------------------------------------------------------------------------
# NER
# ---------------------------------------------------------------------------------------


def test_entity_f1_partial_span_is_a_miss():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "O"]]
    # gold entities: PER[0,1], LOC[3], ORG[0]; predicted: PER[0], LOC[3], ORG[0].
    # PER[0] != PER[0,1] -> 2 correct of 3 predicted and of 3 gold.
    r = entity_f1(gold, pred)
    assert r["precision"] == pytest.approx(2 / 3)
    assert r["recall"] == pytest.approx(2 / 3)
    assert r["f1"] == pytest.approx(2 / 3)


def test_entity_f1_wrong_type_and_extra_entity():
    gold = [["B-PER", "I-PER", "O", "O", "B-LOC"]]
    pred = [["B-ORG", "I-ORG", "O", "B-MISC", "B-LOC"]]
    # gold: PER[0,1], LOC[4]; pred: ORG[0,1], MISC[3], LOC[4] -> 1 correct.
    # P = 1/3, R = 1/2, F1 = 2*(1/3)*(1/2)/(1/3+1/2) = 2/5
    r = entity_f1(gold, pred)
    assert (r["precision"], r["recall"], r["f1"]) == pytest.approx((1 / 3, 1 / 2, 2 / 5))


def test_entity_f1_conlleval_mode_reads_leading_I_as_start():
    # conlleval (seqeval default mode): an I-PER after O starts a PER entity, so
    # I-PER I-PER spans the same words as gold B-PER I-PER and counts as correct.
    r = entity_f1([["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]])
    assert r == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_entity_f1_no_predictions_is_zero():
    r = entity_f1([["B-PER", "O"]], [["O", "O"]])
    assert r == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_entity_f1_errors():
    with pytest.raises(ValueError, match="sentence 0"):
        entity_f1([["B-PER", "O"]], [["B-PER"]])


# ---------------------------------------------------------------------------------------
# SemEval-2010 Task 8
# ---------------------------------------------------------------------------------------


def test_label_inventory():
    assert len(SEMEVAL_LABELS) == 19 and SEMEVAL_LABELS[-1] == "Other"
    assert len(SEMEVAL_RELATIONS) == 9
    assert "Cause-Effect" in SEMEVAL_RELATIONS and "Other" not in SEMEVAL_RELATIONS


CE12, CE21 = "Cause-Effect(e1,e2)", "Cause-Effect(e2,e1)"
CW12, CW21 = "Component-Whole(e1,e2)", "Component-Whole(e2,e1)"
MT12, ED12, PP12 = "Message-Topic(e1,e2)", "Entity-Destination(e1,e2)", "Product-Producer(e1,e2)"

# ex:        1     2     3        4     5     6        7        8        9     10
HAND_GOLD = [CE12, CE12, CE21, CW12, CW21, "Other", "Other", MT12, ED12, "Other"]
HAND_PRED = [CE12, CE21, "Other", CW12, CE12, CW21, "Other", "Other", ED12, PP12]
# ex 2: right type, wrong direction; ex 5: wrong type; ex 6, 10: Other predicted as a
# relation; ex 8: Message-Topic never predicted; ex 10: Product-Producer absent from gold.
#
# Official (9+1)-way with direction, per type (TP / predicted with type / gold with type):
#   Cause-Effect       TP 1 (ex1)  pred 3 (ex1,2,5)  gold 3 (ex1,2,3)  P 1/3 R 1/3 F 1/3
#   Component-Whole    TP 1 (ex4)  pred 2 (ex4,6)    gold 2 (ex4,5)    P 1/2 R 1/2 F 1/2
#   Message-Topic      TP 0        pred 0            gold 1            P 0   R 0   F 0
#   Entity-Destination TP 1 (ex9)  pred 1            gold 1            P 1   R 1   F 1
#   Product-Producer   TP 0        pred 1 (ex10)     gold 0            -> not averaged
# macro over the 4 gold types: P = R = F1 = (1/3 + 1/2 + 0 + 1) / 4 = 11/24
# micro over those types: P = 3/6, R = 3/7, F1 = 2*(1/2)(3/7)/(1/2+3/7) = 6/13
# accuracy (exact label): ex1, 4, 7, 9 -> 4/10
# 18-label macro F1 over the 6 directed labels in gold:
#   CE12: TP1/pred2(ex1,5)/gold2 -> F 1/2;  CE21: 0/1/1 -> 0;  CW12: 1/1/1 -> 1;
#   CW21: 0/1(ex6)/1 -> 0;  MT12: 0/0/1 -> 0;  ED12: 1/1/1 -> 1;  mean = 2.5/6 = 5/12


def test_semeval_hand_case():
    r = semeval_scores(HAND_GOLD, HAND_PRED)
    assert r["macro_f1"] == pytest.approx(11 / 24)
    assert r["macro_precision"] == pytest.approx(11 / 24)
    assert r["macro_recall"] == pytest.approx(11 / 24)
    assert r["micro_precision"] == pytest.approx(1 / 2)
    assert r["micro_recall"] == pytest.approx(3 / 7)
    assert r["micro_f1"] == pytest.approx(6 / 13)
    assert r["accuracy"] == pytest.approx(0.4)
    assert r["macro_f1_18"] == pytest.approx(5 / 12)
    assert r["n"] == 10
    ce = r["per_type"]["Cause-Effect"]
    assert (ce["tp"], ce["n_pred"], ce["n_gold"]) == (1, 3, 3)
    assert ce["precision"] == pytest.approx(1 / 3) and ce["f1"] == pytest.approx(1 / 3)
    assert r["per_type"]["Message-Topic"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "tp": 0,
        "n_pred": 0,
        "n_gold": 1,
    }
    pp = r["per_type"]["Product-Producer"]
    assert (pp["tp"], pp["n_pred"], pp["n_gold"]) == (0, 1, 0)
    assert set(r["per_type"]) == set(SEMEVAL_RELATIONS)


def test_semeval_direction_matters():
    # Every relation predicted with the right type but the wrong direction: no credit.
    gold = [CE12, CW21, ED12]
    pred = [CE21, CW12, "Entity-Destination(e2,e1)"]
    r = semeval_scores(gold, pred)
    assert r["macro_f1"] == 0.0 and r["accuracy"] == 0.0 and r["macro_f1_18"] == 0.0
    perfect = semeval_scores(gold, gold)
    assert perfect["macro_f1"] == 1.0 and perfect["accuracy"] == 1.0 and perfect["macro_f1_18"] == 1.0


def _reference_official(gold, pred):
    """Independent re-derivation following the scorer's confusion-matrix layout: a
    (9+1)-way matrix whose wrong-direction predictions go to a separate WRONG_DIR column;
    P = diag / (column sum + WRONG_DIR of that type), R = diag / gold count."""
    typ = lambda lab: lab.split("(")[0]
    conf, wrong = {}, {}
    for g, p in zip(gold, pred):
        if g != p and typ(g) == typ(p):
            wrong[typ(g)] = wrong.get(typ(g), 0) + 1
        else:
            conf[(typ(p), typ(g))] = conf.get((typ(p), typ(g)), 0) + 1
    gold_types = sorted({typ(g) for g in gold} - {"Other"})
    fs = []
    for t in gold_types:
        diag = conf.get((t, t), 0)
        col = sum(v for (p, _), v in conf.items() if p == t)
        den_p = col + wrong.get(t, 0)
        den_r = sum(typ(g) == t for g in gold)
        P = diag / den_p if col else 0.0
        R = diag / den_r
        fs.append(2 * P * R / (P + R) if P + R else 0.0)
    return sum(fs) / len(fs)


def test_semeval_random_against_references():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(0)
    for _trial in range(30):
        n = rng.randint(5, 200)
        gold = [rng.choice(SEMEVAL_LABELS) for _ in range(n)]
        # predictions: often the gold, sometimes the flipped direction, sometimes random
        pred = []
        for g in gold:
            u = rng.random()
            if u < 0.4:
                pred.append(g)
            elif u < 0.6 and g != "Other":
                pred.append(g.replace("(e1,e2)", "(e2,e1)") if "(e1,e2)" in g else g.replace("(e2,e1)", "(e1,e2)"))
            else:
                pred.append(rng.choice(SEMEVAL_LABELS))
        r = semeval_scores(gold, pred)
        if any(g != "Other" for g in gold):
            assert r["macro_f1"] == pytest.approx(_reference_official(gold, pred), abs=1e-12)
        labels18 = sorted(set(gold) - {"Other"})
        if labels18:
            ref18 = sklearn_metrics.f1_score(gold, pred, labels=labels18, average="macro", zero_division=0)
            assert r["macro_f1_18"] == pytest.approx(ref18, abs=1e-12)
        assert r["accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(gold, pred))


def test_semeval_errors():
    with pytest.raises(ValueError, match="valid labels are"):
        semeval_scores(["Cause-Effect"], ["Other"])  # direction missing
    with pytest.raises(ValueError, match="unknown pred"):
        semeval_scores(["Other"], ["other"])
    with pytest.raises(ValueError, match="2 labels but pred has 1"):
        semeval_scores(["Other", "Other"], ["Other"])
    with pytest.raises(ValueError, match="empty"):
        semeval_scores([], [])


# ---------------------------------------------------------------------------------------
# UAS / LAS
# ---------------------------------------------------------------------------------------

# sentence 1: "I saw it ."   sentence 2: "Wow !"
G_HEADS = [[2, 0, 2, 2], [0, 1]]
P_HEADS = [[2, 0, 1, 2], [2, 1]]
G_RELS = [["nsubj", "root", "obj", "punct"], ["root", "punct"]]
P_RELS = [["nsubj", "root", "obj", "dep"], ["root", "punct"]]
UPOS = [["PRON", "VERB", "PRON", "PUNCT"], ["INTJ", "PUNCT"]]


def test_attachment_hand_case():
    # s1: w1 head+rel ok, w2 head+rel ok, w3 head wrong, w4 head ok but rel wrong
    # s2: w1 head wrong, w2 head+rel ok            -> UAS 4/6, LAS 3/6 over 6 words
    r = attachment_scores(G_HEADS, P_HEADS, G_RELS, P_RELS)
    assert r == {"uas": pytest.approx(4 / 6), "las": pytest.approx(3 / 6), "n": 6}
    # without punctuation (s1 w4, s2 w2 dropped): s1 w1, w2 right, s1 w3, s2 w1 wrong
    r = attachment_scores(G_HEADS, P_HEADS, G_RELS, P_RELS, upos=UPOS, punct=False)
    assert r == {"uas": pytest.approx(2 / 4), "las": pytest.approx(2 / 4), "n": 4}


def test_attachment_errors():
    with pytest.raises(ValueError, match="needs upos"):
        attachment_scores(G_HEADS, P_HEADS, G_RELS, P_RELS, punct=False)
    with pytest.raises(ValueError, match="sentence 1"):
        attachment_scores(G_HEADS, [[2, 0, 1, 2], [2]], G_RELS, P_RELS)
    with pytest.raises(ValueError, match="pred_rels"):
        attachment_scores(G_HEADS, P_HEADS, G_RELS, P_RELS[:1])
    with pytest.raises(ValueError, match="no word to score"):
        attachment_scores([[0]], [[0]], [["punct"]], [["punct"]], upos=[["PUNCT"]], punct=False)
