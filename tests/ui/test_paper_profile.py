"""The paper profile is known to run: each notebook runs under papermill with the paper
profile's settings (its adapter size, batch size, learning rate, subword level, orders and
keys, every task, every control, the ResNet-18 classifier with refit, the context-mixing
baselines) at tiny sizes (``olas_utils.studies.profiles.dry_run``: a few real zoo models, a few
chunks and sentences, 2 epochs, 2 seeds) on the CPU, and writes its tables. Its numbers are not
checked: at these sizes they mean nothing."""

from dataclasses import fields

import pandas as pd
import pytest
from _support.notebooks import errors_of, run_outputs

from olas_utils.studies import crosslm, gallery, syntax, transfer
from olas_utils.studies.profiles import DRY_RUN_MODELS, dry_run
from olas_utils.toa.adapter import ADAPTER_SIZES
from olas_utils.ui.reproduce import list_notebooks

NOTEBOOKS = list_notebooks()

#: Tables each notebook must write under the paper profile (beside its figures).
TABLES = {
    "01": [],
    "02": ["02_verdict.csv", "02_classifier.csv", "02_classifier_verdict.csv", "02_lineage_verdict.csv"],
    "03": ["03_parser.csv", "03_parser_controls.csv", "03_probes.csv"],
    "04": ["04_transfer_summary.csv", "04_verdict.csv", "04_lineage.csv"],
}


def test_dry_run_keeps_every_setting_and_shrinks_only_sizes():
    sizes = {"models", "n_sentences", "n_chunks", "sizes", "batch_size", "classifier", "training"}
    for module in (gallery, crosslm, syntax, transfer):
        paper = module.PROFILES["paper"]
        small = dry_run(paper)
        assert type(small) is type(paper)
        for f in fields(paper):
            if f.name not in sizes:
                assert getattr(small, f.name) == getattr(paper, f.name), (module.__name__, f.name)
        for name in ("training", "classifier"):
            if hasattr(paper, name):
                a, b = getattr(paper, name), getattr(small, name)
                sized = ("epochs", "patience", "min_epochs", "seeds", "adapter")
                kept = [g.name for g in fields(a) if g.name not in sized]
                assert {k: getattr(a, k) for k in kept} == {k: getattr(b, k) for k in kept}
                assert b.seeds == a.seeds[:2] and b.epochs <= 2
                if name == "training":  # the paper's blocks (depth, heads, reversible), narrower
                    wide, narrow = ADAPTER_SIZES[a.adapter], ADAPTER_SIZES[b.adapter]
                    assert {k: v for k, v in wide.items() if k != "dim"} == {
                        k: v for k, v in narrow.items() if k != "dim"
                    }
                    assert len(a.seeds) >= 3  # the paper profile trains 3 seeds
    assert dry_run(transfer.PROFILES["paper"]).tasks is None  # every task
    assert dry_run(syntax.PROFILES["paper"]).level == "subword"
    assert dry_run(crosslm.PROFILES["paper"]).classifier.design == "resnet18"
    assert set(DRY_RUN_MODELS) <= set(__import__("olas_utils.zoo", fromlist=["DEFAULT_MODELS"]).DEFAULT_MODELS)
    with pytest.raises(TypeError, match="notebook profile"):
        dry_run(object())


@pytest.mark.notebook
@pytest.mark.real_model
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_with_the_paper_profiles_settings(path, tmp_path):
    errors = errors_of(run_outputs(path, tmp_path, "paper", dry_run=True))
    assert not errors, errors[0].get("evalue")
    assert list((tmp_path / "figures").glob("*.png")), "no figure written"
    for name in TABLES[path.stem[:2]]:
        table = pd.read_csv(tmp_path / "results" / name)
        assert len(table), name
