"""Progress bars: a batch run (``OLAS_PROGRESS=text``) writes plain text lines, not a widget."""

from __future__ import annotations

import io

import pytest
import tqdm as tqdm_pkg
from tqdm.auto import tqdm as tqdm_auto

from olas_utils.infra.progress import progress_mode, tqdm


def test_text_mode_writes_plain_lines(monkeypatch):
    monkeypatch.setenv("OLAS_PROGRESS", "text")
    out = io.StringIO()
    for _ in tqdm(range(7), desc="step", file=out):
        pass
    text = out.getvalue()
    assert "step: 100%" in text and "7/7" in text
    assert all(ord(ch) < 128 for ch in text), "text mode draws ASCII bars"


def test_text_mode_is_plain_tqdm_and_off_disables(monkeypatch):
    monkeypatch.setenv("OLAS_PROGRESS", "text")
    bar = tqdm(total=3, file=io.StringIO())
    assert type(bar) is tqdm_pkg.std.tqdm  # never the notebook widget subclass
    assert bar.mininterval >= 10, "a log gets a line every few seconds at most"
    bar.close()
    monkeypatch.setenv("OLAS_PROGRESS", "auto")
    bar = tqdm(total=3, file=io.StringIO())
    assert isinstance(bar, tqdm_auto) and bar.mininterval < 10
    bar.close()
    monkeypatch.setenv("OLAS_PROGRESS", "off")
    out = io.StringIO()
    for _ in tqdm(range(3), desc="quiet", file=out):
        pass
    assert out.getvalue() == ""


def test_unknown_mode_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setenv("OLAS_PROGRESS", "loud")
    with pytest.raises(ValueError, match="OLAS_PROGRESS=text"):
        progress_mode()
    monkeypatch.delenv("OLAS_PROGRESS")
    assert progress_mode() == "auto"
