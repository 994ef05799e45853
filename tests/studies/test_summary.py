"""The README's results summary (olas_utils.studies.summary): counts read from verdict
tables with known answers (hand-built outcomes whose verdicts are fixed by construction),
duplicate protocols counted once with the less favourable verdict, tables from before the
intervals named as such, and the committed README in step with the committed results."""

from __future__ import annotations

import pandas as pd
import pytest
from _support.studies import syntax_tables as _syntax
from _support.studies import transfer_tables as _transfer

from olas_utils.infra.settings import project_root
from olas_utils.studies import summary, syntax_report, transfer_report
from olas_utils.studies.tables import write_table


def _retrieval_rows() -> pd.DataFrame:
    """Encoder ola:1 beats on `paper` but loses on `released`, whose trained outcomes are the
    same (one cell, the worse verdict); causal ola:1 indistinguishable; encoder rollout beats."""
    base = {"ola_low": 0.1, "ola_high": 0.3, "control_hit@1": 0.1, "control_low": 0.05, "control_high": 0.2}
    base |= {"margin_low": 0.01, "margin_high": 0.2, "p": 0.01, "holm_cells": 4, "pairs": 20, "chunks": 128}
    rows = [
        ("paper", "encoder", "ola:1", 0.2, "shuffled", 0.1, "beats", ""),
        ("released", "encoder", "ola:1", 0.2, "uniform", 0.25, "loses", "paper"),
        ("paper", "causal", "ola:1", 0.05, "random", 0.01, "indistinguishable", ""),
        ("paper", "encoder", "rollout", 0.3, "shuffled", 0.1, "beats", ""),
    ]
    cols = ("protocol", "family", "key", "ola_hit@1", "strongest_control", "margin", "verdict", "same_trained_as")
    return pd.DataFrame([base | dict(zip(cols, r)) for r in rows])


@pytest.fixture
def results(tmp_path):
    write_table(_retrieval_rows(), tmp_path / "02_verdict")
    parser, items = _syntax()
    write_table(syntax_report.parser_table(parser, items), tmp_path / "03_parser_controls")
    write_table(syntax_report.order_table(items), tmp_path / "03_parser_orders")
    frame, titems = _transfer({"e1": 0.55, "e2": None, "e3": 0.12})
    s = transfer_report.task_summary(frame, titems)
    write_table(transfer_report.transfer_verdicts(s, titems), tmp_path / "04_verdict")
    return tmp_path


def test_summary_counts_the_verdicts_its_tables_hold(results):
    text = summary.results_summary(results)
    # 02: encoder paper+released are one cell (beats and loses → loses), causal indistinguishable
    assert "OLA order 1 beats its strongest control on 0 of 2 (1 indistinguishable, 1 lose) distinct" in text
    assert "over every key and baseline, 1 of 3 (1 indistinguishable, 1 lose)" in text
    assert "`released`" not in text  # the duplicate's own line is not quoted
    assert "encoder, `paper`: OLA order 1 20.0 [10.0, 30.0] vs shuffled layers 10.0 [5.0, 20.0]" in text
    # 03: ola:1 beats, ola:2 is the tokenizer-only control's outcomes, ola:3 loses (tests/studies/test_reports.py)
    assert "neighbour chain) on 1 of 3 (1 indistinguishable, 1 lose) (model, key) cells" in text
    assert "3 of 9 OLA parser runs were stopped by the epoch cap, not by early stopping" in text  # seed 0 of each key
    assert "m ola:1: UAS" in text and "— beats." in text
    assert "ola:1 − ola:2 +" in text
    # the order claims read across seeds: 3 seeds, 2 cells: no verdict (Holm over 2 needs 2/2**7 <= 0.025)
    assert "read across seeds (3 seeds, the seed as the unit): m ola:1 − ola:2 t interval [" in text
    assert "cannot pass Holm over 2 cells (it needs 7 seeds)" in text
    # 04: e1 beats, e2 indistinguishable, e3 loses; self beats everywhere
    assert "the headline TOA beats the strongest control on 1 of 3 (1 indistinguishable, 1 lose) targets" in text
    assert "the self-trained adapter on 3 of 3 (0 indistinguishable, 0 lose)" in text
    assert "wide" not in text  # no results/wide/ folder


