"""The similarity corpus: chunks of consecutive words from whole documents.

A stand-in for the paper's 50-word chunks of CoNLL-2012 training documents (Liang et al.,
NeurIPS 2025): ``source="conll2003"`` (default, :func:`olas_utils.data.load_conll2003`) or
``"ewt"`` (:func:`olas_utils.data.load_ud_ewt`). Rule: each document's words concatenated, cut
into non-overlapping ``chunk_words`` chunks from its first word (remainder dropped), all chunks
permuted with ``numpy.random.default_rng(seed).permutation``, the first ``n_chunks`` kept
(``docs/method.md#corpus``).

Importing this module does no work; data are read on first call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from olas_utils.infra.fingerprint import sha256_json

__all__ = ["SOURCES", "ChunkSpan", "documents", "chunk_spans", "build_chunks", "corpus_hash"]

#: Corpus sources :func:`build_chunks` knows (all train splits).
SOURCES: tuple[str, ...] = ("conll2003", "ewt")


@dataclass(frozen=True)
class ChunkSpan:
    """Where one chunk comes from.

    Attributes:
        doc: the document key (``"conll2003:train:<doc_id>"`` or ``"ewt:train:<prefix>"``).
        doc_index: 0-based index of the document in :func:`documents` order.
        start: 0-based index of the chunk's first word within the document's words.
        words: the chunk's words (``chunk_words`` of them).
    """

    doc: str
    doc_index: int
    start: int
    words: tuple[str, ...]


def documents(source: str = "conll2003", data_dir: str | os.PathLike | None = None) -> list[tuple[str, list[str]]]:
    """The training documents of a corpus source, each as its key and concatenated words.

    Args:
        source: ``"conll2003"`` or ``"ewt"`` (``docs/method.md#corpus``).
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.

    Returns:
        ``[(doc_key, words), ...]`` in file order; ``words`` is the document's words in
        order, across sentence boundaries.

    Raises:
        ValueError: unknown source.
        FileNotFoundError: the dataset is missing (from the reader).
    """
    from olas_utils.data.conll import load_conll2003
    from olas_utils.data.ud import load_ud_ewt

    if source == "conll2003":
        ds = load_conll2003("train", data_dir=data_dir)
        keys = [f"conll2003:train:{d}" for d in ds["doc_id"]]
    elif source == "ewt":
        ds = load_ud_ewt("train", data_dir=data_dir)
        keys = [f"ewt:train:{s.rsplit('-', 1)[0]}" for s in ds["sent_id"]]
    else:
        raise ValueError(f"unknown corpus source {source!r}; choose one of {SOURCES}")
    docs: list[tuple[str, list[str]]] = []
    seen: dict[str, int] = {}
    prev = None
    for key, words in zip(keys, ds["words"]):
        if key != prev:  # a new run of sentences starts a new document
            n = seen.get(key, 0)
            seen[key] = n + 1
            docs.append((key if n == 0 else f"{key}#{n}", []))
            prev = key
        docs[-1][1].extend(words)
    return docs


def chunk_spans(
    source: str = "conll2003",
    n_chunks: int = 1000,
    chunk_words: int = 50,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> list[ChunkSpan]:
    """The chunks of :func:`build_chunks` with where each comes from.

    Args and Raises: as :func:`build_chunks`.

    Returns:
        ``n_chunks`` :class:`ChunkSpan`, in the seeded order.
    """
    import numpy as np

    if not isinstance(chunk_words, int) or chunk_words < 1:
        raise ValueError(f"chunk_words must be a positive integer, got {chunk_words!r}")
    if not isinstance(n_chunks, int) or n_chunks < 1:
        raise ValueError(f"n_chunks must be a positive integer, got {n_chunks!r}")
    all_spans: list[ChunkSpan] = []
    for d, (key, words) in enumerate(documents(source, data_dir)):
        for start in range(0, len(words) - chunk_words + 1, chunk_words):
            all_spans.append(ChunkSpan(key, d, start, tuple(words[start : start + chunk_words])))
    if n_chunks > len(all_spans):
        raise ValueError(
            f"{source} train has only {len(all_spans)} chunks of {chunk_words} words "
            f"(whole chunks inside one document); asked for {n_chunks}. Ask for fewer chunks, "
            f"shorter chunks, or another source ({', '.join(SOURCES)})."
        )
    perm = np.random.default_rng(seed).permutation(len(all_spans))
    return [all_spans[int(i)] for i in perm[:n_chunks]]


def build_chunks(
    source: str = "conll2003",
    n_chunks: int = 1000,
    chunk_words: int = 50,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> list[list[str]]:
    """The similarity corpus: ``n_chunks`` chunks of ``chunk_words`` consecutive words.

    The module's chunking rule (``docs/method.md#corpus``); deterministic for given arguments and
    data files.

    Args:
        source: ``"conll2003"`` (default) or ``"ewt"``.
        n_chunks: number of chunks to return (paper: 1,000).
        chunk_words: words per chunk (paper: 50).
        seed: seed of the permutation (``numpy.random.default_rng``).
        data_dir: data folder; see :func:`olas_utils.infra.settings.data_dir`.

    Returns:
        ``n_chunks`` lists of ``chunk_words`` words each.

    Raises:
        ValueError: unknown source, non-positive sizes, or fewer chunks available than
            ``n_chunks`` (the message gives how many there are).
        FileNotFoundError: the dataset is missing.
    """
    return [list(s.words) for s in chunk_spans(source, n_chunks, chunk_words, seed, data_dir)]


def corpus_hash(chunks: Sequence[Sequence[str]]) -> str:
    """SHA-256 (hex) of a corpus's canonical JSON.

    Of :func:`olas_utils.infra.fingerprint.canonical_json` of ``[[word, ...], ...]`` as UTF-8: the
    words and their order only.

    Raises:
        TypeError: if a word is not a string.
    """
    rows = []
    for i, chunk in enumerate(chunks):
        if isinstance(chunk, str):
            raise TypeError(f"chunk {i} is a string; pass lists of words")
        row = list(chunk)
        for j, w in enumerate(row):
            if not isinstance(w, str):
                raise TypeError(f"chunk {i}, word {j} is {type(w).__name__}, not str")
        rows.append(row)
    return sha256_json(rows)
