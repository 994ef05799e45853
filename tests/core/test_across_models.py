"""The across-models reading against independent references: brute-force enumeration of sign
vectors (itertools), scipy's t interval, statsmodels' Holm on the testable cells, hand cases."""

from itertools import permutations, product

import numpy as np
import pytest
from _support.stats import statsmodels_holm
from scipy import stats

from olas_utils.stats.across_models import (
    NOT_TESTABLE,
    across_verdicts,
    dyadic_sign_flip_p,
    holm_reachable,
    min_p,
    model_reading,
    pair_reading,
    sign_flip_p,
    units_needed,
)
from olas_utils.stats.uncertainty import against_every_control, verdicts
from olas_utils.stats.uncertainty import margin as item_margin


def _brute_sign_flip(v):
    v = np.asarray(v, float)
    obs = abs(v.mean())
    hits = [abs(np.dot(s, v) / len(v)) >= obs - 1e-12 for s in product([1, -1], repeat=len(v))]
    return sum(hits) / len(hits)


def _brute_dyadic(models, pairs, d):
    d = np.asarray(d, float)
    obs = abs(d.mean())
    idx = {m: i for i, m in enumerate(models)}
    count = total = 0
    for s in product([1, -1], repeat=len(models)):
        t = np.mean([s[idx[a]] * s[idx[b]] * x for (a, b), x in zip(pairs, d)])
        count += abs(t) >= obs - 1e-12
        total += 1
    return count / total


@pytest.mark.parametrize(
    "values", [[0.3, 0.1, 0.2], [0.5, -0.1, 0.2, 0.05, 0.4, -0.3], [1, 2, 3, 4, 5, 6, 7], [0.0, 0.0]]
)
def test_sign_flip_p_equals_brute_force_enumeration(values):
    assert sign_flip_p(values) == pytest.approx(_brute_sign_flip(values), abs=1e-12)


def test_three_models_cannot_reach_five_percent_and_six_can():
    assert min_p(3) == 0.25 and sign_flip_p([0.5, 0.6, 0.8]) == 0.25
    assert min_p(6) == pytest.approx(1 / 32) and sign_flip_p([0.5, 0.6, 0.8, 0.4, 0.7, 0.9]) == pytest.approx(1 / 32)
    r3 = model_reading({"a": 0.5, "b": 0.6, "c": 0.8})
    assert not r3.testable and np.isnan(r3.p_value) and r3.positive == 3
    r6 = model_reading({m: v for m, v in zip("abcdef", [0.5, 0.6, 0.8, 0.4, 0.7, 0.9])}, p_items=0.001)
    assert r6.testable and r6.p_value == pytest.approx(1 / 32)
    # the larger of the item and model p-values is kept
    assert model_reading({m: 1.0 + i for i, m in enumerate("abcdef")}, p_items=0.2).p_value == 0.2


def test_dyadic_sign_flip_equals_brute_force():
    rng = np.random.default_rng(3)
    models = ["a", "b", "c", "d", "e"]
    pairs = list(permutations(models, 2))
    d = rng.normal(0.1, 0.3, len(pairs))
    assert dyadic_sign_flip_p(models, pairs, d) == pytest.approx(_brute_dyadic(models, pairs, d), abs=1e-12)
    # weak effects, whose p lies away from its floor 2/2^5 (where any sign rule gives the same p)
    ps = []
    for seed in range(6):
        d = np.random.default_rng(seed).normal(0.02, 0.3, len(pairs))
        ps.append(_brute_dyadic(models, pairs, d))
        assert dyadic_sign_flip_p(models, pairs, d) == pytest.approx(ps[-1], abs=1e-12), seed
    assert max(ps) > 0.2


def test_pair_reading_takes_per_target_margins_and_the_largest_p():
    models = list("abcdef")
    pairs = list(permutations(models, 2))
    rng = np.random.default_rng(0)
    d = np.abs(rng.normal(0.3, 0.1, len(pairs)))
    r = pair_reading(pairs, d, p_items=0.0)
    by_target = [np.mean([x for (t, _), x in zip(pairs, d) if t == m]) for m in models]
    assert r.models == tuple(models) and np.allclose(r.per_model, by_target)
    assert r.estimate == pytest.approx(d.mean())
    expect = max(
        _brute_sign_flip(by_target),
        _brute_sign_flip([np.mean([x for (_, s), x in zip(pairs, d) if s == m]) for m in models]),
        _brute_dyadic(models, pairs, d),
    )
    assert r.p_value == pytest.approx(expect)
    ci = stats.ttest_1samp(by_target, 0.0).confidence_interval(0.95)
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high))


def test_across_verdicts_holm_over_the_testable_cells_only():
    six = list("abcdef")
    cells = [
        model_reading({m: 0.5 + 0.1 * i for i, m in enumerate("abcdefg")}, p_items=0.0),  # p = 1/64
        model_reading({"x": 0.4, "y": 0.5, "z": 0.6}),  # three models: not testable
        model_reading({m: (-1) ** i * 0.3 for i, m in enumerate(six)}, p_items=0.5),
        None,
    ]
    got = across_verdicts(cells)
    ps = [cells[0].p_value, cells[2].p_value]
    reject = statsmodels_holm(ps, alpha=0.05)
    assert got[1] == NOT_TESTABLE and got[3] is None
    assert got[0] == ("beats" if reject[0] else "indistinguishable")
    assert got[0] == "beats"  # 1/64 < 0.05/2, where 6 models (1/32) could not pass Holm over 2 cells
    assert got[2] == "indistinguishable"


