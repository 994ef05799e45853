"""CacheSettings: one frozen value for what an image-cache run computes; the torch thread count
it records is not part of a cache's identity."""

import dataclasses

import pytest

import olas_utils.similarity.imagecache as ic


def test_settings_are_frozen_and_refuse_bad_values_before_any_work():
    s = ic.CacheSettings(orders=[1, 2], baselines=["rollout"], image_size=12, batch_size=4, torch_threads=3)
    assert s.orders == (1, 2) and s.baselines == ("rollout",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.image_size = 5
    with pytest.raises(ValueError, match="image_size must be a positive integer"):
        ic.CacheSettings(image_size=0)
    with pytest.raises(ValueError, match="unknown baseline 'rolout'"):
        ic.CacheSettings(baselines=("rolout",))
    with pytest.raises(TypeError, match="not both"):
        ic.CacheSettings.of(s, orders=(1,))
    with pytest.raises(TypeError, match=r"unknown cache setting\(s\) \['image_sise'\]"):
        ic.CacheSettings.of(None, image_sise=3)
    assert ic.CacheSettings.of(s) is s
    assert ic.CacheSettings.of(None, seed=4).seed == 4


def test_the_recorded_thread_count_is_outside_the_identity(tmp_path):
    manifest = {"model": "m", "protocol": "paper", "seed": 0}
    old = ic.default_cache_root(manifest, tmp_path)
    with_threads = dict(manifest, recorded={"torch_threads": 8})
    assert ic.default_cache_root(with_threads, tmp_path) == old  # caches written before keep their folder
    assert ic.manifest_diff(manifest, with_threads) == {}
    assert ic.manifest_diff(dict(manifest, recorded={"torch_threads": 1}), with_threads) == {}
    assert ic.manifest_diff(manifest, dict(with_threads, seed=1)) == {"seed": (0, 1)}
    # a nested field of that name is compared like any other
    assert ic.manifest_diff({"t": {"recorded": 1}}, {"t": {"recorded": 2}}) == {"t.recorded": (1, 2)}


def test_a_run_tokenises_the_corpus_once_and_opens_one_capture(tmp_path, tiny_lm, monkeypatch):
    """Five batches, two protocols: one tokenisation of the corpus and one capture for the whole run
    (it was one tokenisation for the plan, then one more and one capture per batch)."""
    import olas_utils.align as align
    import olas_utils.extract_steps as steps
    from olas_utils.capture.attention import AttentionCapture
    from olas_utils.data.corpus import build_chunks

    calls = {"tokenise": 0, "capture": 0}
    tokenise, enter = align.tokenize_words, AttentionCapture.__enter__

    def counted_tokenise(*a, **kw):
        calls["tokenise"] += 1
        return tokenise(*a, **kw)

    def counted_enter(self):
        calls["capture"] += 1
        return enter(self)

    monkeypatch.setattr(align, "tokenize_words", counted_tokenise)
    monkeypatch.setattr(steps, "tokenize_words", counted_tokenise)
    monkeypatch.setattr(AttentionCapture, "__enter__", counted_enter)
    settings = ic.CacheSettings(orders=(1, 2), baselines=("rollout",), image_size=8, batch_size=2, cache_dir=tmp_path)
    got = ic.extract_protocols(
        tiny_lm("bert"), build_chunks(n_chunks=10), protocols=["paper", "word"], settings=settings, progress=False
    )
    assert all(c.complete for c in got.values()) and len(got["paper"].plan) == 5
    assert calls == {"tokenise": 1, "capture": 1}
