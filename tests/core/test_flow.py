"""Attention flow against independent references: networkx's default max-flow on the same
layered graph (float capacities, built here), hand-computed cases, bounds that hold for any
flow, and one real model (splade-tiny)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from olas_utils.maths.flow import (
    DEFAULT_SCALE,
    FlowCost,
    attention_flow,
    attention_flow_many,
    flow_cost,
    flow_error_bound,
)

#: float32 rounding of a result ≤ 1 (2⁻²⁴), plus networkx's float arithmetic.
F32 = 1e-7


def random_stack(n, t, seed, causal=False):
    """(N, T, T) float64 row-stochastic attention, peaked like real attention."""
    g = torch.Generator().manual_seed(seed)
    s = 3 * torch.randn(n, t, t, generator=g, dtype=torch.float64)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1)


def networkx_flow(layers) -> np.ndarray:
    """The paper's graph built from scratch: node (l, k), edge (l, k) → (l−1, m) with
    capacity (A_l[k, m] + [k = m]) / 2, one networkx max-flow per (output, input) pair."""
    a = torch.as_tensor(layers).double().numpy()
    n, t, _ = a.shape
    g = nx.DiGraph()
    for l in range(1, n + 1):
        res = (a[l - 1] + np.eye(t)) / 2
        for k in range(t):
            for m in range(t):
                if res[k, m] > 0:
                    g.add_edge((l, k), (l - 1, m), capacity=float(res[k, m]))
    return np.array([[nx.maximum_flow_value(g, (n, i), (0, j)) for j in range(t)] for i in range(t)])


def residual(layers) -> np.ndarray:
    a = torch.as_tensor(layers).double().numpy()
    return (a + np.eye(a.shape[-1])) / 2


CASES = [(1, 2), (1, 5), (2, 2), (2, 4), (2, 6), (3, 3), (3, 6), (4, 5), (4, 6)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n,t", CASES)
def test_equals_networkx_within_the_stated_bound(n, t, seed, causal):
    layers = random_stack(n, t, seed=100 * n + 10 * t + seed, causal=causal)
    got = attention_flow(layers)
    assert got.dtype == torch.float32 and got.shape == (t, t)
    ref = networkx_flow(layers)
    tol = flow_error_bound(t, n) + F32
    assert tol < 1e-6  # the bound is tight at the default scale, not a loose tolerance
    err = np.abs(got.double().numpy() - ref).max()
    assert err <= tol, (err, tol)


@pytest.mark.parametrize("n,t", [(3, 6), (4, 5)])
def test_a_coarse_scale_stays_within_its_bound_and_the_bound_is_not_vacuous(n, t):
    layers = random_stack(n, t, seed=7)
    ref = networkx_flow(layers)
    scale = 2**10
    err = np.abs(attention_flow(layers, scale=scale).double().numpy() - ref).max()
    assert err <= flow_error_bound(t, n, scale) + F32
    assert err > 10 * (flow_error_bound(t, n) + F32)  # the scale is really used
    assert flow_error_bound(t, n, scale) < 0.05


def test_one_layer_is_the_residual_attention_exactly():
    layers = random_stack(1, 5, seed=3)
    want = torch.from_numpy(residual(layers)[0]).float()
    assert torch.equal(attention_flow(layers), want)
    assert flow_error_bound(5, 1) == 0.0


def test_two_layers_two_tokens_by_hand():
    # Â_1 = [[1, 0], [.25, .75]], Â_2 = [[.75, .25], [0, 1]];
    # flow(i, j) = Σ_k min(Â_2[i, k], Â_1[k, j]) (one intermediate node per path):
    # (0,0) .75 + .25; (0,1) 0 + .25; (1,0) 0 + .25; (1,1) 0 + .75.
    a1 = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    a2 = torch.tensor([[0.5, 0.5], [0.0, 1.0]])
    got = attention_flow(torch.stack([a1, a2]))
    want = torch.tensor([[1.0, 0.25], [0.25, 0.75]])
    assert torch.allclose(got, want, rtol=0, atol=flow_error_bound(2, 2) + F32)


@pytest.mark.parametrize("seed", [0, 1])
def test_two_layers_equal_the_sum_of_path_bottlenecks(seed):
    layers = random_stack(2, 7, seed=seed)
    r = residual(layers)
    want = np.minimum(r[1][:, :, None], r[0][None, :, :]).sum(1)  # Σ_k min(Â_2[i,k], Â_1[k,j])
    assert np.abs(attention_flow(layers).double().numpy() - want).max() <= flow_error_bound(7, 2) + F32


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [3, 4])
def test_flow_lies_between_rollout_and_the_first_edge_bound(n, causal):
    """Lower: the normalised rollout Π Â (higher layer on the left) is the flow of a random
    walk restricted to the paths ending at j, a feasible flow, so it is ≤ the maximum.
    Upper: splitting a flow by its first edge, flow_l(i, j) ≤ Σ_k min(Â_l[i, k],
    flow_{l−1}(k, j)), so U_l = Σ_k min(Â_l[i, k], U_{l−1}[k, j]) (U_1 = Â_1) bounds it; also
    ≤ 1 (source cut) and ≤ the column sum of Â_1 (sink cut)."""
    t = 6
    layers = random_stack(n, t, seed=11 + n, causal=causal)
    r = residual(layers)
    got = attention_flow(layers).double().numpy()
    tol = flow_error_bound(t, n) + F32
    roll, upper = r[0], r[0]
    for layer in r[1:]:
        roll = layer @ roll
        upper = np.minimum(layer[:, :, None], upper[None, :, :]).sum(1)
    assert (got >= roll - tol).all()
    assert (got <= upper + tol).all()
    assert (got <= 1 + tol).all() and (got <= r[0].sum(0)[None, :] + tol).all()
    assert (upper - roll).max() > 0.05  # the two bounds are not the same matrix


def test_causal_flow_is_exactly_zero_above_the_diagonal():
    got = attention_flow(random_stack(4, 8, seed=5, causal=True))
    assert torch.equal(torch.triu(got, 1), torch.zeros(8, 8))
    assert (torch.diagonal(got) > 0).all()


def test_padding_changes_nothing_of_the_real_tokens():
    n, t, pad = 3, 5, 2
    layers = random_stack(n, t, seed=9)
    padded = torch.zeros(n, t + pad, t + pad, dtype=layers.dtype)
    padded[:, :t, :t] = layers
    got = attention_flow(padded)
    assert torch.equal(got[:t, :t], attention_flow(layers))
    assert not got[t:].any() and not got[:, t:].any()


def test_pairs_per_call_and_method_change_nothing():
    layers = random_stack(3, 6, seed=4)
    base = attention_flow(layers)
    for kw in ({"pairs_per_call": 1}, {"pairs_per_call": 5}, {"method": "edmonds_karp"}):
        assert torch.equal(attention_flow(layers, **kw), base), kw


def test_many_equals_one_at_a_time_with_two_processes():
    stacks = [random_stack(3, t, seed=t) for t in (4, 6, 5)] + [random_stack(1, 3, seed=1)]
    alone = [attention_flow(s) for s in stacks]
    one = attention_flow_many(stacks, processes=1, progress=False)
    two = attention_flow_many(stacks, processes=2, progress=False)
    for a, b, c in zip(alone, one, two):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_the_token_cap_refuses_or_skips_on_request():
    stacks = [random_stack(2, 3, seed=0), random_stack(2, 9, seed=1)]
    with pytest.raises(
        ValueError, match=r"sentence 1 has 9 tokens, more than max_tokens=8.*max_tokens=9.*too_long='skip'"
    ):
        attention_flow_many(stacks, max_tokens=8, progress=False)
    with pytest.warns(UserWarning, match=r"skipped 1 sentence.*\[1\]"):
        out = attention_flow_many(stacks, max_tokens=8, too_long="skip", progress=False)
    assert out[1] is None and torch.equal(out[0], attention_flow(stacks[0]))
    assert attention_flow_many(stacks, max_tokens=None, progress=False)[1].shape == (9, 9)


def test_many_prints_the_cost_first(capsys):
    attention_flow_many([random_stack(2, 3, seed=0)], progress=True)
    assert "attention flow: 1 sentence(s), 9 max-flows" in capsys.readouterr().out


def _bad(kind):
    a = random_stack(2, 4, seed=0)
    if kind == "nan":
        a[1, 2, 3] = float("nan")
    elif kind == "negative":
        a[0, 1, 1] = -0.1
    elif kind == "row sum":
        a[1, 3] *= 0.9
    elif kind == "zero in one layer":
        a[0, 2] = 0
    elif kind == "padding attended":
        a[:, 3] = 0
    return a


@pytest.mark.parametrize(
    "layers,match",
    [
        (torch.rand(3, 4, 5), r"\(layer, T, T\)"),
        (torch.rand(4, 4), r"\(layer, T, T\)"),
        (torch.rand(2, 2, 4, 4), "attention_flow_many"),
        ([torch.eye(3), torch.eye(4)], "different shapes"),
        ([], "empty"),
        (_bad("nan"), "NaN"),
        (_bad("negative"), "negative"),
        (_bad("row sum"), r"layer 1, row 3 .* sums to 0\.9"),
        (_bad("zero in one layer"), r"token 2's attention row is zero in layers \[0\]"),
        (_bad("padding attended"), "receives attention"),
    ],
)
def test_bad_inputs_are_refused(layers, match):
    with pytest.raises(ValueError, match=match):
        attention_flow(layers)


def test_bad_options_are_refused():
    a = random_stack(2, 3, seed=0)
    with pytest.raises(TypeError, match="floating point"):
        attention_flow(torch.ones(2, 3, 3, dtype=torch.int64))
    for kw, match in [
        ({"scale": 0}, "scale"),
        ({"scale": 2**31}, "int32"),
        ({"scale": 1.5}, "scale"),
        ({"method": "push_relabel"}, "dinic"),
        ({"pairs_per_call": 0}, "pairs_per_call"),
    ]:
        with pytest.raises(ValueError, match=match):
            attention_flow(a, **kw)
    for kw, match in [({"processes": 0}, "processes"), ({"too_long": "cut"}, "too_long")]:
        with pytest.raises(ValueError, match=match):
            attention_flow_many([a], progress=False, **kw)
    with pytest.raises(ValueError, match="sentence 1: .*NaN"):
        attention_flow_many([a, _bad("nan")], progress=False)


def test_flow_cost_counts_and_reads():
    c = flow_cost([3, 5], num_layers=4)
    assert (c.sentences, c.max_flows) == (2, 9 + 25)
    assert c.edges == 9 * (2 * 9 + 6) + 25 * (2 * 25 + 10)
    assert c.error_bound == flow_error_bound(5, 4) and c.seconds > 0
    causal = flow_cost([5], num_layers=4, causal=True, processes=2)
    assert causal.max_flows == 15 and causal.edges == 15 * (2 * 15 + 10) and causal.processes == 2
    assert flow_cost([5], num_layers=1).max_flows == 0
    assert str(c).startswith("attention flow: 2 sentence(s), 34 max-flows over 1,716 edges, about ")
    assert isinstance(flow_cost([24], num_layers=6, calibrate=True), FlowCost)
    assert flow_error_bound(64, 12) == (10 * 64 * 64 + 128) / 2 / DEFAULT_SCALE


@pytest.mark.real_model
def test_splade_tiny_on_a_real_sentence_equals_networkx(zoo_model):
    from olas_utils.data import load_ud_ewt
    from olas_utils.extract import extract_ola

    lm = zoo_model("splade-tiny")
    words = next(list(w) for w in load_ud_ewt("dev")["words"] if 6 <= len(w) <= 10)
    res = extract_ola(lm.model, lm.tokenizer, [words], orders=(1,), rollout=False, layers=range(2), progress=False)
    layers = torch.stack([res["layer:0"][0], res["layer:1"][0]])
    t = layers.shape[-1]
    assert t >= 8
    got = attention_flow(layers)
    ref = networkx_flow(layers)
    # float32 attention: rows sum to 1 within ~1e-7, which moves (A + I)/2 vs the renormalised Â
    # by as much; the rounding bound and the float32 result add theirs.
    tol = flow_error_bound(t, 2) + 1e-6
    assert np.abs(got.double().numpy() - ref).max() <= tol
    assert ref.std() > 0.01  # a real, non-uniform flow


def test_one_layer_flow_is_its_residual_attention_by_hand():
    """With one layer the only path from output i to input j is the edge i -> j, so the flow is its
    capacity: (A + I) / 2 for row-stochastic A (Abnar & Zuidema's residual graph)."""
    a = torch.softmax(torch.randn(5, 5, generator=torch.Generator().manual_seed(0)), -1)
    expected = (a.double() + torch.eye(5, dtype=torch.float64)) / 2
    torch.testing.assert_close(attention_flow(a[None]).double(), expected, rtol=0, atol=1e-6)
