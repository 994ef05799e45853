"""Result tables of the notebooks: each written as CSV (for code) and Markdown (for
readers) side by side under ``results/``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from olas_utils.atomic import write_text_atomic

__all__ = ["write_table"]


def write_table(df: pd.DataFrame, stem: str | Path, *, floatfmt: str = ".3f") -> tuple[Path, Path]:
    """Write ``df`` as ``<stem>.csv`` and ``<stem>.md`` (folders created; each written
    atomically, :func:`olas_utils.atomic.write_text_atomic`).

    Returns:
        The two paths.
    """
    stem = Path(stem)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    write_text_atomic(csv, df.to_csv(index=False, float_format="%.4f"), what="result table")
    write_text_atomic(md, df.to_markdown(index=False, floatfmt=floatfmt) + "\n", what="result table")
    return csv, md
