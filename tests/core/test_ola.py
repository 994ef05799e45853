"""The OLA recurrence against brute-force enumeration of layer combinations (float64)."""

from itertools import combinations
from math import comb

import pytest
import torch

from olas_utils.maths.ola import OrderAccumulator, check_orders, ola_from_layers, rollout_from_layers


def random_stochastic(n_layers, batch, t, seed, causal=False):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(n_layers, batch, t, t, generator=g, dtype=torch.float64) ** 3
    if causal:
        a = torch.tril(a)
    return a / a.sum(-1, keepdim=True)


def brute_force_ola(layers, k):
    """Σ over i1<…<ik of A(ik)…A(i1), divided by C(N, k) — the released code's enumeration."""
    n, b, t, _ = layers.shape
    total = torch.zeros(b, t, t, dtype=layers.dtype)
    for combo in combinations(range(n), k):
        prod = torch.eye(t, dtype=layers.dtype).expand(b, t, t)
        for i in combo:  # lowest layer first, each new layer multiplied on the left
            prod = layers[i] @ prod
        total += prod
    return total / comb(n, k)


@pytest.mark.parametrize("n_layers", list(range(1, 9)))
@pytest.mark.parametrize("causal", [False, True])
def test_recurrence_equals_enumeration_every_order(n_layers, causal):
    layers = random_stochastic(n_layers, batch=2, t=5, seed=n_layers, causal=causal)
    got = ola_from_layers(layers, range(n_layers + 1))
    for k in range(n_layers + 1):
        ref = brute_force_ola(layers, k)
        assert torch.allclose(got[k], ref, rtol=0, atol=1e-10), (k, (got[k] - ref).abs().max())


def test_order_one_is_layer_mean_and_order_zero_is_identity():
    layers = random_stochastic(4, 1, 6, seed=0)
    got = ola_from_layers(layers, [0, 1])
    torch.testing.assert_close(got[0], torch.eye(6, dtype=torch.float64)[None], rtol=0, atol=0)
    torch.testing.assert_close(got[1], layers.mean(0), rtol=0, atol=1e-15)


def test_hand_computed_two_layers():
    a1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]], dtype=torch.float64)
    a2 = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]], dtype=torch.float64)
    got = ola_from_layers([a1, a2], [2])
    # order 2 of two layers is the single product A(2)·A(1)
    expected = torch.tensor([[[0.5, 0.5], [1.0, 0.0]]], dtype=torch.float64)
    torch.testing.assert_close(got[2], expected, rtol=0, atol=0)


@pytest.mark.parametrize("n_layers", [1, 3, 6, 8])
def test_rollout_is_binomial_sum_of_orders(n_layers):
    layers = random_stochastic(n_layers, batch=3, t=4, seed=10 + n_layers)
    ola = ola_from_layers(layers, range(n_layers + 1))
    summed = sum(comb(n_layers, k) * ola[k] for k in range(n_layers + 1))
    # independent reference: the explicit product Π (A(i) + I), higher layer on the left
    eye = torch.eye(4, dtype=torch.float64)
    prod = eye.expand(3, 4, 4)
    for i in range(n_layers):
        prod = (layers[i] + eye) @ prod
    torch.testing.assert_close(rollout_from_layers(layers), prod, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(summed, prod, rtol=1e-12, atol=1e-10)


def test_rows_sum_to_one_for_stochastic_inputs():
    layers = random_stochastic(6, 2, 7, seed=3)
    for _k, m in ola_from_layers(layers, range(7)).items():
        torch.testing.assert_close(m.sum(-1), torch.ones(2, 7, dtype=torch.float64), rtol=0, atol=1e-12)


def test_keep_layers_and_negative_index():
    layers = random_stochastic(5, 1, 3, seed=4)
    acc = OrderAccumulator(max_order=1, keep_layers=(0, -1), num_layers=5, dtype=torch.float64)
    for a in layers:
        acc.add_layer(a)
    assert set(acc.layers) == {0, 4}
    torch.testing.assert_close(acc.layers[4], layers[4], rtol=0, atol=0)


@pytest.mark.parametrize("bad", [[-1], [4], [1.5], [], [True]])
def test_orders_outside_range_are_rejected(bad):
    with pytest.raises(ValueError, match="order|orders"):
        check_orders(bad, 3)


def test_accumulator_errors():
    acc = OrderAccumulator(max_order=2, num_layers=2)
    with pytest.raises(RuntimeError, match="no layer"):
        acc.ola(1)
    acc.add_layer(torch.eye(3)[None])
    with pytest.raises(RuntimeError, match="expected 2"):
        acc.ola(1)
    with pytest.raises(ValueError, match="shape"):
        acc.add_layer(torch.eye(4)[None])
    with pytest.raises(ValueError, match="rollout"):
        acc.add_layer(torch.eye(3)[None])
        acc.rollout_map()
