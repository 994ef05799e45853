"""Tests of the visual chunk classifier (olas_utils.similarity.classifier).

Synthetic data: each class (chunk) is a fixed smooth random pattern (a 4×4 grid of
uniform values, bilinearly upsampled); each "model" sees it with its own gain, its own
smooth additive offset and its own pixel noise. The class is recoverable from any model,
so a classifier trained on two source models must transfer to an unseen target.

Small images (16×16) and one CPU thread keep the whole file well under a minute on a
busy 2-core machine.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _support.similarity import synth

from olas_utils.maths.augment import (
    NO_AUGMENTATION,
    Augmentation,
    add_gaussian_noise,
    augment_batch,
    highlight_sink_columns,
)
from olas_utils.similarity.classifier import SELECT_AUGMENTED, SELECT_LAST, train_classifier
from olas_utils.similarity.evaluation import Accuracy, class_ranks, evaluate, predict_logits, predict_ranks
from olas_utils.similarity.inputs import stack_channels, standardize
from olas_utils.similarity.resnet import build_resnet18
from olas_utils.similarity.result import ClassifierResult


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------------------
# training on synthetic models
# --------------------------------------------------------------------------------------

N_CLASSES = 32


@pytest.fixture(scope="module")
def data():
    return synth(n_classes=N_CLASSES)


@pytest.fixture(scope="module")
def trained(data):
    return train_classifier(
        {"a": data["a"], "b": data["b"], "c": data["c"]},
        select_on="c",
        epochs=12,
        batch_size=8,
        seed=0,
        device="cpu",
        progress=False,
        monitor={"target": data["target"]},
    )


@pytest.mark.slow  # 8 s measured alone at 1 thread (docs/testing.md)
def test_transfers_to_unseen_target(trained, data):
    chance = 1.0 / N_CLASSES
    acc = evaluate(trained, data["target"], device="cpu")
    assert isinstance(acc, Accuracy) and acc.n == N_CLASSES
    assert acc.top1 > 10 * chance, acc  # measured 0.78 (chance 0.031)
    assert acc.top5 >= acc.top1
    assert trained.selection == "source:c"
    assert trained.train_models == ("a", "b")
    assert len(trained.selection_top1) == len(trained.selection_loss) == len(trained.train_loss) == 12
    best = max(trained.selection_top1)
    assert trained.selection_top1[trained.chosen_epoch - 1] == best
    # ties broken by the lower selection loss
    tied = [i for i, v in enumerate(trained.selection_top1) if v == best]
    assert trained.chosen_epoch - 1 == min(tied, key=lambda i: trained.selection_loss[i])


def test_monitoring_the_target_never_changes_selection(data):
    """Selection must not depend on the target: monitor a real target, then an all-zero one."""
    src = {"a": data["a"][:8], "b": data["b"][:8]}
    kw = dict(select_on="b", epochs=3, batch_size=4, seed=3, device="cpu", progress=False)
    r1 = train_classifier(src, monitor={"target": data["target"][:8]}, **kw)
    r2 = train_classifier(src, monitor={"target": np.zeros_like(data["target"][:8])}, **kw)
    r3 = train_classifier(src, **kw)
    assert len(r1.monitor_top1["target"]) == len(r2.monitor_top1["target"]) == 3
    assert r3.monitor_top1 == {}
    for r in (r2, r3):
        assert r.chosen_epoch == r1.chosen_epoch
        assert r.selection_top1 == r1.selection_top1
        assert r.selection_loss == r1.selection_loss
        assert _same_state(r.state_dict, r1.state_dict)


def test_select_on_must_be_a_source(data):
    src = {"a": data["a"][:4], "b": data["b"][:4]}
    with pytest.raises(ValueError, match="never uses the target"):
        train_classifier(src, select_on="target", epochs=1, device="cpu", progress=False)
    with pytest.raises(ValueError, match="only source"):
        train_classifier({"a": data["a"][:4]}, select_on="a", epochs=1, device="cpu", progress=False)
    with pytest.raises(ValueError, match="one shape"):
        train_classifier({"a": data["a"][:4], "b": data["b"][:5]}, epochs=1, device="cpu", progress=False)
    with pytest.raises(ValueError, match="NaN"):
        bad = data["a"][:4].copy()
        bad[0, 0, 0, 0] = np.nan
        train_classifier({"a": bad}, epochs=1, device="cpu", progress=False)


def test_determinism_same_seed_identical_weights(data):
    src = {"a": data["a"][:8], "b": data["b"][:8]}
    kw = dict(select_on=SELECT_LAST, epochs=2, batch_size=4, device="cpu", progress=False)
    r1 = train_classifier(src, seed=7, **kw)
    r2 = train_classifier(src, seed=7, **kw)
    r3 = train_classifier(src, seed=8, **kw)
    assert _same_state(r1.state_dict, r2.state_dict)
    assert r1.train_loss == r2.train_loss
    assert not _same_state(r1.state_dict, r3.state_dict)
    assert r1.chosen_epoch == 2 and r1.selection == "last" and r1.selection_top1 == []


def test_global_rng_untouched(data):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train_classifier({"a": data["a"][:4], "b": data["b"][:4]}, epochs=1, batch_size=4, device="cpu", progress=False)
    assert torch.equal(torch.rand(3), expected)


def test_single_source_selects_on_augmented_copies(data):
    r = train_classifier({"a": data["a"][:8]}, epochs=2, batch_size=4, seed=0, device="cpu", progress=False)
    assert r.selection == "augmented"
    assert r.train_models == ("a",)
    assert len(r.selection_top1) == 2 and 1 <= r.chosen_epoch <= 2
    r2 = train_classifier(
        {"a": data["a"][:8], "b": data["b"][:8]},
        select_on=SELECT_AUGMENTED,
        epochs=1,
        batch_size=4,
        device="cpu",
        progress=False,
    )
    assert r2.selection == "augmented" and r2.train_models == ("a", "b")


def test_refit_trains_on_all_sources(data):
    src = {"a": data["a"][:8], "b": data["b"][:8]}
    kw = dict(select_on="b", epochs=2, batch_size=4, seed=0, device="cpu", progress=False)
    plain = train_classifier(src, **kw)
    refit = train_classifier(src, refit=True, **kw)
    assert refit.refit and not plain.refit
    assert refit.train_models == ("a", "b") and plain.train_models == ("a",)
    assert refit.chosen_epoch == plain.chosen_epoch
    assert refit.selection_top1 == plain.selection_top1
    assert not _same_state(refit.state_dict, plain.state_dict)


# --------------------------------------------------------------------------------------
# network, checkpoints
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", ["imagenet", "cifar"])
@pytest.mark.parametrize("channels", [1, 3])
def test_first_conv_takes_c_channels(stem, channels):
    net = build_resnet18(10, channels, stem=stem).eval()
    assert net.conv1.in_channels == channels
    assert net.fc.out_features == 10
    with torch.no_grad():
        assert net(torch.randn(2, channels, 50, 50)).shape == (2, 10)
    with pytest.raises(ValueError):
        build_resnet18(10, channels, stem="vgg")


def test_multichannel_training_and_wrong_channels(data):
    two = {k: stack_channels([v[:8, 0], v[:8, 0] ** 2]) for k, v in data.items()}
    assert two["a"].shape == (8, 2, 16, 16)
    r = train_classifier({"a": two["a"], "b": two["b"]}, epochs=1, batch_size=4, device="cpu", progress=False)
    assert r.in_channels == 2 and r.state_dict["conv1.weight"].shape[1] == 2
    assert evaluate(r, two["target"], device="cpu").n == 8
    with pytest.raises(ValueError, match="channel"):
        evaluate(r, data["target"][:8], device="cpu")
    with pytest.raises(ValueError, match="trained on"):
        evaluate(r, np.zeros((8, 2, 20, 20), np.float32), device="cpu")


def test_save_load_round_trip(trained, data, tmp_path):
    path = trained.save(tmp_path / "sub" / "clf.pt")
    loaded = ClassifierResult.load(path)
    assert loaded.metadata() == trained.metadata()
    assert loaded.n_classes == N_CLASSES and loaded.in_channels == 1 and loaded.seed == 0
    assert loaded.chosen_epoch == trained.chosen_epoch and loaded.image_size == (16, 16)
    assert _same_state(loaded.state_dict, trained.state_dict)
    a = predict_logits(trained, data["target"], device="cpu")
    b = predict_logits(loaded, data["target"], device="cpu")
    assert torch.equal(a, b)
    assert evaluate(loaded, data["target"], device="cpu") == evaluate(trained, data["target"], device="cpu")
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an OLAS classifier"):
        ClassifierResult.load(tmp_path / "other.pt")


def test_evaluate_labels_and_zero_images(trained):
    zeros = np.zeros((4, 16, 16), np.float32)  # (n, S, S) is taken as C = 1
    acc = evaluate(trained, zeros, labels=[0, 1, 2, 3], device="cpu")
    assert acc.n == 4 and 0.0 <= acc.top1 <= acc.top5 <= 1.0
    with pytest.raises(ValueError, match="labels"):
        evaluate(trained, zeros, labels=[0, 1], device="cpu")
    with pytest.raises(ValueError, match="labels must be"):
        evaluate(trained, zeros, labels=[0, 1, 2, N_CLASSES], device="cpu")


# --------------------------------------------------------------------------------------
# augmentation and normalisation rules
# --------------------------------------------------------------------------------------


def test_sink_columns_change_exactly_1_to_3_columns():
    g = torch.Generator().manual_seed(0)
    counts = set()
    for _ in range(200):
        img = torch.rand(2, 12, 12) + 0.01
        out, cols = highlight_sink_columns(img, g)
        changed = torch.nonzero((out != img).any(dim=0).any(dim=0)).flatten()
        assert 1 <= changed.numel() <= 3
        assert sorted(changed.tolist()) == sorted(cols.tolist())
        # the same columns in every channel, every row raised by about the row maximum
        for c in range(2):
            m = torch.topk(img[c], 2, dim=-1).values
            lo = m[:, 0] - 0.5 * (m[:, 0] - m[:, 1])
            hi = m[:, 0] + 0.5 * (m[:, 0] - m[:, 1])
            for j in cols.tolist():
                d = out[c, :, j] - img[c, :, j]
                assert torch.all(d >= lo - 1e-6) and torch.all(d <= hi + 1e-6)
        counts.add(changed.numel())
    assert counts == {1, 2, 3}


def test_sink_columns_only_where_the_image_has_columns_and_zero_rows_stay_zero():
    g = torch.Generator().manual_seed(1)
    img = torch.zeros(1, 10, 10)
    img[0, :6, :5] = torch.rand(6, 5) + 0.1  # columns 5..9 and rows 6..9 are empty
    for _ in range(50):
        out, cols = highlight_sink_columns(img, g)
        assert cols.max() < 5
        assert torch.all(out[0, 6:] == 0)


def test_noise_std_ratio():
    g = torch.Generator().manual_seed(0)
    img = torch.rand(2, 50, 50) * torch.tensor([1.0, 10.0])[:, None, None]
    out = add_gaussian_noise(img, g, std_ratio=0.13)
    ratio = (out - img).std(dim=(-2, -1)) / img.std(dim=(-2, -1), unbiased=False)
    assert torch.allclose(ratio, torch.full((2,), 0.13), rtol=0.05)
    assert abs((out - img).mean().item()) < 0.05


def test_augment_batch_probabilities_and_noise_reference():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2000, 1, 8, 8) + 0.01
    out = augment_batch(x, g, Augmentation())
    changed = (out != x).flatten(1).any(1).float().mean().item()
    # P(changed) = 1 - (1 - 0.3)(1 - 0.15) = 0.405
    assert abs(changed - 0.405) < 0.04
    assert torch.equal(augment_batch(x[:5], g, NO_AUGMENTATION), x[:5])
    # noise only: std relative to the clean image
    out = augment_batch(x[:200], g, Augmentation(sink_p=0.0, noise_p=1.0))
    r = (out - x[:200]).flatten(1).std(1) / x[:200].flatten(1).std(1, unbiased=False)
    assert abs(r.mean().item() - 0.13) < 0.02
    with pytest.raises(ValueError):
        Augmentation(sink_p=1.5)
    with pytest.raises(ValueError):
        Augmentation(min_columns=3, max_columns=1)


def test_standardize_per_image_per_channel():
    x = torch.rand(3, 2, 5, 5) * 7 + 3
    x[1, 1] = 4.0  # a constant channel
    z = standardize(x)
    assert torch.allclose(z[0].mean(dim=(-2, -1)), torch.zeros(2), atol=1e-5)
    assert torch.allclose(z[0].std(dim=(-2, -1), unbiased=False), torch.ones(2), atol=1e-5)
    assert torch.all(z[1, 1] == 0)


@pytest.mark.slow  # 7 s measured alone at 1 thread (docs/testing.md)
def test_early_stopping_stops_after_patience_and_keeps_the_best(data):
    src = {"a": data["a"], "b": data["b"], "c": data["c"]}
    kw = dict(select_on="c", batch_size=8, seed=0, device="cpu", progress=False)
    full = train_classifier(src, epochs=8, **kw)
    early = train_classifier(src, epochs=8, patience=1, **kw)
    # the same run up to the stop (same seed), stopped one epoch after the last improvement
    n = len(early.train_loss)
    assert early.selection_top1 == full.selection_top1[:n]
    keys = [(t, -ls) for t, ls in zip(full.selection_top1, full.selection_loss)]
    first_drop = next((e for e in range(1, 8) if max(keys[: e + 1]) == max(keys[:e])), None)
    assert n == (8 if first_drop is None else first_drop + 1)
    assert early.chosen_epoch == max(range(1, n + 1), key=lambda e: keys[e - 1])
    with pytest.raises(ValueError, match="patience"):
        train_classifier(src, epochs=2, patience=0, **kw)
    with pytest.raises(ValueError, match="selection set"):
        train_classifier(src, epochs=2, patience=1, select_on=SELECT_LAST, batch_size=8, device="cpu", progress=False)


def _stop_epoch(keys: list, patience: int, min_epochs: int) -> int:
    """The epoch at which the patience rule (not before ``min_epochs``) stops a run whose
    selection keys ``(top1, -loss)`` per epoch are ``keys`` (``len(keys)`` if it never does)."""
    for e in range(1, len(keys) + 1):
        best = max(range(1, e + 1), key=lambda i: (keys[i - 1], -i))  # earliest best epoch so far
        if e >= min_epochs and e - best >= patience:
            return e
    return len(keys)


@pytest.mark.slow  # 6 s measured alone at 1 thread (docs/testing.md)
def test_min_epochs_delays_early_stopping_and_keeps_the_best_epoch():
    """A held-out source of pure noise gives a flat selection curve, so patience 1 stops at
    once; ``min_epochs`` must keep training until then, and the chosen epoch is still the
    best of every epoch run. The default (1) is the behaviour without the argument."""
    rng = np.random.default_rng(1)
    src = {**synth(n_classes=16, models=("a", "b")), "noise": rng.random((16, 1, 16, 16), dtype=np.float32)}
    kw = dict(select_on="noise", batch_size=8, seed=0, device="cpu", progress=False)
    full = train_classifier(src, epochs=7, **kw)
    keys = [(t, -ls) for t, ls in zip(full.selection_top1, full.selection_loss)]
    plain = train_classifier(src, epochs=7, patience=1, **kw)
    default = train_classifier(src, epochs=7, patience=1, min_epochs=1, **kw)
    late = train_classifier(src, epochs=7, patience=1, min_epochs=5, **kw)
    n_plain, n_late = len(plain.train_loss), len(late.train_loss)
    assert n_plain == _stop_epoch(keys, 1, 1) < 5  # without min_epochs this run stops before epoch 5
    assert n_late == _stop_epoch(keys, 1, 5) >= 5
    assert late.selection_top1 == full.selection_top1[:n_late]
    assert late.chosen_epoch == max(range(1, n_late + 1), key=lambda e: (keys[e - 1], -e))
    assert _same_state(late.state_dict, train_classifier(src, epochs=late.chosen_epoch, **kw).state_dict)
    assert len(default.train_loss) == n_plain and default.chosen_epoch == plain.chosen_epoch
    assert _same_state(default.state_dict, plain.state_dict)
    for bad in (0, 8, 2.5):
        with pytest.raises(ValueError, match="min_epochs"):
            train_classifier(src, epochs=7, patience=1, min_epochs=bad, **kw)


def test_class_ranks_by_hand_and_accuracy_is_their_reduction(trained, data):
    logits = torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.5, 0.1], [0.2, 0.7, 0.7], [float("nan"), 0.0, 0.1]])
    # row 0: true 1 is first; row 1: true 1 ties class 0, which comes first; row 2: true 2
    # ties class 1 (earlier) and nothing is higher; row 3: a NaN true score ranks last
    assert class_ranks(logits, torch.tensor([1, 1, 2, 0])).tolist() == [0, 1, 1, 2]
    ranks = predict_ranks(trained, data["target"], device="cpu")
    logits = predict_logits(trained, data["target"], device="cpu")
    assert ranks.shape == (N_CLASSES,)
    assert np.array_equal(ranks == 0, (logits.argmax(1) == torch.arange(N_CLASSES)).numpy())
    acc = evaluate(trained, data["target"], device="cpu")
    assert acc.top1 == (ranks < 1).mean() and acc.top5 == (ranks < 5).mean()


def test_a_damaged_classifier_checkpoint_is_refused(trained, tmp_path):
    path = trained.save(tmp_path / "clf.pt")
    ck = torch.load(path, weights_only=True)
    assert len(ck["content_sha256"]) == 64
    ck["state_dict"]["conv1.weight"] = ck["state_dict"]["conv1.weight"] * 2  # damaged, the recorded hash kept
    torch.save(ck, path)
    with pytest.raises(ValueError, match="is damaged: its content differs from the SHA-256"):
        ClassifierResult.load(path)
    with pytest.warns(UserWarning, match="read anyway"):
        ClassifierResult.load(path, verify=False)
    del ck["content_sha256"]
    torch.save(ck, path)
    with pytest.raises(ValueError, match="records no content hash"):
        ClassifierResult.load(path)
