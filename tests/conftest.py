"""Shared fixtures: real zoo models loaded once per test session, and the tiny-model and
toy-example builders that tests of several layers use (as fixtures; a child process started
by a test imports the plain builder functions from this file)."""

from __future__ import annotations

import functools
import os

import pytest


@functools.lru_cache(maxsize=None)
def _load(name: str):
    from olas_utils.zoo import load_model

    return load_model(name, device="cpu")


@pytest.fixture(scope="session")
def zoo_model():
    """Callable ``name -> LoadedModel`` (cached for the session)."""
    return _load


def build_tiny_lm(kind: str = "bert"):
    """A seeded 3-layer random model (``"bert"``: a BERT encoder with minilm-l6's tokenizer;
    ``"llama"``: a Llama decoder with smollm2-135m's) as a ``LoadedModel``, eager attention;
    the same weights every call. For shapes and edge cases only, never for results."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    from olas_utils import zoo

    if kind == "bert":
        tok = AutoTokenizer.from_pretrained(zoo.prepare("minilm-l6"))
        torch.manual_seed(0)
        m = BertModel(
            BertConfig(
                vocab_size=len(tok),
                hidden_size=32,
                num_hidden_layers=3,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=512,
            )
        )
    else:
        tok = AutoTokenizer.from_pretrained(zoo.prepare("smollm2-135m"))
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        torch.manual_seed(0)
        m = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tok),
                hidden_size=32,
                num_hidden_layers=3,
                num_attention_heads=2,
                num_key_value_heads=1,
                intermediate_size=64,
                max_position_embeddings=512,
            )
        )
    m.config._attn_implementation = "eager"
    m.eval()
    return zoo.LoadedModel(
        model=m, tokenizer=tok, name=f"tiny-{kind}", source="memory", is_causal=kind != "bert", num_layers=3
    )


def tiny_adapter_config():
    """The smallest adapter the TOA tests train: 2 channels, width 8, one block, 2 heads."""
    from olas_utils.toa.adapter import AdapterConfig

    return AdapterConfig(in_channels=2, dim=8, depth=1, heads=2, reversible=False)


def build_toa_examples(kind: str, n: int = 12, n_classes: int = 3, seed: int = 0) -> list:
    """``n`` seeded toy adapter examples of a task kind (``"token"``, ``"dependency"``: a chain
    rooted at word 1, ``"relation"``: spans of the first two and last two words), 3–5 words,
    2 random channels."""
    import torch

    from olas_utils.toa.features import Example

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        w = 3 + i % 3
        img = torch.rand(2, w, w, generator=g)
        lab = torch.randint(0, n_classes, (w,) if kind != "relation" else (), generator=g)
        ex = Example(image=img, positions=torch.arange(w), labels=lab)
        if kind == "dependency":
            ex.heads = torch.tensor([0] + list(range(1, w)))  # a chain rooted at word 1
        if kind == "relation":
            ex.spans = torch.tensor([[0, 1], [w - 2, w]])
        out.append(ex)
    return out


@pytest.fixture(scope="session")
def tiny_lm():
    """Callable ``kind -> LoadedModel``: :func:`build_tiny_lm`."""
    return build_tiny_lm


@pytest.fixture(scope="session")
def tiny_adapter():
    """The tiny :class:`~olas_utils.toa.adapter.AdapterConfig` (:func:`tiny_adapter_config`)."""
    return tiny_adapter_config()


@pytest.fixture(scope="session")
def toa_examples():
    """Callable ``(kind, n=12, n_classes=3, seed=0) -> list[Example]``: :func:`build_toa_examples`."""
    return build_toa_examples


#: Markers and fixtures that mean a test needs the prepared zoo models (their weights or their
#: tokenizers in the model cache): such a test is also marked ``models``, which the fast tier
#: (``make test-fast``: ``pytest -m "not models and not slow"``) leaves out.
NEEDS_MODELS_MARKERS = ("real_model", "notebook", "browser")
NEEDS_MODELS_FIXTURES = ("zoo_model", "tiny_lm")


@functools.lru_cache(maxsize=1)
def _session_cache():
    """The model cache this test session started with (where the prepared zoo lives)."""
    from olas_utils.infra import settings

    return settings.cache_dir().resolve()


@pytest.fixture(autouse=True)
def _no_zoo_in_the_fast_tier(request, monkeypatch):
    """With ``OLAS_TEST_NO_MODELS=1`` (``make test-fast``), a test not marked ``models`` that asks
    the zoo for a model of the session's cache fails at once, naming the marker it lacks, instead of
    preparing (converting) models behind the tier's back. Preparing into another folder (a fake
    model in ``tmp_path``) goes through."""
    if os.environ.get("OLAS_TEST_NO_MODELS") != "1" or request.node.get_closest_marker("models"):
        return
    import olas_utils.zoo
    import olas_utils.zoo.load
    import olas_utils.zoo.preparation
    from olas_utils.infra import settings

    real = olas_utils.zoo.preparation.prepare
    session_cache = _session_cache()

    def guarded(name, cache_dir=None, *args, **kwargs):
        if settings.cache_dir(cache_dir).resolve() == session_cache:
            pytest.fail(
                f"{request.node.nodeid} asks the zoo for {name!r}: it needs the prepared models, so mark it "
                "@pytest.mark.models (or use a fixture that tests/conftest.py marks)",
                pytrace=False,
            )
        return real(name, cache_dir, *args, **kwargs)

    for module in (olas_utils.zoo, olas_utils.zoo.load, olas_utils.zoo.preparation):
        monkeypatch.setattr(module, "prepare", guarded)


def pytest_collection_modifyitems(config, items):
    for it in items:
        fixtures = getattr(it, "fixturenames", ())
        if any(m in it.keywords for m in NEEDS_MODELS_MARKERS) or any(f in fixtures for f in NEEDS_MODELS_FIXTURES):
            it.add_marker(pytest.mark.models)
    # keep real-model tests grouped by model to limit memory churn
    items.sort(key=lambda it: 0 if "real_model" not in it.keywords else 1)


def zoo_models_to_test() -> list[str]:
    """The default zoo models, then each optional one that is prepared in this machine's cache
    (``python -m olas_utils.zoo prepare embeddinggemma-300m``): the parametrized real-model tests
    cover an optional model wherever it is prepared, and skip it elsewhere."""
    from olas_utils.zoo import DEFAULT_MODELS, REGISTRY, is_prepared

    return list(DEFAULT_MODELS) + [n for n, e in REGISTRY.items() if not e.default and is_prepared(n)]


# --- nothing the user owns is written by the tests ------------------------------------------------
#: What a test must never write: the committed outputs, the notebooks, the front door and the docs.
COMMITTED = ("results", "figures", "notebooks", "README.md", "docs")


def _committed_state() -> str | None:
    """``git status`` of :data:`COMMITTED` (None outside a git checkout)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", *COMMITTED],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def pytest_sessionstart(session):
    # `make screenshot` (OLAS_SCREENSHOT) is the one run asked to write a committed figure
    session.config._olas_committed = None if os.environ.get("OLAS_SCREENSHOT") else _committed_state()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_olas_committed", None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    after = _committed_state()
    if after is not None and after != before:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "FAILED: the test session changed committed files (a test wrote outside its tmp_path, or "
                "something else ran beside it):\n  " + "\n  ".join(changed[:20]),
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
