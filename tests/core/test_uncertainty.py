"""Bootstrap intervals and three-way verdicts (olas_utils.stats.uncertainty) against references
that do not use the code: scipy's own bootstrap, coverage on synthetic data whose true
value is known, and Holm's step-down procedure worked by hand."""

import numpy as np
import pytest
from _support.stats import statsmodels_holm
from scipy import stats

from olas_utils.stats.uncertainty import (
    BEATS,
    INDISTINGUISHABLE,
    LOSES,
    Interval,
    interval,
    margin,
    resamples_for,
    verdict_counts,
    verdicts,
)


def test_plain_mean_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(0)
    x = (rng.random(300) < 0.3).astype(float)
    ours = interval(x, n_resamples=8000, seed=1)
    ref = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=8000, random_state=2).confidence_interval
    assert ours.estimate == pytest.approx(x.mean())
    # two Monte Carlo estimates of the same quantiles: they agree to well under a point
    assert ours.low == pytest.approx(ref.low, abs=0.006)
    assert ours.high == pytest.approx(ref.high, abs=0.006)


def test_coverage_on_binomial_data_is_nominal():
    rng = np.random.default_rng(3)
    p, n, reps = 0.3, 150, 300
    hits = 0
    for r in range(reps):
        x = (rng.random(n) < p).astype(float)
        iv = interval(x, n_resamples=1000, seed=r)
        hits += iv.low <= p <= iv.high
    # 95 % nominal; the percentile bootstrap is slightly liberal at n = 150. Binomial
    # spread of the count over 300 replicates is about ±4 (1 SE), so [0.90, 0.985].
    assert 0.90 <= hits / reps <= 0.985, hits / reps


def _pairs_and_chunks(rng, n_pairs, n_chunks, mu, pair_sd, chunk_sd):
    """Hit outcomes (pair, chunk) whose probability has a pair effect and a chunk effect
    shared by every pair (the same chunks are retrieved by every model pair)."""
    pair = rng.normal(0, pair_sd, size=(n_pairs, 1))
    chunk = rng.normal(0, chunk_sd, size=(1, n_chunks))
    prob = np.clip(mu + pair + chunk, 0.01, 0.99)
    return (rng.random((n_pairs, n_chunks)) < prob).astype(float)


def test_resampling_pairs_and_chunks_covers_where_items_alone_do_not():
    """A number averaged over model pairs must carry the pairs' spread: an interval from
    the items alone (every cell one independent item) undercovers badly."""
    rng = np.random.default_rng(4)
    mu, reps = 0.4, 120
    crossed = flat = 0
    for r in range(reps):
        x = _pairs_and_chunks(rng, 12, 64, mu, pair_sd=0.12, chunk_sd=0.15)
        a = interval(x, n_resamples=600, seed=r)
        b = interval(x.reshape(-1), n_resamples=600, seed=r)
        crossed += a.low <= mu <= a.high
        flat += b.low <= mu <= b.high
    assert crossed / reps >= 0.85, crossed / reps
    assert flat / reps <= 0.75, flat / reps


def _crossed_bootstrap_by_hand(num, den, n_resamples, seed):
    """The two-way (row, item) percentile bootstrap of ``Σ num / Σ den`` written out resample by
    resample: each resample draws how often each row and each item is taken (multinomial counts,
    rows then items, from ``default_rng(seed)``: the draws the code makes, so the reference sees
    the very same resamples), weighs each cell by its row's and its item's count, and takes the
    ratio; then the 2.5/97.5 % quantiles and the two-sided p of the sign."""
    rng = np.random.default_rng(seed)
    rows, items = num.shape
    w_rows = rng.multinomial(rows, np.full(rows, 1 / rows), size=n_resamples)
    w_items = rng.multinomial(items, np.full(items, 1 / items), size=n_resamples)
    values = []
    for r in range(n_resamples):
        top = bottom = 0.0
        for i in range(rows):
            for j in range(items):
                top += w_rows[r, i] * w_items[r, j] * num[i, j]
                bottom += w_rows[r, i] * w_items[r, j] * den[i, j]
        values.append(top / bottom)
    values = np.array(values)
    low, high = np.quantile(values, [0.025, 0.975])
    b1 = n_resamples + 1
    p = min(1.0, 2 * min((1 + (values <= 0).sum()) / b1, (1 + (values >= 0).sum()) / b1))
    return low, high, p


