"""Messages that say what to do: a maps file from a newer OLAS is named as such (not "damaged"),
and ``mixing=None`` suggests ``mixing=()`` rather than ``mixing=('None',)``."""

import pytest
import torch

from olas_utils import __version__
from olas_utils.extract_steps import mixing_keys
from olas_utils.maps import OLAMaps, _version_tuple


def test_version_order_by_hand():
    assert _version_tuple("0.12.3rc1") == (0, 12, 3)
    assert _version_tuple("1.0") == (1, 0)
    assert _version_tuple("2.0.0") > _version_tuple("1.9.9") > _version_tuple(__version__)


def test_a_maps_file_from_a_newer_version_says_upgrade(tmp_path):
    path = tmp_path / "maps.pt"
    torch.save({"maps": {}, "library_version": "99.0.0", "a_field_of_the_future": 1}, path)
    with pytest.raises(ValueError, match=r"newer OLAS \(99\.0\.0\).*upgrade"):
        OLAMaps.load(path)


def test_mixing_none_suggests_an_empty_tuple():
    with pytest.raises(TypeError, match=r"mixing=\(\)") as e:
        mixing_keys(None)
    assert "'None'" not in str(e.value)


def test_float16_overflow_past_the_causal_mask_is_named_not_called_a_causality_setting():
    """A tiny Llama (toy model: an edge case) whose query/key/MLP weights are scaled so float16
    scores overflow: the causal mask no longer holds, and the error says overflow."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from olas_utils import extract_ola

    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="eager",
        pad_token_id=63,
        bos_token_id=61,
        eos_token_id=62,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("q_proj", "k_proj", "up_proj", "down_proj")):
                p.mul_(3000.0)
    vocab = {f"w{i}": i for i in range(60)} | {"[UNK]": 60, "<s>": 61, "</s>": 62, "[PAD]": 63}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>", eos_token="</s>"
    )
    sents = [[f"w{i}" for i in range(10)], [f"w{i}" for i in range(4)]]
    # in float32 the same weights keep the mask: the maps are causal and finite
    ok = extract_ola(model.model, tokenizer, sents, orders=(1,), check_tokenizer=False)
    assert torch.isfinite(ok["ola:1"][0]).all() and torch.triu(ok["ola:1"][0], 1).abs().max() == 0
    with pytest.raises(FloatingPointError, match="float16.*overflowed"):
        extract_ola(model.half().model, tokenizer, sents, orders=(1,), check_tokenizer=False)


def test_statistics_name_what_is_wrong_with_their_input(tmp_path):
    import numpy as np
    import pandas as pd

    from olas_utils.stats.uncertainty import interval
    from olas_utils.studies import crosslm_stats, summary

    with pytest.raises(ValueError, match="must hold numbers"):
        interval(["a", "b", "c", "d", "e"])
    items = pd.DataFrame({"target": ["a"] * 6, "source": ["b"] * 6, "chunk": range(6), "rank": [0, 1, np.nan, 0, 2, 0]})
    with pytest.raises(ValueError, match="1 item.*no rank or chunk"):
        crosslm_stats.outcome_array(items)
    (tmp_path / "02_verdict.csv").write_text('protocol,family,verdict\npaper,encoder,"beats\n')
    with pytest.raises(ValueError, match="02_verdict.csv is not a readable table"):
        summary.results_summary(tmp_path)
