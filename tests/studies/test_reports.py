"""Notebook 03/04 tables and verdicts on hand-built per-sentence outcomes with known answers:
a system clearly better than its strongest control beats it, one identical to it is
indistinguishable, one clearly worse loses (Holm across the table); the headline variant is
chosen on non-target models only; the closing text states each claim with its verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _support.studies import WORDS
from _support.studies import syntax_tables as _syntax
from _support.studies import transfer_tables as _transfer


def test_capped_runs_counts_runs_that_early_stopping_did_not_end():
    from olas_utils.studies.outcomes import capped_runs

    # a run that stopped early after its best epoch 3 of 5, one that ran to the cap of 5 with its best at 4
    # (patience 2 not yet used up: capped, though its best epoch is not the last), one capped at its best
    runs = pd.DataFrame({"best_epoch": [3, 4, 5], "epochs_run": [5, 5, 5], "stopped_early": [True, False, False]})
    assert capped_runs(runs) == 2
    assert capped_runs(runs.drop(columns="stopped_early")) == 1  # tables from before the column: best = last


def test_parser_table_reads_beats_indistinguishable_loses_from_paired_margins():
    from olas_utils.studies import syntax_report

    parser, items = _syntax()
    t = syntax_report.parser_table(parser, items).set_index("key")
    assert list(t.verdict) == ["beats", "indistinguishable", "loses"]
    assert (t["strongest control"] == "tokenizer-only").all() and t.loc["ola:2", "margin"] == 0.0
    assert t.loc["ola:1", "margin low"] > 20 and t.loc["ola:3", "margin high"] < -5
    assert t.loc["ola:1", "ola low"] < t.loc["ola:1", "ola"] < t.loc["ola:1", "ola high"]
    assert (t.seeds == 3).all() and (t["capped"] == 1).all() and t.loc["ola:1", "ola sd (seeds)"] > 0
    # the OLA column is the mean over seeds of the per-seed UAS, as the run table has it
    ola1 = parser[(parser.key == "ola:1") & (parser.condition == "ola")]
    assert t.loc["ola:1", "ola"] == pytest.approx(100 * ola1.uas.mean(), abs=0.05)


def test_order_claims_are_paired_margins_with_their_own_verdicts():
    from olas_utils.studies import syntax_report

    parser, items = _syntax()
    o = syntax_report.order_table(items).set_index("comparison")
    assert o.loc["ola:1 − ola:2", "verdict"] == "beats" and o.loc["ola:2 − ola:3", "verdict"] == "beats"
    text = syntax_report.comparison_markdown(parser, items, _probes(), sizes="S")
    assert (
        "lower orders carry more syntax than higher orders (each order's UAS minus the next order's, paired): m: **shown**"
        in text
    )
    assert "**1 beat, 1 indistinguishable, 1 lose (of 3)**" in text and "indistinguishable: m ola:2" in text
    # a model whose ola:2 equals ola:3: that step is indistinguishable, the claim not shown
    same = items.copy()
    same.loc[same.key == "ola:3", "arcs"] = same.loc[same.key == "ola:2", "arcs"].to_numpy()
    o2 = syntax_report.order_table(same).set_index("comparison")
    assert o2.loc["ola:2 − ola:3", "verdict"] == "indistinguishable"
    assert "m: **not shown**" in syntax_report.comparison_markdown(parser, same, _probes(), sizes="S")


def _ola3_as(key: str):
    """The syntax runs and items with only ola:1, ola:3 and the neighbour chain ("-"), ola:3 renamed ``key``
    (its outcomes far below ola:1's)."""
    parser, items = _syntax()
    renamed = items[items.key.isin(["ola:1", "ola:3", "-"])].copy()
    renamed.loc[renamed.key == "ola:3", "key"] = key
    runs = parser[parser.key.isin(["ola:1", "ola:3"])].replace({"key": {"ola:3": key}})
    return runs, renamed


def test_ola_against_a_context_mixing_key_of_the_same_order_is_its_own_claim():
    """alti:1 given the ola:3 parser's outcomes (far below ola:1): ola:1 − alti:1 beats and is read as the
    mixing comparison, not as a step between OLA orders; alti (bare) and valuenorm:2 (no ola:2 here) are
    compared with nothing."""
    from olas_utils.studies import syntax_report

    assert syntax_report._comparisons(["ola:1", "ola:2", "rollout", "alti:1", "valuenorm:2", "alti"]) == [
        ("ola:1", "ola:2"),
        ("ola:1", "rollout"),
        ("ola:2", "rollout"),
        ("ola:1", "alti:1"),
        ("ola:2", "valuenorm:2"),
    ]
    runs, mixed = _ola3_as("alti:1")
    o = syntax_report.order_table(mixed).set_index("comparison")
    assert list(o.index) == ["ola:1 − alti:1"] and o.loc["ola:1 − alti:1", "verdict"] == "beats"
    text = syntax_report.comparison_markdown(runs, mixed, _probes(), sizes="S")
    assert "Attention or context mixing?" in text and "m: ola:1 − alti:1 +" in text
    assert "not testable in this run (fewer than two OLA orders)" in text  # the mixing row is no order step


def _probes():
    """Two models' UUAS counts: model a above the chain (0.55 vs 0.40), b below (0.25)."""
    rng = np.random.default_rng(2)
    rows = []

    def add(model, fam, maps, key, p):
        c = rng.binomial(WORDS - 1, p)
        rows.extend(
            {"model": model, "family": fam, "maps": maps, "key": key, "sentence": i, "n": w, "n_head": w - 1}
            | {"head": x, "dependent": x, "either": x, "correct": x, "total": w - 1}
            for i, (x, w) in enumerate(zip(c, WORDS))
        )

    for maps in ("raw", "sinks removed"):
        add("a", "encoder", maps, "ola:1", 0.55)
        add("b", "causal", maps, "ola:1", 0.25)
    add("baseline: next word", "-", "-", "-", 0.40)
    add("baseline: previous word", "-", "-", "-", 0.40)
    return pd.DataFrame(rows)


def test_probe_text_reports_the_mean_over_models_not_the_best_cell():
    from olas_utils.studies import syntax_report

    p = syntax_report.probe_table(_probes())
    cells = p[p.model != "mean over models"].set_index(["model", "maps"])
    assert cells.loc[("a", "raw"), "verdict"] == "beats" and cells.loc[("b", "raw"), "verdict"] == "loses"
    mean = p[p.model == "mean over models"].iloc[0]
    assert mean.uuas == pytest.approx((cells.loc[("a", "raw"), "uuas"] + cells.loc[("b", "raw"), "uuas"]) / 2, abs=0.1)
    parser, items = _syntax()
    text = syntax_report.comparison_markdown(parser, items, _probes(), sizes="S", probes=p)
    assert f"ola:1 {mean.uuas:.1f} [" in text and "best a" not in text  # the old text quoted the best cell


def test_transfer_summary_verdicts_and_family_mean():
    from olas_utils.studies import transfer_report

    # e1 clearly above the strongest control, e2's transfer is position-only's very outcomes, e3 clearly below
    frame, items = _transfer({"e1": 0.55, "e2": None, "e3": 0.12})
    s = transfer_report.task_summary(frame, items).set_index("target")
    assert (s["strongest control"] == "position-only").all()
    assert list(s["TOA verdict"]) == ["beats", "indistinguishable", "loses"]
    assert s.loc["e2", "TOA − strongest"] == 0.0 and (s["self verdict"] == "beats").all()
    assert s.loc["e1", "random-init target"] == pytest.approx(10, abs=2)  # mean over the three sources
    assert s.loc["e1", "TOA (headline)"] == pytest.approx(
        100 * frame[(frame.target == "e1") & (frame.condition == "TOA (headline)")].uas.mean(), abs=0.05
    )
    v = transfer_report.transfer_verdicts(s.reset_index(), items).iloc[0]
    assert (v["TOA beats"], v["TOA indistinguishable"], v["TOA loses"]) == (1, 1, 1) and v.targets == 3
    assert v["mean TOA − strongest low"] < v["mean TOA − strongest"] < v["mean TOA − strongest high"]
    text = transfer_report.comparison_markdown(s.reset_index(), pd.DataFrame([v]), sizes="S", frame=frame)
    assert "beats the strongest control on **1 of 3** (task, target) pairs (1 indistinguishable, 1 lose)" in text
    assert "indistinguishable: e2 TOA" in text and "Exploratory" in text


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


def test_classifier_text_says_when_seeds_repeat_one_deterministic_logistic_fit():
    """A logistic fit chosen on a held-out source has no seed: its text must not call the
    repeated outcome a mean over seeds; a single source's per-seed fits and a ResNet's seeds are a
    spread over seeds, reported as such."""
    from olas_utils.studies.crosslm_report import _classifier_lines
    from olas_utils.vocabulary import ENCODER, Control

    row = {
        "family": ENCODER,
        "key": "ola:1",
        "control": Control.TRAINED.ident,
        "target": "t",
        "seeds": 3,
        "top1": 0.5,
        "top1 low": 0.4,
        "top1 high": 0.6,
        "top1 sd": 0.0,
        "n": 128,
        "chance": 1 / 128,
        "heldout_top1": 0.3,
        "source_top1": 1.0,
        "chosen": "C=1",
        "epochs_run": 120,
        "max_epochs": 1000,
        "capped": 0,
        "chosen_epochs": "",
    }
    logistic = _classifier_lines(pd.DataFrame([{**row, "design": "logistic", "selection": "source:s"}]), None)[0]
    assert "one deterministic fit, repeated for its 3 seeds" in logistic and "mean of 3 seeds" not in logistic
    assert "C chosen on the held-out source" in logistic
    # one source: each seed chooses C on its own augmented copy, a real (here zero) spread over seeds
    single = _classifier_lines(pd.DataFrame([{**row, "design": "logistic", "selection": "augmented"}]), None)[0]
    assert "mean of 3 seeds, sd 0.0 points" in single and "deterministic" not in single
    assert "augmented copy of the one source, per seed" in single
    resnet = _classifier_lines(pd.DataFrame([{**row, "design": "resnet18", "top1 sd": 0.02}]), None)[0]
    assert "mean of 3 seeds, sd 2.0 points" in resnet and "deterministic" not in resnet


def test_attention_flow_is_set_against_every_ola_order_like_rollout():
    """Attention flow given the ola:3 parser's outcomes: each OLA order minus flow is a row of its own
    kind, read as "Attention flow below every OLA order", not as a step between orders or a mixing row."""
    from olas_utils.studies import syntax_report

    assert syntax_report._comparisons(["ola:1", "ola:2", "rollout", "flow"]) == [
        ("ola:1", "ola:2"),
        ("ola:1", "rollout"),
        ("ola:2", "rollout"),
        ("ola:1", "flow"),
        ("ola:2", "flow"),
    ]
    runs, flowed = _ola3_as("flow")
    o = syntax_report.order_table(flowed).set_index("comparison")
    assert list(o.index) == ["ola:1 − flow"] and o.loc["ola:1 − flow", "verdict"] == "beats"
    text = syntax_report.comparison_markdown(runs, flowed, _probes(), sizes="S")
    assert "Attention flow below every OLA order" in text and "m: **shown** (ola:1 − flow +" in text
    assert "Attention or context mixing?" not in text and "Rollout below" not in text


def test_the_parser_figure_names_the_trained_bars_by_the_models_maps_not_ola():
    """The bars of the parsers on the model's own maps are labelled for every key (rollout, flow, ...),
    the controls by their names, the neighbour-chain baseline as its line; heights are the mean UAS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from olas_utils.studies import syntax_report

    runs, items = _ola3_as("flow")
    fig = syntax_report.uas_figure(items, "uas")
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "the model's maps of the key" in labels and "ola" not in labels
    assert {"tokenizer-only", "position-only", "random-init target", "baseline: neighbour chain"} <= set(labels)
    bars = next(c for c in ax.containers if c.get_label() == "the model's maps of the key")
    flow = runs[(runs.key == "flow") & (runs.condition == "ola")]
    got = {t.get_text().split("\n")[1]: b.get_height() for t, b in zip(ax.get_xticklabels(), bars)}
    assert got["flow"] == pytest.approx(100 * flow.uas.mean(), abs=0.05)
    plt.close(fig)
