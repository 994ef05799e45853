"""References from statistics libraries, made cheap enough to call in a loop."""

from __future__ import annotations

from unittest import mock

import numpy as np


def statsmodels_holm(p_values, alpha: float = 0.05) -> np.ndarray:
    """Holm's rejections by ``statsmodels.stats.multitest.multipletests(method="holm")``.

    statsmodels runs ``gc.collect()`` on every Holm call: seconds in a process that has collected
    the whole test suite. The collection changes no result, so it is skipped here."""
    from statsmodels.stats.multitest import multipletests

    with mock.patch("gc.collect", lambda *a: 0):
        return multipletests(np.asarray(p_values, dtype=float), alpha=alpha, method="holm")[0]
