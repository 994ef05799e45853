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
    from olas_utils.augment import augment_batch

    x = torch.rand(3, 2, 5, 5)
    off = TrainConfig(noise_p=0.0)
    assert torch.equal(augment_batch(x, torch.Generator().manual_seed(0), off.augmentation), x)
    on = TrainConfig(noise_p=0.0, sink_p=1.0, temperature_p=1.0)
    y = augment_batch(x, torch.Generator().manual_seed(0), on.augmentation)
    assert y.shape == x.shape and not torch.equal(y, x)
    with pytest.raises(ValueError, match="sink_p"):
        TrainConfig(sink_p=1.5)
