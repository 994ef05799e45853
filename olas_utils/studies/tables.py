"""Result tables of the notebooks: each written as CSV (for code) and Markdown (for
readers) side by side under ``results/``, and the per-item outcomes every table is computed
from (:func:`write_items`: Parquet when ``pyarrow`` is installed, else gzipped CSV)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pandas as pd

from olas_utils.infra.atomic import write_atomic, write_text_atomic

__all__ = ["ITEM_SUFFIXES", "write_table", "write_items", "read_items"]

#: The two formats of an items file, preferred first.
ITEM_SUFFIXES = (".parquet", ".csv.gz")


def write_table(df: pd.DataFrame, stem: str | Path, *, floatfmt: str = ".3f") -> tuple[Path, Path]:
    """Write ``df`` as ``<stem>.csv`` and ``<stem>.md`` (folders created; each written
    atomically, :func:`olas_utils.infra.atomic.write_text_atomic`). The Markdown shows floats with
    ``floatfmt``, except p-values (a column named ``p`` or ending in `` p``, e.g. ``seed p``), which
    keep 4 decimals.

    Returns:
        The two paths.
    """
    stem = Path(stem)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    is_p = [c == "p" or str(c).endswith(" p") for c in df.columns]
    fmt = [".4f" if q else floatfmt for q in is_p] if any(is_p) else floatfmt
    write_text_atomic(csv, df.to_csv(index=False, float_format="%.4f"), what="result table")
    write_text_atomic(md, df.to_markdown(index=False, floatfmt=fmt) + "\n", what="result table")
    return csv, md


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_items(df: pd.DataFrame, stem: str | Path, *, fmt: str | None = None) -> Path:
    """Write a long table of per-item outcomes as ``<stem>.parquet`` (``pyarrow`` installed)
    or ``<stem>.csv.gz`` (otherwise), atomically; a file of the other format at the same
    stem is removed, so :func:`read_items` never reads a stale one.

    Args:
        df: the items.
        stem: the path without suffix.
        fmt: ``"parquet"`` or ``"csv.gz"``; None picks Parquet when ``pyarrow`` is installed.

    Returns:
        The path written.

    Raises:
        ValueError: an unknown ``fmt``.
    """
    stem = Path(stem)
    if fmt is None:
        fmt = "parquet" if _has_pyarrow() else "csv.gz"
    if "." + fmt not in ITEM_SUFFIXES:
        raise ValueError(f"fmt must be 'parquet' or 'csv.gz', got {fmt!r}")
    if fmt == "parquet":
        path = stem.with_name(stem.name + ".parquet")
        buf = io.BytesIO()
        df.to_parquet(buf, index=False, engine="pyarrow")
        data = buf.getvalue()
    else:
        path = stem.with_name(stem.name + ".csv.gz")
        data = gzip.compress(df.to_csv(index=False).encode("utf-8"), mtime=0)
    write_atomic(path, lambda fh: fh.write(data), what="items file")
    for suffix in ITEM_SUFFIXES:
        other = stem.with_name(stem.name + suffix)
        if other != path:
            other.unlink(missing_ok=True)
    return path


def read_items(path: str | Path) -> pd.DataFrame:
    """Read an items file written by :func:`write_items`: ``path`` itself, or the stem it
    was written under (``<path>.parquet``, then ``<path>.csv.gz``). A gzipped CSV is read
    with ``keep_default_na=False``: a ``"-"`` or an empty label stays a string, and only an
    empty cell reads as NaN.

    Raises:
        FileNotFoundError: no such file under either suffix.
    """
    path = Path(path)
    candidates = [path] if path.is_file() else [path.with_name(path.name + s) for s in ITEM_SUFFIXES]
    for p in candidates:
        if p.is_file():
            if p.name.endswith(".parquet"):
                return pd.read_parquet(p)
            return pd.read_csv(p, keep_default_na=False, na_values=[""])
    raise FileNotFoundError(f"no items file at {path} (looked for {', '.join(str(c) for c in candidates)})")
