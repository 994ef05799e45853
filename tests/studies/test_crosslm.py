"""Notebook 02's tables, verdicts and reading on hand-made per-item outcomes (the real run is
the notebook smoke test): summaries by hand, the items file round trip, three-way verdicts
whose answer is known, duplicate evidence counted once, and the classifier over seeds."""

import numpy as np
import pandas as pd
import pytest
from _support.studies import FakeImages as _Images

from olas_utils.stats.uncertainty import BEATS, INDISTINGUISHABLE, LOSES, interval
from olas_utils.studies import classifier_stats, crosslm, crosslm_report, crosslm_stats
from olas_utils.studies.tables import read_items, write_items, write_table

MODELS = ("a", "b", "c")


def ranks_with(rng, n, p):
    """``n`` ranks: 0 (a hit) with probability ``p``, else 1..n-1."""
    return np.where(rng.random(n) < p, 0, rng.integers(1, n, n))


def items(spec, n=40, seed=0, family="causal", models=MODELS):
    """Retrieval items: ``spec`` maps (protocol, control, key) to a hit probability or to an
    explicit ``(pairs, n)`` rank array (pairs in the order a→b, a→c, b→a, ...)."""
    rng = np.random.default_rng(seed)
    pairs = [(t, s) for t in models for s in models if t != s]
    rows = {c: [] for c in crosslm.RETRIEVAL_ITEM_COLUMNS}
    for (protocol, control, key), p in spec.items():
        ranks = np.asarray(p) if np.ndim(p) else np.stack([ranks_with(rng, n, p) for _ in pairs])
        for (t, s), r in zip(pairs, ranks):
            for i, v in enumerate(r):
                for c, x in zip(rows, (family, control, protocol, key, "ssim", t, s, i, int(v))):
                    rows[c].append(x)
    return pd.DataFrame(rows)


def hand_items():
    """Two ordered pairs, 10 chunks: trained hits 9/10 and 7/10, random control 1/10, 2/10."""
    hit = lambda k: [0] * k + [3] * (10 - k)  # noqa: E731
    return items(
        {("paper", "none", "ola:1"): [hit(9), hit(7)], ("paper", "random", "ola:1"): [hit(1), hit(2)]},
        models=("a", "b"),
    )


def test_summary_means_ranges_and_intervals_by_hand():
    s = crosslm_stats.retrieval_summary(hand_items())
    r = s[s.control == "none"].iloc[0]
    assert r["pairs"] == 2 and r["n"] == 10 and r["chance@1"] == pytest.approx(0.1)
    assert r["hit@1"] == pytest.approx(0.8) and r["hit@1 min"] == 0.7 and r["hit@1 max"] == 0.9
    assert r["hit@1 low"] < 0.8 < r["hit@1 high"]
    # the interval is the crossed bootstrap of the (pair, chunk) hits
    hits = np.array([[1] * 9 + [0], [1] * 7 + [0] * 3], float)
    iv = interval(hits)
    assert (r["hit@1 low"], r["hit@1 high"]) == (iv.low, iv.high)
    pairs = crosslm_stats.retrieval_frame(hand_items())
    a = pairs[(pairs.control == "none") & (pairs.target == "a")].iloc[0]
    assert a["hit@1"] == pytest.approx(0.9) and a["hit@1 low"] <= 0.9 <= a["hit@1 high"]
    assert (a["hit@1 low"], a["hit@1 high"]) == (interval(np.sort(hits[0])).low, interval(np.sort(hits[0])).high)


def test_hit5_counts_ranks_below_five():
    s = crosslm_stats.retrieval_summary(hand_items())
    # ranks are 0 or 3: every item is in the top 5
    assert s.loc[s.control == "none", "hit@5"].iloc[0] == 1.0


