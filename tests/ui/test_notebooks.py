"""Every numbered notebook runs under papermill with the smoke profile, writing into a
temporary folder, so a broken notebook fails CI."""

import pytest
from _support.notebooks import errors_of, run_outputs

from olas_utils.ui.reproduce import list_notebooks

NOTEBOOKS = list_notebooks()


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS][:1] == ["01_ola_gallery.ipynb"]


@pytest.mark.notebook
@pytest.mark.real_model
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_smoke(path, tmp_path):
    assert not errors_of(run_outputs(path, tmp_path, "smoke"))
    figures = list((tmp_path / "figures").glob("*.png"))
    assert figures, "the notebook wrote no figure"
    assert all(f.stat().st_size > 5_000 for f in figures)
    if path.stem.startswith("02"):
        _check_items_of_02(tmp_path / "results")
    else:
        _check_items(path.stem, tmp_path / "results")


@pytest.mark.notebook
@pytest.mark.real_model
def test_notebook_02_sets_attention_flow_against_ola_on_the_flow_profiles_shorter_chunks(tmp_path):
    """The ``flow`` profile's settings at tiny sizes: its 20-word chunks reach the corpus, flow has
    retrieval items under every control, and OLA order 1 is set against rollout and flow, paired."""
    import pandas as pd

    from olas_utils.studies.tables import read_items

    path = next(p for p in NOTEBOOKS if p.stem.startswith("02"))
    outputs = run_outputs(path, tmp_path, "flow", dry_run=True)
    assert not errors_of(outputs)
    printed = "".join("".join(o.get("text", "")) for o in outputs)
    assert "8 chunks of 20 words" in printed
    items = read_items(tmp_path / "results" / "02_retrieval_items")
    flow = items[items.key == "flow"]
    assert set(flow.control) == set(items.control) and len(flow)
    margins = pd.read_csv(tmp_path / "results" / "02_key_margins.csv")
    assert set(margins["key"]) == {"rollout", "flow"}
    assert set(pd.read_csv(tmp_path / "results" / "02_classifier_key_margins.csv")["key"]) == {"rollout", "flow"}


def _check_items_of_02(results):
    """Notebook 02 saved its per-item outcomes, and its tables are recomputed from them."""
    import numpy as np
    import pandas as pd

    from olas_utils.studies import crosslm_stats
    from olas_utils.studies.tables import read_items

    items = read_items(results / "02_retrieval_items")
    summary = crosslm_stats.retrieval_summary(items)
    table = pd.read_csv(results / "02_retrieval_paper.csv")
    mine = summary[summary.protocol == "paper"].reset_index(drop=True)
    np.testing.assert_allclose(table["hit@1"], mine["hit@1"], atol=1e-4)
    np.testing.assert_allclose(table["hit@1 high"], mine["hit@1 high"], atol=1e-4)
    clf = read_items(results / "02_classifier_items")
    runs = pd.read_csv(results / "02_classifier_runs.csv")
    assert len(clf) == int(runs["n"].sum()) and set(clf["seed"]) == set(runs["seed"])
    # across the families (the smoke zoo has two encoders and two causal LMs): every ordered
    # (encoder, causal) pair both ways, and the verdict table recomputed from the items
    from olas_utils.studies import crossfamily

    cross = read_items(results / "02_cross_family_items")
    assert set(cross.family) == {crossfamily.CROSS_FAMILY} and set(cross.protocol) <= {"paper", "word"}
    assert cross[["target", "source"]].drop_duplicates().shape[0] == 8
    verdict = pd.read_csv(results / "02_cross_family_verdict.csv")
    mine = crossfamily.cross_family_tables(cross)["verdict"]
    np.testing.assert_allclose(verdict["ola_hit@1"], mine["ola_hit@1"], atol=1e-4)
    assert list(verdict["verdict"]) == list(mine["verdict"])
    # OLA order 1 against rollout and ALTI (the smoke profile's baselines), paired, from the items
    margins = pd.read_csv(results / "02_key_margins.csv")
    mine = crosslm_stats.key_margin_frame(items)
    assert set(margins["key"]) == {"rollout", "alti"} and list(margins["verdict"]) == list(mine["verdict"])
    np.testing.assert_allclose(margins["margin"], mine["margin"], atol=1e-4)


def _check_items(stem: str, results):
    """Notebooks 03 and 04 save per-sentence outcomes beside their tables, and every trained
    run's metric in the run table is the metric of its items (real adapter predictions)."""
    import pandas as pd

    from olas_utils.data.tasks import TASKS
    from olas_utils.studies.tables import read_items
    from olas_utils.toa.fit import score_outcomes

    if stem.startswith("03"):
        items = read_items(results / "03_parser_items")
        runs = pd.read_csv(results / "03_parser.csv", keep_default_na=False, na_values=[""])
        assert len(read_items(results / "03_probe_items")) and items.seed.nunique() >= 1
        got = items.groupby(["model", "key", "condition", "seed"]).apply(lambda g: g.arcs.sum() / g.words.sum())
        want = runs.set_index(["model", "key", "condition", "seed"]).uas
        assert len(got) == len(want)
        for k, v in want.items():
            assert got[k] == pytest.approx(v, abs=1e-4), k
    elif stem.startswith("04"):
        items = read_items(results / "04_transfer_items")
        runs = pd.read_csv(results / "04_transfer_all.csv", keep_default_na=False, na_values=[""])
        cols = ["task", "source", "target", "condition", "variant", "seed"]
        runs = runs[runs.condition != "TOA (headline)"]
        groups = dict(list(items.groupby(cols)))
        assert len(groups) == len(runs)
        for _, r in runs.iterrows():
            g = groups[tuple(r[c] for c in cols)].sort_values("sentence")
            got = score_outcomes(r.task, TASKS[r.task].kind, g)[r.metric]
            assert got == pytest.approx(r.score, abs=1e-4), tuple(r[c] for c in cols)
