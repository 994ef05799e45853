"""Extraction is bit-reproducible across processes at one thread count: two fresh Python
processes extract the same real sentences (UD English-EWT dev, word level, orders 1–3,
rollout, the last layer and ALTI) from a real zoo encoder (minilm-l6) and a real zoo causal LM
(smollm2-135m), both at 1 torch thread (then both at 2), and give byte-identical maps, and a byte-identical
derived table: the SSIM matrix of the encoder's order-1 images against the causal model's
(:func:`olas_utils.similarity.ssim.ssim_matrix`). The reference of each process is the other
process (nothing is shared between them but the files they read); what changes across thread
counts is measured in docs/reproducibility.md (benchmarks/reproducibility.py)."""

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest
import torch

MODELS = ("minilm-l6", "smollm2-135m")
N_SENTENCES = 4

CHILD = textwrap.dedent(
    """
    import sys, warnings
    import torch
    torch.set_num_threads(int(sys.argv[2]))
    warnings.filterwarnings("ignore")
    from olas_utils.data import load_ud_ewt
    from olas_utils.extract import extract_ola
    from olas_utils.similarity.images import to_image
    from olas_utils.similarity.ssim import ssim_matrix
    from olas_utils.zoo import load_model

    words = [list(w) for w in load_ud_ewt("dev")["words"] if 5 <= len(w) <= 40][: int(sys.argv[3])]
    out = {"threads": torch.get_num_threads(), "maps": {}}
    for name in sys.argv[4:]:
        lm = load_model(name, device="cpu")
        res = extract_ola(lm, words, orders=(1, 2, 3), level="word", batch_size=8, progress=False, mixing=("alti",))
        out["maps"][name] = {k: [m.clone() for m in res[k]] for k in res.keys()}
        out.setdefault("causal", {})[name] = res.is_causal
    names = sys.argv[4:]
    images = [
        torch.stack([to_image(m, causal=out["causal"][n]) for m in out["maps"][n]["ola:1"]])[:, None] for n in names
    ]
    out["ssim"] = ssim_matrix(images[0], images[-1])
    torch.save(out, sys.argv[1])
    """
)


def _extract_in_fresh_process(tmp_path, tag: str, threads: int) -> dict:
    out = tmp_path / f"{tag}.pt"
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR",)}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OLAS_DEVICE="cpu")
    subprocess.run(
        [sys.executable, "-c", CHILD, str(out), str(threads), str(N_SENTENCES), *MODELS],
        env=env,
        check=True,
        timeout=600,
    )
    return torch.load(out, weights_only=False)


def _sha256(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(str((tuple(t.shape), t.dtype)).encode())
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.real_model
@pytest.mark.parametrize("threads", [1, 2])
def test_two_fresh_processes_at_one_thread_count_give_byte_identical_maps_and_ssim(tmp_path, threads):
    first = _extract_in_fresh_process(tmp_path, "first", threads)
    second = _extract_in_fresh_process(tmp_path, "second", threads)
    assert first["threads"] == second["threads"] == threads
    for name in MODELS:
        a, b = first["maps"][name], second["maps"][name]
        assert sorted(a) == sorted(b) == sorted(["ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1", "alti"])
        for key in a:
            assert len(a[key]) == len(b[key]) == N_SENTENCES
            for x, y in zip(a[key], b[key]):
                assert x.dtype == y.dtype == torch.float32 and x.shape == y.shape
                assert torch.equal(x, y), f"{name} {key}: maps differ between two processes at {threads} thread(s)"
            assert _sha256(a[key]) == _sha256(b[key])
        # real content, not a constant: the orders differ from each other
        assert not torch.equal(a["ola:1"][0], a["ola:2"][0])
    assert first["ssim"].shape == (N_SENTENCES, N_SENTENCES)
    assert _sha256([first["ssim"]]) == _sha256([second["ssim"]])
    assert torch.isfinite(first["ssim"]).all()
