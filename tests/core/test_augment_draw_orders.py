"""The one augmentation definition: its presets hold the paper's values and each mode draws
its random numbers in the documented order (checked against the draws re-made by hand from
a generator with the same seed)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from olas_utils.maths.augment import (
    MODES,
    NO_AUGMENTATION,
    PAPER_ADAPTER,
    PAPER_ADAPTER_AUGMENTED,
    PAPER_CLASSIFIER,
    Augmentation,
    augment_batch,
)


def _images(b=4, c=2, n=5, seed=0):
    x = torch.rand(b, c, n, n, generator=torch.Generator().manual_seed(seed))
    return x / x.sum(-1, keepdim=True)


def test_presets_hold_the_papers_values():
    # paper §2: sink columns p 0.3, 1-3 columns, noise p 0.15, std ratio 0.13
    assert (PAPER_CLASSIFIER.sink_p, PAPER_CLASSIFIER.min_columns, PAPER_CLASSIFIER.max_columns) == (0.3, 1, 3)
    assert (PAPER_CLASSIFIER.noise_p, PAPER_CLASSIFIER.noise_std_ratio) == (0.15, 0.13)
    assert PAPER_CLASSIFIER.temperature_p == 0.0 and PAPER_CLASSIFIER.mode == "classifier"
    assert PAPER_CLASSIFIER == Augmentation()
    # paper §4: noise p 0.3, std 0.2; sink columns and temperature only as the transfer remedy
    assert (PAPER_ADAPTER.noise_p, PAPER_ADAPTER.noise_std_ratio, PAPER_ADAPTER.sink_p) == (0.3, 0.2, 0.0)
    assert PAPER_ADAPTER.temperature_p == 0.0 and PAPER_ADAPTER.mode == "adapter"
    assert dataclasses.replace(PAPER_ADAPTER, sink_p=0.3, temperature_p=0.3) == PAPER_ADAPTER_AUGMENTED
    assert NO_AUGMENTATION.sink_p == NO_AUGMENTATION.noise_p == 0.0
    assert MODES == ("classifier", "adapter")


def test_bad_settings_are_refused_with_their_name():
    with pytest.raises(ValueError, match="temperature_p"):
        Augmentation(temperature_p=1.5, mode="adapter")
    with pytest.raises(ValueError, match="mode"):
        Augmentation(mode="other")
    with pytest.raises(ValueError, match="classifier"):
        Augmentation(temperature_p=0.3)  # the classifier's order has no temperature
    with pytest.raises(ValueError, match="noise_std_ratio"):
        Augmentation(noise_std_ratio=-0.1)


def test_classifier_order_noise_only_matches_hand_draws():
    x = _images()
    aug = Augmentation(sink_p=0.0, noise_p=1.0, noise_std_ratio=0.13)
    out = augment_batch(x, torch.Generator().manual_seed(7), aug)
    g = torch.Generator().manual_seed(7)
    torch.rand(4, generator=g)  # sink coins
    torch.rand(4, generator=g)  # noise coins (all fall: p = 1)
    expected = x.clone()
    for i in range(4):
        std = x[i].std(dim=(-2, -1), keepdim=True, unbiased=False)
        expected[i] = x[i] + torch.randn(x[i].shape, generator=g) * (0.13 * std)
    assert torch.equal(out, expected)


def test_classifier_order_draws_coins_even_when_off():
    x = _images()
    g = torch.Generator().manual_seed(3)
    assert torch.equal(augment_batch(x, g, NO_AUGMENTATION), x)
    ref = torch.Generator().manual_seed(3)
    torch.rand(8, generator=ref)
    assert torch.equal(g.get_state(), ref.get_state())


def test_adapter_order_noise_only_matches_hand_draws():
    x = _images(b=3)
    aug = dataclasses.replace(PAPER_ADAPTER, noise_p=0.5)
    out = augment_batch(x, torch.Generator().manual_seed(11), aug)
    g = torch.Generator().manual_seed(11)
    pick = torch.rand(3, generator=g) < 0.5
    noise = torch.randn(x.shape, generator=g)
    expected = x.clone()
    for i in range(3):
        for c in range(2):
            std = x[i, c].flatten().std(correction=0)
            if pick[i]:
                expected[i, c] = x[i, c] + noise[i, c] * (0.2 * std)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-7)
    assert pick.any() and not pick.all()  # the seed exercises both branches


def test_adapter_order_draws_nothing_when_off_and_returns_the_input():
    x = _images()
    g = torch.Generator().manual_seed(5)
    off = dataclasses.replace(PAPER_ADAPTER, noise_p=0.0)
    assert augment_batch(x, g, off) is x
    assert torch.equal(g.get_state(), torch.Generator().manual_seed(5).get_state())


def test_adapter_order_temperature_and_sink_come_image_by_image_before_the_noise():
    x = _images(b=2)
    aug = Augmentation(sink_p=1.0, noise_p=0.0, temperature_p=1.0, mode="adapter")
    out = augment_batch(x, torch.Generator().manual_seed(2), aug)
    g = torch.Generator().manual_seed(2)
    from olas_utils.maths.augment import apply_temperature, highlight_sink_columns

    expected = x.clone()
    for i in range(2):
        assert float(torch.rand(1, generator=g)) < 1.0  # temperature coin
        expected[i] = apply_temperature(expected[i].clamp_min(0), g)
        assert float(torch.rand(1, generator=g)) < 1.0  # sink coin
        expected[i] = highlight_sink_columns(expected[i], g)[0]
    assert torch.equal(out, expected)
    assert not torch.equal(out, x)


def test_the_two_modes_draw_differently():
    x = _images()
    a = Augmentation(sink_p=0.0, noise_p=1.0, noise_std_ratio=0.2)
    b = dataclasses.replace(a, mode="adapter")
    assert not torch.equal(
        augment_batch(x, torch.Generator().manual_seed(0), a), augment_batch(x, torch.Generator().manual_seed(0), b)
    )
