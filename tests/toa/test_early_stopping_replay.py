"""``benchmarks/early_stopping.py`` replays stopping rules on full dev curves: for the plain
patience rule its stopping and kept epochs must be the real training loop's
(:func:`olas_utils.toa.train.train_model` with a :class:`Selection` fed the same scores), and the
delta / smoothed rules are checked on hand-worked curves."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from olas_utils.toa.heads import TOAModel
from olas_utils.toa.train import Selection, TrainConfig, checkpoint_key, epochs_since_gain, train_model

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def replay():
    sys.path.insert(0, str(BENCH))  # the benchmark imports its sibling `common`
    try:
        spec = importlib.util.spec_from_file_location("early_stopping_bench", BENCH / "early_stopping.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module.replay


@pytest.mark.parametrize(
    "patience,min_epochs,delta", [(1, 1, 0.0), (2, 4, 0.0), (3, 2, 0.0), (2, 1, 0.05), (4, 4, 0.05)]
)
def test_the_patience_replay_is_the_training_loops_stopping(
    replay, tiny_adapter, toa_examples, patience, min_epochs, delta
):
    """The loop's ``Selection(min_gain=...)`` stops where the benchmark's ``delta`` rule stops."""
    ex = toa_examples("token", n=8)
    rng = np.random.default_rng(patience * 10 + min_epochs + int(delta * 100))
    for _ in range(4):
        curve = list(np.round(rng.uniform(0.2, 0.6, size=8), 2))  # rounded: ties occur
        scores = iter(curve)
        torch.manual_seed(0)
        info = train_model(
            TOAModel(tiny_adapter, "token", 3),
            ex,
            TrainConfig(epochs=len(curve), batch_size=4, lr=1e-2, seed=0),
            selection=Selection(
                score=lambda m, s=scores: next(s), patience=patience, min_epochs=min_epochs, min_gain=delta
            ),
            progress=False,
        )
        assert replay(curve, patience, min_epochs, delta=delta) == (info["epochs_run"], info["best_epoch"]), curve


def test_delta_and_smoothed_rules_on_hand_worked_curves(replay):
    curve = [0.30, 0.40, 0.403, 0.404, 0.405, 0.50, 0.52, 0.51]
    # plain patience 2: 0.403, 0.404, 0.405 are new bests; no stop until the cap
    assert replay(curve, 2, 1) == (8, 7)
    # delta 0.005: the gains after epoch 2 are too small; epochs 3 and 4 pass without one -> stop at 4,
    # keeping the raw best among epochs 1-4 (epoch 4, 0.404)
    assert replay(curve, 2, 1, delta=0.005) == (4, 4)
    # not before min_epochs 5: epoch 5 is the third without a counted gain -> stop at 5
    assert replay(curve, 2, 5, delta=0.005) == (5, 5)
    dip = [0.30, 0.50, 0.45, 0.44, 0.60, 0.61, 0.40, 0.39, 0.38]
    # raw: best 0.50 at 2, epochs 3-4 without -> stop at 4, keep 2
    assert replay(dip, 2, 1) == (4, 2)
    # trailing means of 3: .30 .40 .4167 .4633 .4967 .55 .5367 .4667 .39 -> bests to epoch 6, then 7 and 8
    # without -> stop at 8, keep the raw best among 1-8 (epoch 6, 0.61)
    assert replay(dip, 2, 1, window=3) == (8, 6)


def test_epochs_since_gain_on_hand_worked_curves():
    curve = [0.30, 0.40, 0.403, 0.404, 0.405, 0.50, 0.52, 0.51]
    assert epochs_since_gain(curve) == 1  # last strict new best: 0.52 at epoch 7
    assert epochs_since_gain(curve[:5], 0.005) == 3  # gains at 1 (first) and 2 (0.40 > 0.305); 3-5 below 0.405
    assert epochs_since_gain(curve[:6], 0.005) == 0  # 0.50 > 0.405
    assert epochs_since_gain([0.5, 0.5, 0.5]) == 2  # a tie is no gain
    assert epochs_since_gain([]) == 0


def test_min_gain_is_checked_and_enters_the_checkpoint_key_only_when_set(tiny_adapter, toa_examples):
    for bad in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="min_gain"):
            Selection(score=lambda m: 0.0, min_gain=bad)
    ex, model = toa_examples("token", n=4), TOAModel(tiny_adapter, "token", 3)
    cfg = TrainConfig(epochs=2, batch_size=4, lr=1e-2, seed=0)
    keys = {g: checkpoint_key(model, cfg, ex, None, Selection(score=lambda m: 0.0, min_gain=g)) for g in (0.0, 0.005)}
    assert keys[0.0] != keys[0.005]