def test_ratio_of_sums_is_the_corpus_metric():
    correct = np.array([[3, 5, 0, 7, 1], [2, 5, 1, 6, 2]], float)
    words = np.array([[4, 6, 2, 8, 3], [4, 6, 2, 8, 3]], float)
    iv = interval(correct, words, n_resamples=400, seed=7)
    assert iv.estimate == pytest.approx(correct.sum() / words.sum())
    assert iv.shape == (2, 5)
    low, high, p = _crossed_bootstrap_by_hand(correct, words, 400, seed=7)
    assert (iv.low, iv.high, iv.p_value) == pytest.approx((low, high, p), abs=1e-12)


def test_a_margin_is_the_bootstrap_of_the_difference_by_hand():
    rng = np.random.default_rng(8)
    a = (rng.random((3, 20)) < 0.6).astype(float)
    b = (rng.random((3, 20)) < 0.5).astype(float)
    iv = margin(a, b, n_resamples=300, seed=9)
    # the difference of two means over the same cells = the ratio of (a - b) over a count of one
    low, high, p = _crossed_bootstrap_by_hand(a - b, np.ones_like(a), 300, seed=9)
    assert iv.estimate == pytest.approx(a.mean() - b.mean())
    assert (iv.low, iv.high, iv.p_value) == pytest.approx((low, high, p), abs=1e-12)


def test_ratio_of_sums_matches_scipy_paired_bootstrap():
    """One axis: scipy's percentile bootstrap of Σ correct / Σ words, resampling sentences with
    their word counts (paired); two Monte Carlo estimates of the same quantiles."""
    rng = np.random.default_rng(10)
    words = rng.integers(3, 30, size=250).astype(float)
    correct = rng.binomial(words.astype(int), 0.7).astype(float)
    ours = interval(correct, words, n_resamples=8000, seed=1)
    ref = stats.bootstrap(
        (correct, words),
        lambda c, w: c.sum() / w.sum(),
        paired=True,
        vectorized=False,
        method="percentile",
        n_resamples=8000,
        random_state=2,
    ).confidence_interval
    assert ours.estimate == pytest.approx(correct.sum() / words.sum())
    assert ours.low == pytest.approx(ref.low, abs=0.004)
    assert ours.high == pytest.approx(ref.high, abs=0.004)


def test_paired_margin_cancels_shared_difficulty():
    rng = np.random.default_rng(5)
    difficulty = rng.random(400)
    a = (rng.random(400) < np.clip(difficulty + 0.04, 0, 1)).astype(float)
    b = (rng.random(400) < difficulty).astype(float)
    # a system against itself: no difference at all
    same = margin(a, a, n_resamples=500)
    assert same.estimate == 0 and same.low == 0 and same.high == 0 and same.p_value == 1
    paired = margin(a, b, n_resamples=2000)
    ia, ib = interval(a, n_resamples=2000), interval(b, n_resamples=2000)
    unpaired_half = np.hypot(ia.half_width, ib.half_width)
    assert paired.estimate == pytest.approx(a.mean() - b.mean())
    assert paired.half_width < unpaired_half


def test_null_margins_reject_about_alpha_of_the_time():
    rng = np.random.default_rng(6)
    reps, rejected = 200, 0
    for r in range(reps):
        p = rng.random(100)
        a = (rng.random(100) < p).astype(float)
        b = (rng.random(100) < p).astype(float)
        rejected += margin(a, b, n_resamples=1000, seed=r).p_value < 0.05
    assert rejected / reps <= 0.10, rejected / reps


