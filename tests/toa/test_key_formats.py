"""The TOA cache and checkpoint keys and the derived seeds keep their values: each is compared
with the formula it was defined by, computed here with :mod:`hashlib` and :mod:`json` directly
(so caches, checkpoints and training numbers made before stay valid)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import torch

from olas_utils.data.corpus import corpus_hash
from olas_utils.data.tasks import TaskData
from olas_utils.infra.fingerprint import library_versions, seed_from
from olas_utils.maths.augment import PAPER_ADAPTER, PAPER_ADAPTER_AUGMENTED
from olas_utils.toa.features import Example
from olas_utils.toa.heads import TOAModel
from olas_utils.toa.mapshards import sentence_id
from olas_utils.toa.taskmaps import maps_key
from olas_utils.toa.train import Selection, TrainConfig, checkpoint_key, examples_digest

#: ``asdict(TrainConfig())`` as it was written before the augmentation had its own type.
OLD_DEFAULT = {
    "epochs": 10,
    "batch_size": 8,
    "lr": 1e-3,
    "weight_decay": 0.01,
    "noise_p": 0.3,
    "noise_std": 0.2,
    "grad_clip": 5.0,
    "sink_p": 0.0,
    "temperature_p": 0.0,
    "seed": 0,
    "checkpoint_every": 200,
}


def _examples():
    g = torch.Generator().manual_seed(0)
    return [
        Example(image=torch.rand(2, 3, 3, generator=g), positions=torch.arange(3), labels=torch.tensor([0, 1, 2])),
        Example(
            image=torch.rand(2, 2, 2, generator=g),
            positions=torch.arange(2),
            labels=torch.tensor([1, 0]),
            heads=torch.tensor([0, 1]),
        ),
    ]


def _example_bytes(examples):
    out = b""
    for ex in examples:
        for t in (ex.image, ex.positions, ex.labels, ex.heads, ex.spans):
            if t is not None:
                out += t.contiguous().numpy().tobytes()
    return out


def test_seed_formula():
    for parts in [(0, "noise", 5), (3, "order", 0), (1, "dropout", 12)]:
        ref = int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1
        assert seed_from(*parts) == ref


def test_sentence_id_and_maps_key_formulas():
    for words in (["a", "b"], ["Straße", "日本", '"q"'], []):
        assert sentence_id(words) == hashlib.sha256(json.dumps(words, ensure_ascii=False).encode()).hexdigest()
    payload = {
        "weights": "w" * 64,
        "model": "minilm-l6",
        "control": "random",
        "control_seed": 3,
        "orders": [1, 2, 3],
        "rollout": True,
        "versions": library_versions(),
        "extraction": "one sentence per forward pass",
        "torch_threads": torch.get_num_threads(),
    }
    ref = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    assert maps_key("w" * 64, "minilm-l6", "random", 3, [3, 1, 2], True) == ref
    assert maps_key("w" * 64, "minilm-l6", "random", 3, [3, 1, 2], True, mixing=()) == ref  # no mixing key


def test_task_fingerprint_and_corpus_hash_formulas():
    d = TaskData(
        task="dependency",
        kind="dependency",
        split="train",
        words=[["a", "é"]],
        labels=[["nsubj", "root"]],
        label_names=("nsubj", "root"),
        rows=[0],
        heads=[[2, 0]],
        spans=[((0, 1), (1, 2))],
    )
    payload = json.dumps([d.task, d.split, d.words, d.labels, d.heads, d.spans], sort_keys=True, default=list)
    assert d.fingerprint() == hashlib.sha256(payload.encode()).hexdigest()
    text = '[["a","é"],["b"]]'
    assert corpus_hash([["a", "é"], ("b",)]) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_examples_digest_and_checkpoint_key_formulas(tiny_adapter):
    ex = _examples()
    assert examples_digest(ex) == hashlib.sha256(_example_bytes(ex)).hexdigest()
    torch.manual_seed(0)
    m = TOAModel(tiny_adapter, "token", 3)
    arch = {
        "kind": m.kind,
        "adapter": m.adapter.config.to_dict(),
        "params": [(n, tuple(p.shape)) for n, p in m.named_parameters()],
    }

    def ref(cfg_dict, extra, sel=None):
        parts = [arch, cfg_dict, extra] + ([sel] if sel else [])
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode() + _example_bytes(ex)).hexdigest()

    assert checkpoint_key(m, TrainConfig(), ex, {"task": "pos"}) == ref(OLD_DEFAULT, {"task": "pos"})
    cfg = TrainConfig(epochs=3, sink_p=0.3, temperature_p=0.3)
    old = {**OLD_DEFAULT, "epochs": 3, "sink_p": 0.3, "temperature_p": 0.3}
    assert checkpoint_key(m, cfg, ex, None, Selection(score=len, identity="dev")) == ref(old, {}, [2, 1, "dev"])
    # a minimum gain for early stopping enters the key only when set (runs without one keep theirs)
    gain = Selection(score=len, identity="dev", patience=4, min_gain=0.005)
    assert checkpoint_key(m, cfg, ex, None, gain) == ref(old, {}, [4, 1, "dev", 0.005])
    # the same settings given as an augmentation object name the same run
    assert checkpoint_key(m, TrainConfig(epochs=3, augmentation=PAPER_ADAPTER_AUGMENTED), ex) == ref(old, {})
    # settings the old layout could not hold change the key
    wide = TrainConfig(augmentation=replace(PAPER_ADAPTER, max_columns=5))
    assert checkpoint_key(m, wide, ex) != checkpoint_key(m, TrainConfig(), ex)


def test_train_config_keeps_its_augmentation_arguments():
    cfg = TrainConfig(noise_p=0.0, sink_p=1.0)
    assert cfg.augmentation == replace(PAPER_ADAPTER, noise_p=0.0, sink_p=1.0)
    assert (cfg.noise_p, cfg.noise_std, cfg.sink_p, cfg.temperature_p) == (0.0, 0.2, 1.0, 0.0)
    again = replace(cfg, sink_p=0.3, temperature_p=0.3)  # as studies.adapters does
    assert (again.noise_p, again.sink_p, again.temperature_p) == (0.0, 0.3, 0.3)
    swapped = replace(cfg, augmentation=PAPER_ADAPTER_AUGMENTED)
    assert swapped.augmentation == PAPER_ADAPTER_AUGMENTED
    assert TrainConfig() == TrainConfig(augmentation=PAPER_ADAPTER) and hash(TrainConfig()) == hash(TrainConfig())
