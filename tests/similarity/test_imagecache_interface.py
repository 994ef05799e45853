"""The image cache's public interface: a tiny cache written, opened, verified and merged from
shards through ``olas_utils.similarity.imagecache`` names only; and no module of the
similarity layer (or the CLI) imports another module's underscore-prefixed name."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import olas_utils.similarity.imagecache as ic
from olas_utils.data.corpus import build_chunks

PKG = Path(__file__).resolve().parents[2] / "olas_utils"
KEYS = ["ola:1", "ola:2", "rollout"]
SETTINGS = dict(orders=(1, 2), baselines=("rollout",), image_size=12, batch_size=4, progress=False)


@pytest.fixture(scope="module")
def bert(tiny_lm):
    return tiny_lm("bert")


@pytest.fixture(scope="module")
def chunks():
    return build_chunks(n_chunks=10)


@pytest.fixture(scope="module")
def single(tmp_path_factory, bert, chunks):
    return ic.extract_to_cache(bert, chunks, cache_root=tmp_path_factory.mktemp("single") / "c", **SETTINGS)


def test_write_open_read_equals_the_pipeline_run_by_hand(single, bert, chunks):
    from olas_utils.extract import extract_ola
    from olas_utils.similarity.images import to_image

    c = ic.open_cache(single.root)
    assert isinstance(c, ic.CachedImages) and c.complete and c.keys == KEYS and c.n_chunks == len(chunks)
    assert c.manifest["format"] == ic.FORMAT_VERSION
    # the same batches recomputed here, outside the cache: every image must be bit-identical
    seen = []
    for batch in c.plan:
        res = extract_ola(
            bert.model,
            bert.tokenizer,
            [chunks[i] for i in batch],
            orders=(1, 2),
            rollout=True,
            layers=(),
            level="subword",
            batch_size=len(batch),
            progress=False,
            model_name="tiny-bert",
        )
        for j, i in enumerate(batch):
            seen.append(i)
            for key in KEYS:
                want = to_image(res[key][j], causal=False, image_size=12, protocol="paper").numpy()
                assert np.array_equal(c.images(key)[i], want), (key, i)
            assert c.lengths()[i] == res["ola:1"][j].shape[-1]
    assert sorted(seen) == list(range(len(chunks)))
    assert c.stack().shape == (len(chunks), len(KEYS), 12, 12)
    assert (single.root / ic.key_filename("ola:2")).is_file() and ic.key_filename("layer:-1") == "layer_-1.npy"


def test_verify_detects_a_changed_array(tmp_path, single):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(single.root, root)
    ic.open_cache(root).verify()  # intact
    recorded = ic.open_cache(root).progress["files"]
    ic.verify_files(root, recorded)
    path = root / ic.key_filename("rollout")
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # one byte of the last image, same size
    path.write_bytes(bytes(raw))
    with pytest.raises(ic.CacheCorruptError, match="rollout.npy.*SHA-256"):
        ic.verify_files(root, recorded)
    with pytest.raises(ic.CacheCorruptError, match="rollout.npy"):
        ic.open_cache(root)


def test_other_settings_are_refused_and_named(single, bert, chunks):
    with pytest.raises(ic.CacheMismatchError) as e:
        ic.extract_to_cache(bert, chunks, cache_root=single.root, **{**SETTINGS, "image_size": 10})
    assert e.value.fields["image_size"] == (12, 10) and e.value.path == single.root
    stored = dict(single.manifest)
    assert ic.manifest_diff(stored, {**stored, "seed": 7}) == {"seed": (stored["seed"], 7)}
    assert ic.manifest_diff({"t": {"a": 1}}, {"t": {"a": 2}, "x": 0}) == {"t.a": (1, 2), "x": ("<absent>", 0)}


def test_default_root_is_the_sha256_of_the_canonical_manifest(tmp_path, bert, chunks):
    manifest = {"model": "Org/Some model ü", "protocol": "word", "b": [1, {"é": None}], "a": 0.5}
    text = json.dumps(manifest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    assert ic.default_cache_root(manifest, tmp_path) == tmp_path / "ola" / "Org_Some_model" / f"word-{digest}"
    # a real run lands in the folder its stored manifest names
    c = ic.extract_protocols(bert, chunks[:4], protocols=["paper"], cache_dir=tmp_path, **SETTINGS)["paper"]
    assert c.root == ic.default_cache_root(c.manifest, tmp_path)
    assert ic.cache_complete(
        bert,
        chunks[:4],
        protocols=["paper"],
        cache_dir=tmp_path,
        **{k: v for k, v in SETTINGS.items() if k != "progress"},
    )
    assert not ic.cache_complete(
        bert,
        chunks[:4],
        protocols=["word"],
        cache_dir=tmp_path,
        **{k: v for k, v in SETTINGS.items() if k != "progress"},
    )
    tok = ic.tokenizer_settings(bert.tokenizer)
    assert tok == c.manifest["tokenizer"] and tok["vocab_size"] == len(bert.tokenizer)


def test_two_shards_merge_into_the_single_process_cache(tmp_path, single, bert, chunks):
    root = tmp_path / "merged"
    shards = [ic.extract_to_cache(bert, chunks, cache_root=root, shard=(i, 2), **SETTINGS) for i in range(2)]
    assert [s.root for s in shards] == [ic.shard_root(root, i, 2) for i in range(2)]
    assert ic.parse_shard_root(shards[1].root) == (root, 1, 2)
    with pytest.raises(ValueError, match="not a shard folder"):
        ic.parse_shard_root(root)
    merged = ic.merge_shards(shards[1].root)
    assert merged.root == root and merged.complete and merged.plan == single.plan
    for key in KEYS:
        assert np.array_equal(np.asarray(merged.images(key)), np.asarray(single.images(key))), key
    assert np.array_equal(merged.lengths(), single.lengths())
    # the shards computed disjoint halves of the plan
    done = [s.done for s in shards]
    assert not (done[0] & done[1]).any() and (done[0] | done[1]).all()


def test_the_interface_is_complete_and_the_old_modules_are_gone():
    for name in ic.__all__:
        assert getattr(ic, name) is not None, name
    assert {
        "extract_protocols",
        "extract_to_cache",
        "cache_complete",
        "open_cache",
        "CachedImages",
        "verify_files",
        "merge_shards",
        "CacheMismatchError",
        "CacheCorruptError",
        "CacheBusyError",
        "default_cache_root",
    } <= set(ic.__all__)
    for old in ("cache", "cache_folder", "cache_plan", "cache_reader", "shards", "manifest"):
        assert importlib.util.find_spec(f"olas_utils.similarity.{old}") is None, old


# -- no module imports another module's private name ------------------------------------------------


def private_imports(source: str) -> list[str]:
    """``module.name`` of every underscore-prefixed (not dunder) name imported from an
    olas_utils module, at any depth of the source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("olas_utils")):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{'.' * node.level}{node.module or ''}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("olas_utils") and any(
                    p.startswith("_") and not p.startswith("__") for p in alias.name.split(".")
                ):
                    out.append(alias.name)
    return out


def test_the_private_import_finder_finds_them():
    src = (
        "from olas_utils.a import b, _c\nimport olas_utils._d\ndef f():\n    from .e import _g\n"
        "from olas_utils import __version__\nfrom os import _exit\n"
    )
    assert sorted(private_imports(src)) == [".e._g", "olas_utils._d", "olas_utils.a._c"]


def test_no_private_name_crosses_a_module_boundary():
    files = sorted((PKG / "similarity").rglob("*.py")) + [PKG / "ui" / "cli.py"]
    assert PKG / "similarity" / "imagecache" / "write.py" in files
    bad = {str(f.relative_to(PKG.parent)): found for f in files if (found := private_imports(f.read_text()))}
    assert not bad, bad
