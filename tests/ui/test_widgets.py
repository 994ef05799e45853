"""The interactive explorer, headless: setting widget values redraws, and what is drawn
equals extract_ola + sinks.preprocess computed directly."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from olas_utils.extract import extract_ola  # noqa: E402
from olas_utils.maths.sinks import preprocess  # noqa: E402

SENT = "The old man gave his granddaughter a wooden boat ."


def expected(lm, words, key, level, remove_sinks):
    res = extract_ola(lm.model, lm.tokenizer, [words], orders=(1, 2, 3), level=level, progress=False)
    m = res[key][0]
    if remove_sinks:
        m = preprocess(m[None], causal=lm.is_causal, remove_sinks=True, symmetrize=False)[0]
    return m, res.labels(0)


def drawn(explorer, i):
    """The array of the i-th heatmap of the explorer's figure."""
    ax = [a for a in explorer.figure.axes if a.images][i]  # colour bars hold no image
    return torch.from_numpy(np.asarray(ax.images[0].get_array(), dtype=np.float32))


@pytest.fixture
def counting_loader(zoo_model):
    calls = []

    def load(name):
        calls.append(name)
        return zoo_model(name)

    load.calls = calls
    return load


@pytest.mark.real_model
def test_explorer_draws_what_the_library_computes(zoo_model, counting_loader):
    from olas_utils.ui.widgets import OLAExplorer

    ex = OLAExplorer("minilm-l6", sentence=SENT, loader=counting_loader, models=["minilm-l6", "smollm2-135m"])
    lm = zoo_model("minilm-l6")
    words = SENT.split()
    assert ex.error is None and bytes(ex.image.value[:4]) == b"\x89PNG"
    m, labels = expected(lm, words, "ola:1", "word", True)
    torch.testing.assert_close(drawn(ex, 0), m, rtol=0, atol=1e-6)
    torch.testing.assert_close(ex.current_maps["minilm-l6"], m, rtol=0, atol=0)
    assert ex.current_labels["minilm-l6"] == words
    assert [t.get_text() for t in ex.figure.axes[0].get_xticklabels()] == words

    # each control fires an update
    ex.key.value = "ola:2"
    torch.testing.assert_close(drawn(ex, 0), expected(lm, words, "ola:2", "word", True)[0], rtol=0, atol=1e-6)
    ex.remove_sinks.value = False
    torch.testing.assert_close(drawn(ex, 0), expected(lm, words, "ola:2", "word", False)[0], rtol=0, atol=1e-6)
    ex.level.value = "subword"
    m, tokens = expected(lm, words, "ola:2", "subword", False)
    torch.testing.assert_close(drawn(ex, 0), m, rtol=0, atol=1e-6)
    assert ex.current_labels["minilm-l6"] == tokens and tokens[0] == "[CLS]"
    ex.key.value = "rollout"
    res = extract_ola(lm.model, lm.tokenizer, [words], orders=(1,), level="subword", progress=False)
    torch.testing.assert_close(
        drawn(ex, 0), res["rollout"][0], rtol=0, atol=1e-4 * res["rollout"][0].abs().max().item()
    )
    new = "Rain fell all night ."
    ex.set(sentence=new, key="ola:3", level="word", remove_sinks=True)
    torch.testing.assert_close(drawn(ex, 0), expected(lm, new.split(), "ola:3", "word", True)[0], rtol=0, atol=1e-6)

    # a second model side by side (causal: sinks on the lower triangle, no symmetrisation)
    ex.compare.value = "smollm2-135m"
    causal = zoo_model("smollm2-135m")
    assert list(ex.current_maps) == ["minilm-l6", "smollm2-135m"]
    m2 = expected(causal, new.split(), "ola:3", "word", True)[0]
    torch.testing.assert_close(drawn(ex, 1), m2, rtol=0, atol=1e-6)
    assert torch.triu(drawn(ex, 1), 1).abs().max() == 0
    torch.testing.assert_close(drawn(ex, 0), expected(lm, new.split(), "ola:3", "word", True)[0], rtol=0, atol=1e-6)

    # swapping which model is first, and back: each model was loaded exactly once
    ex.set(model="smollm2-135m", compare="minilm-l6")
    torch.testing.assert_close(drawn(ex, 0), m2, rtol=0, atol=1e-6)
    ex.set(model="minilm-l6", compare=None)
    assert list(ex.current_maps) == ["minilm-l6"]
    assert sorted(counting_loader.calls) == ["minilm-l6", "smollm2-135m"]


