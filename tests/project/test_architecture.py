"""The package's layout is its architecture. ``docs/architecture.md`` is its one description:
each ``## <n> <wing>`` section is a wing at layer n with its modules listed; this file reads it
and enforces it: every module listed in exactly one wing, no import into a higher layer or into
another wing of the same layer, no circle, no private name shared across modules, a hard cap on
file length.

The imports are read from the source with ``ast`` (module level *and* inside functions), so a
lazy import inside a function counts like any other: it runs sooner or later.

``olas_utils/__init__.py`` is the front door: it re-exports lazily (PEP 562) and imports nothing
at import time, so it sits outside the layers; ``test_front_door`` checks what it offers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "olas_utils"
ARCHITECTURE = PKG.parent / "docs" / "architecture.md"
#: Hard cap on a module's length; below it, "one job per module" is a matter of review.
MAX_LINES = 600


def read_wings(text: str) -> dict[str, tuple[int, str]]:
    """``{module: (layer, wing)}`` from the page: rows ``| `name` | job |`` under ``## <n> <wing>``."""
    out: dict[str, tuple[int, str]] = {}
    where = None
    for line in text.splitlines():
        if m := re.match(r"## (\d+) (\w+)\s*$", line):
            where = (int(m.group(1)), m.group(2))
        elif line.startswith("## "):
            where = None
        elif m := re.match(r"\| `(olas_utils[\w.]*)` \| (.+) \|\s*$", line):
            assert where is not None, f"{m.group(1)} is listed outside a '## <n> <wing>' section"
            assert m.group(2).strip(), f"{m.group(1)} is listed without its job"
            assert m.group(1) not in out, f"{m.group(1)} is listed twice"
            out[m.group(1)] = where
    return out


WINGS = read_wings(ARCHITECTURE.read_text(encoding="utf-8"))


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The olas_utils modules that ``name`` imports anywhere in its source."""
    package = name if is_package(name, modules) else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import sub`` imports the submodule pkg.sub; ``from mod import name`` imports mod.
            # ``from olas_utils import __version__`` reads a constant of the front door, which
            # imports nothing: no edge (the package itself is always imported first anyway).
            targets = [
                f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
                for a in node.names
                if not (mod == "olas_utils" and a.name == "__version__")
            ]
        else:
            continue
        for t in targets:
            if t == "olas_utils" or t.startswith("olas_utils."):
                # ``import olas_utils.a.b`` without a module of that name: the longest known prefix
                while t not in modules and "." in t:
                    t = t.rpartition(".")[0]
                if t != name:
                    out.add(t)
    return out


def layer(name: str) -> tuple[int, str]:
    """(layer, wing) of a module, as docs/architecture.md lists it."""
    return WINGS[name]


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {n: imported_modules(n, p, modules) for n, p in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_imports_of_every_kind():
    # function-level, relative and ``from pkg import submodule`` imports all count
    g = import_graph()
    assert "olas_utils.maths.ola" in g["olas_utils.capture.attention"]
    assert "olas_utils.zoo.controls" in g["olas_utils.toa.taskmaps"]  # imported inside a method
    assert "olas_utils.toa.metrics" in g["olas_utils.toa.fit"]  # ``from olas_utils.toa import metrics``


def test_no_import_circle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_circle_finder_finds_circles():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_upward_or_sideways_import():
    bad = []
    for mod, deps in import_graph().items():
        if mod == "olas_utils":
            continue  # the front door
        (lm, pm) = layer(mod)
        for dep in deps:
            if dep == "olas_utils":
                bad.append(f"{mod} imports the front door olas_utils (import the module that defines the name)")
                continue
            (ld, pd) = layer(dep)
            if ld > lm or (ld == lm and pd != pm):
                bad.append(f"{mod} (layer {lm} {pm}) imports {dep} (layer {ld} {pd})")
    assert not bad, "\n".join(sorted(bad))


def test_no_file_over_the_hard_cap_and_each_module_says_its_job():
    long, undocumented = [], []
    for name, path in all_modules().items():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            long.append(f"{path.relative_to(PKG.parent)}: {n} lines")
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if not doc or len(doc.split()) < 4:
            undocumented.append(name)
    assert not long, f"files over {MAX_LINES} lines (split by job, not by length):\n" + "\n".join(long)
    assert not undocumented, "modules without an opening docstring that says their job: " + ", ".join(undocumented)


def private_imports(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """``from <another olas_utils module> import _name`` statements in ``name``'s source."""
    package = name if is_package(name, modules) else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if not (mod == "olas_utils" or mod.startswith("olas_utils.")) or mod == name:
            continue
        out += [
            f"{name}: from {mod} import {a.name}"
            for a in node.names
            if a.name.startswith("_") and not a.name.startswith("__")
        ]
    return out


def test_no_module_imports_another_modules_private_names():
    modules = all_modules()
    bad = [line for n, p in modules.items() for line in private_imports(n, p, modules)]
    assert not bad, "private names imported across modules (give them a public name):\n" + "\n".join(bad)


