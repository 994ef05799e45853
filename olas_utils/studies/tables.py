"""Result tables of the notebooks: each written as CSV (for code) and Markdown (for
readers) side by side under ``results/``, and the per-item outcomes they are computed from
as gzipped CSV beside them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from olas_utils.atomic import write_bytes_atomic, write_text_atomic

__all__ = ["write_table", "write_items", "read_items"]


def write_table(df: pd.DataFrame, stem: str | Path, *, floatfmt: str = ".3f") -> tuple[Path, Path]:
    """Write ``df`` as ``<stem>.csv`` and ``<stem>.md`` (folders created; each written
    atomically, :func:`olas_utils.atomic.write_text_atomic`). The Markdown shows floats with
    ``floatfmt``, except p-values (a column named ``p``), which keep 4 decimals.

    Returns:
        The two paths.
    """
    stem = Path(stem)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    fmt = [".4f" if c == "p" else floatfmt for c in df.columns] if "p" in df.columns else floatfmt
    write_text_atomic(csv, df.to_csv(index=False, float_format="%.4f"), what="result table")
    write_text_atomic(md, df.to_markdown(index=False, floatfmt=fmt) + "\n", what="result table")
    return csv, md


def write_items(df: pd.DataFrame, stem: str | Path) -> Path:
    """Write per-item outcomes ``df`` (one row per run and sentence) as ``<stem>.csv.gz``
    (gzip without a time stamp, so equal outcomes give equal bytes; written atomically).

    Returns:
        The path.
    """
    import gzip

    path = Path(stem).with_suffix(".csv.gz")
    data = gzip.compress(df.to_csv(index=False, float_format="%.6g").encode("utf-8"), mtime=0)
    write_bytes_atomic(path, data, what="per-item outcomes")
    return path


def read_items(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_items` (``keep_default_na=False``: a ``"-"`` or
    an empty label stays a string; missing outcome columns read as NaN)."""
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    return df
