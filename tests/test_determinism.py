"""Determinism: two runs of a reduced TOA / syntax pipeline with the same seed (and fresh
training checkpoints, so nothing is reused) write byte-identical result tables."""

from __future__ import annotations

import pytest

from olas_utils.studies import syntax as syntax_study

from olas_utils.studies import transfer
from olas_utils.studies.tables import write_table
from olas_utils.toa.taskmaps import ModelPool

pytestmark = pytest.mark.real_model

REDUCED = {**transfer.PROFILES["smoke"], "models": ["minilm-l6", "mpnet-base"], "tasks": ["pos", "dependency"],
           "n_train": 10, "n_test": 6, "max_words": 10}


def test_reduced_runs_write_identical_tables(tmp_path):
    splits = transfer.load_splits(REDUCED["tasks"], REDUCED, seed=0)
    texts = []
    for run in range(2):
        pool = ModelPool(device="cpu", seed=0)
        frame = transfer.run_transfer(REDUCED["models"], splits, REDUCED, pool, seed=0,
                                      checkpoint_dir=tmp_path / f"ckpt{run}", progress=False)
        train, test = splits["dependency"]
        parser = syntax_study.parser_frame(["minilm-l6"], train, test, pool, {**syntax_study.PROFILES["smoke"]},
                                           seed=0, checkpoint_dir=tmp_path / f"ckpt{run}", progress=False)
        paths = write_table(frame, tmp_path / f"run{run}" / "transfer") + write_table(parser, tmp_path / f"run{run}" / "parser")
        texts.append([p.read_bytes() for p in paths])
        assert len(list((tmp_path / f"ckpt{run}").glob("*.pt"))) == 2 * 2 + 2  # trained afresh each run
    assert texts[0] == texts[1]
