"""The primary claims: Holm over each reading against statsmodels, the status words on
hand-made cells, and the committed table, figure and README block in step with the committed
per-item files."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from olas_utils.stats.across_models import NOT_TESTABLE
from olas_utils.studies import claims

ROOT = Path(__file__).resolve().parents[2]


def test_holm_verdicts_skip_cells_without_a_test_and_match_statsmodels():
    est = [0.3, -0.2, 0.1, 0.5]
    p = [0.001, 0.004, np.nan, 0.03]
    got = claims.holm_verdicts(est, p)
    reject = multipletests([0.001, 0.004, 0.03], alpha=0.05, method="holm")[0]
    assert got[2] == NOT_TESTABLE
    expect = [("beats" if e > 0 else "loses") if r else "indistinguishable" for e, r in zip([0.3, -0.2, 0.5], reject)]
    assert [got[0], got[1], got[3]] == expect == ["beats", "loses", "beats"]


def _cells(verdicts, across):
    return pd.DataFrame(
        {
            "claim": "C1",
            "cell": "x",
            "family": [f"f{i}" for i in range(len(verdicts))],
            "margin": 0.1,
            "low": 0.05,
            "high": 0.15,
            "models": 6.0,
            "verdict": verdicts,
            "across_verdict": across,
        }
    )


@pytest.mark.parametrize(
    "verdicts, across, says",
    [
        (["beats", "beats"], ["beats", "beats"], "holds across models"),
        (["beats", "beats"], [NOT_TESTABLE, NOT_TESTABLE], "holds on these models**; not testable across models"),
        (["beats", "beats"], ["indistinguishable", NOT_TESTABLE], "across models 0 of 1 testable"),
        (["loses", "indistinguishable"], [NOT_TESTABLE] * 2, "does not hold**: loses in 1 of 2 cells"),
        (["indistinguishable"] * 2, [NOT_TESTABLE] * 2, "not shown** on these models (2 of 2"),
        (["beats", "loses"], [NOT_TESTABLE] * 2, "holds in 1 of 2 cells** on these models, loses in 1"),
    ],
)
def test_status_words_by_hand(verdicts, across, says):
    assert says in claims.findings_markdown(_cells(verdicts, across))


@pytest.mark.slow  # 24 s measured alone at 1 thread (docs/testing.md)
def test_committed_primary_table_figure_and_readme_are_in_step_with_the_items():
    fresh = claims.primary_frame(ROOT / "results")
    old = pd.read_csv(ROOT / "results" / "primary_claims.csv")
    assert list(old.columns) == list(fresh.columns) and len(old) == len(fresh)
    assert old["verdict"].tolist() == fresh["verdict"].tolist()
    assert old["across_verdict"].tolist() == fresh["across_verdict"].tolist()
    assert np.allclose(old["margin"], fresh["margin"], atol=2e-4)
    assert set(claims.CLAIMS) == set(fresh["claim"])
    # C1 and C2 read on every offline model: the across-models reading counts each model of the
    # profile's family once (issue 43, item 4)
    from olas_utils.studies import crosslm
    from olas_utils.zoo.registry import REGISTRY

    c12 = fresh[fresh.claim.isin(["C1", "C2"])]
    assert set(c12.profile) == {claims.MODELS_PROFILE}
    zoo = crosslm.PROFILES[claims.MODELS_PROFILE].models
    n = {f: sum(REGISTRY[m].family == f for m in zoo) for f in ("encoder", "causal")}
    assert n == {"encoder": 7, "causal": 4} and (c12.models == c12.family.map(n)).all()
    assert (ROOT / "figures" / "primary_claims.png").is_file()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(claims.START)[1].split(claims.END)[0]
    assert block.strip() == claims.findings_markdown(old).strip(), (
        "README's findings table is out of step: python -m olas_utils.studies.claims --results-dir results "
        "--figures-dir figures --readme README.md"
    )