def test_the_private_import_finder_finds_them(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from olas_utils.similarity.x import _helper, public\nfrom . import _y\nfrom os import _exit\n")
    modules = {"olas_utils.similarity.m": src, "olas_utils.similarity.x": src}
    found = private_imports("olas_utils.similarity.m", src, modules)
    assert found == [
        "olas_utils.similarity.m: from olas_utils.similarity.x import _helper",
        "olas_utils.similarity.m: from olas_utils.similarity import _y",
    ]


def test_the_page_lists_every_module_once_and_nothing_else():
    listed, actual = set(WINGS), set(all_modules())
    assert sorted(actual - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - actual) == [], "docs/architecture.md lists modules that do not exist"


def test_a_wing_is_a_folder_or_the_root():
    """A subpackage's modules all sit in one wing, so the folders are the wings."""
    by_folder: dict[str, set[tuple[int, str]]] = {}
    for name in WINGS:
        if name == "olas_utils":
            continue
        parts = name.split(".")
        folder = parts[1] if (PKG / parts[1]).is_dir() else "<root>"
        by_folder.setdefault(folder, set()).add(WINGS[name])
    split = {f: sorted(w) for f, w in by_folder.items() if len(w) > 1 and f != "<root>"}
    assert not split, f"a folder split over several wings: {split}"


def test_the_wing_reader_sees_rows_and_layers():
    text = (
        "intro\n## 1 maths\n\n| module | its one job |\n|---|---|\n| `olas_utils.maths.ola` | The recurrence. |\n"
        "## 8 ui\n| `olas_utils.ui.cli` | The command line. |\n"
    )
    assert read_wings(text) == {"olas_utils.maths.ola": (1, "maths"), "olas_utils.ui.cli": (8, "ui")}
    with pytest.raises(AssertionError, match="outside"):
        read_wings("## notes\n| `olas_utils.x` | job |\n")


def test_front_door_imports_nothing_at_import_time():
    tree = ast.parse((PKG / "__init__.py").read_text())
    top_level_imports = [
        n
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    ]
    assert not top_level_imports, [ast.unparse(n) for n in top_level_imports]


def test_front_door():
    import olas_utils
    from olas_utils import OLAMaps, extract_ola, load_model
    from olas_utils.extract import OLAMaps as maps_cls
    from olas_utils.extract import extract_ola as extract_fn
    from olas_utils.zoo import load_model as load_fn

    assert (load_model, extract_ola, OLAMaps) == (load_fn, extract_fn, maps_cls)
    for name in olas_utils.__all__:
        assert getattr(olas_utils, name) is not None, name
    assert set(olas_utils.__all__) <= set(dir(olas_utils))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        olas_utils.no_such_name  # noqa: B018


ROOT = PKG.parent


def documented_texts() -> dict[str, str]:
    """The README, the Makefile, the data and benchmark READMEs, the notebooks, the benchmark
    scripts and the package's own docstrings and messages."""
    import json

    texts = {
        p.name: p.read_text()
        for p in (ROOT / "README.md", ROOT / "Makefile", ROOT / "data" / "README.md", ROOT / "benchmarks" / "README.md")
    }
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        texts[nb.name] = "\n".join("".join(c["source"]) for c in cells)
    for path in sorted(PKG.rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py")):
        texts[str(path.relative_to(ROOT))] = path.read_text()
    return texts


def resolve(dotted: str):
    """Import the longest module prefix of ``dotted`` and walk the rest as attributes."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_documented_path_exists():
    """Import lines, ``python -m`` modules and dotted names in the README, Makefile and
    notebooks all point at something that exists (so a move cannot leave them stale)."""
    import importlib.util
    import re

    bad = []
    for where, text in documented_texts().items():
        for line in re.findall(r"^\s*(from olas_utils[\w.]* import [\w, ]+|import olas_utils[\w.]*)", text, re.M):
            try:
                exec(line, {})
            except Exception as e:  # noqa: BLE001 - report every broken line
                bad.append(f"{where}: {line!r}: {type(e).__name__}: {e}")
        for mod in re.findall(r"-m (olas_utils[\w.]*)", text):
            spec = importlib.util.find_spec(mod)
            if spec is None or (
                spec.submodule_search_locations is not None and importlib.util.find_spec(mod + ".__main__") is None
            ):
                bad.append(f"{where}: `-m {mod}` cannot be run")
        for dotted in re.findall(r"\bolas_utils(?:\.\w+)+", text):
            try:
                resolve(dotted.rstrip("."))
            except (ImportError, AttributeError) as e:
                bad.append(f"{where}: {dotted}: {type(e).__name__}: {e}")
    assert not bad, "\n".join(bad)


def test_console_script_points_at_the_cli():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["olas"].partition(":")
    from olas_utils.ui.cli import main

    assert resolve(f"{module}.{func}") is main
