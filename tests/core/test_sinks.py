"""Sink (outlier) masks and pre-processing on small hand-computed cases."""

import statistics

import numpy as np
import pytest
import torch

from olas_utils.maths.sinks import outlier_mask, preprocess, remove_outliers, renormalize_rows, symmetrize_causal


def test_outlier_is_argmax_and_above_mean_plus_3sigma():
    # row 0: ten small values and one huge one -> the huge one is both argmax and > mean + 3σ
    row = [0.01] * 10 + [0.9]
    # row 1: uniform -> argmax (the first) only
    m = torch.tensor([row, [1 / 11] * 11] + [[1 / 11] * 11] * 9, dtype=torch.float32)
    mask = outlier_mask(m, causal=False)
    mean, sd = statistics.mean(row), statistics.stdev(row)
    assert 0.9 > mean + 3 * sd  # the hand check that the rule applies
    assert mask[0].tolist() == [False] * 10 + [True]
    assert mask[1].tolist() == [True] + [False] * 10


def test_value_above_threshold_that_is_not_argmax():
    # 20 entries: two spikes; both exceed mean + 3σ? compute by hand with statistics
    row = [0.0] * 18 + [0.5, 0.5]
    mean, sd = statistics.mean(row), statistics.stdev(row)
    thr = mean + 3 * sd
    m = torch.tensor([row], dtype=torch.float64).expand(20, 20)
    mask = outlier_mask(m, causal=False)
    expected = [v > thr for v in row]
    expected[18] = True  # argmax (first of the ties)
    assert mask[0].tolist() == expected


def test_causal_rows_use_lower_triangle_only():
    m = torch.tensor([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.1, 0.8]])
    mask = outlier_mask(m, causal=True)
    # row 0 has one valid entry: its argmax only; nothing above the diagonal is ever marked
    assert mask.tolist() == [[True, False, False], [False, True, False], [False, False, True]]
    assert not torch.triu(mask, 1).any()


def test_padding_excluded():
    m = torch.zeros(4, 4)
    m[:3, :3] = torch.tensor([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.6, 0.2, 0.2]])
    m[:3, 3] = 5.0  # garbage in a padded column must be ignored
    mask = outlier_mask(m, causal=False, length=3)
    assert not mask[:, 3].any() and not mask[3].any()
    assert mask[0, 2] and mask[1, 2] and mask[2, 0]


def test_renormalize_and_remove():
    m = torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, False], [False, False, False]])
    out = renormalize_rows(remove_outliers(m, mask))
    torch.testing.assert_close(out, torch.tensor([[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]))
    assert m[0, 0] == 0.5  # input untouched


def test_symmetrize_copies_transposed_lower_triangle():
    m = torch.tensor([[1.0, 0.0, 0.0], [2.0, 3.0, 0.0], [4.0, 5.0, 6.0]])
    expected = torch.tensor([[1.0, 2.0, 4.0], [2.0, 3.0, 5.0], [4.0, 5.0, 6.0]])
    torch.testing.assert_close(symmetrize_causal(m), expected)


def test_preprocess_channels_and_order_of_steps():
    m = torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]])
    out = preprocess(m, causal=False, remove_sinks=True, keep_raw=True)
    assert out.shape == (2, 3, 3)
    torch.testing.assert_close(out[0], m[0])  # raw rows already sum to 1
    # sink-removed: each row's argmax zeroed, the rest renormalised
    expected = torch.tensor([[0.0, 2 / 3, 1 / 3], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    torch.testing.assert_close(out[1], expected)
    causal = preprocess(torch.tril(m), causal=True, remove_sinks=False)
    torch.testing.assert_close(causal[0], causal[0].T)


def test_preprocess_shape_error():
    with pytest.raises(ValueError, match="channels"):
        preprocess(torch.zeros(3, 3), causal=False)


@pytest.mark.parametrize("unbiased", [True, False])
def test_threshold_uses_the_sample_or_population_std_like_numpy(unbiased):
    """Random rows against numpy's ``std(ddof=1)`` / ``std(ddof=0)``: outliers above ``mean + n·std``
    plus each row's argmax; at n = 1 on 5 keys the two standard deviations mark different entries."""
    rng = np.random.default_rng(0)
    maps = torch.tensor(rng.random((40, 5, 5)) ** 3)
    got = outlier_mask(maps, causal=False, n_sigma=1.0, unbiased=unbiased).numpy()
    other = outlier_mask(maps, causal=False, n_sigma=1.0, unbiased=not unbiased).numpy()
    x = maps.numpy()
    thresh = x.mean(-1, keepdims=True) + x.std(-1, ddof=1 if unbiased else 0, keepdims=True)
    expect = x > thresh
    np.put_along_axis(expect, x.argmax(-1)[..., None], True, axis=-1)
    np.testing.assert_array_equal(got, expect)
    assert (got != other).any()  # the case tells the two apart
