"""Notebook 02's retrieval summary and key margins on a toy case small enough to work out by hand:
two models (two ordered pairs), six chunks, ranks typed in; Hit@1 counts rank 0, Hit@5 ranks 0–4
(rank 5 is a miss), means over the pairs' chunks, their range over pairs, chance 1/chunks; a key
margin is the paired difference of two keys' hits on the same pairs and chunks."""

import numpy as np
import pandas as pd
import pytest

from olas_utils.stats.uncertainty import BEATS, margin
from olas_utils.studies import crosslm, crosslm_stats

#: ranks of the true chunk, per key, per ordered pair (target, source), chunk 0..5
RANKS = {
    "ola:1": {("a", "b"): [0, 1, 4, 5, 0, 9], ("b", "a"): [0, 0, 0, 2, 7, 3]},
    "rollout": {("a", "b"): [3, 0, 2, 5, 1, 8], ("b", "a"): [1, 1, 6, 6, 0, 2]},
}


def toy_items(keys=("ola:1", "rollout")) -> pd.DataFrame:
    rows = {c: [] for c in crosslm.RETRIEVAL_ITEM_COLUMNS}
    for key in keys:
        for (target, source), ranks in RANKS[key].items():
            for chunk, rank in enumerate(ranks):
                values = ("causal", "none", "paper", key, "ssim", target, source, chunk, rank)
                for col, v in zip(rows, values):
                    rows[col].append(v)
    return pd.DataFrame(rows)


def test_retrieval_summary_by_hand():
    s = crosslm_stats.retrieval_summary(toy_items(("ola:1",)))
    assert len(s) == 1
    r = s.iloc[0]
    # ola:1, pair a→b: ranks 0 1 4 5 0 9 → Hit@1 2/6, Hit@5 4/6 (0, 1, 4, 0; 5 and 9 miss)
    #        pair b→a: ranks 0 0 0 2 7 3 → Hit@1 3/6, Hit@5 5/6
    assert r["pairs"] == 2 and r["n"] == 6 and r["chance@1"] == pytest.approx(1 / 6)
    assert r["hit@1"] == pytest.approx((2 + 3) / 12)
    assert (r["hit@1 min"], r["hit@1 max"]) == pytest.approx((2 / 6, 3 / 6))
    assert r["hit@5"] == pytest.approx((4 + 5) / 12)
    assert (r["hit@5 min"], r["hit@5 max"]) == pytest.approx((4 / 6, 5 / 6))
    assert r["hit@1 low"] < r["hit@1 high"] and r["hit@5 low"] < r["hit@5 high"]


def test_retrieval_frame_per_pair_by_hand():
    f = crosslm_stats.retrieval_frame(toy_items(("ola:1",))).set_index(["target", "source"])
    assert f.loc[("a", "b"), "hit@1"] == pytest.approx(2 / 6) and f.loc[("a", "b"), "hit@5"] == pytest.approx(4 / 6)
    assert f.loc[("b", "a"), "hit@1"] == pytest.approx(3 / 6) and f.loc[("b", "a"), "hit@5"] == pytest.approx(5 / 6)
    assert set(f["n"]) == {6}


def test_key_margin_by_hand():
    t = crosslm_stats.key_margin_frame(toy_items())
    assert list(t["key"]) == ["rollout"] and list(t["reference"]) == ["ola:1"]
    r = t.iloc[0]
    # Hit@1: ola:1 2 + 3 of 12, rollout 1 (a→b: chunk 1) + 1 (b→a: chunk 4) of 12
    assert r["reference_score"] == pytest.approx(5 / 12) and r["key_score"] == pytest.approx(2 / 12)
    assert r["margin"] == pytest.approx(3 / 12)
    assert r["pairs"] == 2 and r["chunks"] == 6 and r["holm_cells"] == 1
    # paired: the interval is the bootstrap of the same (pair, chunk) cells of both keys, laid
    # out by hand here (rows a→b, b→a; columns chunk 0..5)
    ola = np.array([[1, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 0]], float)
    rollout = np.array([[0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0]], float)
    m = margin(ola, rollout)
    assert (r["margin_low"], r["margin_high"], r["p"]) == pytest.approx((m.low, m.high, m.p_value))


def test_a_key_far_below_is_beaten_by_hand():
    # rollout never in first place on 40 chunks of 3 pairs, ola:1 always: margin 1, p at its floor
    rows = {c: [] for c in crosslm.RETRIEVAL_ITEM_COLUMNS}
    pairs = [("a", "b"), ("b", "a"), ("a", "c")]
    for key, rank in (("ola:1", 0), ("rollout", 1)):
        for target, source in pairs:
            for chunk in range(40):
                for col, v in zip(rows, ("causal", "none", "paper", key, "ssim", target, source, chunk, rank)):
                    rows[col].append(v)
    r = crosslm_stats.key_margin_frame(pd.DataFrame(rows)).iloc[0]
    assert r["margin"] == 1.0 and r["margin_low"] == 1.0 and r["margin_high"] == 1.0
    assert r["verdict"] == BEATS