@pytest.mark.parametrize("parquet", [True, False], ids=["parquet", "csv.gz"])
def test_items_file_round_trips_and_the_tables_recompute(tmp_path, parquet):
    it = items({("paper", "none", "ola:1"): 0.7, ("paper", "uniform", "ola:1"): 0.2, ("word", "none", "ola:1"): 0.5})
    path = write_items(it, tmp_path / "02_retrieval_items", fmt=None if parquet else "csv.gz")
    assert path.name == ("02_retrieval_items.parquet" if parquet else "02_retrieval_items.csv.gz")
    back = read_items(tmp_path / "02_retrieval_items")
    pd.testing.assert_frame_equal(back[list(it.columns)], it, check_dtype=False, check_categorical=False)
    pd.testing.assert_frame_equal(crosslm_stats.retrieval_summary(back), crosslm_stats.retrieval_summary(it))
    csv, _ = write_table(crosslm_stats.retrieval_summary(it), tmp_path / "02_summary")
    table = pd.read_csv(csv)
    again = crosslm_stats.retrieval_summary(read_items(path))
    np.testing.assert_allclose(table["hit@1"], again["hit@1"], atol=1e-4)  # the CSV keeps 4 decimals
    np.testing.assert_allclose(table["hit@1 low"], again["hit@1 low"], atol=1e-4)
    other = write_items(it, tmp_path / "02_retrieval_items", fmt="csv.gz" if parquet else "parquet")
    assert not path.exists() and other.exists()  # never two formats side by side


def test_an_incomplete_grid_is_refused():
    it = hand_items()
    with pytest.raises(ValueError, match="complete"):
        crosslm_stats.retrieval_summary(it.drop(index=3))


def test_verdicts_beat_tie_and_lose_where_the_answer_is_known():
    rng = np.random.default_rng(1)
    same = np.stack([ranks_with(rng, 60, 0.4) for _ in range(6)])
    it = items(
        {
            ("paper", "none", "ola:1"): 0.8,  # clearly better than both controls
            ("paper", "random", "ola:1"): 0.1,
            ("paper", "uniform", "ola:1"): 0.25,  # the strongest control
            ("paper", "none", "ola:2"): same,  # identical to its control
            ("paper", "random", "ola:2"): same,
            ("paper", "none", "ola:3"): 0.1,  # clearly worse
            ("paper", "random", "ola:3"): 0.8,
        },
        n=60,
    )
    v = crosslm_report.retrieval_verdict_table(it).set_index("key")
    assert list(v["verdict"]) == [BEATS, INDISTINGUISHABLE, LOSES]
    assert v.loc["ola:1", "strongest_control"] == "uniform"
    assert v.loc["ola:2", "margin"] == 0 and v.loc["ola:2", "p"] == 1
    assert (v["holm_cells"] == 3).all() and (v["pairs"] == 6).all() and (v["chunks"] == 60).all()
    for _, r in v.iterrows():
        assert r["ola_low"] <= r["ola_hit@1"] <= r["ola_high"]
        assert r["margin_low"] <= r["margin"] <= r["margin_high"]
        assert r["margin"] == pytest.approx(r["ola_hit@1"] - r["control_hit@1"])
    assert v.loc["ola:1", "margin_low"] > 0 and v.loc["ola:3", "margin_high"] < 0
    assert "beats_controls" not in v.columns


def test_duplicate_protocols_are_flagged_and_counted_once():
    rng = np.random.default_rng(2)
    trained = np.stack([ranks_with(rng, 40, 0.7) for _ in range(6)])
    spec = {}
    for protocol, ctrl in (("released", 0.6), ("paper", 0.1)):  # the same trained ranks, another control
        spec[(protocol, "none", "ola:1")] = trained
        spec[(protocol, "uniform", "ola:1")] = ctrl
    spec[("word", "none", "ola:1")] = 0.9
    spec[("word", "uniform", "ola:1")] = 0.05
    it = items(spec, family="encoder")
    v = crosslm_report.retrieval_verdict_table(it)
    assert list(v["same_trained_as"]) == ["", "released", ""]
    verdicts = dict(zip(v.protocol, v.verdict))
    assert verdicts["paper"] == BEATS and verdicts["word"] == BEATS
    text = crosslm_report.comparison_markdown(crosslm_stats.retrieval_summary(it), v, n_chunks=40)
    # released (against a strong control) and paper are one cell, counted with the less favourable verdict
    n_beat = 1 + (verdicts["released"] == BEATS)
    assert f"OLA order 1 beats its strongest control on {n_beat} of 2 distinct (protocol, family) cells" in text
    assert "encoder `paper` has the same trained-model outcomes as `released`" in text
    assert "(same trained-model outcomes as `released`)" in text


