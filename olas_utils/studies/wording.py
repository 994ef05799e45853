"""How notebook 02's readings word a number, an interval and a verdict (shared by
:mod:`olas_utils.studies.crosslm_report` and :mod:`olas_utils.studies.crossfamily`, so every
sentence of the two reads the same way). Fractions in, percent out."""

from __future__ import annotations

import pandas as pd

from olas_utils.stats.uncertainty import BEATS, INDISTINGUISHABLE, LOSES

__all__ = ["pct", "percent_ci", "points_ci", "verdict_counts", "VERDICT_SAYS"]


def pct(x: float) -> str:
    """``"58.3 %"``: a fraction in percent."""
    return f"{100 * x:.1f} %"


def percent_ci(est: float, low: float, high: float) -> str:
    """``"58.3 % [50.1, 66.0]"``: a fraction in percent with its interval."""
    return f"{100 * est:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"


def points_ci(est: float, low: float, high: float) -> str:
    """A margin in percentage points with its interval, signed."""
    return f"{100 * est:+.1f} points [{100 * low:+.1f}, {100 * high:+.1f}]"


def verdict_counts(verdicts_: pd.Series) -> str:
    """``"2 beat, 9 indistinguishable, 1 lose (of 12)"``: a column of three-way verdicts counted."""
    c = verdicts_.value_counts()
    return f"{int(c.get(BEATS, 0))} beat, {int(c.get(INDISTINGUISHABLE, 0))} indistinguishable, {int(c.get(LOSES, 0))} lose (of {len(verdicts_)})"


#: A verdict against the strongest control, as the readings state it.
VERDICT_SAYS = {
    BEATS: "**beats** its strongest control",
    INDISTINGUISHABLE: "**indistinguishable** from its strongest control",
    LOSES: "**loses** to its strongest control",
}
