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
    """Notebook 02 saved its per-item outcomes and wrote the tables the current code writes (their
    files, columns and rows). Structure only: the numbers of these tables are tested on hand-worked
    cases (tests/studies/test_retrieval_by_hand.py, test_crosslm.py, test_cross_family.py)."""
    import pandas as pd

    from olas_utils.studies import crossfamily, crosslm, crosslm_stats
    from olas_utils.studies.tables import read_items

    def same_columns(written: pd.DataFrame, current: pd.DataFrame, name: str) -> None:
        assert list(written.columns) == list(current.columns), f"{name}: columns of an older version of the code"
        assert len(written) == len(current), f"{name}: {len(written)} rows, the items give {len(current)}"

    items = read_items(results / "02_retrieval_items")
    assert list(items.columns)[: len(crosslm.RETRIEVAL_ITEM_COLUMNS)] == list(crosslm.RETRIEVAL_ITEM_COLUMNS)
    assert set(items.control) >= {"none"} and (items["rank"] >= 0).all()
    summary = crosslm_stats.retrieval_summary(items)
    same_columns(
        pd.read_csv(results / "02_retrieval_paper.csv"),
        summary[summary.protocol == "paper"].drop(columns=["protocol"]),
        "02_retrieval_paper",
    )
    clf = read_items(results / "02_classifier_items")
    runs = pd.read_csv(results / "02_classifier_runs.csv")
    assert len(clf) == int(runs["n"].sum()) and set(clf["seed"]) == set(runs["seed"])
    # across the families (the smoke zoo has two encoders and two causal LMs): every ordered
    # (encoder, causal) pair both ways
    cross = read_items(results / "02_cross_family_items")
    assert set(cross.family) == {crossfamily.CROSS_FAMILY} and set(cross.protocol) <= {"paper", "word"}
    assert cross[["target", "source"]].drop_duplicates().shape[0] == 8
    verdict = pd.read_csv(results / "02_cross_family_verdict.csv")
    same_columns(verdict, crossfamily.cross_family_tables(cross)["verdict"], "02_cross_family_verdict")
    # OLA order 1 against rollout and ALTI (the smoke profile's baselines)
    margins = pd.read_csv(results / "02_key_margins.csv")
    assert set(margins["key"]) == {"rollout", "alti"}
    same_columns(margins, crosslm_stats.key_margin_frame(items), "02_key_margins")


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
