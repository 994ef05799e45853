"""Adapter inputs against hand-computed cases: rank-normalised rows and the position-only
channels."""

from __future__ import annotations

import torch

from olas_utils.toa.features import position_image, rank_rows


def test_rank_rows_hand_case_and_causal_visibility():
    x = torch.tensor([[[0.5, 0.2, 0.2, 0.1]] * 4])
    torch.testing.assert_close(rank_rows(x, causal=False)[0, 0], torch.tensor([1.0, 0.625, 0.625, 0.25]))
    c = torch.tensor([[[1.0, 0, 0], [0.3, 0.7, 0], [0.2, 0.2, 0.6]]])
    torch.testing.assert_close(
        rank_rows(c, causal=True)[0], torch.tensor([[1.0, 0, 0], [0.5, 1.0, 0], [0.5, 0.5, 1.0]])
    )
    scaled = rank_rows(c * 7 + 0.0, causal=True)  # scale-free
    torch.testing.assert_close(scaled, rank_rows(c, causal=True))


def test_position_image_hand_case():
    p = position_image(3, 2, causal=False)
    torch.testing.assert_close(p[0], torch.tensor([[1, 0, 0], [1 / 2, 1, 0], [1 / 3, 1 / 2, 1]], dtype=torch.float64))
    torch.testing.assert_close(p[1], p[0].T)
    q = position_image(3, 3, causal=True)
    torch.testing.assert_close(q[1], torch.tril(torch.ones(3, 3, dtype=torch.float64)))
    assert torch.equal(q[2], q[0])
