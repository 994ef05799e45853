"""Result tables of the notebooks: each written as CSV (for code) and Markdown (for
readers) side by side under ``results/``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["write_table"]


def write_table(df: pd.DataFrame, stem: str | Path, *, floatfmt: str = ".3f") -> tuple[Path, Path]:
    """Write ``df`` as ``<stem>.csv`` and ``<stem>.md`` (folders created).

    Returns:
        The two paths.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    df.to_csv(csv, index=False, float_format="%.4f")
    md.write_text(df.to_markdown(index=False, floatfmt=floatfmt) + "\n", encoding="utf-8")
    return csv, md
