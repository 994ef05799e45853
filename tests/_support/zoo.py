"""The shared model notes (``../shared/models.md``, written before the zoo's registry) as an
independent reference for the registry: each model's row, its layer count and its weights' SHA-256."""

from __future__ import annotations

import re
from pathlib import Path

NOTES = Path(__file__).resolve().parents[2].parent / "shared" / "models.md"


def model_rows() -> dict[str, str]:
    """``short name -> its table rows joined`` (a model may have two rows); ``{}`` without the notes.
    A name written ``name (optional, ...)`` is stored under ``name``, the row keeping the remark."""
    if not NOTES.is_file():
        return {}
    rows: dict[str, str] = {}
    for line in NOTES.read_text().splitlines():
        m = re.match(r"\| ([a-z0-9][a-z0-9.\-]*)( \([^|]*\))? \|", line)
        if m and m.group(1) != "short":
            rows[m.group(1)] = (rows.get(m.group(1), "") + " " + line).strip()
    return rows


def layers_in(row: str) -> int:
    """The layer count of a row: the first ``N ×`` (``N layers ×``) in it."""
    m = re.search(r"\| (?:[^|]*?, )?(\d+) (?:layers )?×", row)
    if m is None:
        raise ValueError(f"no 'N ×' layer count in {row[:80]!r}")
    return int(m.group(1))