def test_reading_quotes_the_verdict_cells_and_keeps_word_apart_from_the_paper():
    it = items(
        {
            ("released", "none", "ola:1"): 0.8,
            ("released", "random", "ola:1"): 0.1,
            ("word", "none", "ola:1"): 0.85,
            ("word", "random", "ola:1"): 0.05,
        }
    )
    s, v = crosslm_stats.retrieval_summary(it), crosslm_report.retrieval_verdict_table(it)
    text = crosslm_report.comparison_markdown(s, v, n_chunks=40, models=["a", "smollm2-135m"])
    r = v[v.protocol == "released"].iloc[0]
    quoted = f"OLA {100 * r['ola_hit@1']:.1f} % [{100 * r['ola_low']:.1f}, {100 * r['ola_high']:.1f}]"
    assert quoted in text and "**beats** its strongest control" in text
    assert "Holm-corrected over the table's 2 cells" in text
    assert "our Hit@1 interval lies below that range" in text  # about 80 % < 84 %, among 40 chunks
    word = [line for line in text.splitlines() if "word protocol" in line][0]
    assert "subword-level, so none is set beside it" in word and "The paper reports" not in word
    assert "dequantised from 4-bit files: smollm2-135m" in text and "40 chunks" in text
    note = crosslm_report.sizes_note(v, seed=0, threads=2)
    assert "40 chunks" in note and "causal 6" in note and "4,000 resamples" in note and "2 cells" in note


def test_write_table_and_hit_matrix(tmp_path):
    frame = crosslm_stats.retrieval_frame(hand_items())
    csv, md = write_table(crosslm_stats.retrieval_summary(hand_items()), tmp_path / "t")
    assert pd.read_csv(csv).shape[0] == 2 and md.read_text().startswith("| protocol")
    fig = crosslm_report.hit_matrix_figure(frame, protocol="paper", key="ola:1")
    img = np.ma.filled(fig.axes[0].images[0].get_array().astype(float), np.nan)
    assert np.isnan(img[0, 0]) and img[0, 1] == pytest.approx(0.9) and img[1, 0] == pytest.approx(0.7)


def test_interval_figure_draws_error_bars():
    v = crosslm_report.retrieval_verdict_table(hand_items())
    fig = crosslm_report.interval_figure(v)
    ax = fig.axes[0]
    bars = [c for c in ax.containers if hasattr(c, "errorbar")]
    assert len(bars) == 2 and all(b.errorbar is not None for b in bars)
    heights = [p.get_height() for p in bars[0].patches]
    assert heights == pytest.approx([0.8])


def test_verdict_table_names_a_shuffled_control_of_shallow_models_as_weak():
    spec = {("paper", "none", "ola:1"): 0.6, ("paper", "shuffled", "ola:1"): 0.5, ("paper", "random", "ola:1"): 0.1}
    it = items(spec)
    v = crosslm_report.retrieval_verdict_table(it, layers={"a": 12, "b": 3, "c": 2})
    assert list(v.weak_controls) == ["shuffled layers: b (3 layers), c (2 layers)"]
    assert list(crosslm_report.retrieval_verdict_table(it, layers={"a": 12, "b": 6}).weak_controls) == [""]
    # without a shuffled control nothing is weak, whatever the depths
    no_shuffle = items({k: p for k, p in spec.items() if k[1] != "shuffled"})
    assert list(crosslm_report.retrieval_verdict_table(no_shuffle, layers={"b": 1}).weak_controls) == [""]
    # the zoo's depths by default: paraphrase-minilm-l3 has 3 layers, splade-tiny 2
    zoo = items(spec, models=("minilm-l6", "paraphrase-minilm-l3", "splade-tiny"))
    assert crosslm_report.weak_controls(zoo, "causal") == (
        "shuffled layers: paraphrase-minilm-l3 (3 layers), splade-tiny (2 layers)"
    )


def test_protocols_side_by_side():
    it = items({("paper", "none", "ola:1"): 0.5, ("word", "none", "ola:1"): 0.6, ("paper", "uniform", "ola:1"): 0.1})
    side = crosslm_report.protocol_frame(crosslm_stats.retrieval_summary(it))
    assert list(side.columns) == ["family", "control", "key", "paper", "word"]
    assert np.isnan(side[side.control == "uniform"].iloc[0]["word"])


def test_unknown_control_is_rejected():
    with pytest.raises(ValueError, match="unknown control"):
        crosslm.extract_images([], [], orders=[1], baselines=[], protocols=["paper"], controls=["bogus"])


