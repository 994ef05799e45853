"""GPU check: streaming OLA on a randomly initialised Llama-3.1-8B-sized model in bf16, and
the paper profile's heaviest step (training the 448 M-parameter paper adapter with its parser
head) timed for ``benchmarks/paper_estimate.py``.

No download: the model is built from a config. Prints throughput, peak memory, batch
invariance and the recurrence against enumeration on the GPU. Exit code 1 if a check fails.

    python benchmarks/gpu_check.py [--layers 32] [--batch 8] [--seq 512]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from itertools import combinations
from math import comb

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from olas_utils.capture.attention import AttentionCapture
from olas_utils.maths.ola import ola_from_layers


def enumerate_ola(layers, k):
    n, b, t, _ = layers.shape
    total = torch.zeros(b, t, t, dtype=layers.dtype, device=layers.device)
    for combo in combinations(range(n), k):
        prod = layers[combo[0]]
        for i in combo[1:]:
            prod = layers[i] @ prod
        total += prod
    return total / comb(n, k)


def adapter_steps(dev, sync, *, tiny: bool, length: int, steps: int = 12) -> bool:
    """Train the paper profile's adapter + biaffine head on one fixed batch of 2 random images of
    ``length`` subwords: seconds per step, peak memory, and whether the loss falls (it must, on
    one repeated batch). ``tiny``: the same blocks at width 32 (CPU dry run)."""
    from olas_utils.studies.transfer import PROFILES
    from olas_utils.toa.adapter import OLAAdapter
    from olas_utils.toa.features import n_channels
    from olas_utils.toa.fit import adapter_config
    from olas_utils.toa.heads import BiaffineHead

    s = PROFILES["paper"].training
    size = "paper-narrow" if tiny else s.adapter
    c = n_channels(PROFILES["paper"].keys)
    torch.manual_seed(0)
    adapter = OLAAdapter(adapter_config(size, c)).to(dev)
    head = BiaffineHead(adapter.config.dim, n_labels=40, arc_dim=s.arc_dim, label_dim=s.label_dim).to(dev)
    params = list(adapter.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=s.lr)
    g = torch.Generator(device=dev).manual_seed(2)
    images = torch.rand(2, c, length, length, device=dev, generator=g)
    heads = torch.randint(0, length + 1, (2, length), device=dev, generator=g)
    rels = torch.randint(0, 40, (2, length), device=dev, generator=g)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    losses, times = [], []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        arcs, labels = head(adapter(images))
        loss = torch.nn.functional.cross_entropy(arcs[:, 1:].reshape(-1, arcs.shape[-1]), heads.reshape(-1))
        picked = labels[:, 1:].gather(2, heads[..., None, None].expand(-1, -1, 1, labels.shape[-1])).squeeze(2)
        loss = loss + torch.nn.functional.cross_entropy(picked.reshape(-1, picked.shape[-1]), rels.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    per_step = min(times[2:]) if len(times) > 2 else min(times)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    n = sum(p.numel() for p in params) / 1e6
    print(
        f"paper adapter ({size}, {n:.0f} M parameters with the head) training, batch 2 × {length} subwords, fp32: "
        f"{per_step:.3f} s a step, peak memory {peak:.1f} GiB; loss {losses[0]:.3f} -> {losses[-1]:.3f} over {steps} "
        f"steps (benchmarks/paper_estimate.py --step-seconds {per_step:.3f} --step-length {length})"
    )
    return bool(losses[-1] < losses[0] and all(map(math.isfinite, losses)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--adapter-length", type=int, default=64, help="subwords per sentence of the adapter step")
    ap.add_argument("--tiny", action="store_true", help="dry run of the script's logic on a small model (CPU allowed)")
    args = ap.parse_args()
    if not torch.cuda.is_available() and not args.tiny:
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    ok = True
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name(0) if dev.type == 'cuda' else 'CPU (dry run)'}",
        flush=True,
    )

    # 1. recurrence vs enumeration on the GPU (float64)
    g = torch.Generator(device=dev).manual_seed(0)
    for n in (6, 8):
        a = torch.rand(n, 2, 64, 64, device=dev, dtype=torch.float64, generator=g) ** 3
        a = a / a.sum(-1, keepdim=True)
        got = ola_from_layers(a, range(1, n + 1))
        err = max((got[k] - enumerate_ola(a, k)).abs().max().item() for k in range(1, n + 1))
        print(f"recurrence vs enumeration, N={n}, every order, fp64: max abs diff {err:.2e}")
        ok &= err <= 1e-10

    # 2. Llama-3.1-8B-sized random model, bf16
    cfg = LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=args.layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=8192,
        rope_theta=500000.0,
    )
    if args.tiny:
        cfg = LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=args.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=1000,
            max_position_embeddings=1024,
        )
    cfg._attn_implementation = "eager"
    t0 = time.time()
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    n_params = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"built {n_params:.2f} B-parameter Llama ({args.layers} layers) in {time.time() - t0:.0f} s", flush=True)

    b, t = args.batch, args.seq
    ids = torch.randint(0, cfg.vocab_size, (b, t), device=dev, generator=torch.Generator(device=dev).manual_seed(1))
    mask = torch.ones(b, t, dtype=torch.long, device=dev)
    mask[1, t // 2 :] = 0  # one right-padded sequence
    x = {"input_ids": ids, "attention_mask": mask}

    def timed(fn):
        fn()
        sync()
        times = []
        for _ in range(args.repeats):
            sync()
            s = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - s)
        return min(times)

    with torch.no_grad():
        cuda = dev.type == "cuda"
        mem = torch.cuda.max_memory_allocated if cuda else (lambda: 0)
        reset = torch.cuda.reset_peak_memory_stats if cuda else (lambda: None)
        base_mem = torch.cuda.memory_allocated() if cuda else 0
        reset()
        t_plain = timed(lambda: model(**x, use_cache=False, logits_to_keep=1))
        peak_plain = mem() - base_mem
        with AttentionCapture(model, max_order=3, rollout=True) as cap:
            reset()
            t_ola = timed(lambda: cap.forward(**x, use_cache=False, logits_to_keep=1))
            peak_ola = mem() - base_mem
            acc = cap.forward(**x, use_cache=False, logits_to_keep=1)
            batched = {k: acc.ola(k) for k in (1, 2, 3)}
            alone = cap.forward(
                input_ids=ids[1:2, : t // 2], attention_mask=mask[1:2, : t // 2], use_cache=False, logits_to_keep=1
            )
            first = cap.forward(input_ids=ids[:1], attention_mask=mask[:1], use_cache=False, logits_to_keep=1)
        print(
            f"plain eager forward: {b / t_plain:.2f} seq/s ({b * t / t_plain:.0f} tok/s), peak activations {peak_plain / 2**30:.2f} GiB"
        )
        print(
            f"forward + OLA orders 1-3 + rollout: {b / t_ola:.2f} seq/s ({b * t / t_ola:.0f} tok/s), peak activations {peak_ola / 2**30:.2f} GiB"
        )
        print(f"OLA overhead: {t_ola / t_plain - 1:+.1%} time")
        h = t // 2
        for k in (1, 2, 3):
            d_pad = (batched[k][1, :h, :h] - alone.ola(k)[0]).abs().max().item()
            d_full = (batched[k][0] - first.ola(k)[0]).abs().max().item()
            rows = batched[k][0].sum(-1)
            print(
                f"order {k}: batch vs alone max abs diff {max(d_pad, d_full):.2e} (padded seq {d_pad:.2e}); "
                f"row sums in [{rows.min().item():.6f}, {rows.max().item():.6f}]; upper triangle max {torch.triu(batched[k][0], 1).abs().max().item():.1e}"
            )
            ok &= max(d_pad, d_full) <= 2e-3 and (rows - 1).abs().max().item() <= 1e-4
            ok &= torch.triu(batched[k][0], 1).abs().max().item() == 0.0

        # 3. the captured layers against enumeration (orders 1-3, all 32 layers, fp64)
        with AttentionCapture(model, max_order=3, keep_layers=range(args.layers)) as cap:
            acc = cap.forward(input_ids=ids[:1, :128], attention_mask=mask[:1, :128], use_cache=False, logits_to_keep=1)
        layers = torch.stack([acc.layers[i] for i in range(args.layers)]).double()
        for k in (1, 2, 3):
            err = (acc.ola(k).double() - enumerate_ola(layers, k)).abs().max().item()
            print(f"captured model, order {k}: streaming vs enumeration of {comb(args.layers, k)} products: {err:.2e}")
            ok &= err <= 1e-5
    # 4. the paper profile's heaviest step: training the paper adapter (448 M parameters) with the
    # biaffine parser head, batch 2, AdamW at the paper profile's learning rate, fp32; its seconds
    # per step feed benchmarks/paper_estimate.py --step-seconds
    ok &= adapter_steps(dev, sync, tiny=args.tiny, length=args.adapter_length)
    print("GPU CHECK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
