"""Inputs that used to give a silent wrong result or a library's own message now get a
refusal that names the input, what was wrong with it and what to do: all-zero attention for
attention flow, lengths for its cost estimate, a zero reference or bad word ids for word
pooling, a uniform reference handed out mutable, orders and mixing keys given as a string or
None, and a worker count given as a string."""

from __future__ import annotations

import pytest
import torch

from olas_utils.align import pool_to_words
from olas_utils.maths.flow import attention_flow, flow_cost
from olas_utils.maths.mixing import mixing_plan
from olas_utils.maths.ola import check_orders
from olas_utils.maths.uniform import uniform_reference


def test_attention_flow_refuses_attention_that_is_all_zero():
    with pytest.raises(ValueError, match="every attention row is zero in every layer"):
        attention_flow(torch.zeros(3, 4, 4))


def test_flow_cost_refuses_negative_lengths_and_a_bare_number():
    with pytest.raises(ValueError, match=r"positive whole token counts .* got -3"):
        flow_cost([-3], 6)
    with pytest.raises(TypeError, match=r"lengths must be a list of token counts.*for one sentence pass \[50\]"):
        flow_cost(50, 6)
    with pytest.raises(ValueError, match="got 2.5"):
        flow_cost([2.5], 6)
    with pytest.raises(ValueError, match="num_layers must be a whole number"):
        flow_cost([5], 0)
    assert flow_cost([5], 6).max_flows == 25


def _sentence():
    maps = torch.softmax(torch.rand(4, 4), -1)
    word_ids = torch.tensor([-1, 0, 1, -1])
    return maps, word_ids, uniform_reference("ola:1", 4, causal=False, num_layers=2)


def test_pool_to_words_refuses_a_zero_reference():
    maps, ids, ref = _sentence()
    pool_to_words(maps, ids, 2, reference=ref)
    with pytest.raises(ValueError, match="reference row 0 is all zero"):
        pool_to_words(maps, ids, 2, reference=torch.zeros_like(ref))
    with pytest.raises(ValueError, match="negative entries"):
        pool_to_words(maps, ids, 2, reference=-ref)
    with pytest.raises(ValueError, match="NaN or inf"):
        pool_to_words(maps, ids, 2, reference=ref * float("nan"))


def test_pool_to_words_refuses_float_word_ids_and_too_few_words():
    maps, ids, ref = _sentence()
    with pytest.raises(TypeError, match="word_ids must hold whole numbers"):
        pool_to_words(maps, ids.float(), 2, reference=ref)
    with pytest.raises(ValueError, match="word_ids name word 1 but num_words is 1"):
        pool_to_words(maps, ids, 1, reference=ref)
    with pytest.raises(ValueError, match="num_words must be a whole number"):
        pool_to_words(maps, ids, 2.0, reference=ref)


def test_uniform_reference_hands_out_a_tensor_its_caller_cannot_corrupt():
    first = uniform_reference("ola:1", 6, causal=True, num_layers=3)
    keep = first.clone()
    first.mul_(2)  # a caller's in-place edit
    again = uniform_reference("ola:1", 6, causal=True, num_layers=3)
    assert torch.equal(again, keep)


def test_orders_as_a_string_or_number_get_a_usable_suggestion():
    with pytest.raises(TypeError) as e:
        check_orders("123", 6)
    assert "orders=(1, 2, 3)" in str(e.value) and "('123',)" not in str(e.value)
    with pytest.raises(TypeError, match=r"orders=\(2,\)"):
        check_orders(2, 6)
    with pytest.raises(TypeError, match=r"orders=\(1, 2, 3\)"):
        check_orders(None, 6)


def test_mixing_none_or_a_string_get_a_usable_suggestion():
    with pytest.raises(TypeError) as e:
        mixing_plan(None, 6)
    assert "mixing=None: pass ()" in str(e.value) and "('None',)" not in str(e.value)
    with pytest.raises(TypeError, match=r"mixing=\('alti',\)"):
        mixing_plan("alti", 6)


def test_workers_as_a_string_is_refused_with_a_message():
    from olas_utils.toa.parallel import fit_many

    with pytest.raises(ValueError, match="workers must be a whole number >= 1 .* got str '2'"):
        fit_many({"a": {}}, workers="2", progress=False)


def test_a_training_job_without_cfg_is_named_before_any_training():
    from olas_utils.toa.parallel import fit_many

    with pytest.raises(ValueError, match=r"job 'a' lacks cfg: a job holds fit_adapter's keyword arguments"):
        fit_many({"a": {"examples": [], "data": None, "adapter": None}}, workers=1, progress=False)


def test_saving_maps_under_a_parent_that_is_a_file_says_so(tmp_path):
    from olas_utils.maps import OLAMaps

    (tmp_path / "f").write_text("x")
    maps = OLAMaps(
        maps={"ola:1": [torch.eye(2)]},
        tokens=[["a", "b"]],
        words=[["a", "b"]],
        word_ids=[torch.tensor([0, 1])],
        model_name="m",
        num_layers=1,
        is_causal=False,
        level="subword",
        capture_path="eager",
        dtype="float32",
    )
    with pytest.raises(NotADirectoryError, match=r"is a file, not a folder"):
        maps.save(tmp_path / "f" / "maps.pt")