def classifier_tables(seeds=(0, 1, 2), n=50, capped=True):
    """Classifier runs and items: the trained models hit about 60 %, the uniform control 5 %."""
    rng = np.random.default_rng(3)
    runs, rows = [], {c: [] for c in crosslm.CLASSIFIER_ITEM_COLUMNS}
    for control, p in (("none", 0.6), ("uniform", 0.05)):
        for seed in seeds:
            r = ranks_with(rng, n, p)
            for i, v in enumerate(r):
                for c, x in zip(rows, ("causal", control, "t", "ola:1", "paper", seed, i, int(v))):
                    rows[c].append(x)
            runs.append(
                dict(
                    family="causal",
                    control=control,
                    target="t",
                    key="ola:1",
                    protocol="paper",
                    seed=seed,
                    source_top1=0.9,
                    heldout_top1=0.4 if control == "none" else 0.02,
                    top1=float((r < 1).mean()),
                    max_epochs=12,
                    epochs_run=12,
                    chosen_epoch=12 if capped and control == "none" and seed == seeds[0] else 5,
                    capped=capped and control == "none" and seed == seeds[0],
                )
            )
    return pd.DataFrame(runs), pd.DataFrame(rows)


def test_classifier_summary_over_seeds_and_its_verdict():
    runs, it = classifier_tables()
    clf = classifier_stats.classifier_summary(runs, it)
    r = clf[clf.control == "none"].iloc[0]
    per_seed = runs[runs.control == "none"].top1
    assert r["seeds"] == 3 and r["n"] == 50 and r["resampled"] == "seeds × images"
    assert r["top1"] == pytest.approx(per_seed.mean()) and r["top1 sd"] == pytest.approx(per_seed.std(ddof=1))
    assert r["top1 low"] < r["top1"] < r["top1 high"] and r["capped"] == 1 and r["chosen_epochs"] == "12;5;5"
    cv = classifier_stats.classifier_verdict_frame(it)
    assert list(cv.verdict) == [BEATS] and cv.seeds.iloc[0] == 3 and cv.images.iloc[0] == 50
    text = crosslm_report.comparison_markdown(
        crosslm_stats.retrieval_summary(hand_items()),
        crosslm_report.retrieval_verdict_table(hand_items()),
        clf,
        cv,
        n_chunks=50,
    )
    assert "mean of 3 seeds" in text and "**beats** its strongest control (`02_classifier_verdict`" in text
    assert "on 1 of 3 seed(s): early stopping did not trigger" in text
    assert "not comparable at 50 classes" in text


def test_one_seed_says_its_interval_covers_images_only():
    runs, it = classifier_tables(seeds=(0,), capped=False)
    clf = classifier_stats.classifier_summary(runs, it)
    r = clf[clf.control == "none"].iloc[0]
    assert r["seeds"] == 1 and np.isnan(r["top1 sd"]) and r["resampled"] == "images (1 seed)"
    text = crosslm_report.comparison_markdown(
        crosslm_stats.retrieval_summary(hand_items()),
        crosslm_report.retrieval_verdict_table(hand_items()),
        clf,
        None,
        n_chunks=50,
    )
    assert "1 seed: the interval covers the test images only" in text and "Stopped by the epoch cap" not in text
    assert "1 training seed(s) [0]: intervals over images only" in crosslm_report.sizes_note(
        clf, seed=0, threads=1, seeds=(0,)
    )


def test_classifier_items_reduce_to_its_accuracy():
    """A real (tiny) run: each seed's top-1/top-5 in the runs table is its items' reduction."""
    rng = np.random.default_rng(0)
    base = rng.random((6, 16, 16)).astype(np.float32)
    caches = {
        (c, "paper"): {m: _Images({"ola:1": base + 0.05 * rng.random(base.shape).astype(np.float32)}) for m in "xyz"}
        for c in ("none", "uniform")
    }
    s = crosslm.ImageSet(caches=caches, families={m: "causal" for m in "xyz"}, keys=["ola:1"])
    runs, it = crosslm.classifier_frame(
        s, keys=["ola:1"], epochs=1, targets="last", refit=False, controls=["uniform"], seeds=(0, 1), progress=False
    )
    assert len(runs) == 4 and set(runs.seed) == {0, 1} and len(it) == 4 * 6
    for _, r in runs.iterrows():
        mine = it[(it.control == r["control"]) & (it.seed == r["seed"])]
        assert r["top1"] == pytest.approx((mine["rank"] < 1).mean()) and r["top5"] == pytest.approx(
            (mine["rank"] < 5).mean()
        )
    with pytest.raises(ValueError, match="seeds"):
        crosslm.classifier_frame(s, keys=["ola:1"], epochs=1, seeds=(0, 0), progress=False)