def test_holm_reachable_by_hand_and_against_statsmodels():
    # hand-worked: 6 units reach 2/64 = 0.031 (one cell alone: yes; two: 0.031 > 0.05/2, neither);
    # 9 units reach 2/512 = 0.0039: 12 cells (<= 0.05/12 = 0.0042) yes, 13 (0.00385) no
    assert holm_reachable([6]) == [True] and holm_reachable([6, 6]) == [False, False]
    assert all(holm_reachable([9] * 12)) and not any(holm_reachable([9] * 13))
    assert holm_reachable([3, 6]) == [False, True]  # 3 units are out alone (0.25), the 6 then stand alone
    assert holm_reachable([6, 10, 10]) == [True, True, True]  # 0.002, 0.002 pass first; 0.031 <= 0.05 last
    # whatever the counts: statsmodels' Holm on the kept cells' smallest p-values rejects every kept cell
    rng = np.random.default_rng(5)
    for _ in range(200):
        units = rng.integers(2, 12, size=rng.integers(1, 9)).tolist()
        ok = holm_reachable(units)
        kept = [min_p(n) for n, k in zip(units, ok) if k]
        if kept:
            assert statsmodels_holm(kept, alpha=0.05).all()


def test_units_needed_by_hand():
    # 2/2**6 = 0.031 <= 0.05; 2/2**7 = 0.0156 <= 0.025; 2/2**9 = 0.0039 <= 0.05/12 = 0.0042 but not <= 0.05/13
    assert [units_needed(m) for m in (1, 2, 12, 13, 14)] == [6, 7, 9, 10, 10]
    for m in (1, 5, 14, 30):
        n = units_needed(m)
        assert all(holm_reachable([n] * m)) and not any(holm_reachable([n - 1] * m))


def test_a_family_too_small_for_holm_reads_not_testable_not_indistinguishable():
    # two cells of 6 models each, every model agreeing: p = 1/32 each, no Holm over 2 can reject;
    # the old procedure printed "indistinguishable", a verdict the model count had decided
    cells = [model_reading({m: 0.5 + 0.01 * i for i, m in enumerate("abcdef")}, p_items=0.0) for _ in range(2)]
    assert [c.testable for c in cells] == [True, True]
    assert across_verdicts(cells) == [NOT_TESTABLE, NOT_TESTABLE]
    assert across_verdicts(cells[:1]) == ["beats"]


def test_every_control_intersection_union_and_bonferroni_by_hand():
    # every margin positive: the largest p decides (the control hardest to beat)
    assert against_every_control([0.3, 0.1, 0.2], [0.001, 0.04, 0.01]) == (0.04, 1)
    # one negative margin: "loses to some control", Bonferroni over the 3 controls
    assert against_every_control([0.3, -0.1, 0.2], [0.001, 0.01, 0.01]) == (pytest.approx(0.03), 1)
    assert against_every_control([0.3, -0.1, -0.2], [0.001, 0.5, 0.2]) == (pytest.approx(0.6), 2)
    assert against_every_control([0.0, 0.2], [1.0, 0.01]) == (1.0, 0)
    # p-values at the bootstrap's floor tie: the smallest margin (the hardest control) decides
    assert against_every_control([0.5, 0.2, 0.3], [0.0005, 0.0005, 0.0005]) == (0.0005, 1)
    assert against_every_control([0.5, -0.2, -0.4], [0.0005, 0.0005, 0.0005]) == (pytest.approx(0.0015), 2)
    with pytest.raises(ValueError, match="NaN"):
        against_every_control([0.1, float("nan")], [0.01, 0.01])


def test_no_verdict_from_a_nan_p_value():
    m = item_margin(np.ones((3, 10)), np.zeros((3, 10)), n_resamples=200)
    bad = type(m)(**{**m.__dict__, "p_value": float("nan")})
    with pytest.raises(ValueError, match="NaN"):
        verdicts([m, bad])
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_p([0.1, float("nan")])


def test_no_interval_or_verdict_from_fewer_than_the_minimum_items():
    from olas_utils.stats.uncertainty import MIN_ITEMS, interval, interval_of, ratio

    with pytest.raises(ValueError, match="item"):
        verdicts([item_margin([1.0], [0.0])])  # one item: it was "beats" at p = 0.0005
    with pytest.raises(ValueError, match="item"):
        interval([1.0])
    with pytest.raises(ValueError, match="item"):
        item_margin(np.ones((1, 1)), np.zeros((1, 1)))  # one pair, one chunk
    with pytest.raises(ValueError, match="item"):
        interval_of(ratio, np.ones((MIN_ITEMS - 1, 2)))
    assert interval(np.r_[np.ones(MIN_ITEMS), np.zeros(MIN_ITEMS)]).estimate == 0.5


def test_holm_reject_equals_statsmodels_on_random_and_tied_p_values():
    from olas_utils.stats.uncertainty import holm_reject

    rng = np.random.default_rng(11)
    for m in (1, 2, 5, 36):
        for _ in range(200):
            p = rng.choice([0.0005, 0.001, 0.004, 0.01, 0.02, 0.04, 0.2, 0.9], size=m) * rng.choice([1, 1, 0.5], size=m)
            expect = statsmodels_holm(p, alpha=0.05)
            assert (holm_reject(p, alpha=0.05) == expect).all(), p
    with pytest.raises(ValueError, match="NaN"):
        holm_reject([0.01, float("nan")])
