"""Standard word-level evaluation metrics for the paper's downstream tasks (``docs/method.md#metrics``).

:func:`pos_accuracy` (POS), :func:`entity_f1` (NER), :func:`semeval_scores` (relations),
:func:`attachment_scores` (dependencies); the ``*_counts`` functions give per-sentence counts
whose sums give back each corpus metric exactly, for the bootstrap
(``docs/method.md#uncertainty``). All scores are fractions in [0, 1].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from olas_utils.data import SEMEVAL_LABELS

__all__ = [
    "pos_accuracy",
    "released_pos_accuracy",
    "entity_f1",
    "semeval_scores",
    "attachment_scores",
    "SEMEVAL_RELATIONS",
    "pos_counts",
    "entity_counts",
    "entity_f1_from_counts",
    "semeval_counts",
    "semeval_macro_f1_from_counts",
    "attachment_counts",
]


def _check_parallel(gold: Sequence[Sequence], pred: Sequence[Sequence], what: str) -> int:
    """Check two corpora of sentences align; return the total number of items."""
    if len(gold) != len(pred):
        raise ValueError(f"{what}: gold has {len(gold)} sentences but pred has {len(pred)}")
    total = 0
    for i, (g, p) in enumerate(zip(gold, pred)):
        if isinstance(g, str) or isinstance(p, str):
            raise ValueError(f"{what}: sentence {i} is a string; expected a sequence of labels per sentence")
        if len(g) != len(p):
            raise ValueError(f"{what}: sentence {i} has {len(g)} gold items but {len(p)} predicted")
        total += len(g)
    if total == 0:
        raise ValueError(f"{what}: no items to score (empty input)")
    return total


# ----------------------------------------------------------------------------------------
# POS and NER
# ----------------------------------------------------------------------------------------


def pos_accuracy(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> float:
    """Word-level tagging accuracy: correct words / all words, pooled over sentences.

    Args:
        gold: one sequence of gold tags per sentence (one tag per word).
        pred: predicted tags, same shape as ``gold``.

    Returns:
        Accuracy in [0, 1] (a micro average: long sentences weigh more).

    Raises:
        ValueError: different numbers of sentences, a sentence whose gold and predicted
            lengths differ, or no words at all.
    """
    total = _check_parallel(gold, pred, "pos_accuracy")
    correct = sum(g == p for gs, ps in zip(gold, pred) for g, p in zip(gs, ps))
    return correct / total


def released_pos_accuracy(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], word_ids: Sequence[Sequence[int]]
) -> float:
    """POS accuracy as the paper's released code counts it (``docs/method.md#released-code``): over every subword
    token, special tokens included, from word-level tags.

    A word of k subwords counts k times; a special token (``word_ids`` −1) counts as correct
    (``docs/method.md#metrics``).

    Args:
        gold, pred: one tag per word per sentence.
        word_ids: per sentence, the word index of each subword token (−1: special token),
            e.g. ``OLAMaps.word_ids`` (:class:`olas_utils.maps.OLAMaps`).

    Returns:
        Accuracy in [0, 1] over all tokens.

    Raises:
        ValueError: as :func:`pos_accuracy`, or a word index out of range. Words without
            a token (a sentence cut at the model's length limit) are not counted, as in the
            released code.
    """
    _check_parallel(gold, pred, "released_pos_accuracy")
    if len(word_ids) != len(gold):
        raise ValueError(f"released_pos_accuracy: {len(word_ids)} word-id lists for {len(gold)} sentences")
    correct = total = 0
    for i, (gs, ps, wid) in enumerate(zip(gold, pred, word_ids)):
        wid = [int(w) for w in wid]
        if any(w < -1 or w >= len(gs) for w in wid):
            raise ValueError(f"released_pos_accuracy: sentence {i} has {len(gs)} words but word ids {wid}")
        total += len(wid)
        correct += sum(1 if w == -1 else int(gs[w] == ps[w]) for w in wid)
    return correct / total


def entity_f1(gold_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro precision, recall and F1 (CoNLL ``conlleval`` style) via seqeval.

    Exact type and boundaries; seqeval's default mode (``mode=None``, conlleval's reading of
    IOB2), ``zero_division=0`` (``docs/method.md#metrics``).

    Args:
        gold_tags: one sequence of IOB2 tags (e.g. ``"B-PER"``, ``"I-PER"``, ``"O"``) per
            sentence.
        pred_tags: predicted tags, same shape.

    Returns:
        ``{"precision", "recall", "f1"}`` as floats in [0, 1].

    Raises:
        ValueError: mismatched numbers/lengths of sentences or empty input.

    Source: Nakayama (2018), *seqeval* (github.com/chakki-works/seqeval); CoNLL-2000/2003
    ``conlleval``.
    """
    from seqeval.metrics import f1_score, precision_score, recall_score

    _check_parallel(gold_tags, pred_tags, "entity_f1")
    g = [list(s) for s in gold_tags]
    p = [list(s) for s in pred_tags]
    return {
        "precision": float(precision_score(g, p, zero_division=0)),
        "recall": float(recall_score(g, p, zero_division=0)),
        "f1": float(f1_score(g, p, zero_division=0)),
    }


# ----------------------------------------------------------------------------------------
# SemEval-2010 Task 8
# ----------------------------------------------------------------------------------------

#: The 9 SemEval-2010 Task 8 relation types (without direction), in label order.
SEMEVAL_RELATIONS: tuple[str, ...] = tuple(dict.fromkeys(lab.split("(")[0] for lab in SEMEVAL_LABELS if lab != "Other"))


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    """Precision, recall, F1 with 0 for a zero denominator (as the official scorer)."""
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def semeval_scores(gold: Sequence[str], pred: Sequence[str]) -> dict:
    """SemEval-2010 Task 8 scores, following the official scorer ``semeval2010_task8_scorer-v1.2.pl``.

    ``macro_f1`` (official): per relation type R, TP = gold type R and label exact (direction
    included), P = TP / predicted type R, R = TP / gold type R, F1 = 2PR / (P + R) (0 on a zero
    denominator), averaged over the types present in gold, ``Other`` excluded. How each number
    is counted: ``docs/method.md#metrics``.

    Args:
        gold: gold labels, one per example, each one of :data:`olas_utils.data.SEMEVAL_LABELS`
            (e.g. ``"Cause-Effect(e1,e2)"``, ``"Cause-Effect(e2,e1)"``, ``"Other"``).
        pred: predicted labels, same length and vocabulary.

    Returns:
        ``{"macro_f1", "macro_precision", "macro_recall", "micro_precision", "micro_recall",
        "micro_f1", "accuracy" (19-way), "macro_f1_18" (18 directed labels), "per_type" ({type:
        {"precision", "recall", "f1", "tp", "n_pred", "n_gold"}} for all 9 types), "n"}``;
        scores are fractions in [0, 1].

    Raises:
        ValueError: different lengths, empty input, or a label outside the 19 valid ones
            (the message lists them).

    Source: the official scorer v1.2 (Preslav Nakov, 2010), section "(9+1)-WAY EVALUATION
    TAKING DIRECTIONALITY INTO ACCOUNT -- OFFICIAL" and its per-relation P/R/F1 and
    macro-average code; ``SemEval2010_task8_training/README.txt`` ("EVALUATION") for the
    18-label macro F-score; Hendrickx et al. (2010), SemEval-2010 Task 8 paper.
    """
    if isinstance(gold, str) or isinstance(pred, str):
        raise ValueError("semeval_scores: gold and pred must be sequences of labels, not strings")
    gold, pred = list(gold), list(pred)
    if len(gold) != len(pred):
        raise ValueError(f"semeval_scores: gold has {len(gold)} labels but pred has {len(pred)}")
    if not gold:
        raise ValueError("semeval_scores: empty input")
    valid = set(SEMEVAL_LABELS)
    for name, labels in (("gold", gold), ("pred", pred)):
        bad = sorted({str(x) for x in labels if x not in valid})
        if bad:
            raise ValueError(
                f"semeval_scores: unknown {name} label(s) {bad[:5]}; valid labels are {list(SEMEVAL_LABELS)}"
            )

    def rtype(label: str) -> str:
        return label.split("(")[0]

    # official (9+1)-way with direction, per relation type
    tp = Counter(rtype(g) for g, p in zip(gold, pred) if g == p and g != "Other")
    n_pred = Counter(rtype(p) for p in pred if p != "Other")
    n_gold = Counter(rtype(g) for g in gold if g != "Other")
    per_type = {}
    for r in SEMEVAL_RELATIONS:
        p_, r_, f_ = _prf(tp[r], n_pred[r], n_gold[r])
        per_type[r] = {"precision": p_, "recall": r_, "f1": f_, "tp": tp[r], "n_pred": n_pred[r], "n_gold": n_gold[r]}
    in_gold = [r for r in SEMEVAL_RELATIONS if n_gold[r]]
    k = len(in_gold)
    macro_p = sum(per_type[r]["precision"] for r in in_gold) / k if k else 0.0
    macro_r = sum(per_type[r]["recall"] for r in in_gold) / k if k else 0.0
    macro_f = sum(per_type[r]["f1"] for r in in_gold) / k if k else 0.0
    micro_p, micro_r, micro_f = _prf(
        sum(tp[r] for r in in_gold), sum(n_pred[r] for r in in_gold), sum(n_gold[r] for r in in_gold)
    )

    # 18 directed labels (the (2*9+1)-way evaluation), averaged over labels present in gold
    tp18 = Counter(g for g, p in zip(gold, pred) if g == p)
    pred18, gold18 = Counter(pred), Counter(gold)
    labels18 = [lab for lab in SEMEVAL_LABELS if lab != "Other" and gold18[lab]]
    f18 = [_prf(tp18[lab], pred18[lab], gold18[lab])[2] for lab in labels18]
    macro_f1_18 = sum(f18) / len(f18) if f18 else 0.0

    return {
        "macro_f1": macro_f,
        "macro_precision": macro_p,
        "macro_recall": macro_r,
        "micro_precision": micro_p,
        "micro_recall": micro_r,
        "micro_f1": micro_f,
        "accuracy": sum(tp18.values()) / len(gold),
        "macro_f1_18": macro_f1_18,
        "per_type": per_type,
        "n": len(gold),
    }


# ----------------------------------------------------------------------------------------
# Dependency parsing
# ----------------------------------------------------------------------------------------


def attachment_scores(
    gold_heads: Sequence[Sequence[int]],
    pred_heads: Sequence[Sequence[int]],
    gold_rels: Sequence[Sequence[str]],
    pred_rels: Sequence[Sequence[str]],
    upos: Sequence[Sequence[str]] | None = None,
    punct: bool = True,
) -> dict:
    """Unlabelled and labelled attachment scores, per word, pooled over sentences.

    UAS: head right; LAS: head and relation right (exact string, subtypes included;
    ``docs/method.md#metrics``).

    Args:
        gold_heads: per sentence, the gold 1-based head of each word (0 = root).
        pred_heads: predicted heads, same shape.
        gold_rels: per sentence, the gold dependency relation of each word.
        pred_rels: predicted relations, same shape.
        upos: per sentence, the **gold** UPOS tag of each word; needed when ``punct=False``.
        punct: score punctuation too (True) or exclude words whose gold UPOS is ``"PUNCT"``
            (False, as Dozat & Manning 2017).

    Returns:
        ``{"uas", "las", "n"}``: fractions in [0, 1] and the number of words scored.

    Raises:
        ValueError: mismatched numbers of sentences or sentence lengths among the inputs,
            ``punct=False`` without ``upos``, or no word left to score.
    """
    _check_parallel(gold_heads, pred_heads, "attachment_scores (heads)")
    _check_parallel(gold_heads, gold_rels, "attachment_scores (gold_rels vs gold_heads)")
    _check_parallel(gold_heads, pred_rels, "attachment_scores (pred_rels vs gold_heads)")
    if not punct:
        if upos is None:
            raise ValueError("attachment_scores: punct=False needs upos (gold UPOS tags) to find punctuation")
        _check_parallel(gold_heads, upos, "attachment_scores (upos vs gold_heads)")
    n = ua = la = 0
    for s, (gh, ph, gr, pr) in enumerate(zip(gold_heads, pred_heads, gold_rels, pred_rels)):
        tags = upos[s] if not punct else None
        for i in range(len(gh)):
            if tags is not None and tags[i] == "PUNCT":
                continue
            n += 1
            if int(gh[i]) == int(ph[i]):
                ua += 1
                if gr[i] == pr[i]:
                    la += 1
    if n == 0:
        raise ValueError("attachment_scores: no word to score (all words excluded as punctuation)")
    return {"uas": ua / n, "las": la / n, "n": n}


# ----------------------------------------------------------------------------------------
# Per-sentence counts (their sums give the corpus metrics above)
# ----------------------------------------------------------------------------------------


def pos_counts(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
    """Per sentence ``(correct words, words)``: :func:`pos_accuracy` is the ratio of their sums.

    Raises:
        ValueError: as :func:`pos_accuracy`.
    """
    _check_parallel(gold, pred, "pos_counts")
    return [(sum(g == p for g, p in zip(gs, ps)), len(gs)) for gs, ps in zip(gold, pred)]


def entity_counts(gold_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> list[tuple[int, int, int]]:
    """Per sentence ``(tp, fp, fn)`` of exactly matching entities, read as :func:`entity_f1` reads
    them (seqeval's ``get_entities``, default mode; an entity never crosses a sentence, so
    the sentences' counts add up to the corpus counts seqeval uses).

    Raises:
        ValueError: as :func:`entity_f1`.
    """
    from seqeval.metrics.sequence_labeling import get_entities

    _check_parallel(gold_tags, pred_tags, "entity_counts")
    out = []
    for g, p in zip(gold_tags, pred_tags):
        eg, ep = set(get_entities([list(g)])), set(get_entities([list(p)]))
        tp = len(eg & ep)
        out.append((tp, len(ep) - tp, len(eg) - tp))
    return out


def entity_f1_from_counts(tp, fp, fn) -> dict:
    """``{"precision", "recall", "f1"}`` from summed entity counts (scalars or arrays of equal
    shape, e.g. bootstrap resamples); a zero denominator gives 0, as ``zero_division=0``."""
    tp, fp, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        r = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return {"precision": p[()], "recall": r[()], "f1": f[()]}


def semeval_counts(gold: Sequence[str], pred: Sequence[str]) -> np.ndarray:
    """Per example, the official score's counts per relation type: an ``(n, 3, 9)`` 0/1 array
    of ``(tp, predicted, gold)`` for each of :data:`SEMEVAL_RELATIONS` (an example is a true
    positive of its gold type when the label, direction included, is right; ``Other``
    counts nowhere). Their sums are the ``tp``, ``n_pred``, ``n_gold`` of
    :func:`semeval_scores`' ``per_type``.

    Raises:
        ValueError: as :func:`semeval_scores`.
    """
    semeval_scores(gold, pred)  # validates lengths and labels
    index = {r: i for i, r in enumerate(SEMEVAL_RELATIONS)}
    out = np.zeros((len(gold), 3, len(SEMEVAL_RELATIONS)), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gold, pred)):
        if g != "Other":
            out[i, 2, index[g.split("(")[0]]] = 1
            out[i, 0, index[g.split("(")[0]]] = int(g == p)
        if p != "Other":
            out[i, 1, index[p.split("(")[0]]] = 1
    return out


def semeval_macro_f1_from_counts(counts) -> np.ndarray | float:
    """The official SemEval-2010 Task 8 score (:func:`semeval_scores`' ``macro_f1``) from summed
    counts ``(..., 3, 9)`` (:func:`semeval_counts` summed over examples; leading axes, e.g.
    bootstrap resamples, are kept): per type F1 = 2·tp / (predicted + gold), averaged over the
    types present in gold; 0 where no type is."""
    c = np.asarray(counts, dtype=np.float64)
    if c.shape[-2:] != (3, len(SEMEVAL_RELATIONS)):
        raise ValueError(f"counts must end in (3, {len(SEMEVAL_RELATIONS)}), got shape {c.shape}")
    tp, n_pred, n_gold = c[..., 0, :], c[..., 1, :], c[..., 2, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(n_pred + n_gold > 0, 2 * tp / (n_pred + n_gold), 0.0)
    present = n_gold > 0
    k = present.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(k > 0, (f * present).sum(axis=-1) / k, 0.0)
    return out[()]


def attachment_counts(
    gold_heads: Sequence[Sequence[int]],
    pred_heads: Sequence[Sequence[int]],
    gold_rels: Sequence[Sequence[str]],
    pred_rels: Sequence[Sequence[str]],
    upos: Sequence[Sequence[str]] | None = None,
    punct: bool = True,
) -> list[tuple[int, int, int]]:
    """Per sentence ``(correct heads, correct heads and relations, words scored)``: UAS and LAS of
    :func:`attachment_scores` are the ratios of their sums (a sentence of punctuation only
    scores ``(0, 0, 0)`` with ``punct=False``).

    Raises:
        ValueError: as :func:`attachment_scores`, except that a corpus with no word left is
            allowed (every sentence then counts 0).
    """
    _check_parallel(gold_heads, pred_heads, "attachment_counts (heads)")
    _check_parallel(gold_heads, gold_rels, "attachment_counts (gold_rels vs gold_heads)")
    _check_parallel(gold_heads, pred_rels, "attachment_counts (pred_rels vs gold_heads)")
    if not punct:
        if upos is None:
            raise ValueError("attachment_counts: punct=False needs upos (gold UPOS tags) to find punctuation")
        _check_parallel(gold_heads, upos, "attachment_counts (upos vs gold_heads)")
    out = []
    for s, (gh, ph, gr, pr) in enumerate(zip(gold_heads, pred_heads, gold_rels, pred_rels)):
        keep = [punct or upos[s][i] != "PUNCT" for i in range(len(gh))]
        ua = [k and int(gh[i]) == int(ph[i]) for i, k in enumerate(keep)]
        la = sum(u and gr[i] == pr[i] for i, u in enumerate(ua))
        out.append((sum(ua), la, sum(keep)))
    return out