def _m(estimate, p):
    return Interval(estimate, estimate - 0.1, estimate + 0.1, p, (10,))


def test_holm_step_down_by_hand():
    # sorted p 0.001 < .05/3, 0.02 < .05/2, 0.04 < .05/1: all three rejected
    assert verdicts([_m(0.1, 0.04), _m(0.2, 0.001), _m(-0.1, 0.02)]) == [BEATS, BEATS, LOSES]
    # 0.01 < .05/3 rejected; next 0.03 > .05/2 stops: the rest stand
    assert verdicts([_m(0.1, 0.01), _m(0.1, 0.04), _m(0.1, 0.03)]) == [BEATS, INDISTINGUISHABLE, INDISTINGUISHABLE]
    # a single cell is its own family: plain p < alpha
    assert verdicts([_m(-0.3, 0.049)]) == [LOSES]
    assert verdicts([None, _m(0.1, 0.2)]) == [None, INDISTINGUISHABLE]
    assert verdict_counts([BEATS, INDISTINGUISHABLE, None, LOSES, BEATS]) == (
        "2 beat, 1 indistinguishable, 1 lose (of 4)"
    )


def test_verdicts_reject_what_statsmodels_holm_rejects():
    rng = np.random.default_rng(11)
    for _ in range(200):
        m = int(rng.integers(1, 9))
        p = np.round(rng.random(m) ** 3, 3)  # many small p, some ties
        est = rng.choice([-0.2, 0.3], size=m)
        got = verdicts([_m(e, q) for e, q in zip(est, p)])
        reject = statsmodels_holm(p, alpha=0.05)
        expect = [(BEATS if e > 0 else LOSES) if r else INDISTINGUISHABLE for e, r in zip(est, reject)]
        assert got == expect, (p, est)


def test_a_table_its_bootstrap_cannot_resolve_under_holm_reads_not_testable():
    """Bootstrap p-values are at least 2/(n+1); with 4,000 resamples that is 0.0005, so over more
    than 100 cells Holm's first threshold 0.05/m is out of reach and nothing can be rejected:
    every cell reads "not testable", not "indistinguishable"."""
    import dataclasses

    floor = 2 / 4001  # the smallest p of 4,000 resamples
    for m, expect in ((100, BEATS), (101, "not testable"), (150, "not testable")):
        cells = [dataclasses.replace(_m(0.3, floor), n_resamples=4000) for _ in range(m)]
        assert set(verdicts(cells)) == {expect}, m
    # the resamples a table needs: 4,000 while 2/4001 <= 0.05/m; beyond, 2/(n+1) <= 0.05/m with room
    assert [resamples_for(m) for m in (1, 50, 100)] == [4000] * 3
    for m in (101, 150, 1000):
        n = resamples_for(m)
        assert n > 4000 and 2 / (n + 1) <= 0.05 / m / 1.9 and n % 1000 == 0
    assert resamples_for(150) == 12000
    cells = [dataclasses.replace(_m(0.3, 2 / 12001), n_resamples=12000) for _ in range(150)]
    assert set(verdicts(cells)) == {BEATS}
    with pytest.raises(ValueError, match="cells"):
        resamples_for(0)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        interval([0.1, float("nan")])
    with pytest.raises(ValueError, match="same cells"):
        margin(np.ones((2, 6)), np.ones((3, 6)))
    with pytest.raises(ValueError, match="den"):
        interval(np.ones(6), np.ones(7))
    with pytest.raises(ValueError, match="non-empty"):
        interval([])
    with pytest.raises(ValueError, match="alpha"):
        verdicts([_m(0.1, 0.01)], alpha=1.5)


def _same(a: Interval, b: Interval) -> bool:
    return a.shape == b.shape and all(
        getattr(a, k) == pytest.approx(getattr(b, k), abs=1e-12) for k in ("estimate", "low", "high", "p_value")
    )


def _runs(rng, rates, words):
    return np.stack([rng.binomial(words, p) for p in rates]).astype(float)


