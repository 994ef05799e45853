"""SemEval-2010 Task 8 relation classification: its labels, tokeniser and reader.

:data:`SEMEVAL_LABELS` lists the 19 directed labels in the Hugging Face ClassLabel order,
:func:`tokenize_semeval` splits a tagged sentence into words and entity spans, and
:func:`load_semeval2010_task8` reads the train or test file under the data folder.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterator

import datasets

from olas_utils.data.files import (
    INT_SEQ,
    RESTORE_HINT,
    STR_SEQ,
    DataFormatError,
    canonical_split,
    data_file,
    file_key,
    text_lines,
    to_columns,
    to_dataset,
)

__all__ = ["SEMEVAL_LABELS", "tokenize_semeval", "load_semeval2010_task8"]


_SEMEVAL_RELATIONS = (
    "Cause-Effect",
    "Component-Whole",
    "Content-Container",
    "Entity-Destination",
    "Entity-Origin",
    "Instrument-Agency",
    "Member-Collection",
    "Message-Topic",
    "Product-Producer",
)

#: The 19 SemEval-2010 Task 8 labels: the 9 relations in alphabetical order, each as
#: ``(e1,e2)`` then ``(e2,e1)``, then ``Other`` last (index 18). This is the order of the
#: Hugging Face ``sem_eval_2010_task_8`` ClassLabel, so integer ids agree with it.
SEMEVAL_LABELS: tuple[str, ...] = tuple(f"{rel}{d}" for rel in _SEMEVAL_RELATIONS for d in ("(e1,e2)", "(e2,e1)")) + (
    "Other",
)


_SEMEVAL_TAG = re.compile(r"(</?e[12]>)")
_SEMEVAL_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|'s\b|[^\w\s]")
_SEMEVAL_HEADER = re.compile(r'^(\d+)\t"(.*)"\s*$')
_SEMEVAL_LABEL = re.compile(r"^(.+)(\(e1,e2\)|\(e2,e1\))$")


def tokenize_semeval(sentence: str) -> tuple[list[str], tuple[int, int], tuple[int, int]]:
    """Split a SemEval-2010 Task 8 sentence into words and locate its two entities.

    Tokenisation rule: the entity tags ``<e1> </e1> <e2> </e2>`` are removed and always
    act as word boundaries; each stretch of text between them is split into

    * words: runs of letters/digits/underscore, which may be joined by single inner
      hyphens, apostrophes or periods (``e-mail``, ``Hideyoshi's``, ``don't``, ``3.5``);
    * the clitic ``'s`` when it directly follows an entity (``<e1>factory</e1>'s`` gives
      ``factory``, ``'s``);
    * every other non-space character as its own token (``,`` ``.`` ``"`` ``(`` ``$``...).

    Args:
        sentence: the sentence without its surrounding double quotes.

    Returns:
        ``(words, e1_span, e2_span)``; spans are ``[start, end)`` word indices.

    Raises:
        ValueError: unless each of ``<e1>…</e1>`` and ``<e2>…</e2>`` occurs exactly once,
            properly opened and closed, around at least one word.
    """
    words: list[str] = []
    starts: dict[str, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    for piece in _SEMEVAL_TAG.split(sentence):
        if _SEMEVAL_TAG.fullmatch(piece):
            name = piece.strip("</>")
            if not piece.startswith("</"):
                if name in starts or name in spans:
                    raise ValueError(f"entity <{name}> opened twice in {sentence!r}")
                starts[name] = len(words)
            else:
                if name not in starts:
                    raise ValueError(f"</{name}> without <{name}> in {sentence!r}")
                spans[name] = (starts.pop(name), len(words))
        else:
            words.extend(_SEMEVAL_TOKEN.findall(piece))
    if starts or set(spans) != {"e1", "e2"} or any(s >= e for s, e in spans.values()):
        raise ValueError(f"expected one non-empty <e1> and <e2> entity in {sentence!r}")
    return words, spans["e1"], spans["e2"]


def _semeval_label_parts(label: str) -> tuple[str, str | None]:
    """``"Cause-Effect(e2,e1)"`` → ``("Cause-Effect", "(e2,e1)")``; ``"Other"`` → ``("Other", None)``."""
    if label not in SEMEVAL_LABELS:
        raise ValueError(f"unknown SemEval-2010 Task 8 label {label!r}")
    m = _SEMEVAL_LABEL.match(label)
    return (m.group(1), m.group(2)) if m else (label, None)


def _semeval_blocks(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first_line_number, [id line, label line, comment line])`` for each example.

    An example is exactly an ``ID<TAB>"sentence"`` line, a label line and a ``Comment:`` line,
    then a blank line (the last example may end the file without it); extra blank lines
    between examples are allowed.

    Raises:
        DataFormatError: anything else, naming the file and the 1-based line.
    """
    block, start = [], 0
    for lineno, line in text_lines(path):
        line = line.rstrip("\r")
        blank = not line.strip()
        if len(block) == 3:
            if not blank:
                raise DataFormatError(
                    f"{path}:{lineno}: expected the blank line that ends the example of line {start} (an example "
                    f"is an ID line, a label line and a 'Comment:' line, then a blank line), got {line[:60]!r}; "
                    f"{RESTORE_HINT}"
                )
            yield start, block
            block = []
        elif blank:
            if block:
                what = "label line" if len(block) == 1 else "'Comment:' line"
                raise DataFormatError(
                    f"{path}:{lineno}: expected the {what} of the example of line {start}, "
                    f"got a blank line; {RESTORE_HINT}"
                )
        else:
            if not block:
                start = lineno
                if _SEMEVAL_HEADER.match(line) is None:
                    raise DataFormatError(
                        f"{path}:{lineno}: expected an 'ID<TAB>\"sentence\"' line, got {line[:60]!r}; {RESTORE_HINT}"
                    )
            elif len(block) == 1 and line.strip() not in SEMEVAL_LABELS:
                raise DataFormatError(
                    f"{path}:{lineno}: expected one of the 19 labels (e.g. 'Other', "
                    f"'Cause-Effect(e1,e2)'), got {line[:60]!r}; {RESTORE_HINT}"
                )
            elif len(block) == 2 and not line.startswith("Comment"):
                raise DataFormatError(
                    f"{path}:{lineno}: expected the 'Comment:' line of the example of line "
                    f"{start}, got {line[:60]!r}; {RESTORE_HINT}"
                )
            block.append(line)
    if len(block) == 3:
        yield start, block
    elif block:
        raise DataFormatError(
            f"{path}:{start}: the file ends inside the example that starts here (it has "
            f"{len(block)} of its 3 lines): the file looks cut; {RESTORE_HINT}"
        )


def _semeval_row(path: Path, lineno: int, block: list[str]) -> dict:
    """Parse one example block (header line, label line, comment line).

    Raises:
        DataFormatError: for a sentence whose entity tags are malformed (file and line named).
    """
    header = _SEMEVAL_HEADER.match(block[0])
    label = block[1].strip()
    try:
        words, e1, e2 = tokenize_semeval(header.group(2))
        relation, direction = _semeval_label_parts(label)
    except ValueError as e:
        raise DataFormatError(f"{path}:{lineno}: {e}") from e
    return {
        "id": header.group(1),
        "words": tuple(words),
        "e1_span": e1,
        "e2_span": e2,
        "label": label,
        "relation": relation,
        "direction": direction,
    }


_SEMEVAL_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "words": STR_SEQ,
        "e1_span": INT_SEQ,
        "e2_span": INT_SEQ,
        "label": datasets.Value("string"),
        "relation": datasets.Value("string"),
        "direction": datasets.Value("string"),
    }
)


