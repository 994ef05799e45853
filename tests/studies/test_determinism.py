"""Determinism: two runs of a reduced TOA / syntax pipeline with the same seed (and fresh
training checkpoints, so nothing is reused) write byte-identical result tables and
per-sentence outcomes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from olas_utils.studies import syntax as syntax_study
from olas_utils.studies import transfer
from olas_utils.studies.tables import write_items, write_table
from olas_utils.toa.taskmaps import ModelPool

pytestmark = pytest.mark.real_model

REDUCED = replace(
    transfer.PROFILES["smoke"],
    models=("minilm-l6", "mpnet-base"),
    tasks=("pos", "dependency"),
    sizes=replace(transfer.PROFILES["smoke"].sizes, n_train=10, n_dev=6, n_test=6, max_words=10),
)


def test_reduced_runs_write_identical_tables(tmp_path):
    splits = transfer.load_splits(REDUCED.tasks, REDUCED, seed=0)
    texts = []
    for run in range(2):
        pool = ModelPool(device="cpu", seed=0)
        frame, items = transfer.run_transfer(
            REDUCED.models, splits, REDUCED, pool, seeds=(0,), checkpoint_dir=tmp_path / f"ckpt{run}", progress=False
        )
        train, dev, test = splits["dependency"]
        parser, parser_items = syntax_study.parser_frame(
            ["minilm-l6"],
            train,
            dev,
            test,
            pool,
            syntax_study.PROFILES["smoke"],
            seeds=(0,),
            checkpoint_dir=tmp_path / f"ckpt{run}",
            progress=False,
        )
        paths = write_table(frame, tmp_path / f"run{run}" / "transfer") + write_table(
            parser, tmp_path / f"run{run}" / "parser"
        )
        paths += (
            write_items(items, tmp_path / f"run{run}" / "ti"),
            write_items(parser_items, tmp_path / f"run{run}" / "pi"),
        )
        texts.append([p.read_bytes() for p in paths])
        # trained afresh each run. Per transfer task: 2 models × 3 variants, the tokenizer-only and
        # position-only controls, whose word-level inputs are the same for both encoders (one checkpoint
        # each), and the random-weights control of each model; multi-source on one other model is that
        # model's plain adapter. The parser: its keys (smoke: ola:1, rollout, alti), each also on the random
        # copy's maps, and its 2 input-free controls (the same for every key).
        keys = len(syntax_study.PROFILES["smoke"].keys)
        assert len(list((tmp_path / f"ckpt{run}").glob("*.pt"))) == 2 * (2 * 3 + 2 + 2) + 2 * keys + 2
    assert texts[0] == texts[1]
