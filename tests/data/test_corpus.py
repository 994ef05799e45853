"""The similarity corpus: chunks of consecutive words from one document, deterministic."""

from __future__ import annotations

import itertools

import pytest

from olas_utils.data import load_conll2003, load_ud_ewt
from olas_utils.data.corpus import build_chunks, chunk_spans, corpus_hash, documents


def _reader_docs_conll():
    """Documents rebuilt straight from the reader (independent of corpus.documents)."""
    ds = load_conll2003("train")
    docs: dict[int, list[str]] = {}
    for d, words in zip(ds["doc_id"], ds["words"]):
        docs.setdefault(d, []).extend(words)
    return docs


def _reader_docs_ewt():
    ds = load_ud_ewt("train")
    docs: dict[str, list[str]] = {}
    for sid, words in zip(ds["sent_id"], ds["words"]):
        docs.setdefault(sid.rsplit("-", 1)[0], []).extend(words)
    return docs


def _occurs_in(chunk, doc_words, start):
    return doc_words[start : start + len(chunk)] == list(chunk)


def test_deterministic_and_lengths():
    a = build_chunks(n_chunks=200)
    b = build_chunks(n_chunks=200)
    assert a == b
    assert len(a) == 200
    assert all(len(c) == 50 for c in a)
    assert all(isinstance(w, str) and w for c in a for w in c)
    assert corpus_hash(a) == corpus_hash(b)
    # a prefix property: asking for fewer chunks gives the first ones of the same order
    assert build_chunks(n_chunks=50) == a[:50]
    # chunks are distinct positions
    spans = chunk_spans(n_chunks=200)
    assert len({(s.doc, s.start) for s in spans}) == 200


def test_chunks_are_consecutive_words_of_one_conll_document():
    docs = _reader_docs_conll()
    spans = chunk_spans("conll2003", n_chunks=300, chunk_words=50, seed=3)
    chunks = build_chunks("conll2003", n_chunks=300, chunk_words=50, seed=3)
    assert [list(s.words) for s in spans] == chunks
    for s, c in zip(spans, chunks):
        doc_id = int(s.doc.rsplit(":", 1)[1])
        assert s.start % 50 == 0
        assert _occurs_in(c, docs[doc_id], s.start), s
        assert s.start + 50 <= len(docs[doc_id])


def test_chunks_cross_sentence_boundaries():
    ds = load_conll2003("train")
    sentences = {tuple(w) for w in ds["words"]}
    chunks = build_chunks(n_chunks=100)
    # no 50-word chunk is one whole sentence: they span several
    assert sum(tuple(c) in sentences for c in chunks) <= 1


def test_ewt_source():
    docs = _reader_docs_ewt()
    spans = chunk_spans("ewt", n_chunks=100, seed=0)
    for s in spans:
        prefix = s.doc.split(":", 2)[2]
        assert _occurs_in(s.words, docs[prefix], s.start)
    assert build_chunks("ewt", n_chunks=100) == [list(s.words) for s in spans]


def test_documents_match_reader_and_all_chunks_counted():
    docs = documents("conll2003")
    ref = _reader_docs_conll()
    assert len(docs) == len(ref) == 946
    assert [w for _, w in docs] == [ref[i] for i in sorted(ref)]
    total = sum(len(w) // 50 for _, w in docs)
    assert total == 3609
    assert len(build_chunks(n_chunks=total)) == total


def test_seed_changes_order_not_content_set():
    a = chunk_spans(n_chunks=3609, seed=0)
    b = chunk_spans(n_chunks=3609, seed=1)
    assert [(s.doc, s.start) for s in a] != [(s.doc, s.start) for s in b]
    assert {(s.doc, s.start) for s in a} == {(s.doc, s.start) for s in b}
    assert build_chunks(n_chunks=20, seed=0) != build_chunks(n_chunks=20, seed=1)
    assert corpus_hash(build_chunks(n_chunks=20, seed=0)) != corpus_hash(build_chunks(n_chunks=20, seed=1))


def test_errors():
    with pytest.raises(ValueError, match="only 3609 chunks"):
        build_chunks(n_chunks=5000)
    with pytest.raises(ValueError, match="unknown corpus source"):
        build_chunks("conll2012")
    with pytest.raises(ValueError, match="positive"):
        build_chunks(n_chunks=0)
    with pytest.raises(ValueError, match="positive"):
        build_chunks(chunk_words=0)


def test_corpus_hash_canonical():
    c = [["a", "b"], ["c"]]
    assert corpus_hash(c) == corpus_hash([("a", "b"), ("c",)])
    assert corpus_hash(c) != corpus_hash([["a"], ["b", "c"]])
    assert corpus_hash(c) != corpus_hash([["c"], ["a", "b"]])
    assert len(corpus_hash(c)) == 64
    with pytest.raises(TypeError):
        corpus_hash(["ab"])
    with pytest.raises(TypeError):
        corpus_hash([["a", 1]])
    # different chunk lengths never collide through joining
    assert corpus_hash([list(itertools.repeat("x", 3))]) != corpus_hash([["x", "x"], ["x"]])