def test_statistic_of_counts_with_ratio_is_interval_and_margin_draw_for_draw():
    from olas_utils.stats.uncertainty import interval_of, margin_of, ratio

    rng = np.random.default_rng(7)
    words = rng.integers(3, 30, size=150)
    a, b = _runs(rng, (0.5, 0.55, 0.52), words), _runs(rng, (0.45, 0.46, 0.5), words)
    den = np.broadcast_to(words.astype(float), a.shape)
    # (items, k)
    assert _same(
        interval_of(ratio, np.stack([a[0], words], -1), n_resamples=600), interval(a[0], words, n_resamples=600)
    )
    # (runs, items, k): the same draws as interval() / margin() on (seed, sentence) arrays
    assert _same(interval_of(ratio, np.stack([a, den], -1), n_resamples=600), interval(a, den, n_resamples=600))
    got = margin_of(ratio, np.stack([a, den], -1), np.stack([b, den], -1), n_resamples=600)
    assert _same(got, margin(a, b, den, den, n_resamples=600))


def test_margin_of_compares_runs_of_different_numbers_and_pairs():
    from olas_utils.stats.uncertainty import interval_of, margin_of, ratio

    rng = np.random.default_rng(8)
    words = rng.integers(3, 30, size=200)
    six = np.stack([_runs(rng, [0.6] * 6, words), np.broadcast_to(words, (6, 200))], -1)
    one = np.stack([_runs(rng, [0.4], words), words[None]], -1)
    m = margin_of(ratio, six, one, n_resamples=800)
    assert m.estimate == pytest.approx(six[..., 0].sum(1).mean() / words.sum() - one[..., 0].sum() / words.sum())
    assert m.low > 0.1 and m.p_value < 0.01
    # a family of pairs: its estimate is the mean of the pairs' statistics
    pairs = [six, six[:3] * [1, 1], one]
    fam = interval_of(ratio, pairs, n_resamples=800)
    each = [interval_of(ratio, p, n_resamples=100).estimate for p in pairs]
    assert fam.estimate == pytest.approx(np.mean(each)) and fam.shape == (3, 6, 200)
    # pairs resampled: wider than the single pair's interval
    assert fam.half_width > interval_of(ratio, six, n_resamples=800).half_width
    with pytest.raises(ValueError, match="same items"):
        margin_of(ratio, six, one[:, :100])
    with pytest.raises(ValueError, match="same items"):
        margin_of(ratio, [six, six], [one])


def test_nonlinear_statistic_known_answers():
    """Macro-F1-like statistic (mean over classes of 2tp / (pred + gold)): a system clearly
    better than its baseline beats it, one against itself is indistinguishable, clearly worse
    loses."""
    from olas_utils.stats.uncertainty import margin_of

    rng = np.random.default_rng(9)
    n, k = 300, 4
    gold = rng.integers(0, k, size=n)  # the same items for both systems

    def counts(p):
        pred = np.where(rng.random(n) < p, gold, rng.integers(0, k, size=n))
        c = np.zeros((3, n, 3, k))
        for s in range(3):
            pred_s = np.where(rng.random(n) < 0.05, rng.integers(0, k, size=n), pred)
            c[s, np.arange(n), 0, gold] = pred_s == gold
            c[s, np.arange(n), 1, pred_s] = 1
            c[s, np.arange(n), 2, gold] = 1
        return c.reshape(3, n, 3 * k)

    def macro(s):
        s = s.reshape(s.shape[:-1] + (3, k))
        return (2 * s[..., 0, :] / (s[..., 1, :] + s[..., 2, :])).mean(-1)

    good, bad = counts(0.8), counts(0.3)
    cells = [margin_of(macro, good, bad, n_resamples=1000), margin_of(macro, good, good, n_resamples=1000)]
    cells.append(margin_of(macro, bad, good, n_resamples=1000))
    assert verdicts(cells) == [BEATS, INDISTINGUISHABLE, LOSES]
