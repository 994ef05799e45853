"""Notebook 03/04 tables and verdicts on hand-built frames: the strongest control and the
margin, the pairs beating it, the headline variant chosen on non-target models only, and
the closing text per family."""

from __future__ import annotations

import pytest


def test_parser_table_names_the_strongest_control_and_the_margin():
    import pandas as pd

    from olas_utils.studies.syntax import parser_table

    rows = [
        {"model": "m", "family": "encoder", "key": "ola:1", "condition": c, "uas": u, "best_epoch": 3, "epochs_run": 5}
        for c, u in (("ola", 0.60), ("tokenizer-only", 0.20), ("position-only", 0.45), ("random-init target", 0.10))
    ]
    rows.append({"model": "baseline: neighbour chain", "family": "-", "key": "-", "condition": "baseline", "uas": 0.30})
    t = parser_table(pd.DataFrame(rows)).iloc[0]
    assert t["strongest control"] == "position-only" and t.margin == pytest.approx(15.0)
    assert t.baseline == pytest.approx(30.0) and t.best_epoch == 3


def test_transfer_summary_and_verdict_count_pairs_beating_the_strongest_control():
    import pandas as pd

    from olas_utils.studies import transfer_report

    def row(cond, target, score, source="a", variant="plain"):
        return {
            "task": "pos",
            "metric": "accuracy",
            "family": "encoder",
            "source": source,
            "target": target,
            "condition": cond,
            "variant": variant,
            "score": score,
        }

    rows = [
        row("self", "b", 0.9),
        row("transfer", "b", 0.5),
        row("TOA (headline)", "b", 0.5, "chosen"),
        row("random-init target", "b", 0.2),
        row("random-init target", "b", 0.4, source="b"),
        row("tokenizer-only", "b", 0.1),
        row("position-only", "b", 0.55),
        row("self", "c", 0.8),
        row("transfer", "c", 0.7),
        row("TOA (headline)", "c", 0.7, "chosen"),
        row("random-init target", "c", 0.1),
        row("tokenizer-only", "c", 0.1),
        row("position-only", "c", 0.3),
        {**row("baseline", "-", 0.35, "-", "-"), "family": "-"},
    ]
    s = transfer_report.task_summary(pd.DataFrame(rows)).set_index("target")
    assert s.loc["b", "random-init target"] == pytest.approx(30.0)  # mean over sources
    assert s.loc["b", "strongest control"] == "position-only" and s.loc["c", "strongest control"] == "baseline"
    v = transfer_report.verdict_frame(s.reset_index()).iloc[0]
    assert v["TOA > strongest control"] == 1 and v["self > strongest control"] == 2  # b: 50 < 55; c: 70 > 35
    assert v["mean TOA − strongest"] == pytest.approx(((50 - 55) + (70 - 35)) / 2)


def test_headline_variant_is_chosen_on_transfer_between_non_target_models_only():
    from olas_utils.studies.transfer import _choose_variant

    dev = {
        ("a", "b", "plain"): 0.3,
        ("b", "a", "plain"): 0.5,
        ("a", "b", "rank"): 0.6,
        ("b", "a", "rank"): 0.4,
        ("a", "b", "augmented"): 0.1,
        ("b", "a", "augmented"): 0.2,
        ("a", "t", "augmented"): 1.0,
        ("t", "a", "augmented"): 1.0,
    }  # the target's pairs must not count
    assert _choose_variant(dev, ["a", "b"]) == ("rank", pytest.approx(0.5))
    assert _choose_variant(dev, ["a"]) == ("plain", None)


def test_closing_text_counts_each_family_and_names_task_and_target_with_several_tasks():
    import pandas as pd

    from olas_utils.studies import transfer_report

    def row(task, fam, cond, target, score, source="a", variant="plain"):
        return {
            "task": task,
            "metric": "m",
            "family": fam,
            "source": source,
            "target": target,
            "condition": cond,
            "variant": variant,
            "score": score,
        }

    rows = []
    for task in ("dependency", "relation"):
        # encoder e1: TOA 0.6 beats every control (best 0.3); causal c1: TOA 0.2 under position-only 0.4
        for fam, t, toa in (("encoder", "e1", 0.6), ("causal", "c1", 0.2)):
            rows += [
                row(task, fam, "self", t, 0.7),
                row(task, fam, "transfer", t, toa),
                row(task, fam, "TOA (headline)", t, toa, "chosen"),
                row(task, fam, "random-init target", t, 0.1),
                row(task, fam, "tokenizer-only", t, 0.1),
                row(task, fam, "position-only", t, 0.4 if fam == "causal" else 0.3),
                row(task, fam, "transfer (multi-source)", t, 0.65, "others"),
            ]
        rows.append({**row(task, "-", "baseline", "-", 0.05, "-", "-")})
    text = transfer_report.comparison_markdown(transfer_report.task_summary(pd.DataFrame(rows)), sizes="s")
    assert "**2/4** (task, target) pairs" in text
    assert "By family: encoder TOA 2/2, self 2/2; causal TOA 0/2, self 2/2" in text
    assert "dependency/e1 65.0 vs 60.0" in text and "relation/c1 65.0 vs 20.0" in text
    one = transfer_report.task_summary(
        pd.DataFrame([r for r in rows if r["task"] == "dependency" and r["target"] in ("e1", "-")])
    )
    text1 = transfer_report.comparison_markdown(one, sizes="s")
    assert "By family" not in text1 and ": e1 65.0 vs 60.0" in text1
