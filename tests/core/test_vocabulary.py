"""The core vocabulary: map keys parse and format in one place, every control has every label,
and each control label is defined once in the package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from olas_utils.extract import parse_key
from olas_utils.vocabulary import (
    CONTROL_LABELS,
    FAMILIES,
    KEY_METHODS,
    Control,
    KeyMethod,
    MapKey,
    family_of,
    key_label,
)

PACKAGE = Path(__file__).resolve().parents[2] / "olas_utils"


@pytest.mark.parametrize(
    "text, method, index",
    [
        ("ola:0", "ola", 0),
        ("ola:2", "ola", 2),
        ("rollout", "rollout", None),
        ("layer:0", "layer", 0),
        ("layer:-1", "layer", -1),
    ],
)
def test_keys_round_trip(text, method, index):
    key = MapKey.parse(text)
    assert (key.method, key.index) == (method, index)
    assert str(key) == text and MapKey.parse(str(key)) == key and MapKey.parse(key) is key
    assert key.order == (index if method == "ola" else None)


def test_key_builders_format_like_the_parser():
    assert str(MapKey.ola(3)) == "ola:3" and str(MapKey.layer(-1)) == "layer:-1" and str(MapKey("rollout")) == "rollout"
    assert MapKey.ola(2) == MapKey.parse("ola:2") and hash(MapKey.ola(2)) == hash(MapKey.parse("ola:2"))


@pytest.mark.parametrize(
    "bad",
    [
        "ola:x",
        "ola:-1",
        "rolout",
        "ola",
        "ola:",
        "rollout:1",
        "layer:1.5",
        "layer",
        "",
        "ola:2:3",
        "OLA:1",
        "nosuch:2",
        "alti:1.5",
    ],
)
def test_bad_keys_are_refused(bad):
    with pytest.raises(ValueError):
        MapKey.parse(bad)
    with pytest.raises(ValueError, match="unknown map name"):
        parse_key(bad, 6)


def test_keys_are_bounded_by_the_model():
    assert parse_key("layer:-6", 6) == ("layer", -6) and parse_key("ola:6", 6) == ("ola", 6)
    assert parse_key("rollout", 6) == ("rollout", None)
    for bad in ("layer:99", "layer:6", "layer:-7", "ola:7"):
        with pytest.raises(ValueError, match="outside|exceeds"):
            parse_key(bad, 6)
    with pytest.raises(ValueError, match="outside"):
        MapKey.parse("layer:99").check(6)


def test_a_new_method_is_one_row(monkeypatch):
    monkeypatch.setitem(KEY_METHODS, "alti", KeyMethod("order", optional=True))
    monkeypatch.setitem(KEY_METHODS, "valuenorm", KeyMethod("none"))
    for text in ("alti", "alti:2", "valuenorm"):
        assert str(MapKey.parse(text)) == text
    assert MapKey.parse("alti:2").order is None  # only "ola:k" is an OLA order
    with pytest.raises(ValueError):
        MapKey.parse("valuenorm:1")
    with pytest.raises(ValueError, match="exceeds"):
        MapKey.parse("alti:9").check(6)


def test_key_labels():
    assert key_label("ola:2") == "OLA order 2" and key_label(MapKey.layer(-1)) == "last-layer attention"
    assert key_label("layer:3") == "layer:3"


def test_every_control_has_every_label_and_each_label_names_one_control():
    assert set(CONTROL_LABELS) == set(Control)
    for c in Control:
        row = c.labels
        for s in (row.ident, row.condition, row.label):
            assert isinstance(s, str) and s and s == s.strip()
        assert Control.parse(c.ident) is c and Control.parse(c.condition) is c and Control.parse(c) is c
    for field in ("ident", "condition", "label"):
        values = [getattr(r, field) for r in CONTROL_LABELS.values()]
        assert len(set(values)) == len(values), field
    idents = {r.ident for r in CONTROL_LABELS.values()}
    conditions = {r.condition: c for c, r in CONTROL_LABELS.items()}
    assert all(conditions.get(i, c) is c for c, i in ((c, c.ident) for c in Control))  # no cross-control clash
    assert idents


@pytest.mark.parametrize("bad", [None, "nope", "Uniform", "", "tokenizer only"])
def test_unknown_controls_are_refused(bad):
    with pytest.raises(ValueError, match="unknown control"):
        Control.parse(bad)


def test_the_strings_tables_and_caches_print_today():
    """Pinned: these strings are in committed tables, cache keys and seeds."""
    got = {c.name: (c.ident, c.condition) for c in Control}
    assert got["TRAINED"] == ("none", "ola")
    assert got["TOKENIZER_ONLY"][:2] == ("uniform", "tokenizer-only")
    assert got["RANDOM_WEIGHTS"][0] == "random" and got["SHUFFLED_LAYERS"][0] == "shuffled"
    assert got["POSITION_ONLY"][1] == "position-only"
    assert got["RANDOM_INIT_TARGET"][1] == "random-init target" and got["BASELINE"][1] == "baseline"
    assert Control.TOKENIZER_ONLY.label == "tokenizer only (uniform attention)"
    assert Control.RANDOM_WEIGHTS.label == "randomly re-initialised weights"
    assert Control.SHUFFLED_LAYERS.label == "shuffled layers"
    assert [
        Control.TOKENIZER_ONLY.copy_suffix(5),
        Control.RANDOM_WEIGHTS.copy_suffix(0),
        Control.SHUFFLED_LAYERS.copy_suffix(3),
    ] == ["+uniform", "+random(seed=0)", "+shuffled(seed=3)"]
    assert Control.TRAINED.cache_id is None and Control.RANDOM_WEIGHTS.cache_id == "random"
    assert Control.RANDOM_INIT_TARGET.maps is Control.RANDOM_WEIGHTS and Control.BASELINE.maps is None
    assert Control.POSITION_ONLY.positions and not Control.TOKENIZER_ONLY.positions


#: Control strings that are also the names of other concepts, so they legitimately appear
#: elsewhere: "none" (e.g. ``normalize="none"``), "ola" (the map method and feature source),
#: "uniform" (``extract_ola(attention="uniform")``).
SHARED_WORDS = {"none", "ola", "uniform"}


def _quoted(text: str) -> list[tuple[str, int]]:
    pat = re.compile(r"""(["'])""" + re.escape(text) + r"\1")
    return [
        (str(p.relative_to(PACKAGE)), i)
        for p in sorted(PACKAGE.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pat.search(line)
    ]


def _label_table_rows() -> tuple[list[list[str]], range]:
    """The string constants of each row of ``CONTROL_LABELS`` (read with ``ast``, whatever
    the formatting) and the line span of the table in vocabulary.py."""
    tree = ast.parse((PACKAGE / "vocabulary.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "CONTROL_LABELS":
            rows = [
                [c.value for c in ast.walk(v) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                for v in node.value.values
            ]
            return rows, range(node.lineno, node.end_lineno + 1)
    raise AssertionError("CONTROL_LABELS not found in vocabulary.py")


@pytest.mark.parametrize(
    "text", sorted({s for r in CONTROL_LABELS.values() for s in (r.ident, r.condition, r.label)} - SHARED_WORDS)
)
def test_each_control_label_is_defined_once_in_the_package(text):
    rows, span = _label_table_rows()
    assert sum(text in row for row in rows) == 1, f"{text!r} must be written in exactly one row of CONTROL_LABELS"
    elsewhere = [(f, i) for f, i in _quoted(text) if not (f == "vocabulary.py" and i in span)]
    assert not elsewhere, elsewhere


def test_shared_words_are_still_spelled_once_by_the_label_table():
    rows, _ = _label_table_rows()
    for word in SHARED_WORDS:
        assert sum(word in row for row in rows) == 1, word


def test_families():
    assert FAMILIES == ("encoder", "causal") and family_of(True) == "causal" and family_of(False) == "encoder"
