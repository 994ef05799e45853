"""Damaged or incomplete model folders and unknown ids: errors name the file or folder and
fail fast offline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


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