@functools.lru_cache(maxsize=8)
def _parse_semeval(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple]:
    p = Path(path)
    rows = (_semeval_row(p, n, b) for n, b in _semeval_blocks(p))
    return to_columns(rows, list(_SEMEVAL_FEATURES))


_SEMEVAL_FILES = {
    "train": "semeval2010_task8/SemEval2010_task8_training/TRAIN_FILE.TXT",
    "test": "semeval2010_task8/SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT",
}


def load_semeval2010_task8(
    split: str, data_dir: str | os.PathLike | None = None, *, verify: bool | None = None
) -> datasets.Dataset:
    """SemEval-2010 Task 8 relation classification (full release).

    Files: train ``SemEval2010_task8_training/TRAIN_FILE.TXT`` (8,000 examples), test
    ``SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT`` (2,717; directed gold labels),
    under ``semeval2010_task8/``. Each example is ``ID<TAB>"sentence with <e1>…</e1> and
    <e2>…</e2>"``, a label line, a ``Comment:`` line and a blank line (CRLF line ends).

    Args:
        split: ``"train"`` or ``"test"``.
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.
        verify: check the file against the data folder's ``SHA256SUMS`` (default: True unless
            ``OLAS_DATA_VERIFY=0``); False for a copy you edited on purpose (warns once).

    Returns:
        Columns ``id`` (str, the example number), ``words`` (list[str], tokenised by
        :func:`tokenize_semeval`, entity tags removed), ``e1_span`` / ``e2_span`` (``[start,
        end)`` word indices of the entities), ``label`` (one of :data:`SEMEVAL_LABELS`,
        e.g. ``"Cause-Effect(e2,e1)"``), ``relation`` (undirected, e.g. ``"Cause-Effect"``
        or ``"Other"``), ``direction`` (``"(e1,e2)"``, ``"(e2,e1)"``, or None for Other).

    Raises:
        ValueError: unknown split.
        DataFormatError: a malformed example, or a file cut inside one (with file and line).
        DataChecksumError: the file is not the one the data folder's ``SHA256SUMS`` lists.
        FileNotFoundError: the data folder or the split's file is missing.
    """
    canon = canonical_split(split, {"train": "train", "test": "test"}, "SemEval-2010 Task 8")
    path = data_file(data_dir, _SEMEVAL_FILES[canon], "SemEval-2010 Task 8", verify)
    return to_dataset(_parse_semeval(*file_key(path)), _SEMEVAL_FEATURES)
