"""Selection on dev data: early stopping keeps the best epoch's weights, the selection rule
is part of the checkpoint key, and augmentations change training inputs only when asked."""

from __future__ import annotations

import pytest
import torch

from olas_utils.toa.heads import TOAModel
from olas_utils.toa.train import Selection, TrainConfig, train_model


def test_early_stopping_keeps_the_best_epoch_and_stops_after_patience(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("token", n=12)
    cfg = TrainConfig(epochs=6, batch_size=4, lr=1e-2, seed=0)
    scores = iter([0.2, 0.5, 0.4, 0.3, 0.9, 0.9])  # best at epoch 2, then 2 epochs without improvement
    snapshots = []

    def score(m):
        snapshots.append({k: v.clone() for k, v in m.state_dict().items()})
        return next(scores)

    torch.manual_seed(0)
    model = TOAModel(tiny_adapter, "token", 3)
    info = train_model(
        model, ex, cfg, selection=Selection(score=score, patience=2), progress=False, checkpoint=tmp_path / "c.pt"
    )
    assert info["curve"] == [0.2, 0.5, 0.4, 0.3] and info["best_epoch"] == 2 and info["epochs_run"] == 4
    assert info["stopped_early"] and len(info["losses"]) == 4
    for k, v in model.state_dict().items():  # the model holds epoch 2's weights, not the last ones
        assert torch.equal(v, snapshots[1][k])
    # a finished run is loaded, not retrained, and ends with the same best weights
    torch.manual_seed(0)
    again = TOAModel(tiny_adapter, "token", 3)
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
    full = train_model(TOAModel(tiny_adapter, "token", 3), ex, cfg, progress=False)
    assert full["epochs_run"] == 6 and full["best_epoch"] == 6 and full["curve"] == []


def test_selection_is_part_of_the_checkpoint_key(tiny_adapter, toa_examples, tmp_path):
    from olas_utils.toa.train import checkpoint_key

    ex = toa_examples("token", n=4)
    m = TOAModel(tiny_adapter, "token", 3)
    cfg = TrainConfig(epochs=1)
    a = checkpoint_key(m, cfg, ex, {}, Selection(score=len, identity="dev-a"))
    assert a != checkpoint_key(m, cfg, ex, {}, Selection(score=len, identity="dev-b"))
    assert a != checkpoint_key(m, cfg, ex, {})
    with pytest.raises(ValueError, match="patience"):
        Selection(score=len, patience=0)


def test_sink_and_temperature_augmentations_change_training_inputs_only_when_asked():
    from olas_utils.maths.augment import augment_batch

    x = torch.rand(3, 2, 5, 5)
    off = TrainConfig(noise_p=0.0)
    assert torch.equal(augment_batch(x, torch.Generator().manual_seed(0), off.augmentation), x)
    on = TrainConfig(noise_p=0.0, sink_p=1.0, temperature_p=1.0)
    y = augment_batch(x, torch.Generator().manual_seed(0), on.augmentation)
    assert y.shape == x.shape and not torch.equal(y, x)
    with pytest.raises(ValueError, match="sink_p"):
        TrainConfig(sink_p=1.5)


def _rates(model, ex, cfg, scores, **kw):
    """Train with a scripted dev curve; return (info, the learning rate of every optimiser step)."""
    it = iter(scores)
    rates = []
    real_step = torch.optim.AdamW.step

    def step(self, *a, **k):
        rates.append(self.param_groups[0]["lr"])
        return real_step(self, *a, **k)

    torch.optim.AdamW.step = step
    try:
        info = train_model(model, ex, cfg, selection=Selection(score=lambda m: next(it), **kw), progress=False)
    finally:
        torch.optim.AdamW.step = real_step
    return info, rates


def test_plateau_schedule_lowers_the_rate_after_each_epoch_without_dev_improvement(tiny_adapter, toa_examples):
    from olas_utils.toa.train import size_batches

    ex = toa_examples("token", n=8)
    cfg = TrainConfig(epochs=6, batch_size=4, lr=1e-2, seed=0, schedule="plateau", lr_factor=0.5)
    steps = len(size_batches(ex, 4))
    # epoch 1 0.2 (best), 2: 0.5 (best), 3: 0.5 (tie: no improvement), 4: 0.6 (best), 5: 0.1, 6: 0.1
    torch.manual_seed(0)
    info, rates = _rates(TOAModel(tiny_adapter, "token", 3), ex, cfg, [0.2, 0.5, 0.5, 0.6, 0.1, 0.1], patience=3)
    # the rate of epoch e is lr × 0.5 ** (epochs before e that did not improve): 1, 1, 1, ½, ½, ¼
    expected = [1e-2, 1e-2, 1e-2, 5e-3, 5e-3, 2.5e-3]
    assert info["epochs_run"] == 6 and not info["stopped_early"] and info["best_epoch"] == 4
    assert rates == pytest.approx([r for r in expected for _ in range(steps)], rel=1e-12)
    # patience 2 and a cap of 10: epochs 5 and 6 miss, so patience (not the cap) ends the run after epoch 6
    torch.manual_seed(0)
    info, _ = _rates(
        TOAModel(tiny_adapter, "token", 3),
        ex,
        TrainConfig(epochs=10, batch_size=4, lr=1e-2, schedule="plateau"),
        [0.2, 0.5, 0.5, 0.6, 0.1, 0.1],
        patience=2,
    )
    assert info["stopped_early"] and info["epochs_run"] == 6 and info["best_epoch"] == 4


def test_plateau_schedule_needs_dev_data_and_valid_settings(tiny_adapter, toa_examples):
    ex = toa_examples("token", n=4)
    with pytest.raises(ValueError, match="plateau schedule"):
        train_model(TOAModel(tiny_adapter, "token", 3), ex, TrainConfig(epochs=1, schedule="plateau"), progress=False)
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainConfig(schedule="cosine")
    with pytest.raises(ValueError, match="lr_factor"):
        TrainConfig(schedule="plateau", lr_factor=0.0)


def test_plateau_run_resumed_after_a_kill_ends_with_the_same_weights(tiny_adapter, toa_examples, tmp_path):
    """A run stopped after epoch 3 of 5 (a finished run of a 3-epoch cap cannot be reused, so the kill is
    simulated by a score that raises) and started again sets the same rates from the saved dev curve."""
    ex = toa_examples("token", n=8)
    cfg = TrainConfig(epochs=5, batch_size=4, lr=1e-2, seed=0, schedule="plateau")
    curve = [0.2, 0.1, 0.3, 0.3, 0.2]

    def scorer(stop_after=None):
        calls = []

        def score(m):
            if stop_after is not None and len(calls) == stop_after:
                raise KeyboardInterrupt
            calls.append(1)
            return curve[len(calls) - 1]

        return score

    torch.manual_seed(0)
    whole = TOAModel(tiny_adapter, "token", 3)
    train_model(whole, ex, cfg, selection=Selection(score=scorer(), patience=5), progress=False)
    torch.manual_seed(0)
    part = TOAModel(tiny_adapter, "token", 3)
    with pytest.raises(KeyboardInterrupt):
        train_model(
            part,
            ex,
            cfg,
            selection=Selection(score=scorer(3), patience=5),
            progress=False,
            checkpoint=tmp_path / "c.pt",
        )
    rest = iter(curve[3:])
    torch.manual_seed(1)
    resumed = TOAModel(tiny_adapter, "token", 3)
    info = train_model(
        resumed,
        ex,
        cfg,
        selection=Selection(score=lambda m: next(rest), patience=5),
        progress=False,
        checkpoint=tmp_path / "c.pt",
    )
    assert info["resumed_from"] > 0 and info["curve"] == curve
    for k, v in resumed.state_dict().items():
        assert torch.equal(v, whole.state_dict()[k]), k


def test_schedule_enters_the_checkpoint_key_only_when_it_is_not_the_old_default(tiny_adapter, toa_examples):
    from olas_utils.toa.train import checkpoint_key

    ex = toa_examples("token", n=4)
    m = TOAModel(tiny_adapter, "token", 3)
    old = checkpoint_key(m, TrainConfig(epochs=3), ex)
    assert checkpoint_key(m, TrainConfig(epochs=3, schedule="linear", lr_factor=0.25), ex) == old
    plateau = checkpoint_key(m, TrainConfig(epochs=3, schedule="plateau"), ex)
    assert plateau != old and plateau != checkpoint_key(m, TrainConfig(epochs=3, schedule="plateau", lr_factor=0.3), ex)
