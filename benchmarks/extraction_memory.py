"""Peak CPU memory of streaming OLA extraction vs ``output_attentions=True`` + post-hoc OLA.

Three variants, each run in its own fresh subprocess (so no variant inherits another's
heap), on one batch of B sequences of exactly T tokens:

``plain``
    the model's eager forward pass, no attention output (the reference peak). Note that
    ``transformers``' eager decoder layers keep each layer's per-head weights alive until
    the layer returns (``hidden_states, _ = self.self_attn(...)``), i.e. through the MLP.
``plain-sdpa``
    the same forward with the model loaded with ``attn_implementation="sdpa"`` (PyTorch's
    fused attention, no weights kept): the smallest peak a forward pass reaches, a
    stricter reference.
``streaming``
    ``AttentionCapture(model, max_order=K, rollout=True, keep_layers=(0, -1)).forward``
    and the maps read off the accumulator (what ``extract_ola`` computes by default).
``post-hoc``
    ``model(..., output_attentions=True)``, then the head-averaged layers stacked
    (``head_average``) and ``ola_from_layers`` / ``rollout_from_layers`` on the stack, plus
    the first and last layer: the same maps, computed the way the released code does.

All three call the model with the arguments ``AttentionCapture.forward`` adds
(``use_cache=False``, ``logits_to_keep=1`` where the forward takes them), so they differ
only in how attention is handled.

Measurement (Linux): in the child, after the model is loaded, the inputs are built and one
tiny warm-up call of the same variant has run, the resident set size is read
(``VmRSS``, the baseline) and the kernel's peak-RSS mark is reset (``echo 5 >
/proc/self/clear_refs``); after the variant, ``VmHWM`` is the peak. Reported: peak -
baseline, and the attention-related part = (peak - baseline) - (that of ``plain``), and
the same relative to ``plain-sdpa``. The
children run with ``MALLOC_MMAP_THRESHOLD_`` = 1 MiB so that every tensor of 1 MiB or more
is its own ``mmap`` and freed memory leaves the RSS at once (glibc otherwise keeps freed
heap blocks, which blurs peaks); ``--no-malloc-tuning`` turns that off. Where
``clear_refs`` cannot be written, the script falls back to ``ru_maxrss`` (which then also
counts model loading; a warning says so).

Inputs: real UD English-EWT dev text, joined and tokenised once, cut into B consecutive
windows of T tokens (no padding, no special tokens); ``--random-ids`` uses random ids.

    python benchmarks/extraction_memory.py [--model qwen2.5-0.5b] [--batch-size 8]
        [--tokens 128 512] [--orders 1 2 3] [--repeats 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch  # noqa: E402
from common import machine_line, median, quiet, rotated, set_threads

VARIANTS = ("plain", "plain-sdpa", "streaming", "post-hoc")
MiB = 1024 * 1024


# -- child ---------------------------------------------------------------------------------
def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def build_inputs(tokenizer, batch: int, tokens: int, random_ids: bool, vocab: int) -> dict:
    if random_ids:
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (batch, tokens), generator=g)
    else:
        from common import ewt_sentences

        from olas_utils.data import load_ud_ewt

        n = len(load_ud_ewt("dev")["words"])
        text = " ".join(" ".join(s) for s in ewt_sentences(n))
        flat = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(flat) < batch * tokens:
            raise ValueError(f"EWT dev has {len(flat)} tokens, fewer than {batch} x {tokens}")
        ids = torch.tensor(flat[: batch * tokens]).view(batch, tokens)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def child(args) -> None:
    quiet()
    set_threads(args.threads)
    from olas_utils.capture.attention import AttentionCapture, head_average
    from olas_utils.maths.ola import ola_from_layers, rollout_from_layers
    from olas_utils.zoo import load_model

    impl = "sdpa" if args.child == "plain-sdpa" else "eager"
    lm = load_model(args.model, device="cpu", attn_implementation=impl)
    model = lm.model
    n_layers = lm.num_layers
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    (tokens,) = args.tokens  # the parent passes one T per child
    inputs = build_inputs(lm.tokenizer, args.batch_size, tokens, args.random_ids, cfg.vocab_size)
    params = inspect.signature(model.forward).parameters
    call_kw = {k: v for k, v in (("use_cache", False), ("logits_to_keep", 1)) if k in params}
    orders = sorted(set(args.orders))
    keep = (0, n_layers - 1)

    def run(v: str, inp: dict) -> dict:
        if v in ("plain", "plain-sdpa"):
            model(**inp, **call_kw)
            return {}
        if v == "streaming":
            with AttentionCapture(model, max_order=max(orders), rollout=True, keep_layers=keep) as cap:
                acc = cap.forward(**inp, **call_kw)
            maps = {f"ola:{k}": acc.ola(k) for k in orders}
            maps["rollout"] = acc.rollout_map()
            maps.update({f"layer:{i}": acc.layers[i] for i in keep})
            return maps
        out = model(**inp, output_attentions=True, **call_kw)
        valid = inp["attention_mask"].bool()
        stacked = torch.stack([head_average(w, valid) for w in out.attentions])
        maps = {f"ola:{k}": m for k, m in ola_from_layers(stacked, orders).items()}
        maps["rollout"] = rollout_from_layers(stacked)
        maps.update({f"layer:{i}": stacked[i].clone() for i in keep})
        return maps

    with torch.no_grad():
        run(args.child, {k: t[:1, :8] for k, t in inputs.items()})  # warm-up, tiny
        gc.collect()
        base_kib = _status_kib("VmRSS")
        reset = _reset_peak()
        ru_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        maps = run(args.child, inputs)
        wall = time.perf_counter() - t0
        peak_kib = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert all(torch.isfinite(m).all() for m in maps.values())
    print(
        json.dumps(
            {
                "variant": args.child,
                "tokens": tokens,
                "batch": args.batch_size,
                "layers": n_layers,
                "heads": cfg.num_attention_heads,
                "baseline_mib": base_kib / 1024,
                "peak_mib": peak_kib / 1024,
                "extra_mib": (peak_kib - base_kib) / 1024,
                "hwm_reset": reset,
                "ru_maxrss_before_mib": ru_before / 1024,
                "wall_s": wall,
                "call_kwargs": call_kw,
                "attn_implementation": model.config._attn_implementation,
            }
        )
    )


# -- parent --------------------------------------------------------------------------------
def spawn(variant: str, tokens: int, args) -> dict:
    env = dict(os.environ)
    if not args.no_malloc_tuning:
        env["MALLOC_MMAP_THRESHOLD_"] = str(MiB)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        variant,
        "--tokens",
        str(tokens),
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size),
        "--threads",
        str(args.threads),
        "--orders",
        *map(str, args.orders),
    ] + (["--random-ids"] if args.random_ids else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"child {variant} T={tokens} failed with exit code {proc.returncode}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if not res["hwm_reset"]:
        print("  warning: /proc/self/clear_refs not writable; peak is ru_maxrss and includes model loading")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-0.5b")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--tokens", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--repeats", type=int, default=1, help="fresh subprocesses per variant and T")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--random-ids", action="store_true", help="random token ids instead of EWT text")
    ap.add_argument("--no-malloc-tuning", action="store_true", help="leave glibc's mmap threshold alone")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    quiet()
    set_threads(args.threads)
    print(machine_line())
    print(
        f"{args.model}, batch {args.batch_size}, T in {args.tokens}, orders {sorted(set(args.orders))} + rollout "
        f"+ layers 0/-1, float32, {'random ids' if args.random_ids else 'EWT dev text'}, "
        f"{args.repeats} fresh subprocess(es) per variant and T, "
        f"MALLOC_MMAP_THRESHOLD_={'default' if args.no_malloc_tuning else '1 MiB'}",
        flush=True,
    )
    results: dict[tuple[int, str], list[dict]] = {}
    for t in args.tokens:
        for r in range(args.repeats):
            for v in rotated(VARIANTS, r):
                res = spawn(v, t, args)
                results.setdefault((t, v), []).append(res)
                print(
                    f"  T={t} {v:<9} baseline {res['baseline_mib']:7.0f} MiB, peak {res['peak_mib']:7.0f} MiB, "
                    f"peak - baseline {res['extra_mib']:7.1f} MiB, {res['wall_s']:.1f} s",
                    flush=True,
                )
    print()
    print("Peak RSS above the loaded-model baseline (MiB; median over subprocesses)")
    print(
        f"{'T':>5} {'plain':>8} {'plain-sdpa':>10} {'streaming':>10} {'post-hoc':>9} {'theory stream':>14} "
        f"{'theory post-hoc':>16}"
    )
    parts = []
    for t in args.tokens:
        ex = {v: median([x["extra_mib"] for x in results[(t, v)]]) for v in VARIANTS}
        first = results[(t, "plain")][0]
        n, h, b = first["layers"], first["heads"], first["batch"]
        k = max(args.orders)
        tt = b * t * t * 4 / MiB  # one (B, T, T) float32 map
        # streaming holds K+1 sums, rollout, 2 kept layers and K returned OLA maps (2K + 4);
        # post-hoc holds every layer's per-head weights and their N head averages, plus the same.
        th_stream = (2 * k + 4) * tt
        th_post = n * h * tt + n * tt + (2 * k + 4) * tt
        print(
            f"{t:>5} {ex['plain']:>8.1f} {ex['plain-sdpa']:>10.1f} {ex['streaming']:>10.1f} {ex['post-hoc']:>9.1f} "
            f"{th_stream:>14.1f} {th_post:>16.1f}"
        )
        parts.append((t, ex))
    print()
    print(
        "Attention-related part = variant - reference (MiB); ratio = post-hoc part / streaming part "
        "(target >= 10x; 'inf' when streaming peaks at or below the reference)"
    )
    print(f"{'T':>5} {'reference':>10} {'streaming':>10} {'post-hoc':>9} {'ratio':>8}")
    for t, ex in parts:
        for ref in ("plain", "plain-sdpa"):
            s_, p_ = ex["streaming"] - ex[ref], ex["post-hoc"] - ex[ref]
            ratio = f"{p_ / s_:7.1f}x" if s_ > 0 else "     inf"
            print(f"{t:>5} {ref:>10} {s_:>10.1f} {p_:>9.1f} {ratio:>8}")


if __name__ == "__main__":
    main()
