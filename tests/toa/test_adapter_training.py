"""Adapter, heads, batching and training mechanics on toy inputs (shapes, invariances,
resumability). Real-data behaviour is covered by the notebook smoke tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from olas_utils.toa.adapter import AdapterConfig, OLAAdapter
from olas_utils.toa.features import Example
from olas_utils.toa.heads import BiaffineHead, RelationHead, TOAModel
from olas_utils.toa.train import (
    CheckpointMismatchError,
    TrainConfig,
    collate,
    predict,
    predict_trees,
    size_batches,
    train_model,
)


def test_adapter_shapes_and_channel_check(tiny_adapter):
    a = OLAAdapter(tiny_adapter)
    out = a(torch.rand(3, 2, 5, 5))
    assert out.shape == (3, 5, 8)
    with pytest.raises(ValueError, match="expects 2 channels"):
        a(torch.rand(1, 3, 5, 5))
    with pytest.raises(ValueError, match="batch, channels, L, L"):
        a(torch.rand(2, 5, 5))
    with pytest.raises(ValueError, match="divisible"):
        AdapterConfig(dim=10, heads=4)


def test_pointwise_feed_forward_mixes_no_neighbouring_pixels():
    """With ``ff_kernel=1`` each feed-forward block's output at a pixel depends on that pixel only (the 3×3
    blocks of the paper's axial transformer read its 5×5 neighbourhood); everything else is unchanged."""
    from dataclasses import replace

    from torch import nn

    torch.manual_seed(0)
    cfg = AdapterConfig(in_channels=2, dim=8, depth=2, heads=2, reversible=False)
    for kernel, spread in ((1, 1), (3, 25)):  # two 3×3 convolutions in a row read a 5×5 neighbourhood
        a = OLAAdapter(replace(cfg, ff_kernel=kernel)).eval()
        blocks = [m for m in a.body.modules() if isinstance(m, nn.Sequential)]
        assert len(blocks) == 2 * cfg.depth  # two feed-forward blocks per axial block
        x = torch.rand(1, 8, 6, 6)
        y = x.clone()
        y[0, :, 2, 3] += 1.0
        with torch.no_grad():
            changed = (blocks[0](y) - blocks[0](x)).abs().amax(1)[0] > 0
        assert int(changed.sum()) == spread and bool(changed[2, 3])
        assert a(torch.rand(3, 2, 5, 5)).shape == (3, 5, 8)
    small = sum(p.numel() for p in OLAAdapter(cfg).parameters())
    point = sum(p.numel() for p in OLAAdapter(replace(cfg, ff_kernel=1)).parameters())
    conv3 = 2 * cfg.depth * 2 * (8 * 32 * 9)  # the 3×3 weights: 2 blocks × depth × 2 convolutions
    assert small - point == conv3 - conv3 // 9
    assert "ff_kernel" not in cfg.to_dict() and replace(cfg, ff_kernel=1).to_dict()["ff_kernel"] == 1
    with pytest.raises(ValueError, match="ff_kernel"):
        AdapterConfig(ff_kernel=5)


def test_adapter_reads_the_diagonal_of_the_transformed_image(tiny_adapter):
    torch.manual_seed(0)
    a = OLAAdapter(tiny_adapter).eval()
    x = torch.rand(2, 2, 6, 6)
    body = a.body(a.proj(x))  # (B, dim, L, L)
    expected = torch.stack([body[:, :, i, i] for i in range(6)], dim=1)
    torch.testing.assert_close(a(x), expected)


def test_relation_head_pools_span_means():
    torch.manual_seed(0)
    head = RelationHead(4, 5, dropout=0.0).eval()
    feats = torch.rand(2, 6, 4)
    spans = torch.tensor([[[0, 2], [3, 6]], [[1, 2], [4, 5]]])
    expected = torch.stack(
        [
            torch.cat([feats[0, 0:2].mean(0), feats[0, 3:6].mean(0)]),
            torch.cat([feats[1, 1:2].mean(0), feats[1, 4:5].mean(0)]),
        ]
    )
    torch.testing.assert_close(head(feats, spans=spans), head.out(expected))
    with pytest.raises(ValueError, match="non-empty"):
        head(feats, spans=torch.tensor([[[2, 2], [3, 4]], [[0, 1], [1, 2]]]))


def test_biaffine_scores_match_formula():
    torch.manual_seed(0)
    h = BiaffineHead(4, 3, arc_dim=5, label_dim=2, dropout=0.0).eval()
    for p in (h.arc_u, h.arc_b, h.lab_u):
        torch.nn.init.normal_(p)
    feats = torch.rand(1, 3, 4)
    arcs, labels = h(feats)
    assert arcs.shape == (1, 4, 4) and labels.shape == (1, 4, 4, 3)
    x = torch.cat([h.root[None], feats[0]])
    ad, ah, ld, lh = h.arc_dep(x), h.arc_head(x), h.lab_dep(x), h.lab_head(x)
    for i in range(4):
        for j in range(4):
            assert torch.isclose(arcs[0, i, j], ad[i] @ h.arc_u @ ah[j] + ah[j] @ h.arc_b, atol=1e-5)
            for r in range(3):
                ref = ld[i] @ h.lab_u[r] @ lh[j] + h.lab_w(torch.cat([ld[i], lh[j]]))[r]
                assert torch.isclose(labels[0, i, j, r], ref, atol=1e-5)