def test_tables_from_before_the_intervals_are_named_not_summarised(results):
    (results / "wide").mkdir()
    pd.DataFrame({"task": ["dependency"], "beats_controls": [True]}).to_csv(results / "wide" / "04_verdict.csv")
    text = summary.results_summary(results)
    assert "(`wide/04_verdict`): written by a one-seed run from before the tables had intervals" in text
    assert "make reproduce PROFILE=wide" in text


def test_counts_that_do_not_sum_to_the_targets_are_refused(results):
    v = pd.read_csv(results / "04_verdict.csv")
    v["TOA beats"] += 1
    v.to_csv(results / "04_verdict.csv", index=False)
    with pytest.raises(ValueError, match="do not sum to its 3 targets"):
        summary.results_summary(results)


def test_update_readme_rewrites_only_the_marked_block(results, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# T\nno markers\n")
    with pytest.raises(ValueError, match="markers"):
        summary.update_readme(readme, results)
    assert readme.read_text() == "# T\nno markers\n"  # nothing lost
    readme.write_text(f"# T\nbefore\n{summary.START}\nold text\n{summary.END}\nafter\n")
    assert summary.update_readme(readme, results) is True
    got = readme.read_text()
    assert got.startswith("# T\nbefore\n") and got.endswith(f"{summary.END}\nafter\n") and "old text" not in got
    assert summary.results_summary(results) in got
    assert summary.update_readme(readme, results) is False  # already in step


def test_committed_readme_quotes_the_committed_results():
    page = (project_root() / "docs" / "results.md").read_text(encoding="utf-8")
    block = page.split(summary.START)[1].split(summary.END)[0]
    assert block.strip() == summary.results_summary(project_root() / "results").strip(), (
        "docs/results.md's results summary is out of step with results/: run python -m olas_utils.studies.summary"
    )


@pytest.mark.parametrize("profile", summary.TRANSFER_PROFILES)
@pytest.mark.slow  # 8 s measured alone at 1 thread (docs/testing.md)
def test_rows_of_another_profile_name_their_folder_their_strongest_control_and_a_repeat_of_quick(results, profile):
    frame, titems = _transfer({"e1": 0.55, "e2": None, "e3": 0.12})
    s = transfer_report.task_summary(frame, titems)
    write_table(s, results / "04_transfer_summary")
    (results / profile).mkdir()
    write_table(s, results / profile / "04_transfer_summary")
    verdict = transfer_report.transfer_verdicts(s, titems)
    write_table(verdict, results / profile / "04_verdict")
    text = summary.results_summary(results)
    rows = [line for line in text.splitlines() if line.startswith(f"- **Transfer, {profile}")]
    assert len(rows) == len(verdict) and all(f"(`{profile}/04_verdict`" in line for line in rows)
    assert all("the quick row's runs and numbers" in line for line in rows)
    names = s["strongest control"].value_counts()
    expected = ", ".join(f"{name} for {n} of {len(s)}" for name, n in names.items())
    assert f"strongest control: {expected}." in rows[0]
    # another number: not a repeat
    verdict["mean TOA − strongest"] += 0.01
    write_table(verdict, results / profile / "04_verdict")
    text = summary.results_summary(results)
    assert "the quick row's runs and numbers" not in text


@pytest.mark.slow  # 5 s measured alone at 1 thread (docs/testing.md)
def test_cross_family_rows_name_their_folder_and_a_lineage_on_both_sides(results):
    """quick's cross-family tables (no lineage on both sides: an empty gap table) and the gemma
    profile's (embeddinggemma-300m and gemma3-270m far above the other pairs, by construction)."""
    from _support.studies import cross_items as _cross_items

    from olas_utils.studies import crossfamily

    gemma = {"embeddinggemma-300m", "gemma3-270m"}
    tables = {
        results: crossfamily.cross_family_tables(_cross_items(["minilm-l6"], ["smollm2-135m"], lambda t, s: 0.5)),
        results / "gemma": crossfamily.cross_family_tables(
            _cross_items(
                ["minilm-l6", "embeddinggemma-300m"],
                ["smollm2-135m", "gemma3-270m"],
                lambda t, s: 0.9 if {t, s} == gemma else 0.3,
            )
        ),
    }
    for folder, t in tables.items():
        folder.mkdir(exist_ok=True)
        for name, table in t.items():
            write_table(table, folder / f"02_cross_family_{name}")
    assert (results / "02_cross_family_gap.csv").read_text().strip() == ""  # quick: no same-lineage pair
    text = summary.results_summary(results)
    assert "- **Across the families** (`02_cross_family_verdict`, beyond the paper" in text
    assert "- **Across the families, gemma profile** (`gemma/02_cross_family_verdict`" in text
    assert text.count("one lineage on both sides") == 1
    assert (
        "one lineage on both sides (embeddinggemma-300m, gemma3-270m), `word`, order 1 (`gemma/02_cross_family_gap`)"
        in text
    )
    assert "over 2 pairs against" in text and "between different lineages (6 pairs)" in text and "— beats." in text


def test_no_summary_from_an_empty_or_partial_folder_and_the_page_is_left_alone(results, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no summary from a partial or empty set"):
        summary.results_summary(empty)
    page = tmp_path / "page.md"
    page.write_text(f"# T\n{summary.START}\nkept\n{summary.END}\n")
    with pytest.raises(ValueError, match="no summary"):
        summary.update_readme(page, empty)
    assert "kept" in page.read_text()
    (results / "03_parser_controls.csv").unlink()
    with pytest.raises(ValueError, match="03_parser_controls"):
        summary.results_summary(results)


def test_an_unknown_verdict_label_is_refused_not_counted(results):
    v = pd.read_csv(results / "02_verdict.csv")
    v["verdict"] = "maybe"
    v.to_csv(results / "02_verdict.csv", index=False)
    with pytest.raises(ValueError, match="'maybe'"):
        summary.results_summary(results)


def test_lineage_held_out_rows_quote_the_drop_at_order_1_and_the_verdict_without_siblings(results):
    """A hand-built lineage table: ola:1 drops 0.9 → 0.6 (beats), rollout 0.5 → 0.5, a control row
    that must not be counted; the verdict table without siblings: ola:1 beats, rollout loses."""
    common = {"family": "encoder", "protocol": "paper", "siblings": "b, c", "p": 0.01, "holm_cells": 2}
    rows = [
        common
        | {"control": "none", "target": "a", "key": "ola:1", "model_top1": 0.9, "lineage_top1": 0.6}
        | {"drop": 0.3, "drop_low": 0.2, "drop_high": 0.4, "verdict": "beats"},
        common
        | {"control": "none", "target": "a", "key": "rollout", "model_top1": 0.5, "lineage_top1": 0.5}
        | {"drop": 0.0, "drop_low": -0.1, "drop_high": 0.1, "verdict": "indistinguishable"},
        common
        | {"control": "random", "target": "a", "key": "ola:1", "model_top1": 0.1, "lineage_top1": 0.0}
        | {"drop": 0.1, "drop_low": 0.05, "drop_high": 0.15, "verdict": "beats"},
    ]
    write_table(pd.DataFrame(rows), results / "02_classifier_lineage")
    verdict = [
        {"family": "encoder", "target": "a", "key": "ola:1", "ola_top1": 0.6, "control_top1": 0.25}
        | {"strongest_control": "shuffled", "verdict": "beats"},
        {"family": "encoder", "target": "a", "key": "rollout", "ola_top1": 0.5, "control_top1": 0.7}
        | {"strongest_control": "uniform", "verdict": "loses"},
    ]
    write_table(pd.DataFrame(verdict), results / "02_classifier_lineage_verdict")
    text = summary.results_summary(results)
    assert "leaving the siblings out lowers top-1 on 1 of 2 (1 indistinguishable, 0 lose) (target, key) cells" in text
    assert "without them the trained maps beat their strongest control on 1 of 2 (0 indistinguishable, 1 lose)" in text
    assert (
        "  - encoder → a (siblings left out: b, c), ola:1: 90.0 → 60.0, drop +30.0 [+20.0, +40.0] (the siblings raise "
        "it); "
        "without them vs shuffled layers 25.0 — beats." in text
    )
    assert "rollout: 50.0" not in text  # only order 1 gets a line


def test_no_lineage_rows_without_the_lineage_table(results):
    assert "Lineage held out" not in summary.results_summary(results)


@pytest.mark.parametrize("seeds", [3, 7])
def test_transfer_claims_read_across_seeds_are_quoted_with_what_the_seed_count_allows(results, seeds):
    """3 targets, every seed of e1's TOA and of each self above every control: with 7 seeds the exact
    sign-flip p is 2/2**7 <= 0.05/3 (Holm's first step), so e1's TOA and all three self cells beat;
    with 3 seeds (2/8) no cell is testable, and the line says 7 would be needed."""
    frame, titems = _transfer({"e1": 0.55, "e2": None, "e3": 0.12}, seeds=tuple(range(seeds)))
    write_table(transfer_report.task_summary(frame, titems), results / "04_transfer_summary")
    text = summary.results_summary(results)
    head = f"read across seeds ({seeds} seeds, the seed as the unit): "
    if seeds == 3:
        assert (
            head
            + "TOA not testable; self not testable (an exact test over 3 seeds cannot pass Holm over 3 cells: it needs 7)."
            in text
        )
    else:
        assert (
            head
            + "TOA beats every control on 1 of 3 (2 indistinguishable, 0 lose) cells; self beats every control on 3 of 3"
            in text
        )


def test_the_paper_size_rows_quote_its_verdicts_beside_the_papers_range(results):
    """A ``paper-size`` folder (retrieval at 1,000 chunks, 3 causal models): one line per protocol with each
    order's Hit@1 and interval, Hit@5 and margin as the hand-built tables hold them; across models not testable."""
    base = {"family": "causal", "pairs": 6, "chunks": 1000, "models": 3, "across_verdict": "not testable"}
    base |= {"strongest_control": "random", "control_hit@1": 0.1, "control_low": 0.05, "control_high": 0.2}
    base |= {"p": 0.001, "holm_cells": 2}
    rows = [
        ("released", "ola:1", 0.85, 0.80, 0.90, 0.75, 0.70, 0.80, "beats"),
        ("released", "ola:2", 0.20, 0.10, 0.30, 0.10, -0.05, 0.25, "indistinguishable"),
    ]
    cols = ("protocol", "key", "ola_hit@1", "ola_low", "ola_high", "margin", "margin_low", "margin_high", "verdict")
    folder = results / "paper-size"
    folder.mkdir()
    write_table(pd.DataFrame([base | dict(zip(cols, r)) for r in rows]), folder / "02_verdict")
    hits = pd.DataFrame(
        {"control": "none", "key": ["ola:1", "ola:2", "ola:1"], "metric": ["ssim", "ssim", "pearson"]}
        | {"hit@5": [0.95, 0.4, 0.5]}
    )
    write_table(hits, folder / "02_retrieval_released")
    text = summary.results_summary(results)
    head = next(line for line in text.splitlines() if "At the paper's size" in line)
    assert "1,000 chunks of 50 words, 6 ordered pairs of 3 causal models" in head
    assert "Hit@1 84–96 %, Hit@5 89–97 %" in head and "1 of 2 (1 indistinguishable, 0 lose)" in head
    assert "across models not testable with 3 models" in head
    line = next(line for line in text.splitlines() if line.startswith("  - `released`: order 1"))
    assert "order 1 Hit@1 85.0 [80.0, 90.0], Hit@5 95.0, margin +75.0 [+70.0, +80.0] over" in line
    assert "order 2 Hit@1 20.0 [10.0, 30.0], Hit@5 40.0, margin +10.0 [-5.0, +25.0]" in line
    assert "(beats)" in line and "(indistinguishable)" in line
