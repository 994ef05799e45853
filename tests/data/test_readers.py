"""Tests for olas_utils.data: split sizes against the data README, spot checks against lines
read by hand from the files, fixtures for CoNLL-U corner cases and the OntoNotes layout,
and the missing-data / unknown-split errors."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import datasets
import pytest

from olas_utils import data as D
from olas_utils.infra.settings import data_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONLL2012_FIXTURE = FIXTURES / "conll2012"

try:
    data_dir()
    HAVE_DATA = True
except FileNotFoundError:
    HAVE_DATA = False
needs_data = pytest.mark.skipif(not HAVE_DATA, reason="real datasets not found (set OLAS_DATA_DIR)")

# ---------------------------------------------------------------------------------------
# Split sizes (numbers from /work/shared/data/README.md)
# ---------------------------------------------------------------------------------------

COUNTS = [
    (D.load_ud_ewt, "train", 12544),
    (D.load_ud_ewt, "dev", 2001),
    (D.load_ud_ewt, "test", 2077),
    (D.load_conll2000, "train", 8936),
    (D.load_conll2000, "test", 2012),
    (D.load_semeval2010_task8, "train", 8000),
    (D.load_semeval2010_task8, "test", 2717),
    (D.load_uner_ewt, "dev", 2001),
    (D.load_uner_ewt, "test", 2077),
    (D.load_conll2003, "train", 14041),
    (D.load_conll2003, "testa", 3250),
    (D.load_conll2003, "testb", 3453),
]


@needs_data
@pytest.mark.parametrize("loader,split,n", COUNTS, ids=[f"{f.__name__}-{s}" for f, s, _ in COUNTS])
def test_split_sizes(loader, split, n):
    ds = loader(split)
    assert isinstance(ds, datasets.Dataset)
    assert len(ds) == n


@needs_data
@pytest.mark.parametrize("split,n_tokens", [("train", 211727), ("test", 47377)])
def test_conll2000_token_counts(split, n_tokens):
    ds = D.load_conll2000(split)
    assert sum(len(w) for w in ds["words"]) == n_tokens
    assert all(len(w) == len(p) == len(c) for w, p, c in zip(ds["words"], ds["pos"], ds["chunks"]))


@needs_data
@pytest.mark.parametrize(
    "loader,alias,canonical",
    [
        (D.load_ud_ewt, "validation", "dev"),
        (D.load_uner_ewt, "validation", "dev"),
        (D.load_conll2003, "dev", "testa"),
        (D.load_conll2003, "validation", "testa"),
        (D.load_conll2003, "test", "testb"),
        (D.load_conll2003, "TRAIN", "train"),
    ],
)
def test_split_aliases(loader, alias, canonical):
    assert loader(alias)[:3] == loader(canonical)[:3]


# ---------------------------------------------------------------------------------------
# UD English-EWT
# ---------------------------------------------------------------------------------------


@needs_data
def test_ewt_first_dev_sentence():
    row = D.load_ud_ewt("dev")[0]
    assert row["sent_id"] == "weblog-blogspot.com_nominations_20041117172713_ENG_20041117_172713-0001"
    assert row["text"] == "From the AP comes this story :"
    assert row["words"] == ["From", "the", "AP", "comes", "this", "story", ":"]
    assert row["upos"] == ["ADP", "DET", "PROPN", "VERB", "DET", "NOUN", "PUNCT"]
    assert row["xpos"] == ["IN", "DT", "NNP", "VBZ", "DT", "NN", ":"]
    assert row["heads"] == [3, 3, 4, 0, 6, 4, 4]
    assert row["deprels"] == ["case", "det", "obl", "root", "det", "nsubj", "punct"]


@needs_data
def test_ewt_dev_multiword_token_and_empty_node_are_skipped():
    ds = D.load_ud_ewt("dev")
    by_id = dict(zip(ds["sent_id"], range(len(ds))))
    # "1-2 Today's" is a multiword token over words 1 "Today" and 2 "'s".
    mwt = ds[by_id["weblog-blogspot.com_gettingpolitical_20030906235000_ENG_20030906_235000-0003"]]
    assert mwt["words"][:4] == ["Today", "'s", "incident", "proves"]
    assert mwt["heads"][:4] == [3, 1, 4, 0]
    # "8.1 write" is an empty node after word 8 "like"; word 9 is "about".
    empty = ds[by_id["weblog-blogspot.com_aggressivevoicedaily_20060814163400_ENG_20060814_163400-0007"]]
    assert empty["words"][7:9] == ["like", "about"]
    assert empty["heads"][:2] == [5, 5]
    assert ds[-1]["sent_id"] == "reviews-140302-0004"


@needs_data
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_ewt_heads_index_into_words(split):
    ds = D.load_ud_ewt(split)
    for words, heads, upos, deprels in zip(ds["words"], ds["heads"], ds["upos"], ds["deprels"]):
        assert len(words) == len(heads) == len(upos) == len(deprels) > 0
        assert all(0 <= h <= len(words) for h in heads)
        assert heads.count(0) >= 1


def test_read_conllu_fixture_skips_multiword_tokens_and_empty_nodes():
    ds = D.read_conllu(FIXTURES / "ud" / "mwt_empty.conllu")
    assert len(ds) == 3
    mwt, ellipsis, bare = ds[0], ds[1], ds[2]
    assert mwt["sent_id"] == "fx-1" and mwt["text"] == "I didn't go."
    assert mwt["words"] == ["I", "did", "n't", "go", "."]
    assert mwt["heads"] == [4, 4, 4, 0, 4]
    assert mwt["deprels"] == ["nsubj", "aux", "advmod", "root", "punct"]
    assert ellipsis["words"] == ["Sue", "likes", "coffee", "and", "Bill", "tea", "."]
    assert ellipsis["heads"] == [2, 0, 2, 5, 2, 5, 2]
    assert ellipsis["xpos"][5] == "_"  # unspecified XPOS
    assert bare["sent_id"] == "2" and bare["text"] == "Hello !"
    assert ds.features["heads"] == datasets.List(datasets.Value("int64"))


def test_read_conllu_rejects_out_of_range_head(tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("# sent_id = b\n1\tHi\thi\tINTJ\tUH\t_\t5\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="head 5"):
        D.read_conllu(bad)


# ---------------------------------------------------------------------------------------
# CoNLL-2000
# ---------------------------------------------------------------------------------------


@needs_data
def test_conll2000_first_sentences():
    train = D.load_conll2000("train")[0]
    assert train["words"][:5] == ["Confidence", "in", "the", "pound", "is"]
    assert train["pos"][:5] == ["NN", "IN", "DT", "NN", "VBZ"]
    assert train["chunks"][:5] == ["B-NP", "B-PP", "B-NP", "I-NP", "B-VP"]
    test = D.load_conll2000("test")[0]
    assert test["words"][:3] == ["Rockwell", "International", "Corp."]
    assert test["chunks"][:3] == ["B-NP", "I-NP", "I-NP"]


# ---------------------------------------------------------------------------------------
# SemEval-2010 Task 8
# ---------------------------------------------------------------------------------------


def test_semeval_labels_order():
    labels = D.SEMEVAL_LABELS
    assert len(labels) == len(set(labels)) == 19
    assert labels[:2] == ("Cause-Effect(e1,e2)", "Cause-Effect(e2,e1)")
    assert labels[16:] == ("Product-Producer(e1,e2)", "Product-Producer(e2,e1)", "Other")


@needs_data
def test_semeval_first_train_example():
    row = D.load_semeval2010_task8("train")[0]
    # 1	"The system as described above has its greatest application in an arrayed
    #    <e1>configuration</e1> of antenna <e2>elements</e2>."  /  Component-Whole(e2,e1)
    assert row["id"] == "1"
    assert row["words"] == [
        "The",
        "system",
        "as",
        "described",
        "above",
        "has",
        "its",
        "greatest",
        "application",
        "in",
        "an",
        "arrayed",
        "configuration",
        "of",
        "antenna",
        "elements",
        ".",
    ]
    assert row["e1_span"] == [12, 13] and row["e2_span"] == [15, 16]
    assert row["label"] == "Component-Whole(e2,e1)"
    assert row["relation"] == "Component-Whole" and row["direction"] == "(e2,e1)"


@needs_data
def test_semeval_clitic_after_entity_and_other_label():
    ds = D.load_semeval2010_task8("train")
    # 18	"The <e1>factory</e1>'s products have included flower pots, Finnish
    #      rooster-whistles, pans, <e2>trays</e2>, tea pots, ..."
    row = ds[17]
    assert row["id"] == "18"
    assert row["words"][:12] == [
        "The",
        "factory",
        "'s",
        "products",
        "have",
        "included",
        "flower",
        "pots",
        ",",
        "Finnish",
        "rooster-whistles",
        ",",
    ]
    assert row["e1_span"] == [1, 2] and row["e2_span"] == [14, 15]
    assert row["words"][14] == "trays"
    other = ds[1]  # 2	"The <e1>child</e1> was ... into the <e2>cradle</e2> by means of a cord."
    assert other["label"] == "Other" and other["relation"] == "Other" and other["direction"] is None
    assert other["words"][slice(*other["e2_span"])] == ["cradle"]
    counts = Counter(ds["label"])
    assert set(counts) == set(D.SEMEVAL_LABELS)
    assert counts["Other"] == 1410 and counts["Entity-Destination(e2,e1)"] == 1


@needs_data
def test_semeval_test_split_ends():
    ds = D.load_semeval2010_task8("test")
    first, last = ds[0], ds[-1]
    # 8001	"The most common <e1>audits</e1> were about <e2>waste</e2> and recycling."
    assert first["id"] == "8001"
    assert first["words"] == ["The", "most", "common", "audits", "were", "about", "waste", "and", "recycling", "."]
    assert (first["e1_span"], first["e2_span"]) == ([3, 4], [6, 7])
    assert first["label"] == "Message-Topic(e1,e2)"
    assert last["id"] == "10717" and last["label"] == "Entity-Destination(e2,e1)"
    assert all(lab in D.SEMEVAL_LABELS for lab in ds["label"])


def test_tokenize_semeval_rules():
    words, e1, e2 = D.tokenize_semeval('He put the<e1>coil</e1> in <e2>outer-surface protein A</e2>, "fast".')
    assert words == ["He", "put", "the", "coil", "in", "outer-surface", "protein", "A", ",", '"', "fast", '"', "."]
    assert e1 == (3, 4) and e2 == (5, 8)
    words, e1, e2 = D.tokenize_semeval("<e2>Hideyoshi's</e2> <e1>author</e1>'s e-mail cost $3.5.")
    assert words == ["Hideyoshi's", "author", "'s", "e-mail", "cost", "$", "3.5", "."]
    assert e2 == (0, 1) and e1 == (1, 2)


@pytest.mark.parametrize(
    "bad",
    [
        "no entities here",
        "<e1>one</e1> only",
        "<e1>a</e1> <e2>b</e2> <e2>c</e2>",
        "<e1>a <e2>b</e2>",
        "<e1></e1> <e2>b</e2>",
    ],
)
def test_tokenize_semeval_rejects_malformed(bad):
    with pytest.raises(ValueError):
        D.tokenize_semeval(bad)


# ---------------------------------------------------------------------------------------
# UNER English-EWT
# ---------------------------------------------------------------------------------------


@needs_data
def test_uner_dev_first_sentence_and_tag_counts():
    ds = D.load_uner_ewt("dev")
    row = ds[0]
    assert row["sent_id"] == "answers-20070404104007AAY1Chs_ans-0001"
    assert row["words"][:9] == ["where", "can", "I", "get", "morcillas", "in", "tampa", "bay", ","]
    assert row["ner_tags"][:9] == ["O", "O", "O", "O", "O", "O", "B-LOC", "I-LOC", "O"]
    tags = Counter(t for sent in ds["ner_tags"] for t in sent)
    # entity counts from en_ewt-ud-dev.stats (label_distribution)
    assert (tags["B-LOC"], tags["B-ORG"], tags["B-PER"]) == (399, 224, 343)
    assert sum(tags.values()) == 25149  # num_tokens in the .stats file


@needs_data
@pytest.mark.parametrize("split", ["dev", "test"])
def test_uner_sentences_match_ewt(split):
    # Same sentences as UD English-EWT (in another order); UNER was annotated on an older
    # EWT commit, so 3 sentences per split are tokenised differently ("can t" vs "ca nt").
    uner = dict(zip(D.load_uner_ewt(split)["sent_id"], D.load_uner_ewt(split)["words"]))
    ewt = dict(zip(D.load_ud_ewt(split)["sent_id"], D.load_ud_ewt(split)["words"]))
    assert set(uner) == set(ewt)
    assert sum(uner[k] != ewt[k] for k in uner) <= 3


@needs_data
def test_uner_train_is_not_available_offline():
    with pytest.raises(FileNotFoundError, match="not available offline"):
        D.load_uner_ewt("train")


# ---------------------------------------------------------------------------------------
# CoNLL-2003 and IOB1 -> IOB2
# ---------------------------------------------------------------------------------------


def test_iob1_to_iob2_hand_computed():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "I-ORG", "I-ORG", "B-ORG", "I-ORG", "O", "B-MISC"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "I-ORG", "B-ORG", "I-ORG", "O", "B-MISC"]
    assert D.iob1_to_iob2(iob1) == iob2
    assert D.iob1_to_iob2(iob2) == iob2  # idempotent
    assert D.iob1_to_iob2([]) == []
    with pytest.raises(ValueError, match="X-PER"):
        D.iob1_to_iob2(["O", "X-PER"])


@needs_data
def test_conll2003_testa_first_sentences():
    ds = D.load_conll2003("testa")
    # CRICKET - LEICESTERSHIRE TAKE ... with NER  O O I-ORG O ...
    assert ds[0]["words"][:4] == ["CRICKET", "-", "LEICESTERSHIRE", "TAKE"]
    assert ds[0]["pos"][:3] == ["NNP", ":", "NNP"]
    assert ds[0]["chunks"][:3] == ["I-NP", "O", "I-NP"]
    assert ds[0]["ner_tags"][:4] == ["O", "O", "B-ORG", "O"]
    assert ds[1]["words"] == ["LONDON", "1996-08-30"] and ds[1]["ner_tags"] == ["B-LOC", "O"]
    assert ds[0]["doc_id"] == ds[1]["doc_id"] == 0


@needs_data
def test_conll2003_iob1_b_tag_and_doc_ids():
    ds = D.load_conll2003("train")
    # eng.train lines 1928-1958, the 10th document: "... the Golan Heights Israel captured ..."
    # with NER I-LOC I-LOC B-LOC (an entity directly after one of the same type).
    row = ds[107]
    i = row["words"].index("Golan")
    assert row["words"][i : i + 3] == ["Golan", "Heights", "Israel"]
    assert row["ner_tags"][i : i + 3] == ["B-LOC", "I-LOC", "B-LOC"]
    assert row["ner_tags"][7:9] == ["B-PER", "I-PER"]  # Benjamin Netanyahu: I-PER I-PER
    assert row["doc_id"] == 9
    doc_ids = ds["doc_id"]
    assert doc_ids[0] == 0 and doc_ids == sorted(doc_ids)
    assert len(set(doc_ids)) == 946  # -DOCSTART- lines in eng.train
    for split, n_docs in [("testa", 216), ("testb", 231)]:
        assert D.load_conll2003(split)["doc_id"][-1] == n_docs - 1


@needs_data
@pytest.mark.parametrize("split", ["train", "testa", "testb"])
def test_conll2003_tags_are_valid_iob2(split):
    ds = D.load_conll2003(split)
    types = set()
    for tags in ds["ner_tags"]:
        assert D.iob1_to_iob2(tags) == tags
        types.update(t[2:] for t in tags if t != "O")
    assert types == {"PER", "ORG", "LOC", "MISC"}


def test_conll2003_docstart_handling(tmp_path):
    folder = tmp_path / "conll2003"
    folder.mkdir()
    (folder / "eng.train").write_text(
        "Hi UH I-NP O\n\n-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nsays VBZ I-VP O\n\n"
        "Bonn NNP I-NP I-LOC\nParis NNP I-NP B-LOC\n\n-DOCSTART- -X- O O\n\nOK UH I-NP O\n",
        encoding="utf-8",
    )
    ds = D.load_conll2003("train", data_dir=tmp_path)
    assert ds["doc_id"] == [0, 1, 1, 2]
    assert ds["ner_tags"] == [["O"], ["B-ORG", "O"], ["B-LOC", "B-LOC"], ["O"]]
    assert ds["chunks"][1] == ["I-NP", "I-VP"]  # chunks stay as in the file


# ---------------------------------------------------------------------------------------
# CoNLL-2012 OntoNotes (HF conll2012_ontonotesv5 layout), on the hand-written fixture
# ---------------------------------------------------------------------------------------

EXPECTED_ONTONOTES = [
    (
        "nw/olas/00/olas_0001",
        0,
        "Maria Lopez visited Paris on Monday .",
        "NNP NNP VBD NNP IN NNP .",
        "B-PERSON I-PERSON O B-GPE O B-DATE O",
    ),
    ("nw/olas/00/olas_0001", 0, "She met 12 French engineers .", "PRP VBD CD JJ NNS .", "O O B-CARDINAL B-NORP O O"),
    ("bc/olas/00/olas_0002", 0, "The United Nations said so .", "DT NNP NNPS VBD RB .", "B-ORG I-ORG I-ORG O O O"),
    ("bc/olas/00/olas_0002", 1, "Thanks , Bob .", "NNS , NNP .", "O O B-PERSON O"),
]


def _check_ontonotes(ds):
    assert ds.column_names == ["document_id", "part_id", "words", "pos_tags", "ner_tags"]
    got = [
        (r["document_id"], r["part_id"], " ".join(r["words"]), " ".join(r["pos_tags"]), " ".join(r["ner_tags"]))
        for r in ds
    ]
    assert got == EXPECTED_ONTONOTES


def test_ontonotes_label_lists():
    assert len(D.ONTONOTES_NER_LABELS) == 37 and len(D.ONTONOTES_POS_LABELS) == 49
    assert D.ONTONOTES_NER_LABELS[:4] == ("O", "B-PERSON", "I-PERSON", "B-NORP")
    assert D.ONTONOTES_NER_LABELS[-1] == "I-LANGUAGE"


def test_ontonotes_jsonl_folder_and_file():
    _check_ontonotes(D.load_conll2012_ontonotes(CONLL2012_FIXTURE))
    _check_ontonotes(D.load_conll2012_ontonotes(CONLL2012_FIXTURE / "train.jsonl"))
    _check_ontonotes(D.load_conll2012_ontonotes(str(CONLL2012_FIXTURE), split="train"))


def _fixture_documents_with_string_labels():
    docs = [json.loads(line) for line in (CONLL2012_FIXTURE / "train.jsonl").read_text().splitlines()]
    for doc in docs:
        for s in doc["sentences"]:
            s["pos_tags"] = [D.ONTONOTES_POS_LABELS[i] for i in s["pos_tags"]]
            s["named_entities"] = [D.ONTONOTES_NER_LABELS[i] for i in s["named_entities"]]
    return docs


def _hf_features(pos_names, ner_names):
    v, seq = datasets.Value, datasets.List
    return datasets.Features(
        {
            "document_id": v("string"),
            "sentences": seq(
                {
                    "part_id": v("int32"),
                    "words": seq(v("string")),
                    "pos_tags": seq(datasets.ClassLabel(names=list(pos_names))),
                    "parse_tree": v("string"),
                    "predicate_lemmas": seq(v("string")),
                    "predicate_framenet_ids": seq(v("string")),
                    "word_senses": seq(v("float32")),
                    "speaker": v("string"),
                    "named_entities": seq(datasets.ClassLabel(names=list(ner_names))),
                    "srl_frames": seq({"verb": v("string"), "frames": seq(v("string"))}),
                    "coref_spans": seq(seq(v("int32"), length=3)),
                }
            ),
        }
    )


@pytest.mark.parametrize("layout", ["save_to_disk", "dataset_dict", "parquet", "arrow_file"])
def test_ontonotes_hf_layouts_use_stored_label_names(tmp_path, layout):
    # Reversed label lists: the stored ints differ from english_v4's, so decoding is only
    # right if the loader reads the ClassLabel names saved with the data.
    features = _hf_features(D.ONTONOTES_POS_LABELS[::-1], D.ONTONOTES_NER_LABELS[::-1])
    ds = datasets.Dataset.from_list(_fixture_documents_with_string_labels(), features=features)
    assert ds[0]["sentences"][0]["named_entities"][0] != 1
    target, split = tmp_path / "onto", None
    if layout == "save_to_disk":
        ds.save_to_disk(str(target))
    elif layout == "dataset_dict":
        datasets.DatasetDict({"train": ds, "validation": ds.select([1])}).save_to_disk(str(target))
        split = "train"
    elif layout == "parquet":
        target.mkdir()
        ds.to_parquet(str(target / "train-00000-of-00001.parquet"))
    else:
        ds.save_to_disk(str(tmp_path / "saved"))
        target = next((tmp_path / "saved").glob("*.arrow"))
    _check_ontonotes(D.load_conll2012_ontonotes(target, split=split))


def test_ontonotes_split_selection(tmp_path):
    shutil.copy(CONLL2012_FIXTURE / "train.jsonl", tmp_path / "train.jsonl")
    lines = (CONLL2012_FIXTURE / "train.jsonl").read_text().splitlines()
    (tmp_path / "validation.jsonl").write_text(lines[1] + "\n")
    with pytest.raises(ValueError, match="several splits"):
        D.load_conll2012_ontonotes(tmp_path)
    assert len(D.load_conll2012_ontonotes(tmp_path, split="dev")) == 2
    assert len(D.load_conll2012_ontonotes(tmp_path, split="train")) == 4
    with pytest.raises(FileNotFoundError, match="no test data files"):
        D.load_conll2012_ontonotes(tmp_path, split="test")
    with pytest.raises(ValueError, match="unknown CoNLL-2012 split"):
        D.load_conll2012_ontonotes(tmp_path, split="training")


def test_ontonotes_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        D.load_conll2012_ontonotes(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no data files"):
        D.load_conll2012_ontonotes(tmp_path)
    doc = {"document_id": "d", "sentences": [{"part_id": 0, "words": ["a"], "pos_tags": [99], "named_entities": [0]}]}
    (tmp_path / "x.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(ValueError, match="pos_tags value 99"):
        D.load_conll2012_ontonotes(tmp_path)


# ---------------------------------------------------------------------------------------
# Data folder, missing files, unknown splits, caching
# ---------------------------------------------------------------------------------------

LOADERS = [
    (D.load_ud_ewt, "dev", "en_ewt-ud-dev.conllu"),
    (D.load_conll2000, "train", "train.txt"),
    (D.load_semeval2010_task8, "test", "TEST_FILE_FULL.TXT"),
    (D.load_uner_ewt, "test", "en_ewt-ud-test.iob2"),
    (D.load_conll2003, "dev", "eng.testa"),
]


@pytest.mark.parametrize("loader,split,filename", LOADERS, ids=[f.__name__ for f, _, _ in LOADERS])
def test_missing_data_folder(tmp_path, monkeypatch, loader, split, filename):
    monkeypatch.setenv("OLAS_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere") as err:
        loader(split)
    assert "OLAS_DATA_DIR" in str(err.value)


@pytest.mark.parametrize("loader,split,filename", LOADERS, ids=[f.__name__ for f, _, _ in LOADERS])
def test_missing_file(tmp_path, monkeypatch, loader, split, filename):
    monkeypatch.setenv("OLAS_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        loader(split)
    msg = str(err.value)
    assert filename in msg and str(tmp_path.resolve()) in msg
    assert "OLAS_DATA_DIR" in msg and "data_dir=" in msg


@pytest.mark.parametrize("loader,split,filename", LOADERS, ids=[f.__name__ for f, _, _ in LOADERS])
def test_unknown_split(loader, split, filename):
    with pytest.raises(ValueError, match="valid splits: .*'test'"):
        loader("no-such-split")


def test_data_dir_argument_wins_over_environment(tmp_path, monkeypatch):
    (tmp_path / "conll2000").mkdir()
    (tmp_path / "conll2000" / "test.txt").write_text("A DT B-NP\ncat NN I-NP\n\nSits VBZ B-VP\n")
    monkeypatch.setenv("OLAS_DATA_DIR", str(tmp_path / "nowhere"))
    ds = D.load_conll2000("test", data_dir=tmp_path)
    assert ds["words"] == [["A", "cat"], ["Sits"]]
    assert ds["chunks"] == [["B-NP", "I-NP"], ["B-VP"]]
    monkeypatch.setenv("OLAS_DATA_DIR", str(tmp_path))
    assert D.load_conll2000("test")["pos"] == [["DT", "NN"], ["VBZ"]]


def test_malformed_column_line_names_file_and_line(tmp_path):
    (tmp_path / "conll2000").mkdir()
    (tmp_path / "conll2000" / "train.txt").write_text("A DT B-NP\nbroken\n")
    with pytest.raises(ValueError, match=r"train.txt:2: expected 3 fields"):
        D.load_conll2000("train", data_dir=tmp_path)


def test_cache_returns_fresh_datasets_and_sees_file_changes(tmp_path):
    folder = tmp_path / "conll2000"
    folder.mkdir()
    path = folder / "train.txt"
    path.write_text("A DT B-NP\n")
    first = D.load_conll2000("train", data_dir=tmp_path)
    changed = first.map(lambda r: {"words": ["Z"]})
    assert changed["words"] == [["Z"]]
    second = D.load_conll2000("train", data_dir=tmp_path)
    assert second is not first and second["words"] == [["A"]]
    path.write_text("The DT B-NP\ndog NN I-NP\n")
    assert D.load_conll2000("train", data_dir=tmp_path)["words"] == [["The", "dog"]]
