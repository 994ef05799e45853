"""The readers check labels and content themselves, with the checksum turned off
(``OLAS_DATA_VERIFY=0``): a POS tag that is not a Penn Treebank tag, a UNER tag of an unknown
entity type and an empty file are refused naming the file and the line; a gold label outside a
token task's label set is refused by ``load_task``. Small bad files are written into tmp_path."""

from __future__ import annotations

import pytest

from olas_utils import data as D
from olas_utils.data.files import DataFormatError
from olas_utils.data.tasks import load_task


@pytest.fixture(autouse=True)
def checksum_off(monkeypatch):
    monkeypatch.setenv("OLAS_DATA_VERIFY", "0")


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


GOOD_2000 = "He PRP B-NP\nran VBD B-VP\n. . O\n\nShe PRP B-NP\nsat VBD B-VP\n"


def test_conll2000_pos_tag_outside_the_tag_set_is_refused_at_its_line(tmp_path):
    _write(tmp_path, "conll2000/test.txt", GOOD_2000 + "\nIt PRP B-NP\nwent XYZ B-VP\n")
    with pytest.raises(DataFormatError, match=r"conll2000/test\.txt:9: 'XYZ' is not a Penn Treebank"):
        D.load_conll2000("test", data_dir=tmp_path)
    _write(tmp_path, "conll2000/test.txt", GOOD_2000)
    assert len(D.load_conll2000("test", data_dir=tmp_path)) == 2


def test_conll2003_pos_tag_outside_the_tag_set_is_refused(tmp_path):
    _write(tmp_path, "conll2003/eng.testb", "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nsays ZZZ I-VP O\n")
    with pytest.raises(DataFormatError, match=r"eng\.testb:4: 'ZZZ' is not a Penn Treebank"):
        D.load_conll2003("test", data_dir=tmp_path)
    _write(tmp_path, "conll2003/eng.testb", "EU NNP I-NP I-ORG\nsays NN|SYM I-VP O\n")  # CoNLL-2003's own tag
    assert len(D.load_conll2003("test", data_dir=tmp_path)) == 1


UNER = "# sent_id = a-1\n# text = Bob ran\n1\tBob\t{tag}\t-\tx\n2\tran\tO\t-\tx\n\n"


def test_uner_tag_of_an_unknown_entity_type_is_refused(tmp_path):
    _write(tmp_path, "uner_english_ewt/en_ewt-ud-dev.iob2", UNER.format(tag="B-FOO"))
    with pytest.raises(DataFormatError, match=r"en_ewt-ud-dev\.iob2:3: 'B-FOO' is not a UNER IOB2 tag.*PER, ORG, LOC"):
        D.load_uner_ewt("dev", data_dir=tmp_path)
    _write(tmp_path, "uner_english_ewt/en_ewt-ud-dev.iob2", UNER.format(tag="B-PER"))
    assert D.load_uner_ewt("dev", data_dir=tmp_path)["ner_tags"] == [["B-PER", "O"]]


@pytest.mark.parametrize(
    "rel,load,text,why",
    [
        ("conll2000/test.txt", lambda d: D.load_conll2000("test", data_dir=d), "", "it is empty"),
        ("conll2000/test.txt", lambda d: D.load_conll2000("test", data_dir=d), "\n\n\n", "3 lines are blank"),
        ("conll2003/eng.testa", lambda d: D.load_conll2003("dev", data_dir=d), "", "it is empty"),
        (
            "conll2003/eng.testa",
            lambda d: D.load_conll2003("dev", data_dir=d),
            "-DOCSTART- -X- O O\n\n",
            "-DOCSTART- lines",
        ),
        ("uner_english_ewt/en_ewt-ud-test.iob2", lambda d: D.load_uner_ewt("test", data_dir=d), "", "it is empty"),
        (
            "uner_english_ewt/en_ewt-ud-test.iob2",
            lambda d: D.load_uner_ewt("test", data_dir=d),
            "# newdoc id = x\n\n",
            "hold no token line",
        ),
    ],
)
def test_a_file_without_a_sentence_is_refused_naming_it(tmp_path, rel, load, text, why):
    _write(tmp_path, rel, text)
    with pytest.raises(DataFormatError, match="holds no sentence") as e:
        load(tmp_path)
    assert str(tmp_path / rel) in str(e.value) and why in str(e.value)


def test_a_gold_label_outside_the_tasks_label_set_is_refused(tmp_path):
    # LS is a Penn tag, but the training split (where the label set comes from) never uses it
    _write(tmp_path, "conll2000/train.txt", GOOD_2000 * 3)
    _write(tmp_path, "conll2000/test.txt", "One LS B-LST\nran VBD B-VP\n\nHe PRP B-NP\nran VBD B-VP\n")
    with pytest.raises(ValueError, match=r"pos/test: sentence 0 .* gold label 'LS', outside the task's label set"):
        load_task("pos", "test", data_dir=tmp_path)


def test_a_folder_where_the_data_file_should_be_is_named_as_such(tmp_path):
    (tmp_path / "conll2000" / "test.txt").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=r"test\.txt is a folder, not the data file"):
        D.load_conll2000("test", data_dir=tmp_path)


def test_a_fractional_number_of_sentences_is_refused_in_words(tmp_path):
    _write(tmp_path, "conll2000/train.txt", GOOD_2000)
    _write(tmp_path, "conll2000/test.txt", GOOD_2000)
    with pytest.raises(ValueError, match=r"n must be a positive number of sentences \(a whole number\) .* got 2.5"):
        load_task("pos", "test", n=2.5, data_dir=tmp_path)