def test_size_batches_partition_by_size(toa_examples):
    ex = toa_examples("token", n=17)
    for gen in (None, torch.Generator().manual_seed(3)):
        batches = size_batches(ex, 4, gen)
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(17))
        assert all(len({ex[i].size for i in b}) == 1 and len(b) <= 4 for b in batches)
    with pytest.raises(ValueError, match="one image size"):
        collate([ex[0], ex[1]])


@pytest.mark.parametrize("kind", ["token", "relation", "dependency"])
def test_several_tree_decoders_from_one_pass_equal_each_decoder_on_the_raw_scores(tiny_adapter, toa_examples, kind):
    """``predict_trees`` against a reference written here: the model's raw output per example, argmax for
    token and relation models, ``decode_tree`` per decoder (and the label argmax at each chosen head)."""
    from olas_utils.toa.decoding import decode_tree

    ex = toa_examples(kind, n=7)
    torch.manual_seed(1)
    model = TOAModel(tiny_adapter, kind, 3, **({"arc_dim": 8, "label_dim": 4} if kind == "dependency" else {}))
    trees = ("mst", "greedy", "eisner")
    got = predict_trees(model, ex, trees, batch_size=3)
    model.eval()
    for t in trees:
        ref = []
        for e in ex:
            b = collate([e])
            with torch.no_grad():
                res = model(b["images"], b["positions"], b.get("spans"))
            if kind == "token":
                ref.append(res[0].argmax(-1).tolist())
            elif kind == "relation":
                ref.append(int(res[0].argmax(-1)))
            else:
                arcs, labels = res
                heads = decode_tree(arcs[0].double().numpy(), algorithm=t, single_root=True)
                lab = labels[0, torch.arange(1, len(heads) + 1), torch.as_tensor(heads)].argmax(-1).tolist()
                ref.append((list(heads), lab))
        assert got[t] == ref == predict(model, ex, tree=t)
    if kind == "dependency":  # the decoders differ somewhere on random scores, so the test can tell them apart
        assert got["greedy"] != got["mst"]
    with pytest.raises(ValueError, match="distinct decoder"):
        predict_trees(model, ex, ("mst", "mst"))
    with pytest.raises(ValueError, match="distinct decoder"):
        predict_trees(model, ex, ())


@pytest.mark.parametrize("kind", ["token", "relation", "dependency"])
def test_training_learns_and_predictions_do_not_depend_on_batch(tiny_adapter, toa_examples, kind):
    ex = toa_examples(kind, n=6)
    torch.manual_seed(0)
    model = TOAModel(tiny_adapter, kind, 3, **({"arc_dim": 8, "label_dim": 4} if kind == "dependency" else {}))
    info = train_model(model, ex, TrainConfig(epochs=60, batch_size=2, lr=1e-2, noise_p=0.0), progress=False)
    assert info["losses"][-1] < 0.5 * info["losses"][0]
    alone = [predict(model, [e])[0] for e in ex]
    assert predict(model, ex, batch_size=4) == alone
    if kind == "token":  # memorised the 6 training sentences
        acc = sum(a == b for p, e in zip(alone, ex) for a, b in zip(p, e.labels.tolist())) / sum(
            len(e.labels) for e in ex
        )
        assert acc > 0.9
    if kind == "dependency":
        assert all(sorted(h).count(0) == 1 for h, _ in alone)  # single-root trees


def test_training_is_deterministic_and_checkpoint_reused(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("token")
    cfg = TrainConfig(epochs=3, batch_size=3, lr=1e-2, checkpoint_every=2)
    states = []
    for _ in range(2):
        torch.manual_seed(0)
        m = TOAModel(tiny_adapter, "token", 3)
        train_model(m, ex, cfg, progress=False)
        states.append(m.state_dict())
    for k in states[0]:
        assert torch.equal(states[0][k], states[1][k]), k
    torch.manual_seed(0)
    m = TOAModel(tiny_adapter, "token", 3)
    train_model(m, ex, cfg, checkpoint=tmp_path / "c.pt", progress=False)
    torch.manual_seed(1)  # other init: the finished checkpoint must replace it
    m2 = TOAModel(tiny_adapter, "token", 3)
    info = train_model(m2, ex, cfg, checkpoint=tmp_path / "c.pt", progress=False)
    assert info["resumed_from"] == info["steps"]
    for k, v in m2.state_dict().items():
        assert torch.equal(v, states[0][k]), k
    with pytest.raises(CheckpointMismatchError, match="another training run"):
        train_model(
            TOAModel(tiny_adapter, "token", 3), ex, TrainConfig(epochs=4), checkpoint=tmp_path / "c.pt", progress=False
        )
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointMismatchError, match="not a readable checkpoint"):
        train_model(TOAModel(tiny_adapter, "token", 3), ex, cfg, checkpoint=tmp_path / "bad.pt", progress=False)