def test_logistic_classifier_frame_reads_chunks_back_from_images_of_unseen_models():
    """The logistic design in notebook 02's classifier frame: three 'models' that see the same 6 chunks with
    small noise → the unseen target's chunks are recovered; its columns say what was chosen; a control runs
    through the same design."""
    rng = np.random.default_rng(0)
    base = rng.random((6, 16, 16)).astype(np.float32)
    flat = np.ones((6, 16, 16), np.float32) + 1e-3 * rng.random((6, 16, 16)).astype(np.float32)
    caches = {
        ("none", "paper"): {
            m: _Images({"ola:1": base + 0.05 * rng.random(base.shape).astype(np.float32)}) for m in "xyz"
        },
        ("uniform", "paper"): {m: _Images({"ola:1": flat}) for m in "xyz"},
    }
    s = crosslm.ImageSet(caches=caches, families={m: "causal" for m in "xyz"}, keys=["ola:1"])
    runs, it = crosslm.classifier_frame(
        s,
        keys=["ola:1"],
        epochs=1,
        targets="last",
        refit=False,
        controls=["uniform"],
        design="logistic",
        seeds=(0, 1),
        progress=False,
    )
    # deterministic with a held-out source: every seed has the same outcome
    per_seed = [g.sort_values("chunk")["rank"].to_numpy() for _, g in it[it.control == "none"].groupby("seed")]
    assert len(per_seed) == 2 and (per_seed[0] == per_seed[1]).all() and set(runs.seed) == {0, 1}
    trained = runs[runs.control == "none"].iloc[0]
    assert trained["design"] == "logistic" and trained["chosen"].startswith("C=") and trained["heldout_source"] == "y"
    assert trained["top1"] == 1.0 and trained["heldout_top1"] == 1.0 and not trained["capped"]
    assert trained["epochs_run"] < trained["max_epochs"] == 1000
    clf = classifier_stats.classifier_summary(runs, it)
    assert set(clf.design) == {"logistic"} and clf[clf.control == "none"].iloc[0]["chosen"].startswith("C=")
    assert set(runs.control) == {"none", "uniform"} and len(runs) == 4
    with pytest.raises(ValueError, match="design"):
        crosslm.classifier_frame(s, keys=["ola:1"], epochs=1, design="svm", progress=False)


def test_logistic_frame_fits_each_cell_as_a_direct_call_would():
    """All logistic fits run first (in worker processes), then the table: every (cell, seed) row holds the
    fit a direct one-thread ``train_logistic`` call gives — one fit for all seeds with a held-out source,
    one fit per seed (its own augmented selection copy) with a single source."""
    import sklearn.linear_model  # noqa: F401 - loaded before the thread limit
    from threadpoolctl import threadpool_limits

    from olas_utils.similarity.evaluation import predict_ranks
    from olas_utils.similarity.logistic import train_logistic

    rng = np.random.default_rng(1)
    base = rng.random((6, 16, 16)).astype(np.float32)
    arrays = {m: base + 0.3 * rng.random(base.shape).astype(np.float32) for m in "xyz"}
    common = rng.random((1, 16, 16)).astype(np.float32)  # the one-source family: chunks barely apart, so that
    arrays |= {m: common + 0.05 * rng.random(base.shape).astype(np.float32) for m in "pq"}  # seeds' copies differ
    caches = {("none", "paper"): {m: _Images({"ola:1": a}) for m, a in arrays.items()}}
    fams = {**{m: "causal" for m in "xyz"}, **{m: "encoder" for m in "pq"}}
    s = crosslm.ImageSet(caches=caches, families=fams, keys=["ola:1"])
    runs, it = crosslm.classifier_frame(
        s,
        keys=["ola:1"],
        epochs=1,
        targets="all",
        refit=True,
        design="logistic",
        seeds=(0, 4),
        progress=False,
        workers=2,
    )
    assert set(runs.fit_workers) == {2} and len(runs) == 5 * 2
    for _, r in runs.iterrows():
        sources = r["sources"].split(", ")
        with threadpool_limits(1):
            ref = train_logistic({m: arrays[m] for m in sources}, seed=int(r["seed"]), refit=len(sources) >= 2)
        ranks = it[(it.target == r["target"]) & (it.seed == r["seed"])].sort_values("chunk")["rank"].to_numpy()
        np.testing.assert_array_equal(ranks, predict_ranks(ref, arrays[r["target"]]))
        assert r["chosen"] == f"C={ref.c:g}" and r["selection"] == ref.selection and r["epochs_run"] == ref.n_iter
        assert r["selection"] == ("augmented" if r["family"] == "encoder" else f"source:{sources[-1]}")
        assert r["curve"] == ";".join(f"{v:.3f}" for v in ref.selection_top1)
    single = runs[runs.family == "encoder"]
    assert single.groupby("target").curve.nunique().eq(2).all()  # each seed's own augmented copy: its own curve


