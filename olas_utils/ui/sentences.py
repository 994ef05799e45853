"""Sentences files of the ``olas`` command line: one sentence a line, words split at whitespace,
each sentence remembering its 1-based line so an error about it can name the line."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["read_sentences", "with_lines"]


class _Sentences(list):
    """Sentences read from a file, with the 1-based line number of each (``lines``)."""

    path: Path
    lines: list[int]


def read_sentences(path: str | Path) -> list[list[str]]:
    """Sentences from a text file: one sentence per line, words separated by whitespace;
    blank lines are skipped.

    Args:
        path: a UTF-8 text file.

    Returns:
        One list of words per non-blank line (a list with ``.lines``, the 1-based line
        number of each sentence in the file, and ``.path``).

    A UTF-8 byte-order mark at the start of the file (Windows editors write one) is dropped.

    Raises:
        FileNotFoundError: if the file does not exist.
        IsADirectoryError: if ``path`` is a folder.
        ValueError: if it holds no sentence, or is not UTF-8 (naming the first bad line).
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"input {path} is a directory; give a text file (one sentence per line)")
    if not path.exists():
        raise FileNotFoundError(f"input file {path} does not exist")
    raw = path.read_bytes()  # a regular file, or a device / pipe such as /dev/stdin or <(...)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ValueError(
            f"{path} is not UTF-8 (line {line}: byte 0x{raw[e.start]:02x}); convert it to UTF-8, "
            f"e.g. iconv -f latin1 -t utf-8 {path} > utf8.txt"
        ) from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is not part of the first word
    sents = _Sentences()
    sents.path, sents.lines = path, []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            sents.append(line.split())
            sents.lines.append(n)
    if not sents:
        what = "is empty" if not raw else "holds only blank lines"
        raise ValueError(
            f"input {path} {what}: it holds no sentence; give a text file with one sentence per line, "
            "words separated by spaces"
        )
    return sents


def with_lines(error: Exception, sentences) -> Exception:
    """The same error with "sentence i" turned into "line L of FILE (sentence i)"."""
    lines = getattr(sentences, "lines", None)
    if lines is None:
        return error

    def sub(m: re.Match) -> str:
        i = int(m.group(1))
        return f"line {lines[i]} of {sentences.path} (sentence {i})" if 0 <= i < len(lines) else m.group(0)

    msg, n = re.subn(r"\bsentence (\d+)\b", sub, str(error))
    if not n:
        return error
    try:
        new = type(error)(msg)
    except Exception:  # noqa: BLE001 - exotic exception signatures keep their own text
        return error
    new.__cause__ = error
    return new
