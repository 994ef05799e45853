"""Training refuses what it cannot use before any step runs, naming the argument, the data
or the folder: examples of another task or length than their task data, all-NaN dev data,
an unwritable checkpoint folder; a killed parallel worker names the runs in flight."""

from __future__ import annotations

import errno
import os

import pytest
import torch

from olas_utils.data.tasks import TaskData
from olas_utils.infra import atomic
from olas_utils.toa import train as train_mod
from olas_utils.toa.features import Example
from olas_utils.toa.fit import adapter_config, evaluate, fit_adapter
from olas_utils.toa.train import TrainConfig

TAGS = ("DET", "NOUN", "VERB")


def pos_data(n: int = 6, split: str = "train") -> TaskData:
    words = [["the", "cat", "sat"] for _ in range(n)]
    return TaskData("pos", "token", split, words, [["DET", "NOUN", "VERB"] for _ in range(n)], TAGS, list(range(n)))


def relation_data(n: int = 6) -> TaskData:
    words = [["the", "cat", "bit", "the", "dog"] for _ in range(n)]
    return TaskData(
        "relation", "relation", "train", words, ["Other"] * n, ("Other",), list(range(n)), spans=[((1, 2), (4, 5))] * n
    )


def token_examples(n: int = 6, w: int = 3, fill: float | None = None, seed: int = 0) -> list[Example]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        img = torch.rand(2, w, w, generator=g) if fill is None else torch.full((2, w, w), fill)
        out.append(Example(image=img, positions=torch.arange(w), labels=torch.tensor([0, 1, 2])))
    return out


def relation_examples(n: int = 6) -> list[Example]:
    return [
        Example(
            image=torch.rand(2, 5, 5),
            positions=torch.arange(5),
            labels=torch.tensor(0),
            spans=torch.tensor([[1, 2], [4, 5]]),
        )
        for _ in range(n)
    ]


CFG = TrainConfig(epochs=2, batch_size=4, lr=1e-3, seed=0, checkpoint_every=1)
ADAPTER = adapter_config("tiny", 2)


@pytest.fixture
def count_steps(monkeypatch):
    calls = []
    real = train_mod.collate

    def counting(examples):
        calls.append(len(examples))
        return real(examples)

    monkeypatch.setattr(train_mod, "collate", counting)
    return calls


def test_examples_of_another_task_name_both_arguments(count_steps):
    with pytest.raises(ValueError, match=r"examples.*data|data.*examples") as e:
        fit_adapter(relation_examples(), pos_data(), ADAPTER, CFG, progress=False)
    assert "relation" in str(e.value) or "spans" in str(e.value)
    assert not count_steps


def test_examples_of_another_length_name_both_arguments(count_steps):
    with pytest.raises(ValueError, match=r"5 examples.*6 sentences|examples.*data") as e:
        fit_adapter(token_examples(5), pos_data(6), ADAPTER, CFG, progress=False)
    assert "pos/train" in str(e.value)
    assert not count_steps


def test_token_examples_for_relation_data_name_both_arguments(count_steps):
    with pytest.raises(ValueError, match="examples") as e:
        fit_adapter(token_examples(), relation_data(), adapter_config("tiny", 2), CFG, progress=False)
    assert "relation" in str(e.value)
    assert not count_steps


def test_evaluate_with_examples_of_another_task_names_both_arguments():
    model, _ = fit_adapter(token_examples(), pos_data(), ADAPTER, TrainConfig(epochs=1, batch_size=4), progress=False)
    with pytest.raises(ValueError, match="examples"):
        evaluate(model, token_examples(4), pos_data(6))
    with pytest.raises(ValueError, match="examples"):
        evaluate(model, token_examples(6, w=5), pos_data(6))  # 5 word positions for 3-word sentences


def test_all_nan_dev_data_is_refused_naming_it(count_steps):
    dev = (token_examples(4, fill=float("nan")), pos_data(4, split="dev"))
    with pytest.raises(ValueError, match="dev") as e:
        fit_adapter(token_examples(), pos_data(), ADAPTER, CFG, dev=dev, progress=False)
    assert "pos/dev" in str(e.value) and ("NaN" in str(e.value) or "finite" in str(e.value))
    assert not count_steps


def test_a_nan_selection_score_is_refused_naming_the_dev_data():
    sel = train_mod.Selection(score=lambda m: float("nan"), identity="uas:dev-data-id")
    from olas_utils.toa.heads import TOAModel

    model = TOAModel(ADAPTER, "token", len(TAGS))
    with pytest.raises(ValueError, match="dev-data-id"):
        train_mod.train_model(model, token_examples(), CFG, selection=sel, progress=False)


@pytest.fixture
def read_only_folder(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root ignores the mode: refuse new files in the folder as the kernel would
        real_open = open

        def read_only_open(file, mode="r", *a, **k):
            if os.path.dirname(os.fspath(file)) == str(folder) and any(c in mode for c in "wax+"):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
            return real_open(file, mode, *a, **k)

        monkeypatch.setattr(atomic, "open", read_only_open, raising=False)
    yield folder
    folder.chmod(0o755)


def test_unwritable_checkpoint_folder_is_refused_before_training(read_only_folder, count_steps):
    with pytest.raises(PermissionError) as e:
        fit_adapter(token_examples(), pos_data(), ADAPTER, CFG, checkpoint_dir=read_only_folder, progress=False)
    assert str(read_only_folder) in str(e.value)
    assert not count_steps, "training ran before the checkpoint folder was found unwritable"
    assert sorted(read_only_folder.iterdir()) == []


class _DieOnLoad(str):
    """A run's name that, unpickled in the worker, kills the process at once, as if killed
    (SIGKILL, out of memory); in the parent it is the name."""

    def __reduce__(self):
        return (os._exit, (137,))


def test_a_killed_worker_names_the_runs_and_says_how_to_resume(tmp_path):
    from concurrent.futures.process import BrokenProcessPool

    from olas_utils.toa.parallel import fit_many

    def job(seed, desc, die=False):
        j = dict(
            examples=token_examples(seed=seed),
            data=pos_data(),
            adapter=ADAPTER,
            cfg=TrainConfig(epochs=1, batch_size=4, seed=seed),
            checkpoint_dir=tmp_path,
            desc=_DieOnLoad(desc) if die else desc,  # checkpoint_file ignores desc; the worker dies loading it
        )
        return j

    jobs = {"a": job(0, "run-a", die=True), "b": job(1, "run-b", die=True)}
    with pytest.raises(RuntimeError) as e:
        fit_many(jobs, workers=2, progress=False)
    assert not isinstance(e.value, BrokenProcessPool)
    msg = str(e.value)
    assert "run-a" in msg and "run-b" in msg and "again" in msg and "checkpoint" in msg
