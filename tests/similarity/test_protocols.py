"""Notebook 02's protocols and controls: the released pre-processing against a hand-built
reference, first-index-wins ties, one forward pass for every protocol (bit-identical to
one protocol at a time), resuming protocols at different stages, control copies built only
when their caches are incomplete, and the tokenizer-only control under neutral pooling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from olas_utils.similarity import hit_at_k, retrieval_table, true_match_ranks
from olas_utils.similarity.imagecache import cache_complete, extract_protocols, extract_to_cache
from olas_utils.similarity.images import to_image

KEYS = ["ola:1", "ola:2", "rollout"]
SETTINGS = dict(orders=(1, 2), baselines=("rollout",), batch_size=4, progress=False)


def test_first_index_wins_ties_by_hand():
    sim = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.5, 0.9, 0.5]])
    # row 0: tie with key 1 but key 0 comes first -> rank 0; row 1: key 0 ties earlier -> 1;
    # row 2: key 1 higher, key 0 ties earlier -> 2
    assert true_match_ranks(sim, ties="first").tolist() == [0, 1, 2]
    assert true_match_ranks(sim, ties="optimistic").tolist() == [0, 0, 1]
    assert true_match_ranks(sim, ties="pessimistic").tolist() == [1, 1, 2]
    assert hit_at_k(np.ones((4, 4)), 1, ties="first") == 0.25
    with pytest.raises(ValueError, match="ties must be one of"):
        true_match_ranks(sim, ties="random")


def test_released_preprocessing_by_hand():
    # a causal 4x4 map; the released code treats it as bidirectional
    m = torch.tensor([[1.0, 0, 0, 0], [0.2, 0.8, 0, 0], [0.1, 0.1, 0.8, 0], [0.25, 0.25, 0.25, 0.25]])
    img = to_image(m, causal=True, image_size=4, protocol="released")
    # outliers over the whole row (mean + 3 sd can never be exceeded by 4 values) plus the
    # row argmax (first max) are zeroed, then rows renormalised; no symmetrisation
    ref = m.clone()
    for i in range(4):
        ref[i, int(torch.argmax(ref[i]))] = 0
    ref = ref / ref.sum(-1, keepdim=True).clamp_min(1e-30)
    ref = torch.nan_to_num(ref)
    torch.testing.assert_close(img, ref)
    assert not torch.allclose(img, img.T)  # never symmetrised
    ours = to_image(m, causal=True, image_size=4, protocol="paper")
    torch.testing.assert_close(ours, ours.T)  # ours mirrors the lower triangle
    # the resize is the bilinear antialiased one (same as torch's interpolate)
    big = torch.rand(70, 70, generator=torch.Generator().manual_seed(0))
    small = to_image(big, causal=False, image_size=50, protocol="released")
    pre = to_image(big, causal=False, image_size=70, protocol="released")
    ref = torch.nn.functional.interpolate(
        pre[None, None], size=(50, 50), mode="bilinear", align_corners=False, antialias=True
    )[0, 0]
    torch.testing.assert_close(small, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.real_model
def test_one_forward_pass_serves_every_protocol(zoo_model, tmp_path):
    from olas_utils.data.corpus import build_chunks

    lm = zoo_model("minilm-l6")
    chunks = build_chunks(n_chunks=8, seed=0)
    calls = []
    handle = lm.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        multi = extract_protocols(
            lm, chunks, protocols=["released", "paper", "word"], cache_dir=tmp_path / "m", **SETTINGS
        )
        n_multi = len(calls)
        calls.clear()
        single = {
            p: extract_to_cache(lm, chunks, protocol=p, cache_dir=tmp_path / "s", **SETTINGS)
            for p in ("released", "paper", "word")
        }
        n_single = len(calls)
    finally:
        handle.remove()
    assert n_multi == 2 and n_single == 3 * n_multi  # 8 chunks in batches of 4
    for p in single:
        for key in KEYS:
            assert np.array_equal(np.asarray(multi[p].images(key)), np.asarray(single[p].images(key))), (p, key)
    # the same call again runs nothing
    calls.clear()
    handle = lm.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        extract_protocols(lm, chunks, protocols=["released", "paper", "word"], cache_dir=tmp_path / "m", **SETTINGS)
        # a new protocol next to complete ones: one pass, only the new folder is written
        assert not calls
        assert cache_complete(
            lm,
            chunks,
            protocols=["paper", "word"],
            cache_dir=tmp_path / "s",
            **{k: v for k, v in SETTINGS.items() if k != "progress"},
        )
        assert not cache_complete(
            lm,
            chunks,
            protocols=["paper"],
            cache_dir=tmp_path / "nowhere",
            **{k: v for k, v in SETTINGS.items() if k != "progress"},
        )
    finally:
        handle.remove()


@pytest.mark.real_model
def test_protocols_resume_from_different_stages(zoo_model, tmp_path):
    from olas_utils.data.corpus import build_chunks

    lm = zoo_model("minilm-l6")
    chunks = build_chunks(n_chunks=12, seed=1)

    class Stop(Exception):
        pass

    def stop_after_1(done, total):
        if done == 1:
            raise Stop

    extract_to_cache(lm, chunks, protocol="paper", cache_dir=tmp_path, **SETTINGS)  # complete
    with pytest.raises(Stop):
        extract_to_cache(lm, chunks, protocol="word", cache_dir=tmp_path, on_batch=stop_after_1, **SETTINGS)
    both = extract_protocols(lm, chunks, protocols=["paper", "word", "released"], cache_dir=tmp_path, **SETTINGS)
    fresh = extract_protocols(lm, chunks, protocols=["paper", "word", "released"], cache_dir=tmp_path / "f", **SETTINGS)
    for p in both:
        assert both[p].progress["complete"]
        for key in KEYS:
            assert np.array_equal(np.asarray(both[p].images(key)), np.asarray(fresh[p].images(key))), (p, key)


@pytest.mark.real_model
def test_controls_built_only_when_incomplete_and_uniform_is_neutral(tmp_path, monkeypatch):
    from olas_utils.data.corpus import build_chunks
    from olas_utils.studies import crosslm
    from olas_utils.vocabulary import Control
    from olas_utils.zoo import controls

    chunks = build_chunks(n_chunks=10, seed=0)
    kw = dict(
        orders=[1],
        baselines=["rollout"],
        protocols=["released", "paper", "word"],
        controls=["uniform", "random"],
        batch_size=5,
        progress=False,
        cache_dir=tmp_path,
    )
    first = crosslm.extract_images(["minilm-l6", "mpnet-base"], chunks, **kw)
    assert ("minilm-l6", "random") in first.built and ("mpnet-base", "random") in first.built

    def boom(*a, **k):
        raise AssertionError("a control copy was built although its caches are complete")

    monkeypatch.setitem(controls.CONTROLS, Control.RANDOM_WEIGHTS, boom)
    again = crosslm.extract_images(["minilm-l6", "mpnet-base"], chunks, **kw)
    assert again.built == []
    for key in ("ola:1", "rollout"):
        for c in ("none", "random"):
            a, b = first.images(c, "word", key), again.images(c, "word", key)
            assert all(np.array_equal(a[m], b[m]) for m in a)
        # tokenizer-only control, word protocol: every chunk's image is the same (50 words,
        # neutral pooling), so retrieval finds nothing (pessimistic ties) ...
        imgs = again.images("uniform", "word", key)
        for m, x in imgs.items():
            assert np.array_equal(x, np.broadcast_to(x[0], x.shape)), m
        rows = retrieval_table(imgs, metric="ssim", progress=False)
        assert all(r["hit@1"] == 0.0 for r in rows)
        # ... while at subword level uniform maps still differ with each chunk's token count
        sub = again.images("uniform", "paper", key)
        assert any(not np.array_equal(x, np.broadcast_to(x[0], x.shape)) for x in sub.values())
    # the trained models are not uniform
    real = again.images("none", "word", "ola:1")
    assert not np.array_equal(real["minilm-l6"][0], real["minilm-l6"][1])
