"""Dev splits of the TOA tasks: the held-out tenth (every index 9 mod 10) is disjoint from
train, and the tasks with their own dev files use them."""

from __future__ import annotations


def test_held_out_tenth_is_every_tenth_sentence_and_disjoint_from_train():
    from olas_utils.data.conll import load_conll2000
    from olas_utils.data.tasks import load_task

    full = load_conll2000("train")
    dev, train = load_task("pos", "dev", min_words=1), load_task("pos", "train", min_words=1)
    assert dev.rows == list(range(9, len(full), 10))  # every index 9 mod 10
    assert set(dev.rows).isdisjoint(train.rows) and len(dev) + len(train) == len(full)
    assert dev.words[0] == full[9]["words"] and dev.label_names == train.label_names
    ewt_dev = load_task("dependency", "dev", min_words=1)
    assert len(ewt_dev) == 2001 and ewt_dev.meta["reader_split"] == "dev"  # UD EWT's own dev file
    assert load_task("ner-conll2003", "dev", min_words=1).meta["reader_split"] == "dev"  # testa
    uner_tr, uner_dev = load_task("ner-uner", "train", min_words=1), load_task("ner-uner", "dev", min_words=1)
    assert len(uner_tr) + len(uner_dev) == 2001 and set(uner_tr.rows).isdisjoint(uner_dev.rows)
