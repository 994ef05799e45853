"""``docs/bad_inputs.md`` publishes the classes of bad input the package is tested against: it
is linked from the docs index, and every test file or folder it names exists (patterns such as
``tests/ui/test_cli*.py`` match at least one file)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "bad_inputs.md"


def test_the_page_is_linked_from_the_docs_index():
    assert "](bad_inputs.md)" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")


def test_every_test_path_it_names_exists():
    text = PAGE.read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[^`]+)`", text)
    assert len(named) >= 15
    missing = [p for p in named if not (list(ROOT.glob(p.rstrip("/"))) if "*" in p else (ROOT / p).exists())]
    assert not missing, missing


def test_it_lists_classes_not_cases():
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert len(headings) >= 8
    assert any("full disk" in h.lower() or "storage" in h.lower() for h in headings)
