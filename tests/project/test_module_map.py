"""docs/architecture.md lists every module of the package, in its layer, and nothing else:
the page is the hand review of "one job per module", so a new module cannot skip it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "olas_utils"
LAYERS = ("data", "zoo", "similarity", "toa", "studies", "ui")


def package_modules() -> dict[str, str]:
    """``{module name: layer}`` of every ``.py`` file of the package."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG).with_suffix("").parts)
        layer = parts[0] if len(parts) > 1 and parts[0] in LAYERS else "core"
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["olas_utils", *parts])] = layer
    return out


def listed_modules(text: str) -> dict[str, str]:
    """``{module name: layer}`` from the page: table rows ``| `name` | job |`` under ``## layer``."""
    out, layer = {}, None
    for line in text.splitlines():
        if m := re.match(r"## (\w+)\s*$", line):
            layer = m.group(1)
        elif m := re.match(r"\| `(olas_utils[\w.]*)` \| (.+) \|\s*$", line):
            assert m.group(2).strip(), f"{m.group(1)} is listed without its job"
            out[m.group(1)] = layer
    return out


def test_the_module_map_lists_every_module_in_its_layer():
    listed = listed_modules((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    actual = package_modules()
    assert sorted(set(actual) - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - set(actual)) == [], "docs/architecture.md lists modules that do not exist"
    wrong = {m: (listed[m], actual[m]) for m in actual if listed[m] != actual[m]}
    assert not wrong, f"listed under the wrong layer (listed, actual): {wrong}"


def test_the_map_reader_sees_rows_and_layers():
    text = "## core\n\n| module | its one job |\n|---|---|\n| `olas_utils.ola` | The recurrence. |\n## ui\n| `olas_utils.ui.cli` | The command line. |\n"
    assert listed_modules(text) == {"olas_utils.ola": "core", "olas_utils.ui.cli": "ui"}
