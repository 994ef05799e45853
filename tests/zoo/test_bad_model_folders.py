"""Damaged or incomplete model folders and unknown ids: errors name the file or folder and
fail fast offline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

#: real zoo models or their tokenizers: not in `make test-fast`
pytestmark = pytest.mark.models


def _copy_model(tmp_path, name="minilm-l6"):
    from olas_utils import zoo

    src = zoo.prepare(name)
    dst = tmp_path / "model"
    dst.mkdir()
    for p in src.iterdir():
        if p.is_file() and p.name != "olas_prepared.json":
            (dst / p.name).symlink_to(p)
    return dst


def test_truncated_safetensors_names_the_file(tmp_path):
    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    w = dst / "model.safetensors"
    data = w.read_bytes()
    w.unlink()
    w.write_bytes(data[: len(data) // 3])
    with pytest.raises((OSError, ValueError), match="model.safetensors.*(truncated|damaged|corrupt)") as e:
        load_model(dst, device="cpu")
    assert "\n" not in str(e.value)


def test_folder_without_config_names_it(tmp_path):
    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    (dst / "config.json").unlink()
    with pytest.raises((OSError, ValueError), match="has no config.json") as e:
        load_model(dst, device="cpu")
    assert str(dst) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("offline_env", [True, False])
def test_unknown_model_id_fails_fast_offline(tmp_path, offline_env):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    if offline_env:
        env["HF_HUB_OFFLINE"] = "1"
    (tmp_path / "s.txt").write_text("a b\n")
    t0 = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "olas_utils.ui.cli",
            "extract",
            "-m",
            "no-such-org/no-such-model",
            "-i",
            str(tmp_path / "s.txt"),
            "-o",
            str(tmp_path / "o.pt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 1 and "no-such-org/no-such-model" in r.stderr
    assert time.monotonic() - t0 < 20


def _rewrite_weights(dst, edit):
    from safetensors.torch import load_file, save_file

    w = dst / "model.safetensors"
    tensors = load_file(str(w))
    w.unlink()
    save_file(edit(dict(tensors)), str(w), metadata={"format": "pt"})


def test_a_weight_missing_from_the_checkpoint_is_warned_in_one_line(tmp_path, capsys):
    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    gone = "encoder.layer.3.attention.self.query.weight"

    def drop(t):
        assert gone in t, sorted(t)[:5]
        return {k: v for k, v in t.items() if k != gone}

    _rewrite_weights(dst, drop)
    with pytest.warns(UserWarning, match=r"1 weight\(s\) missing .*initialised at random .*query.weight"):
        load_model(dst, device="cpu")
    assert "LOAD REPORT" not in capsys.readouterr().err


def test_an_unused_checkpoint_tensor_loads_without_the_load_report(tmp_path, capsys, caplog):
    import logging
    import warnings

    import torch

    from olas_utils.zoo import load_model

    dst = _copy_model(tmp_path)
    _rewrite_weights(dst, lambda t: {**t, "cls.predictions.bias": torch.zeros(3)})
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="olas_utils.zoo"):
        warnings.simplefilter("error")  # an unused head is no reason to warn
        load_model(dst, device="cpu")
    err = capsys.readouterr().err
    assert "LOAD REPORT" not in err and "UNEXPECTED" not in err
    assert any("not used by the model class" in r.getMessage() for r in caplog.records)
