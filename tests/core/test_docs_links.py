"""Links into ``docs/`` resolve, and nothing points outside the repository any more.

Every ``docs/<page>.md#<anchor>`` written in the package (docstrings, comments, messages),
the notebooks, the README and the docs pages themselves names a page that exists and a
heading of that page whose GitHub anchor is ``<anchor>``; every relative Markdown link of
the docs pages names a file that exists. No file of the package or the notebooks refers to
the old notes outside the repository (``shared/paper.md``, ``design.md``, ``shared/models.md``).
Pure text, except that the dotted ``olas_utils`` names of the docs pages are resolved.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: ``docs/<page>.md`` with an optional ``#anchor``, wherever it is written (a relative link
#: such as ``../docs/method.md#x`` contains it too).
DOC_REF = re.compile(r"(?<![\w-])docs/([\w./-]+?\.md)(?:#([\w-]+))?")
#: Relative Markdown links of a docs page: ``[text](target)``.
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: What must not be referred to any more.
STALE = re.compile(r"shared/paper\.md|design\.md|shared/models\.md")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped (letters,
    digits, ``_``, ``-`` and spaces kept), each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()  # a link keeps its text
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (outside code blocks), with GitHub's ``-1``,
    ``-2`` ... suffixes for repeated headings."""
    out: set[str] = set()
    fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            a, n = github_anchor(m.group(1)), 1
            name = a
            while name in out:
                name, n = f"{a}-{n}", n + 1
            out.add(name)
    return out


def sources() -> dict[str, str]:
    """Text of every file that may link into docs/: the package, notebooks, README, docs."""
    files = sorted((ROOT / "olas_utils").rglob("*.py")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    files += [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}


def broken_refs(texts: dict[str, str]) -> list[str]:
    """``where: docs/page.md#anchor: why`` for every reference that does not resolve."""
    bad, cache = [], {}
    for where, text in texts.items():
        for page, anchor in DOC_REF.findall(text):
            path = DOCS / page
            if not path.is_file():
                bad.append(f"{where}: docs/{page}: no such page")
                continue
            if anchor and anchor not in cache.setdefault(path, anchors(path)):
                bad.append(f"{where}: docs/{page}#{anchor}: no heading with that anchor")
    return bad


def broken_links(page: Path) -> list[str]:
    """Relative links of a docs page whose file (and, within docs/, heading) does not exist."""
    bad = []
    for target in MD_LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            bad.append(f"{page.name}: {target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            bad.append(f"{page.name}: {target}: no heading with that anchor")
    return bad


def test_github_anchor_rules():
    assert github_anchor("Released code") == "released-code"
    assert github_anchor("TOA tasks and metrics") == "toa-tasks-and-metrics"
    assert github_anchor("Models (offline, from PyPI wheels)") == "models-offline-from-pypi-wheels"
    assert github_anchor("Order-k `OLA`: the recurrence!") == "order-k-ola-the-recurrence"
    assert github_anchor("`olas_utils.zoo` and [links](x.md)") == "olas_utilszoo-and-links"


def test_docs_exist():
    assert (DOCS / "README.md").is_file() and (DOCS / "method.md").is_file()


def test_every_docs_reference_resolves():
    texts = sources()
    assert sum(len(DOC_REF.findall(t)) for w, t in texts.items() if not w.startswith("docs/")) >= 20
    bad = broken_refs(texts)
    assert not bad, "\n".join(bad)


def test_every_relative_link_of_the_docs_resolves():
    bad = [b for page in sorted(DOCS.glob("*.md")) for b in broken_links(page)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "text, why",
    [
        ("see ``docs/method.md#no-such-section``", "no heading"),
        ("see [it](../docs/nothing.md#released-code)", "no such page"),
    ],
)
def test_a_broken_reference_is_found(text, why):
    assert any(why in b for b in broken_refs({"x.py": text}))
    assert not broken_refs({"x.py": "see ``docs/method.md#released-code``"})


def test_nothing_refers_to_notes_outside_the_repository():
    bad = [
        f"{where}:{i}: {line.strip()}"
        for where, text in sources().items()
        if not where.startswith(("docs/", "README.md"))
        for i, line in enumerate(text.splitlines(), 1)
        if STALE.search(line)
    ]
    assert not bad, "\n".join(bad)


def test_every_dotted_name_in_the_docs_resolves():
    """``olas_utils.x.y`` written in a docs page is a module or an attribute of one (the docs
    name the code they describe; a move or rename must update them)."""
    import importlib

    bad = []
    for page in sorted(DOCS.glob("*.md")):
        for dotted in sorted(set(re.findall(r"\bolas_utils(?:\.\w+)+", page.read_text(encoding="utf-8")))):
            parts = dotted.split(".")
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ModuleNotFoundError:
                    continue
                try:
                    for attr in parts[i:]:
                        obj = getattr(obj, attr)
                except AttributeError as e:
                    bad.append(f"{page.name}: {dotted}: {e}")
                break
    assert not bad, "\n".join(bad)
