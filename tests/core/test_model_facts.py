"""ModelFacts: a model's facts read once from its config and modules, carried on the loaded model,
and the one decision of which map keys it can have, with a reason for each one it cannot."""

import pytest

from olas_utils.capture.facts import ModelFacts, model_facts
from olas_utils.maths.uniform import MAX_NEUTRAL_PRODUCT


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m", "gemma3-270m"])
def test_facts_are_the_config_s_and_read_once(zoo_model, name):
    lm = zoo_model(name)
    cfg = lm.model.config.get_text_config()
    f = lm.facts
    assert lm.facts is f and model_facts(lm) is f  # read once, carried on the loaded model
    assert f.num_layers == cfg.num_hidden_layers == lm.num_layers
    assert f.num_heads == cfg.num_attention_heads
    assert f.is_causal == lm.is_causal and f.family == lm.family
    assert len(f.windows) == f.num_layers
    types = getattr(cfg, "layer_types", None)
    if types and "sliding_attention" in types:  # gemma3: windows where the config says sliding
        for w, t in zip(f.windows, types):
            assert (w is not None) == (t == "sliding_attention") and (w is None or w <= cfg.sliding_window + 1)
    else:
        assert set(f.windows) == {None}
    assert ModelFacts.of(lm.model) == f  # the same facts read again from the bare model


def test_map_keys_names_the_reason_of_each_key_it_drops(tiny_lm):
    bert, llama = tiny_lm("bert"), tiny_lm("llama")  # 3 layers each
    d = bert.facts.map_keys(["ola:1", "ola:3", "ola:4", "rollout", "layer:-3", "layer:3", "alti:2", "alti:4"])
    assert d.kept == ["ola:1", "ola:3", "rollout", "layer:-3", "alti:2"]
    assert d.dropped == {
        "ola:4": "order 4 multiplies 4 distinct layers and the model has 3",
        "layer:3": "layer 3 is outside the model's 3 layers (-3..2)",
        "alti:4": "order 4 multiplies 4 distinct layers and the model has 3",
    }
    g = llama.facts.map_keys(["globenc", "alti"])
    assert g.kept == ["alti"] and "post-LN" in g.dropped["globenc"]
    with pytest.raises(ValueError, match=r"cannot give the context-mixing key\(s\) \['globenc:2'\]: .*post-LN"):
        llama.facts.require_mixing(["alti", "flow", "globenc:2"])
    with pytest.raises(ValueError, match="not a map key|unknown"):
        bert.facts.map_keys(["olaa:1"])


def test_word_level_drops_the_product_keys_of_a_deep_causal_model(tiny_lm, monkeypatch):
    import olas_utils.maths.uniform as uniform

    llama = tiny_lm("llama")
    assert llama.facts.map_keys(["alti"], level="word").dropped == {} or llama.facts.num_layers > MAX_NEUTRAL_PRODUCT
    monkeypatch.setattr(uniform, "MAX_NEUTRAL_PRODUCT", 2)
    d = llama.facts.map_keys(["alti", "alti:1", "rollout"], level="word")
    assert d.kept == ["alti:1", "rollout"] and "product of all 3" in d.dropped["alti"]
    assert llama.facts.map_keys(["alti"], level="subword").dropped == {}
    assert tiny_lm("bert").facts.map_keys(["alti"], level="word").dropped == {}  # encoders: U·U = U
