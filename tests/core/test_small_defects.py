"""Issue 40's small defects: a mixing key a model cannot give is refused alone (the others are
named as extractable), and a model folder without tokenizer files is refused at load."""

from __future__ import annotations

import pytest
import torch

from olas_utils.extract import extract_ola


@pytest.mark.real_model
def test_only_the_mixing_key_gemma_cannot_give_is_refused(zoo_model):
    lm = zoo_model("gemma3-270m")
    keys = ("valuenorm", "alti", "alti:2", "globenc")
    with pytest.raises(ValueError) as e:
        extract_ola(lm, ["The cat sat."], mixing=keys, progress=False)
    msg = str(e.value)
    assert "cannot give the mixing key(s) ['globenc']:" in msg
    assert "post-LN" in msg and "mixing=('valuenorm', 'alti', 'alti:2')" in msg
    # the capture itself names only the failing method too
    from olas_utils.capture.attention import AttentionCapture

    with pytest.raises(ValueError, match=r"cannot extract \['globenc'\]: globenc"):
        AttentionCapture(lm.model, max_order=1, mixing=["alti", "globenc"])
    # and the keys it can give are extracted: rows of the alti maps are distributions over earlier tokens
    res = extract_ola(lm, ["The cat sat."], mixing=keys[:3], orders=(1,), progress=False)
    assert res.keys()[-3:] == ["valuenorm", "alti", "alti:2"]
    a = res["alti"][0]
    assert torch.allclose(a.sum(-1), torch.ones(a.shape[0]), atol=1e-4)
    assert torch.equal(a, a.tril())


def _copy_without_tokenizer(tmp_path):
    from olas_utils import zoo
    from olas_utils.zoo.load import TOKENIZER_FILES

    src = zoo.prepare("minilm-l6")
    dst = tmp_path / "weights-only"
    dst.mkdir()
    tokenizerish = set(TOKENIZER_FILES) | {"tokenizer_config.json", "special_tokens_map.json"}
    for p in src.iterdir():
        if p.is_file() and p.name != "olas_prepared.json" and p.name not in tokenizerish:
            (dst / p.name).symlink_to(p)
    return src, dst


@pytest.mark.real_model
def test_a_folder_without_tokenizer_files_is_refused_at_load(tmp_path):
    from olas_utils.zoo import load_model

    src, dst = _copy_without_tokenizer(tmp_path)
    assert not (dst / "vocab.txt").exists() and not (dst / "tokenizer.json").exists()
    with pytest.raises(FileNotFoundError, match=r"this folder has no tokenizer files: pass `tokenizer=`") as e:
        load_model(dst, device="cpu")
    assert str(dst) in str(e.value) and "\n" not in str(e.value)
    # with the tokenizer named, it loads it: MiniLM's 30,522-entry WordPiece vocabulary
    lm = load_model(dst, device="cpu", tokenizer=src)
    assert len(lm.tokenizer) == 30522 == lm.model.config.vocab_size
    assert lm.tokenizer.tokenize("The cat sat.") == ["the", "cat", "sat", "."]
    # or a tokenizer object
    assert load_model(dst, device="cpu", tokenizer=lm.tokenizer).tokenizer is lm.tokenizer
