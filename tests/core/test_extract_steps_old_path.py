"""The three-step extract_ola against the one-piece extract_ola it replaced (loaded from git at
commit 21235e0), on real zoo models and real sentences: every map equal bit for bit."""

import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from olas_utils.extract import extract_ola

OLD_COMMIT = "21235e0"
ROOT = Path(__file__).resolve().parents[2]


def _old_module():
    try:
        src = subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:olas_utils/extract.py"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the old extract.py is not in this checkout's git history")
    mod = types.ModuleType("olas_utils_extract_old")
    sys.modules[mod.__name__] = mod
    exec(compile(src, "old_extract.py", "exec"), mod.__dict__)
    return mod


@pytest.fixture(scope="module")
def sentences():
    from olas_utils.data import load_ud_ewt

    words = load_ud_ewt("dev")["words"]
    return [list(w) for w in words if 3 <= len(w) <= 25][:6]


CASES = [
    dict(orders=(1, 2, 3), mixing=("alti", "valuenorm", "alti:2")),
    dict(orders=(0, 1, 2), level="word", mixing=("valuenorm",), batch_size=4),
    dict(orders=(1, 2, 3), attention="uniform", batch_size=3),
    dict(orders=(1,), mixing=("flow", "alti"), layers=(), batch_size=2, n=3),
]


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["minilm-l6", "smollm2-135m"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_three_steps_equal_the_old_extract_ola(zoo_model, name, case, sentences):
    old = _old_module()
    lm = zoo_model(name)
    kw = dict(CASES[case])
    sentences = sentences[: kw.pop("n", len(sentences))]
    a = old.extract_ola(lm, sentences, progress=False, **kw)
    b = extract_ola(lm, sentences, progress=False, **kw)
    assert list(a.maps) == list(b.maps)
    for key in a.maps:
        assert len(a[key]) == len(b[key]) == len(sentences)
        for i, (x, y) in enumerate(zip(a[key], b[key])):
            assert x.dtype == y.dtype and torch.equal(x, y), (name, key, i)
    for field in ("tokens", "words", "model_name", "num_layers", "is_causal", "level", "capture_path", "dtype"):
        assert getattr(a, field) == getattr(b, field), field
    for x, y in zip(a.word_ids, b.word_ids):
        assert torch.equal(x, y)
