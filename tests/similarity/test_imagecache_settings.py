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
