"""The logistic chunk classifier (olas_utils.similarity.logistic) against an independent reference:
features computed with numpy (block means, per-image standardisation) and scikit-learn fitted directly;
the regularisation chosen on the held-out source by hand; the synthetic models of test_classifier."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _support.similarity import synth  # the synthetic "models" of the ResNet tests

from olas_utils.similarity.evaluation import evaluate, predict_logits, predict_ranks
from olas_utils.similarity.logistic import LogisticResult, logistic_features, train_logistic


@pytest.fixture(scope="module")
def data():
    return synth(n_classes=24, size=16)


def _features_by_hand(x: np.ndarray, p: int) -> np.ndarray:
    """``(n, S, S)`` → block means of ``S/p × S/p`` pixels, standardised per image (population std)."""
    n, s, _ = x.shape
    b = s // p
    pooled = x.reshape(n, p, b, p, b).mean(axis=(2, 4)).reshape(n, -1).astype(np.float64)
    return (pooled - pooled.mean(1, keepdims=True)) / pooled.std(1, keepdims=True)


def test_features_are_block_means_standardised_per_image(data):
    x = data["a"][:, 0]
    got = logistic_features(torch.from_numpy(data["a"]), 8)
    np.testing.assert_allclose(got, _features_by_hand(x, 8), rtol=1e-5, atol=1e-5)
    assert logistic_features(torch.from_numpy(data["a"]), 64).shape == (24, 16 * 16)  # P > S keeps S


def test_choice_of_c_and_the_fit_match_scikit_learn_by_hand(data):
    from sklearn.linear_model import LogisticRegression

    cs = (0.001, 0.1, 10.0)
    res = train_logistic({m: data[m] for m in "abc"}, select_on="c", cs=cs, pool_size=8)
    x = np.concatenate([_features_by_hand(data[m][:, 0], 8) for m in "ab"])
    y = np.tile(np.arange(24), 2)
    held = _features_by_hand(data["c"][:, 0], 8)
    tops = []
    for c in cs:
        ref = LogisticRegression(C=c, max_iter=1000).fit(x, y)
        tops.append(float((ref.predict(held) == np.arange(24)).mean()))
    assert res.selection_top1 == pytest.approx(tops, abs=1e-12)
    best = max(range(len(cs)), key=lambda i: (tops[i], -i))  # ties go to the smaller C by the loss or order
    assert tops[cs.index(res.c)] == tops[best] and res.selection == "source:c" and res.train_models == ("a", "b")
    ref = LogisticRegression(C=res.c, max_iter=1000).fit(x, y)
    target = data["target"]
    np.testing.assert_allclose(
        predict_logits(res, target).numpy(),
        ref.decision_function(_features_by_hand(target[:, 0], 8)),
        rtol=1e-4,
        atol=1e-4,
    )
    acc = evaluate(res, target)
    assert acc.top1 > 0.8 and acc.top1 == pytest.approx((predict_ranks(res, target) < 1).mean())
    assert not res.capped and 1 <= res.chosen_index <= len(cs)


def test_refit_single_source_and_errors(data):
    res = train_logistic({m: data[m] for m in "abc"}, refit=True, pool_size=8)
    assert res.refit and res.train_models == ("a", "b", "c") and res.selection == "source:c"
    one = train_logistic({"a": data["a"]}, pool_size=8, seed=3)
    assert one.selection == "augmented" and one.train_models == ("a",) and not one.refit
    assert isinstance(one, LogisticResult)
    with pytest.raises(ValueError, match="empty"):
        train_logistic({})
    with pytest.raises(ValueError, match="one shape"):
        train_logistic({"a": data["a"], "b": data["b"][:10]})
    with pytest.raises(ValueError, match="select_on"):
        train_logistic({"a": data["a"], "b": data["b"]}, select_on="target")
    with pytest.raises(ValueError, match="cs must be"):
        train_logistic({"a": data["a"]}, cs=(0.0,))
    bad = data["a"].copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        train_logistic({"a": bad})
    with pytest.raises(ValueError, match="fitted on|trained on"):
        predict_logits(res, data["a"][:, :, :8, :8])


@pytest.mark.slow  # 6 s measured alone at 1 thread (docs/testing.md)
def test_many_fits_in_workers_equal_each_fit_alone(data):
    """Worker processes (one BLAS thread each) and this process return, bit for bit, what each
    ``train_logistic`` call returns at one BLAS thread (threadpoolctl limit set here by hand)."""
    import sklearn.linear_model  # noqa: F401 - loaded before the limit, which covers loaded libraries only
    from threadpoolctl import threadpool_limits

    from olas_utils.similarity.logistic import train_logistic_many

    jobs = [
        {"train_images": {m: data[m] for m in "abc"}, "pool_size": 8, "refit": True},
        {"train_images": {m: data[m] for m in "ab"}, "pool_size": 8, "cs": (0.001, 1.0)},
        {"train_images": {"a": data["a"]}, "pool_size": 8, "seed": 5},
    ]
    for workers in (2, 1):
        got = train_logistic_many(jobs, workers=workers, progress=False)
        assert len(got) == len(jobs)
        for job, res in zip(jobs, got):
            with threadpool_limits(1):
                ref = train_logistic(**job)
            assert (res.c, res.selection, res.train_models, res.refit, res.n_iter) == (
                ref.c,
                ref.selection,
                ref.train_models,
                ref.refit,
                ref.n_iter,
            )
            assert res.selection_top1 == ref.selection_top1
            np.testing.assert_array_equal(res.model.coef_, ref.model.coef_)
            np.testing.assert_array_equal(res.model.intercept_, ref.model.intercept_)
            np.testing.assert_array_equal(predict_ranks(res, data["target"]), predict_ranks(ref, data["target"]))
    tensors = [{**jobs[0], "train_images": {m: torch.from_numpy(data[m]) for m in "abc"}}]
    (as_tensors,) = train_logistic_many(tensors, workers=2, progress=False)
    np.testing.assert_array_equal(as_tensors.model.coef_, got[0].model.coef_)  # got: the workers=1 run
    with pytest.raises(ValueError, match="workers must be"):
        train_logistic_many(jobs, workers=0)
    with pytest.raises(ValueError, match="logistic job 1: .*empty"):
        train_logistic_many([jobs[0], {"train_images": {}}], workers=2, progress=False)
    with pytest.raises(ValueError, match="logistic job 0: train_images must map"):
        train_logistic_many([{"images": data}], workers=2, progress=False)
    # a fit that fails in a worker is named, with the error train_logistic raised
    with pytest.raises(RuntimeError, match="logistic job 1 failed in a worker process: ValueError: cs must be"):
        train_logistic_many([jobs[0], {**jobs[1], "cs": (0.0,)}], workers=2, progress=False)


def test_a_worker_runs_one_thread_in_every_thread_pool():
    """The worker's initialiser leaves one thread in each BLAS / OpenMP pool, scipy's OpenBLAS
    (loaded with scikit-learn) included, even when the parent allows two."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from threadpoolctl import threadpool_info

    from olas_utils.similarity.logistic import _one_thread

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=_one_thread) as pool:
        pools = pool.submit(threadpool_info).result()
    assert {p["user_api"] for p in pools} >= {"blas", "openmp"}, pools
    assert any("scipy" in p["filepath"] for p in pools if p["user_api"] == "blas"), pools
    assert all(p["num_threads"] == 1 for p in pools), pools