_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from conftest import build_toa_examples as toa_examples, tiny_adapter_config
    tiny_adapter = tiny_adapter_config()
    from olas_utils.toa.heads import TOAModel
    from olas_utils.toa.train import TrainConfig, train_model
    ex = toa_examples("dependency", n=40)
    torch.manual_seed(0)
    m = TOAModel(tiny_adapter, "dependency", 3, arc_dim=16, label_dim=8)
    info = train_model(m, ex, TrainConfig(epochs=30, batch_size=2, checkpoint_every=1), checkpoint=sys.argv[1],
                       progress=False)
    torch.save(m.state_dict(), sys.argv[2])
    print(json.dumps({{"resumed_from": info["resumed_from"], "steps": info["steps"]}}))
""")


@pytest.mark.slow  # 27 s measured alone at 1 thread (docs/testing.md)
def test_training_killed_by_sigkill_resumes_to_identical_weights(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT.format(tests=str(Path(__file__).resolve().parents[1])))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ref = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ref.pt"), str(tmp_path / "ref_w.pt")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    total = json.loads(ref.stdout.strip().splitlines()[-1])["steps"]
    ckpt = tmp_path / "killed.pt"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ckpt), str(tmp_path / "w.pt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(0.3)
    assert proc.poll() is None, "training finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "w.pt").exists()
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]
    res = subprocess.run(
        [sys.executable, str(script), str(ckpt), str(tmp_path / "w.pt")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert 0 < info["resumed_from"] < total, info
    a, b = torch.load(tmp_path / "ref_w.pt"), torch.load(tmp_path / "w.pt")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert all(".tmp" not in p.name or p.name in leftovers for p in tmp_path.iterdir())


def test_save_and_load_round_trip(tiny_adapter, toa_examples, tmp_path):
    ex = toa_examples("dependency", n=4)
    torch.manual_seed(0)
    m = TOAModel(tiny_adapter, "dependency", 3, arc_dim=8, label_dim=4)
    train_model(m, ex, TrainConfig(epochs=2, batch_size=2), progress=False)
    m.save(tmp_path / "a.pt", source="toy", keys=["ola:1"])
    m2, meta = TOAModel.load(tmp_path / "a.pt")
    assert meta == {"source": "toy", "keys": ["ola:1"]}
    assert predict(m2, ex) == predict(m, ex)
    torch.save({"x": 1}, tmp_path / "b.pt")
    with pytest.raises(ValueError, match="not a TOA model"):
        TOAModel.load(tmp_path / "b.pt")


def test_checkpoint_write_errors_name_the_path(tiny_adapter, toa_examples, tmp_path, monkeypatch):
    import errno

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    ex = toa_examples("token", n=4)
    with pytest.raises(OSError) as ei:
        train_model(
            TOAModel(tiny_adapter, "token", 3),
            ex,
            TrainConfig(epochs=1, checkpoint_every=1),
            checkpoint=tmp_path / "ck" / "run.pt",
            progress=False,
        )
    assert ei.value.errno == errno.ENOSPC and str(tmp_path / "ck" / "run.pt") in str(ei.value)
    assert not list((tmp_path / "ck").iterdir())  # nothing half-written left behind


def test_one_word_images_train_without_nan_and_bad_inputs_fail_loudly(tiny_adapter, toa_examples):
    ex = toa_examples("token", n=4) + [
        Example(image=torch.rand(2, 1, 1), positions=torch.arange(1), labels=torch.tensor([1]))
    ]
    torch.manual_seed(0)
    m = TOAModel(tiny_adapter, "token", 3)
    info = train_model(m, ex, TrainConfig(epochs=3, batch_size=1, noise_p=1.0), progress=False)
    assert all(torch.isfinite(torch.tensor(info["losses"])))
    assert all(torch.isfinite(p).all() for p in m.parameters())
    bad = [
        Example(image=torch.full((2, 3, 3), float("nan")), positions=torch.arange(3), labels=torch.tensor([0, 1, 2]))
    ]
    with pytest.raises(FloatingPointError, match="non-finite training loss"):
        train_model(TOAModel(tiny_adapter, "token", 3), bad, TrainConfig(epochs=1), progress=False)
    with pytest.raises(ValueError, match="lr must be > 0"):
        TrainConfig(lr=0)
    with pytest.raises(ValueError, match="entity spans"):
        predict(TOAModel(tiny_adapter, "relation", 3), toa_examples("token", n=2))
