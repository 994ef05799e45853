"""Notebook 02's table logic on hand-made inputs (the real run is the notebook smoke test)."""

import numpy as np
import pandas as pd
import pytest

from olas_utils.studies import crosslm, crosslm_report
from olas_utils.studies.tables import write_table


def frame():
    rows = []
    for control, h1 in (("none", [0.9, 0.7]), ("random", [0.1, 0.2])):
        for (t, s), v in zip((("a", "b"), ("b", "a")), h1):
            rows.append(
                {
                    "family": "causal",
                    "control": control,
                    "protocol": "paper",
                    "key": "ola:1",
                    "metric": "ssim",
                    "target": t,
                    "source": s,
                    "n": 10,
                    "hit@1": v,
                    "hit@5": min(1.0, v + 0.1),
                }
            )
    return pd.DataFrame(rows)


def test_summary_means_and_ranges_by_hand():
    s = crosslm.retrieval_summary(frame())
    r = s[s.control == "none"].iloc[0]
    assert r["pairs"] == 2 and r["hit@1"] == pytest.approx(0.8) and r["hit@1 min"] == 0.7 and r["hit@1 max"] == 0.9
    assert r["hit@5"] == pytest.approx(0.9) and r["chance@1"] == pytest.approx(0.1)


def test_comparison_uses_the_run_numbers_and_judges_controls():
    s = crosslm.retrieval_summary(frame())
    text = crosslm_report.comparison_markdown(s, None, n_chunks=10)
    assert "Hit@1 80.0 %" in text and "70.0 %–90.0 %" in text and "inside that range" not in text
    assert "below it" in text  # 80 % < the paper's 84 %
    assert "OLA 80.0 % vs randomly re-initialised weights 15.0 % — beats every control." in text
    f = frame()
    f.loc[f.control == "random", "hit@1"] = 0.85
    text = crosslm_report.comparison_markdown(crosslm.retrieval_summary(f), None, n_chunks=10)
    assert "does NOT beat its strongest control" in text


def test_verdict_picks_the_strongest_control_and_protocols_side_by_side():
    f = frame()
    extra = f[f.control == "random"].copy()
    extra["control"], extra["hit@1"] = "uniform", [0.6, 0.5]
    word = f.copy()
    word["protocol"] = "word"
    s = crosslm.retrieval_summary(pd.concat([f, extra, word], ignore_index=True))
    v = crosslm_report.verdict_frame(s)
    paper = v[v.protocol == "paper"].iloc[0]
    assert paper["strongest_control"] == "uniform" and paper["control_hit@1"] == pytest.approx(0.55)
    assert paper["margin"] == pytest.approx(0.25) and paper["beats_controls"]
    side = crosslm_report.protocol_frame(s)
    assert list(side.columns) == ["family", "control", "key", "paper", "word"]
    row = side[(side.control == "none")].iloc[0]
    assert row["paper"] == pytest.approx(0.8) and row["word"] == pytest.approx(0.8)
    assert np.isnan(side[side.control == "uniform"].iloc[0]["word"])


def test_write_table_and_hit_matrix(tmp_path):
    csv, md = write_table(crosslm.retrieval_summary(frame()), tmp_path / "t")
    assert pd.read_csv(csv).shape[0] == 2 and md.read_text().startswith("| protocol")
    fig = crosslm_report.hit_matrix_figure(frame(), protocol="paper", key="ola:1")
    img = np.ma.filled(fig.axes[0].images[0].get_array().astype(float), np.nan)
    assert np.isnan(img[0, 0]) and img[0, 1] == pytest.approx(0.9) and img[1, 0] == pytest.approx(0.7)


def test_unknown_control_is_rejected():
    with pytest.raises(ValueError, match="unknown control"):
        crosslm.extract_images([], [], orders=[1], baselines=[], protocols=["paper"], controls=["bogus"])


def test_classifier_lines_report_selection_controls_and_the_epoch_cap():
    base = {
        "family": "causal",
        "key": "ola:1",
        "protocol": "paper",
        "target": "c",
        "sources": "a, b",
        "source_top1": 0.9,
        "heldout_source": "b",
        "top5": 0.5,
        "n": 100,
        "chance": 0.01,
        "max_epochs": 12,
        "selection": "source:b",
        "curve": "",
    }
    clf = pd.DataFrame(
        [
            dict(base, control="none", heldout_top1=0.4, top1=0.3, epochs_run=12, chosen_epoch=12),
            dict(base, control="uniform", heldout_top1=0.01, top1=0.02, epochs_run=4, chosen_epoch=1),
            dict(base, control="random", heldout_top1=0.01, top1=0.05, epochs_run=5, chosen_epoch=2),
        ]
    )
    text = crosslm_report.comparison_markdown(crosslm.retrieval_summary(frame()), clf, n_chunks=100)
    assert "unseen-model top-1 30.0 %–30.0 %" in text and "held-out source 40.0 %" in text
    assert "Strongest control: random 5.0 %" in text
    assert "Still improving when the epoch cap (12) stopped it for c" in text
    clf.loc[0, "chosen_epoch"] = 8
    assert "Still improving" not in crosslm_report.comparison_markdown(
        crosslm.retrieval_summary(frame()), clf, n_chunks=100
    )
