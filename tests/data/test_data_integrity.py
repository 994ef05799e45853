"""Damaged or mismatched data is never read as good: checksums and strict formats.

Every damaged file is a copy of a real one under ``tmp_path``, in a data folder laid out as
the readers expect (one dataset folder, ``SHA256SUMS`` adapted with :mod:`hashlib`, kept
as shipped, or absent as the case needs). The shipped files stay read-only and untouched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from pathlib import Path

import pytest

from olas_utils.data import files as data_files
from olas_utils.data import (
    load_conll2000,
    load_conll2003,
    load_conll2012_ontonotes,
    load_semeval2010_task8,
    load_ud_ewt,
    load_uner_ewt,
    read_conllu,
)
from olas_utils.infra.settings import data_dir

REAL = data_dir()
UD_DEV = "ud_english_ewt/en_ewt-ud-dev.conllu"
C2000_TEST = "conll2000/test.txt"
C2003_TESTA = "conll2003/eng.testa"
SEM_TRAIN = "semeval2010_task8/SemEval2010_task8_training/TRAIN_FILE.TXT"
SEM_TEST = "semeval2010_task8/SemEval2010_task8_testing_keys/TEST_FILE_FULL.TXT"
UNER_DEV = "uner_english_ewt/en_ewt-ud-dev.iob2"

# relpath -> (loader call, documented count)
LOADERS = {
    UD_DEV: (lambda d, **kw: load_ud_ewt("dev", data_dir=d, **kw), 2001),
    C2000_TEST: (lambda d, **kw: load_conll2000("test", data_dir=d, **kw), 2012),
    C2003_TESTA: (lambda d, **kw: load_conll2003("testa", data_dir=d, **kw), 3250),
    SEM_TEST: (lambda d, **kw: load_semeval2010_task8("test", data_dir=d, **kw), 2717),
    UNER_DEV: (lambda d, **kw: load_uner_ewt("dev", data_dir=d, **kw), 2001),
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _shipped_hash(rel: str) -> str:
    for line in (REAL / "SHA256SUMS").read_text().splitlines():
        h, _, name = line.partition("  ")
        if name == f"./{rel}":
            return h
    raise AssertionError(f"{rel} not in the shipped SHA256SUMS")


def _folder(tmp_path: Path, rel: str, data: bytes, sums: str = "adapted") -> Path:
    """A data folder holding ``rel`` with content ``data``; SHA256SUMS adapted / shipped / absent."""
    root = tmp_path / "data"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(data)
    if sums == "adapted":
        (root / "SHA256SUMS").write_text(f"{_sha(data)}  ./{rel}\n")
    elif sums == "shipped":
        (root / "SHA256SUMS").write_text(f"{_shipped_hash(rel)}  ./{rel}\n")
    return root


def _lines(rel: str) -> list[bytes]:
    return (REAL / rel).read_bytes().splitlines(keepends=True)


def _cut_mid_sentence(rel: str) -> tuple[bytes, int]:
    """The file cut at a line boundary in the middle of a sentence near its middle; the
    number of lines kept (= the 1-based number of the last line)."""
    lines = _lines(rel)
    i = len(lines) // 2
    while not (lines[i].strip() and lines[i + 1].strip() and lines[i - 1].strip()) or lines[i].startswith(b"#"):
        i += 1
    return b"".join(lines[: i + 1]), i + 1


def _cut_at_sentence_boundary(rel: str) -> bytes:
    """The file cut right after a blank line near its middle: a well-formed, smaller file."""
    lines = _lines(rel)
    i = len(lines) // 2
    while lines[i].strip():
        i += 1
    return b"".join(lines[: i + 1])


@pytest.fixture(autouse=True)
def _verify_on(monkeypatch):
    monkeypatch.delenv("OLAS_DATA_VERIFY", raising=False)


# --- checksums -----------------------------------------------------------------------------------


def test_error_classes_are_value_errors():
    assert issubclass(data_files.DataFormatError, ValueError)
    assert issubclass(data_files.DataChecksumError, ValueError)


@pytest.mark.parametrize("rel", list(LOADERS))
def test_smaller_well_formed_copy_fails_its_checksum(tmp_path, rel):
    data = _cut_at_sentence_boundary(rel)
    root = _folder(tmp_path, rel, data, sums="shipped")
    load, _ = LOADERS[rel]
    with pytest.raises(data_files.DataChecksumError) as e:
        load(root)
    msg = str(e.value)
    assert str(root / rel) in msg
    assert _shipped_hash(rel) in msg and _sha(data) in msg
    assert "OLAS_DATA_VERIFY=0" in msg and "verify=False" in msg


@pytest.mark.parametrize("rel", [UD_DEV, SEM_TEST])
def test_opt_out_reads_the_edited_copy_and_warns_once(tmp_path, rel, monkeypatch):
    data = _cut_at_sentence_boundary(rel)
    root = _folder(tmp_path, rel, data, sums="shipped")
    load, n = LOADERS[rel]
    with pytest.warns(UserWarning, match="not verified"):
        ds = load(root, verify=False)
    assert 0 < len(ds) < n
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load(root, verify=False)) == len(ds)
    monkeypatch.setenv("OLAS_DATA_VERIFY", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # already warned for this file
        assert len(load(root)) == len(ds)


def test_env_opt_out_warns(tmp_path, monkeypatch):
    data = _cut_at_sentence_boundary(C2000_TEST)
    root = _folder(tmp_path, C2000_TEST, data, sums="shipped")
    monkeypatch.setenv("OLAS_DATA_VERIFY", "0")
    with pytest.warns(UserWarning, match="OLAS_DATA_VERIFY"):
        ds = load_conll2000("test", data_dir=root)
    assert 0 < len(ds) < 2012
    monkeypatch.setenv("OLAS_DATA_VERIFY", "1")
    with pytest.raises(data_files.DataChecksumError):
        load_conll2000("test", data_dir=root)


def test_without_sums_or_unlisted_files_are_not_checked(tmp_path):
    data = _cut_at_sentence_boundary(C2000_TEST)
    root = _folder(tmp_path, C2000_TEST, data, sums="absent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert 0 < len(load_conll2000("test", data_dir=root)) < 2012
    (root / "SHA256SUMS").write_text(f"{'0' * 64}  ./conll2000/train.txt\n")
    assert 0 < len(load_conll2000("test", data_dir=root)) < 2012


def test_hashed_once_per_path_size_mtime(tmp_path, monkeypatch):
    data = (REAL / C2000_TEST).read_bytes()
    root = _folder(tmp_path, C2000_TEST, data, sums="adapted")
    calls = []
    real_sha = hashlib.sha256

    def counting(*a, **k):
        calls.append(1)
        return real_sha(*a, **k)

    monkeypatch.setattr(hashlib, "sha256", counting)
    for _ in range(3):
        assert len(load_conll2000("test", data_dir=root)) == 2012
    assert len(calls) == 1
    st = (root / C2000_TEST).stat()
    os.utime(root / C2000_TEST, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert len(load_conll2000("test", data_dir=root)) == 2012
    assert len(calls) == 2


def test_real_data_is_verified_and_keeps_documented_counts(monkeypatch):
    hashed = []
    real_sha = hashlib.sha256

    def spying(*a, **k):
        h = real_sha(*a, **k)
        hashed.append(h)
        return h

    data_files._sha256_cache_clear()
    monkeypatch.setattr(hashlib, "sha256", spying)
    expected = {
        ("ud", "train"): 12544,
        ("ud", "dev"): 2001,
        ("ud", "test"): 2077,
        ("c2000", "train"): 8936,
        ("c2000", "test"): 2012,
        ("sem", "train"): 8000,
        ("sem", "test"): 2717,
        ("uner", "dev"): 2001,
        ("uner", "test"): 2077,
        ("c2003", "train"): 14041,
        ("c2003", "testa"): 3250,
        ("c2003", "testb"): 3453,
    }
    fns = {
        "ud": load_ud_ewt,
        "c2000": load_conll2000,
        "sem": load_semeval2010_task8,
        "uner": load_uner_ewt,
        "c2003": load_conll2003,
    }
    for (name, split), n in expected.items():
        assert len(fns[name](split)) == n, (name, split)
    digests = {h.hexdigest() for h in hashed}
    assert _shipped_hash(SEM_TRAIN) in digests and _shipped_hash("ud_english_ewt/en_ewt-ud-train.conllu") in digests


def test_read_conllu_and_ontonotes_check_a_sums_file_beside_them(tmp_path):
    data = _cut_at_sentence_boundary(UD_DEV)
    root = _folder(tmp_path, UD_DEV, data, sums="shipped")
    with pytest.raises(data_files.DataChecksumError, match="en_ewt-ud-dev.conllu"):
        read_conllu(root / UD_DEV)
    assert 0 < len(read_conllu(root / UD_DEV, verify=False)) < 2001
    onto = tmp_path / "onto"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "conll2012", onto)
    good = len(load_conll2012_ontonotes(onto / "train.jsonl"))
    (onto / "SHA256SUMS").write_text(f"{'0' * 64}  train.jsonl\n")
    with pytest.raises(data_files.DataChecksumError, match="train.jsonl"):
        load_conll2012_ontonotes(onto / "train.jsonl")
    with pytest.raises(data_files.DataChecksumError):
        load_conll2012_ontonotes(onto, split="train")
    assert len(load_conll2012_ontonotes(onto / "train.jsonl", verify=False)) == good


# --- strict formats ------------------------------------------------------------------------------


def test_semeval_without_blank_lines_is_an_error_at_the_line(tmp_path):
    data = b"".join(x for x in _lines(SEM_TRAIN) if x.strip())
    root = _folder(tmp_path, SEM_TRAIN, data)
    with pytest.raises(data_files.DataFormatError) as e:
        load_semeval2010_task8("train", data_dir=root)
    assert f"{root / SEM_TRAIN}:4:" in str(e.value) and "blank line" in str(e.value)


def test_semeval_block_without_its_comment_line(tmp_path):
    lines = _lines(SEM_TEST)
    del lines[6]  # the second example's comment line (lines 5-8: id, label, comment, blank)
    root = _folder(tmp_path, SEM_TEST, b"".join(lines))
    with pytest.raises(data_files.DataFormatError, match=r"TEST_FILE_FULL.TXT:7:.*Comment"):
        load_semeval2010_task8("test", data_dir=root)


def test_semeval_cut_mid_block_and_complete_last_block(tmp_path):
    lines = _lines(SEM_TEST)
    root = _folder(tmp_path, SEM_TEST, b"".join(lines[:10]))  # 2 examples, then an id line and a label line
    with pytest.raises(data_files.DataFormatError, match=r"TEST_FILE_FULL.TXT:9:"):
        load_semeval2010_task8("test", data_dir=root)
    root2 = _folder(tmp_path / "b", SEM_TEST, b"".join(lines[:11]))  # 3 complete, no closing blank line
    assert len(load_semeval2010_task8("test", data_dir=root2)) == 3


@pytest.mark.parametrize("rel", [UD_DEV, UNER_DEV])
def test_cut_at_a_line_boundary_mid_sentence(tmp_path, rel):
    data, last = _cut_mid_sentence(rel)
    root = _folder(tmp_path, rel, data)
    load, _ = LOADERS[rel]
    with pytest.raises(data_files.DataFormatError) as e:
        load(root)
    assert f"{root / rel}:{last}:" in str(e.value)


@pytest.mark.parametrize("rel", [UD_DEV, C2000_TEST, C2003_TESTA, UNER_DEV])
def test_cut_at_a_line_boundary_fails_the_shipped_checksum(tmp_path, rel):
    # column files carry no text to check a last sentence against: the checksum catches the cut
    data, _ = _cut_mid_sentence(rel)
    root = _folder(tmp_path, rel, data, sums="shipped")
    load, _ = LOADERS[rel]
    with pytest.raises(data_files.DataChecksumError, match=_shipped_hash(rel)):
        load(root)


@pytest.mark.parametrize("rel", [UD_DEV, C2000_TEST, C2003_TESTA, UNER_DEV])
def test_cut_mid_line(tmp_path, rel):
    data, last = _cut_mid_sentence(rel)
    data = data.rstrip(b"\n")
    data = data[: data.rfind(b"\n") + 1 + max(2, len(data) - data.rfind(b"\n") - 6)]
    root = _folder(tmp_path, rel, data)
    load, _ = LOADERS[rel]
    with pytest.raises(data_files.DataFormatError) as e:
        load(root)
    assert f"{root / rel}:{last}:" in str(e.value)


def test_conllu_line_with_missing_column(tmp_path):
    lines = _lines(UD_DEV)
    i = next(k for k in range(100, len(lines)) if lines[k][:1].isdigit())
    fields = lines[i].split(b"\t")
    lines[i] = b"\t".join(fields[:4] + fields[5:])
    root = _folder(tmp_path, UD_DEV, b"".join(lines))
    with pytest.raises(data_files.DataFormatError, match=rf"en_ewt-ud-dev.conllu:{i + 1}:.*10"):
        load_ud_ewt("dev", data_dir=root)


@pytest.mark.parametrize("rel", [UD_DEV, UNER_DEV])
def test_complete_last_sentence_without_closing_blank_line_is_fine(tmp_path, rel):
    data = (REAL / rel).read_bytes().rstrip(b"\n") + b"\n"
    root = _folder(tmp_path, rel, data)
    load, n = LOADERS[rel]
    got, want = load(root), load(REAL)
    assert len(got) == n and got["words"] == want["words"]


@pytest.mark.parametrize("rel", [C2000_TEST, C2003_TESTA])
@pytest.mark.parametrize("end", [b"\n", b""])
def test_column_file_without_closing_blank_line_is_fine(tmp_path, rel, end):
    data = (REAL / rel).read_bytes().rstrip(b"\n") + end
    root = _folder(tmp_path, rel, data)
    load, n = LOADERS[rel]
    got, want = load(root), load(REAL)
    assert len(got) == n and got["words"] == want["words"]


def test_column_file_with_cut_tag_is_refused(tmp_path):
    lines = _lines(C2000_TEST)
    i = next(k for k, x in enumerate(lines) if x.endswith(b" B-NP\n"))
    lines[i] = lines[i].replace(b"B-NP", b"B-N")  # a line cut inside its chunk tag, then a line end
    root = _folder(tmp_path, C2000_TEST, b"".join(lines))
    with pytest.raises(data_files.DataFormatError, match=rf"test.txt:{i + 1}:.*B-N"):
        load_conll2000("test", data_dir=root)


@pytest.mark.parametrize("rel", [UD_DEV, C2000_TEST, C2003_TESTA, SEM_TEST, UNER_DEV])
def test_leading_bom_is_never_part_of_a_word(tmp_path, rel):
    root = _folder(tmp_path, rel, b"\xef\xbb\xbf" + (REAL / rel).read_bytes())
    load, n = LOADERS[rel]
    got, want = load(root), load(REAL)
    assert len(got) == n and got["words"][:3] == want["words"][:3]
    assert not any("\ufeff" in w for ws in got["words"] for w in ws)


@pytest.mark.parametrize("rel", [UD_DEV, C2000_TEST, SEM_TEST, UNER_DEV])
def test_bom_inside_a_file_is_refused(tmp_path, rel):
    data = (REAL / rel).read_bytes()
    half = _cut_at_sentence_boundary(rel)
    root = _folder(tmp_path, rel, half + b"\xef\xbb\xbf" + data[len(half) :])
    load, _ = LOADERS[rel]
    line = half.count(b"\n") + 1
    with pytest.raises(data_files.DataFormatError, match=rf":{line}:.*(BOM|byte-order)"):
        load(root)
