"""Notebook 02's comparison across the families (encoders against causal LMs): the causal view of
an encoder's image by hand and as a fixed point of the protocols' own causal images, the pairs the
items hold, and the reading of the tables with and without a lineage on both sides."""

import numpy as np
import pytest
import torch
from _support.studies import FakeImages as _Images
from _support.studies import cross_items as _cross_items

from olas_utils.similarity import retrieval_ranks
from olas_utils.similarity.images import SYMMETRISED, causal_view, to_image
from olas_utils.stats.uncertainty import BEATS
from olas_utils.studies import crossfamily, crosslm


def test_causal_view_by_hand():
    m = np.arange(1.0, 10.0).reshape(3, 3)
    want = np.array([[1.0, 4.0, 7.0], [4.0, 5.0, 8.0], [7.0, 8.0, 9.0]])
    np.testing.assert_array_equal(causal_view(m), want)
    batch = causal_view(np.stack([m, 2 * m]))
    np.testing.assert_array_equal(batch[1], 2 * want)
    assert np.array_equal(m, np.arange(1.0, 10.0).reshape(3, 3))  # the input is not modified
    with pytest.raises(ValueError, match="S, S"):
        causal_view(np.zeros((2, 3, 4)))


@pytest.mark.parametrize("protocol", SYMMETRISED)
@pytest.mark.parametrize("size", [12, 50])
def test_a_causal_models_own_image_is_its_causal_view(protocol, size):
    """The protocols' image of a causal map (resized or not) is already in the causal form."""
    g = torch.Generator().manual_seed(1)
    a = torch.tril(torch.rand(12, 12, generator=g))
    a = a / a.sum(-1, keepdim=True)
    img = to_image(a, causal=True, image_size=size, protocol=protocol).numpy()
    np.testing.assert_allclose(causal_view(img), img, atol=1e-7)
    enc = to_image(torch.rand(12, 12, generator=g), causal=False, image_size=size, protocol=protocol).numpy()
    assert not np.allclose(causal_view(enc), enc)  # an encoder's image is not


def _image_set():
    """Encoders e1, e2 and causal c1, c2 on 8 chunks: each encoder's lower triangle is c1's (the
    causal form of the same chunk), its upper triangle that of another chunk (the next one for e1,
    the one after for e2); the tokenizer-only control's images are one flat image per model."""
    rng = np.random.default_rng(0)
    low = np.tril(rng.random((8, 16, 16)))
    sym = (low + np.swapaxes(np.tril(low, -1), -1, -2)).astype(np.float32)
    enc = {m: np.tril(sym) + np.triu(np.roll(sym, k, axis=0), 1) for k, m in ((1, "e1"), (2, "e2"))}
    cau = {"c1": sym, "c2": sym + 0.01 * rng.random(sym.shape).astype(np.float32)}
    flat = np.ones((8, 16, 16), np.float32)
    caches = {}
    for protocol in ("released", "paper", "word"):
        caches[("none", protocol)] = {m: _Images({"ola:1": x}) for m, x in {**enc, **cau}.items()}
        caches[("uniform", protocol)] = {m: _Images({"ola:1": flat}) for m in (*enc, *cau)}
    families = {"e1": "encoder", "e2": "encoder", "c1": "causal", "c2": "causal"}
    return crosslm.ImageSet(caches=caches, families=families, keys=["ola:1"]), enc, cau


def test_cross_family_items_pair_every_encoder_with_every_causal_model_both_ways():
    s, enc, cau = _image_set()
    it = crossfamily.cross_family_items(s, progress=False)
    assert set(it.family) == {crossfamily.CROSS_FAMILY}
    assert set(it.protocol) == {"paper", "word"}  # released treats causal maps as bidirectional: never used
    pairs = set(zip(it.target, it.source))
    want = {(e, c) for e in enc for c in cau} | {(c, e) for e in enc for c in cau}
    assert pairs == want and len(it) == 2 * 2 * len(want) * 8  # (2 protocols × 2 controls) × 8 ordered pairs × 8 chunks
    trained = it[(it.control == "none") & (it.source == "c1")]
    assert (trained["rank"] == 0).all()  # the encoder's causal view is c1's image: every chunk found
    # the view is what finds them: e1's images as they are lose chunks to their upper triangles
    plain = retrieval_ranks({"e1": enc["e1"], "c1": cau["c1"]}, metric="ssim", progress=False)
    assert any((r["ranks"] > 0).any() for r in plain)
    with pytest.raises(ValueError, match="symmetrises"):
        crossfamily.cross_family_items(s, protocols=["released"], progress=False)


def test_one_family_alone_has_no_cross_family_items():
    s, _, _ = _image_set()
    s.families = {m: "encoder" for m in s.families}
    it = crossfamily.cross_family_items(s, progress=False)
    assert len(it) == 0 and tuple(it.columns) == crosslm.RETRIEVAL_ITEM_COLUMNS
    tables = crossfamily.cross_family_tables(it)
    assert all(len(t) == 0 for t in tables.values())
    assert "no (encoder, causal LM) pair" in crossfamily.cross_family_markdown(**tables)


def test_the_reading_names_a_lineage_on_both_sides_and_its_gap():
    """embeddinggemma-300m and gemma3-270m (one lineage, one tokenizer) retrieve each other far
    better than the across-lineage pairs: the text reports the within cell, each direction, the gap."""
    gemma = {"embeddinggemma-300m", "gemma3-270m"}
    it = _cross_items(
        ["minilm-l6", "embeddinggemma-300m"],
        ["smollm2-135m", "gemma3-270m"],
        lambda t, s: 0.9 if {t, s} == gemma else 0.3,
    )
    tables = crossfamily.cross_family_tables(it)
    lin = tables["lineage"]
    assert set(lin.lineage) == {"within", "across"}
    within = lin[lin.lineage == "within"].iloc[0]
    assert within["models"] == "embeddinggemma-300m, gemma3-270m" and within["verdict"] == BEATS
    assert tables["gap"].iloc[0]["verdict"] == BEATS and tables["gap"].iloc[0]["gap"] > 0.4
    text = crossfamily.cross_family_markdown(**tables)
    assert "One lineage on both sides** (embeddinggemma-300m, gemma3-270m)" in text
    assert "word, embeddinggemma-300m → gemma3-270m: OLA" in text and "word, gemma3-270m → embeddinggemma-300m" in text
    assert "same lineage − different lineages" in text and "share one tokenizer" in text
    assert "No encoder in this run shares a lineage" not in text


def test_the_reading_says_when_no_lineage_is_on_both_sides():
    it = _cross_items(["minilm-l6", "mpnet-base"], ["smollm2-135m", "gemma3-270m"], lambda t, s: 0.3)
    tables = crossfamily.cross_family_tables(it)
    assert set(tables["lineage"].lineage) == {"across"} and len(tables["gap"]) == 0
    text = crossfamily.cross_family_markdown(**tables)
    assert "No encoder in this run shares a lineage with a causal LM" in text and "PROFILE=gemma" in text
    assert "word, order 1, 8 pairs: OLA" in text
