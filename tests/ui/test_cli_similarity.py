"""``olas similarity``: cross-model retrieval from the command line."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from olas_utils.ui.cli import main, similarity_table

SENTENCES = [
    "The cat sat on the mat .",
    "Stocks fell sharply in early trading on Monday after the report .",
    "She gave her brother a book about old ships .",
    "Why did nobody tell me the meeting was moved ?",
    "Heavy rain flooded several roads near the river last night .",
    "I think the new policy will help small businesses grow .",
]


@pytest.fixture
def sentence_file(tmp_path):
    f = tmp_path / "sents.txt"
    f.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return f


def test_help_documents_the_options():
    r = subprocess.run(
        [sys.executable, "-m", "olas_utils.ui.cli", "similarity", "--help"], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0
    for opt in (
        "--models",
        "--order",
        "--metric",
        "--level",
        "--size",
        "--out",
        "--dataset",
        "--n",
        "Hit@k",
        "Exit codes",
    ):
        assert opt in r.stdout, opt


@pytest.mark.parametrize(
    "extra,message",
    [
        ([], "one of the arguments -i/--input --dataset is required"),
        (["--dataset", "ewt", "-i", "x.txt"], "not allowed with"),
        (["-i", "x.txt", "--n", "5"], "--n goes with --dataset"),
        (["--dataset", "ewt", "--n", "1"], "--n must be at least 2"),
        (["-i", "x.txt", "--size", "4"], "too small for SSIM"),
        (["-i", "x.txt", "--metric", "cosine"], "invalid choice"),
        (["-i", "x.txt", "--order", "-1"], "--order values must be >= 1"),
        (["-i", "x.txt", "--order", "0"], "order 0 is the identity map"),
    ],
)
def test_bad_usage_exits_2(extra, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["similarity", "--models", "minilm-l6", "mpnet-base", *extra])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_one_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["similarity", "--models", "minilm-l6", "-i", "x.txt"])
    assert e.value.code == 2 and "two or more different models" in capsys.readouterr().err


def test_runtime_failures_exit_1(tmp_path, capsys):
    assert main(["similarity", "--models", "minilm-l6", "mpnet-base", "-i", str(tmp_path / "nope.txt"), "-q"]) == 1
    assert "nope.txt does not exist" in capsys.readouterr().err
    one = tmp_path / "one.txt"
    one.write_text("Only one sentence .\n")
    assert main(["similarity", "--models", "minilm-l6", "mpnet-base", "-i", str(one), "-q"]) == 1
    assert "at least 2 sentences" in capsys.readouterr().err


@pytest.mark.real_model
def test_similarity_on_six_sentences(sentence_file, tmp_path, zoo_model):
    out = tmp_path / "res" / "hits.csv"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "olas_utils.ui.cli",
            "similarity",
            "--models",
            "minilm-l6",
            "mpnet-base",
            "-i",
            str(sentence_file),
            "--order",
            "1",
            "2",
            "--metric",
            "ssim",
            "--level",
            "word",
            "--size",
            "20",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "hit@1" in r.stdout and "minilm-l6" in r.stdout and f"wrote 4 rows to {out}" in r.stdout
    assert "models" in r.stderr  # tqdm progress bar over models
    table = pd.read_csv(out)
    assert list(table[["key", "target", "source"]].itertuples(index=False, name=None)) == [
        ("ola:1", "minilm-l6", "mpnet-base"),
        ("ola:1", "mpnet-base", "minilm-l6"),
        ("ola:2", "minilm-l6", "mpnet-base"),
        ("ola:2", "mpnet-base", "minilm-l6"),
    ]
    assert (table.n == 6).all() and (table["chance@1"].round(4) == round(1 / 6, 4)).all()

    # the same numbers straight from the library: extract, pre-process to images, SSIM, Hit@k
    from olas_utils.extract import extract_ola
    from olas_utils.similarity import hit_at_k, ssim_matrix
    from olas_utils.similarity.images import to_image

    words = [s.split() for s in SENTENCES]
    imgs = {}
    for name in ("minilm-l6", "mpnet-base"):
        lm = zoo_model(name)
        maps = extract_ola(lm.model, lm.tokenizer, words, orders=(1, 2), level="word", progress=False)
        imgs[name] = {
            k: torch.stack([to_image(m, causal=lm.is_causal, image_size=20) for m in maps[k]])
            for k in ("ola:1", "ola:2")
        }
    for _, row in table.iterrows():
        sim = ssim_matrix(imgs[row["target"]][row["key"]], imgs[row["source"]][row["key"]])
        assert row["hit@1"] == pytest.approx(hit_at_k(sim, 1), abs=1e-4)
        assert row["hit@5"] == pytest.approx(hit_at_k(sim, 5), abs=1e-4)


@pytest.mark.real_model
def test_similarity_table_pearson_subword(zoo_model):
    words = [s.split() for s in SENTENCES]
    table = similarity_table(
        ["minilm-l6", "mpnet-base"],
        words,
        orders=(1,),
        metric="pearson",
        level="subword",
        image_size=16,
        progress=False,
    )
    assert len(table) == 2 and set(table.metric) == {"pearson"} and set(table.level) == {"subword"}
    assert table["hit@1"].between(0, 1).all() and (table["hit@5"] >= table["hit@1"]).all()
    with pytest.raises(ValueError, match="two or more different models"):
        similarity_table(["minilm-l6", "minilm-l6"], words)
