"""Nothing committed is older than its code: every statistics table of every committed profile
equals what the current code computes from that profile's committed per-item files
(:func:`olas_utils.studies.restat.tables_of`, the functions the notebooks call), with the same
files, columns, rows and verdicts."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from olas_utils.studies.restat import tables_of

RESULTS = Path(__file__).resolve().parents[2] / "results"
PROFILES = [".", "mixing", "flow", "gemma", "wide", "tagging", "paper-size"]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.slow  # 70 s measured alone at 1 thread (docs/testing.md)
def test_committed_tables_equal_the_current_code_on_the_committed_items(profile):
    folder = RESULTS / profile
    for name, fresh in tables_of(folder).items():
        path = folder / f"{name}.csv"
        assert path.is_file(), (
            f"{path} is missing: the current notebook writes it (python -m olas_utils.studies.restat)"
        )
        if fresh.empty:
            assert path.read_text().strip() == "", f"{path} should be empty"
            continue
        old = pd.read_csv(path)
        fresh = pd.read_csv(pd.io.common.StringIO(fresh.to_csv(index=False, float_format="%.4f")))
        assert list(old.columns) == list(fresh.columns), f"{path}: columns differ from the current code's"
        assert len(old) == len(fresh), f"{path}: {len(old)} rows, the current code gives {len(fresh)}"
        for col in old.columns:
            a, b = old[col], fresh[col]
            if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
                assert np.allclose(a.to_numpy(float), b.to_numpy(float), atol=2e-4, equal_nan=True), f"{path}: {col}"
            else:
                assert a.fillna("").astype(str).tolist() == b.fillna("").astype(str).tolist(), f"{path}: {col}"