@pytest.mark.real_model
def test_explorer_shows_errors_and_keeps_the_last_figure(counting_loader):
    from olas_utils.ui.widgets import OLAExplorer

    ex = OLAExplorer("minilm-l6", sentence=SENT, loader=counting_loader, models=["minilm-l6"])
    fig = ex.figure
    ex.sentence.value = "   "
    assert "no words" in ex.error and "no words" in ex.status.value and ex.figure is fig
    ex.sentence.value = "a \u200b b"  # a word BERT's normaliser deletes
    assert "yields no subword" in ex.error
    ex.sentence.value = "back to normal ."
    assert ex.error is None and ex.figure is not fig
    with pytest.raises(ValueError, match="unknown control"):
        ex.set(colour="red")


def test_explorer_argument_errors():
    from olas_utils.ui.widgets import OLAExplorer

    def never(name):
        raise AssertionError("no model should be loaded")

    with pytest.raises(ValueError, match="key must be one of"):
        OLAExplorer(key="ola:9", loader=never)
    with pytest.raises(ValueError, match="level must be"):
        OLAExplorer(level="char", loader=never)


def test_models_are_loaded_lazily_and_load_errors_are_shown():
    from olas_utils.ui.widgets import OLAExplorer

    calls = []

    def failing(name):
        calls.append(name)
        raise FileNotFoundError(f"model folder {name} does not exist")

    ex = OLAExplorer("nope", loader=failing, models=["nope"])
    assert calls == ["nope"] and "does not exist" in ex.error and ex.figure is None


@pytest.mark.real_model
def test_explorer_truncation_warn_cuts_long_texts_and_says_so(zoo_model, counting_loader):
    from olas_utils.extract import max_tokens
    from olas_utils.ui.widgets import OLAExplorer

    lm = zoo_model("minilm-l6")
    limit = max_tokens(lm.model, lm.tokenizer)
    assert limit == 512
    words = [f"w{i % 10}" for i in range(600)]  # "w3" is two tokens ("w", "##3"): 1200 + 2 > 512
    long_text = " ".join(words)

    strict = OLAExplorer("minilm-l6", sentence=SENT, loader=counting_loader, models=["minilm-l6"], max_order=2)
    strict.sentence.value = long_text
    assert "512" in strict.error and "truncation='warn'" in strict.error and strict.warning is None
    with pytest.raises(ValueError, match="truncation must be"):
        OLAExplorer("minilm-l6", loader=counting_loader, truncation="cut")

    ex = OLAExplorer(
        "minilm-l6", sentence=long_text, loader=counting_loader, models=["minilm-l6"], max_order=2, truncation="warn"
    )
    assert ex.error is None
    # independent reference: the longest prefix of whole words that fits, counted with the tokenizer
    n_tok = [len(lm.tokenizer(w, add_special_tokens=False)["input_ids"]) for w in words]
    keep = int(np.searchsorted(np.cumsum(n_tok), limit - 2, side="right"))
    assert keep == 255 and ex.current_labels["minilm-l6"] == words[:keep]
    torch.testing.assert_close(drawn(ex, 0), expected(lm, words[:keep], "ola:1", "word", True)[0], rtol=0, atol=1e-6)
    assert f"first {keep} of 600 words" in ex.warning and "512" in ex.warning
    assert "warning" in ex.status.value and f"first {keep} of 600 words" in ex.caption
    ex.sentence.value = SENT  # a text that fits: no warning any more
    assert ex.warning is None and "warning" not in ex.status.value