def test_key_margins_are_paired_on_the_same_pairs_and_chunks_by_hand():
    """ola:1 hits 9/10 and 7/10 on the two ordered pairs; rollout 1/10 and 2/10 (far below: beats);
    alti hits the same chunks as ola:1 but one (indistinguishable); layer:0 everything (4 chunks more).
    Controls and the other OLA orders are never compared; the margin is the paired mean difference."""
    from olas_utils.stats.uncertainty import margin
    from olas_utils.studies.key_margins import key_margin_markdown

    hit = lambda k: [0] * k + [3] * (10 - k)  # noqa: E731
    spec = {
        ("paper", "none", "ola:1"): [hit(9), hit(7)],
        ("paper", "none", "ola:2"): [hit(1), hit(1)],
        ("paper", "none", "rollout"): [hit(1), hit(2)],
        ("paper", "none", "alti"): [hit(8), hit(7)],
        ("paper", "none", "layer:0"): [hit(10), hit(10)],
        ("paper", "uniform", "ola:1"): [hit(0), hit(0)],
    }
    it = items(spec, models=("a", "b"))
    t = crosslm_stats.key_margin_frame(it).set_index("key")
    assert list(t.index) == ["rollout", "alti", "layer:0"] and set(t.reference) == {"ola:1"}
    assert t.loc["rollout", "margin"] == pytest.approx(0.8 - 0.15) and t.loc["rollout", "verdict"] == BEATS
    assert t.loc["alti", "verdict"] == INDISTINGUISHABLE and t.loc["layer:0", "margin"] == pytest.approx(-0.2)
    flipped = crosslm_stats.key_margin_frame(it, reference="rollout").set_index("key")
    assert flipped.loc["alti", "verdict"] == LOSES and flipped.loc["alti", "margin"] == pytest.approx(0.15 - 0.75)
    ref = np.array([hit(9), hit(7)]) == 0
    other = np.array([hit(1), hit(2)]) == 0
    m = margin(ref.astype(float), other.astype(float))
    assert (t.loc["rollout", "margin_low"], t.loc["rollout", "margin_high"]) == (m.low, m.high)
    assert t.loc["rollout", "pairs"] == 2 and t.loc["rollout", "chunks"] == 10 and t.holm_cells.iloc[0] == 3
    # the classifier's items: per target, over seeds × images
    runs, clf_items = classifier_tables()
    extra = clf_items[clf_items.control == "none"].assign(key="rollout", rank=5)  # never a hit
    c = crosslm_stats.key_margin_frame(pd.concat([clf_items, extra], ignore_index=True))
    assert list(c.key) == ["rollout"] and c.verdict.iloc[0] == BEATS and c.seeds.iloc[0] == 3 and c.images.iloc[0] == 50
    text = key_margin_markdown(crosslm_stats.key_margin_frame(it), c)
    assert "* against attention rollout: retrieval" in text and "**1 beat, 0 indistinguishable, 0 lose (of 1)**" in text
    assert "classifier, top-1 on the unseen model" in text
    only_ola = it[it.key.isin(["ola:1", "ola:2"])]  # nothing but OLA orders: no row, and the reading says so
    assert crosslm_stats.key_margin_frame(only_ola).empty
    assert "No key to set against" in key_margin_markdown(crosslm_stats.key_margin_frame(only_ola))
