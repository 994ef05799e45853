"""The released code's metrics against hand-computed cases: greedy (argmax) heads and POS
accuracy over subwords with special tokens."""

from __future__ import annotations

import pytest
import torch

from olas_utils.toa.decoding import decode_tree


def test_greedy_heads_take_each_rows_argmax_without_tree_constraints():
    s = torch.tensor([[0, 0, 0, 0], [5, 9, 1, 2], [0, 3, 9, 1], [0, 4, 1, 9]], dtype=torch.float64)
    # word 1: ROOT (5) beats words 2,3 (self ignored); word 2 → word 1 (3); word 3 → word 1 (4): a tree here
    assert decode_tree(s, "greedy") == [0, 1, 1]
    cyc = torch.tensor([[0, 0, 0], [0, 0, 5], [0, 5, 0]], dtype=torch.float64)
    assert decode_tree(cyc, "greedy") == [2, 1]  # a cycle: greedy keeps it, the MST does not
    assert sorted(decode_tree(cyc, "mst")) != [1, 2]


def test_released_pos_accuracy_counts_subwords_and_special_tokens_by_hand():
    from olas_utils.toa.metrics import pos_accuracy, released_pos_accuracy

    gold, pred = [["DT", "NN", "VB"]], [["DT", "VB", "VB"]]
    # [CLS] the dog(2 subwords) barks [SEP]: tokens 6, correct = CLS + the + barks + SEP = 4
    assert released_pos_accuracy(gold, pred, [[-1, 0, 1, 1, 2, -1]]) == pytest.approx(4 / 6)
    assert pos_accuracy(gold, pred) == pytest.approx(2 / 3)
    assert released_pos_accuracy(gold, pred, [[0, 1]]) == pytest.approx(1 / 2)  # cut: barks has no token
    with pytest.raises(ValueError, match="word ids"):
        released_pos_accuracy(gold, pred, [[-1, 0, 3, -1]])
