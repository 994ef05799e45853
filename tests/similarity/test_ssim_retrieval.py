"""Batched SSIM against torchmetrics one pair at a time (the independent reference); Pearson
against numpy; Hit@k and the retrieval table on hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

from olas_utils.similarity import (
    gaussian_window,
    hit_at_k,
    pearson_matrix,
    retrieval_table,
    ssim,
    ssim_matrix,
    true_match_ranks,
)
from olas_utils.similarity.ssim import _axis_windows, _ssim_blocks


def _ola_like(n: int, s: int, g: torch.Generator, causal: bool = False) -> torch.Tensor:
    """Row-stochastic attention-like images with sink columns (symmetrised if causal)."""
    x = torch.randn(n, s, s, generator=g) * 2
    x[:, :, 0] += 4  # sink
    if causal:
        x = x.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    a = torch.softmax(x, -1)
    if causal:
        a = torch.tril(a) + torch.tril(a, -1).transpose(-1, -2)
    return a


def _mixed(n: int, s: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    parts = [
        torch.rand(n, s, s, generator=g) * torch.logspace(-2, 1, n)[:, None, None],  # ranges 0.01..10
        torch.randn(n, s, s, generator=g) * 3 - 5,  # negative values
        _ola_like(n, s, g),
        _ola_like(n, s, g, causal=True),
    ]
    x = torch.cat(parts)
    return x[torch.randperm(len(x), generator=g)].float()


def _reference(q, k, **kw):
    return torch.tensor(
        [[float(tm_ssim(q[i : i + 1], k[j : j + 1], **kw)) for j in range(len(k))] for i in range(len(q))],
        dtype=torch.float64,
    )


def test_ssim_matches_torchmetrics_pair_by_pair():
    q, k = _mixed(3, 50, 0), _mixed(3, 50, 1)  # 12 x 12 images, all kinds mixed
    got = ssim_matrix(q, k)
    assert got.shape == (12, 12) and got.dtype == torch.float32
    g = np.random.default_rng(0)
    pairs = [(int(i), int(j)) for i, j in zip(g.integers(0, 12, 50), g.integers(0, 12, 50))]
    diffs = [abs(float(got[i, j]) - float(tm_ssim(q[i : i + 1, None], k[j : j + 1, None]))) for i, j in pairs]
    assert max(diffs) <= 1e-5, max(diffs)
    # the same image with itself scores 1; numpy input gives the same numbers
    assert torch.allclose(ssim_matrix(q[:4], q[:4]).diagonal(), torch.ones(4), atol=1e-5)
    assert torch.equal(ssim_matrix(q.numpy(), k.numpy()), got)


def test_ssim_options_and_shapes():
    g = torch.Generator().manual_seed(3)
    q = torch.rand(4, 2, 20, 30, generator=g)  # channels, non-square
    k = torch.rand(5, 2, 20, 30, generator=g) * 2
    for kw in [
        dict(),
        dict(data_range=1.0),
        dict(data_range=(0.1, 0.9)),
        dict(gaussian_kernel=False, kernel_size=7),
        dict(sigma=0.8),
        dict(sigma=(1.2, 0.7)),
        dict(gaussian_kernel=False, kernel_size=(5, 9)),
        dict(k1=0.02, k2=0.05),
    ]:
        got = ssim_matrix(q, k, **kw)
        ref = _reference(q, k, **kw)
        assert (got.double() - ref).abs().max() <= 1e-5, (kw, (got - ref).abs().max())
    # float64 computation, and block sizes do not change the result beyond rounding
    got64 = ssim_matrix(q.double(), k.double())
    assert got64.dtype == torch.float64
    assert (got64 - _reference(q.double(), k.double())).abs().max() <= 1e-10
    small = ssim_matrix(q, k, max_block_bytes=1)
    assert (small - ssim_matrix(q, k)).abs().max() <= 1e-6
    threads = torch.get_num_threads()
    one = ssim_matrix(q, k, num_threads=1)
    assert torch.get_num_threads() == threads and (one - ssim_matrix(q, k)).abs().max() <= 1e-6


def test_ssim_edge_cases():
    c = torch.full((1, 16, 16), 0.5)
    assert torch.isnan(ssim_matrix(c, c)).all() and torch.isnan(tm_ssim(c[None], c[None]))
    with pytest.raises(ValueError, match="differ"):
        ssim_matrix(torch.rand(2, 16, 16), torch.rand(2, 16, 15))
    with pytest.raises(ValueError, match="too small"):
        ssim_matrix(torch.rand(2, 5, 5), torch.rand(2, 5, 5))
    with pytest.raises(ValueError, match="odd"):
        ssim_matrix(torch.rand(2, 16, 16), torch.rand(2, 16, 16), kernel_size=4)
    with pytest.raises(ValueError, match="shape"):
        ssim_matrix(torch.rand(16, 16), torch.rand(16, 16))
    assert ssim_matrix(torch.rand(0, 16, 16), torch.rand(3, 16, 16)).shape == (0, 3)


def _modes(rq, rk, bq, bk):
    """Which denominator path each block of pairs takes in ``_ssim_blocks`` (one key group)."""
    rq, rk = sorted(rq), sorted(rk)
    out = set()
    for qs in range(0, len(rq), bq):
        qe = min(qs + bq, len(rq))
        for ks in range(0, len(rk), bk):
            ke = min(ks + bk, len(rk))
            out.add("q" if rq[qs] >= rk[ke - 1] else ("k" if rq[qe - 1] <= rk[ks] else "mix"))
    return out


@pytest.mark.parametrize("size", [(17, 23), (6, 6), (12, 40)])
def test_ssim_block_paths_match_torchmetrics(size, monkeypatch):
    """Small, ragged blocks (strips and row groups that do not divide the image; key blocks
    that do not divide the keys) on non-square images whose ranges spread over 3 orders of
    magnitude, so that blocks take L from the queries, from the keys, and from both."""
    h, w = size
    g = torch.Generator().manual_seed(h * 100 + w)
    q = torch.cat(
        [
            torch.rand(5, h, w, generator=g) * torch.logspace(-2, 1, 5)[:, None, None],
            _ola_like(4, max(h, w), g)[:, :h, :w],
        ]
    )[:, None]
    k = torch.cat(
        [
            torch.rand(6, h, w, generator=g) * torch.logspace(-1.5, 0.5, 6)[:, None, None],
            _ola_like(5, max(h, w), g, causal=True)[:, :h, :w],
        ]
    )[:, None]
    rq = (q.flatten(1).amax(1) - q.flatten(1).amin(1)).tolist()
    rk = (k.flatten(1).amax(1) - k.flatten(1).amin(1)).tolist()
    assert _modes(rq, rk, 3, 4) == {"q", "k", "mix"}
    windows = _axis_windows(True, 1.5, 11, torch.float32, "cpu")
    ref = _reference(q, k)
    for block in [(3, 4, 3, 4), (2, 5, 1, 3), (9, 11, None, 10)]:
        got = _ssim_blocks(q, k, windows, None, 0.01, 0.03, 2**30, False, block=block)
        assert (got.double() - ref).abs().max() <= 1e-5, (block, (got.double() - ref).abs().max())
    # a budget for ~15 images' tensors: keys in several groups, queries in several chunks
    calls = {True: 0, False: 0}
    prepare = ssim.prepare_side

    def counting(*args, key_side, **kw):
        calls[key_side] += 1
        return prepare(*args, key_side=key_side, **kw)

    monkeypatch.setattr(ssim, "prepare_side", counting)
    per_image = 4 * ((h + 10) * w * 11 + 9 * h * w)
    got = ssim_matrix(q, k, max_block_bytes=15 * per_image)
    assert calls[True] >= 2 and calls[False] >= 2, calls
    assert (got.double() - ref).abs().max() <= 1e-5


def test_ssim_structured_images_and_hit_at_k_match_torchmetrics():
    """OLA-like images (row-stochastic with a sink column, causal ones symmetrised) of two
    "models": the second sees the same chunks mixed with unrelated maps (90 %), so that
    retrieval is imperfect. Every score, every true-match rank and Hit@k equal those of
    torchmetrics called pair by pair."""
    g = torch.Generator().manual_seed(7)
    base = torch.cat([_ola_like(16, 24, g), _ola_like(16, 24, g, causal=True)])
    other = 0.1 * base + 0.9 * torch.cat([_ola_like(16, 24, g), _ola_like(16, 24, g, causal=True)])
    got = ssim_matrix(base, other)
    ref = _reference(base[:, None], other[:, None])
    assert (got.double() - ref).abs().max() <= 1e-5
    assert np.array_equal(true_match_ranks(got), true_match_ranks(ref))
    hits = {kk: hit_at_k(got, kk) for kk in (1, 5)}
    assert hits == {kk: hit_at_k(ref, kk) for kk in (1, 5)}
    assert 0 < hits[1] < 1  # not a trivial case


def test_ssim_constant_images():
    c1, c2 = torch.full((1, 1, 12, 12), 0.5), torch.full((1, 1, 12, 12), -2.0)
    x = torch.rand(1, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    got = ssim_matrix(torch.cat([c1, c2, x]), torch.cat([c1, c2, x]))
    # both constant: L = 0 and C1 = C2 = 0, so 0/0 — NaN (torchmetrics: NaN for equal constants)
    assert torch.isnan(got[:2, :2]).all()
    assert torch.isnan(tm_ssim(c1, c1))
    # a constant image against a varying one is an ordinary score
    for i, j in [(0, 2), (2, 1), (2, 2)]:
        ref = float(tm_ssim(torch.cat([c1, c2, x])[i : i + 1], torch.cat([c1, c2, x])[j : j + 1]))
        assert abs(float(got[i, j]) - ref) <= 1e-5


def test_gaussian_window_is_torchmetrics():
    from torchmetrics.functional.image.utils import _gaussian_kernel_2d

    w = gaussian_window(1.5)
    assert w.shape == (11, 11)
    assert torch.equal(w, _gaussian_kernel_2d(1, (11, 11), (1.5, 1.5), torch.float32, "cpu")[0, 0])


def test_pearson_matches_numpy():
    g = np.random.default_rng(1)
    q = g.random((6, 10, 10)) * g.random((6, 1, 1)) * 5
    k = np.concatenate([q[:3] * 2 + 1, g.normal(size=(4, 10, 10))]).astype(np.float32)
    got = pearson_matrix(q, k).numpy()
    ref = np.array([[np.corrcoef(a.ravel(), b.ravel())[0, 1] for b in k] for a in q])
    np.testing.assert_allclose(got, ref, atol=1e-7)
    np.testing.assert_allclose(got[np.arange(3), np.arange(3)], 1.0, atol=1e-7)
    const = pearson_matrix(np.ones((1, 4, 4)), k[:, :4, :4])
    assert np.isnan(const.numpy()).all()


def test_hit_at_k_hand_made():
    s = np.array(
        [
            [0.9, 0.1, 0.2, 0.3],  # own key first
            [0.5, 0.4, 0.6, 0.1],  # own key third
            [0.2, 0.2, 0.2, 0.2],  # all tied
            [0.1, 0.7, 0.2, 0.7],  # tied with one other key for first
        ]
    )
    assert true_match_ranks(s).tolist() == [0, 2, 3, 1]
    assert true_match_ranks(s, ties="optimistic").tolist() == [0, 2, 0, 0]
    assert hit_at_k(s, 1) == 0.25
    assert hit_at_k(s, 2) == 0.5
    assert hit_at_k(s, 3) == 0.75
    assert hit_at_k(s, 4) == 1.0
    assert hit_at_k(s, 1, ties="optimistic") == 0.75
    assert hit_at_k(torch.tensor(s), 2) == 0.5
    # NaN counts as -inf: a NaN true score is never a hit unless k covers every key
    n = np.array([[np.nan, 0.1], [np.nan, 0.5]])
    assert true_match_ranks(n).tolist() == [1, 0]
    # more keys than queries is fine; the reverse is not
    assert hit_at_k(np.eye(3, 5), 1) == 1.0
    with pytest.raises(ValueError):
        hit_at_k(np.eye(5, 3), 1)
    with pytest.raises(ValueError):
        hit_at_k(s, 0)
    with pytest.raises(ValueError):
        true_match_ranks(s, ties="random")


def test_retrieval_table():
    g = torch.Generator().manual_seed(0)
    a = _ola_like(12, 24, g)
    b = a + 0.002 * torch.rand(a.shape, generator=g)  # nearly the same images
    c = torch.rand(12, 24, 24, generator=g)  # unrelated
    for metric in ("ssim", "pearson"):
        rows = retrieval_table({"A": a, "B": b.numpy(), "C": c}, metric=metric, ks=(1, 5), progress=False)
        assert [(r["target"], r["source"]) for r in rows] == [
            ("A", "B"),
            ("A", "C"),
            ("B", "A"),
            ("B", "C"),
            ("C", "A"),
            ("C", "B"),
        ]
        by = {(r["target"], r["source"]): r for r in rows}
        assert by["A", "B"]["hit@1"] == by["B", "A"]["hit@1"] == 1.0
        assert by["A", "C"]["hit@5"] < 1.0
        assert all(r["metric"] == metric and r["n"] == 12 and set(r) >= {"hit@1", "hit@5"} for r in rows)
    # the reverse direction uses the transposed matrix: check against a direct computation
    rows = retrieval_table({"A": a, "C": c}, ks=(1, 3), progress=False)
    direct = ssim_matrix(c, a)
    assert rows[1]["hit@3"] == hit_at_k(direct, 3)
    with pytest.raises(ValueError, match="two models"):
        retrieval_table({"A": a})
    with pytest.raises(ValueError, match="same number"):
        retrieval_table({"A": a, "B": a[:5]})
    with pytest.raises(ValueError, match="metric"):
        retrieval_table({"A": a, "B": b}, metric="l2")


def _brute_rank(row: np.ndarray, i: int, ties: str) -> int:
    """The rank of key ``i`` in one similarity row, by a loop over the keys."""
    true = -np.inf if np.isnan(row[i]) else row[i]
    rank = 0
    for j, v in enumerate(row):
        v = -np.inf if np.isnan(v) else v
        if j == i:
            continue
        if v > true or (v == true and (ties == "pessimistic" or (ties == "first" and j < i))):
            rank += 1
    return rank


@pytest.mark.real_model
def test_per_item_ranks_reduce_to_hit_at_k_on_real_images(tmp_path):
    """Real OLA images of two zoo encoders (and the tokenizer-only control, whose word-level
    images are all the same, so every score ties): Hit@1/Hit@5 of the saved per-item ranks
    (notebook 02's items → pair table) and of ``retrieval_table`` equal Hit@k counted by a
    loop over each SSIM / Pearson matrix, under both tie rules."""
    from olas_utils.data.corpus import build_chunks
    from olas_utils.similarity.images import TIES
    from olas_utils.studies import crosslm, crosslm_stats

    chunks = build_chunks(n_chunks=10, seed=0)
    images = crosslm.extract_images(
        ["minilm-l6", "paraphrase-minilm-l3"],
        chunks,
        orders=[1],
        baselines=[],
        protocols=["released", "paper", "word"],
        controls=["uniform"],
        batch_size=5,
        progress=False,
        cache_dir=tmp_path,
    )
    items = crosslm.retrieval_items(images, metrics=("ssim", "pearson"), control_metrics=("ssim",), progress=False)
    pairs = crosslm_stats.retrieval_frame(items).set_index(["control", "protocol", "metric", "target", "source"])
    assert len(pairs) == 3 * 2 * 2 + 3 * 2  # trained: 3 protocols × 2 metrics × 2 pairs; uniform: SSIM only
    ties_seen = 0
    for (control, protocol, metric, target, source), row in pairs.iterrows():
        imgs = images.images(control, protocol, "ola:1")
        sim = (ssim_matrix if metric == "ssim" else pearson_matrix)(imgs[target], imgs[source]).numpy()
        ranks = [_brute_rank(sim[i], i, TIES[protocol]) for i in range(len(sim))]
        ties_seen += sum(np.sum(sim[i] == sim[i, i]) > 1 for i in range(len(sim)))
        assert row["hit@1"] == pytest.approx(np.mean(np.array(ranks) < 1), abs=0), (control, protocol, metric, target)
        assert row["hit@5"] == pytest.approx(np.mean(np.array(ranks) < 5), abs=0)
        table = retrieval_table(imgs, metric=metric, ks=(1, 5), ties=TIES[protocol], progress=False)
        mine = next(r for r in table if (r["target"], r["source"]) == (target, source))
        assert (mine["hit@1"], mine["hit@5"]) == (row["hit@1"], row["hit@5"])
    assert ties_seen > 0  # the uniform control's tied scores (word level: one image) exercised a tie rule
