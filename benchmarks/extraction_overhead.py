"""Overhead of streaming OLA extraction over a plain forward pass, per zoo model.

For each model, real UD English-EWT dev sentences are tokenised once
(:func:`~olas_utils.align.tokenize_words`) and grouped into the same length-bucketed,
right-padded batches that :func:`~olas_utils.extract.extract_ola` uses. On those batches,
interleaved batch by batch (which variant runs first alternates):

``plain``
    ``model(**inputs, use_cache=False, logits_to_keep=1)`` (each only if the model's forward
    takes it): the model's eager forward pass, no attention output, outside any capture,
    with the same call arguments ``AttentionCapture.forward`` adds (it skips the KV cache
    and computes a causal LM's head on one position only, since it discards the outputs).
``OLA``
    ``AttentionCapture(...).forward(**inputs)`` (orders 1..K, plus rollout and the
    layer 0 / last-layer baselines unless ``--no-rollout``/``--layers``, i.e. what
    ``extract_ola`` computes by default), timed alone ("fwd") and together with the
    per-batch work ``extract_ola`` does after it: maps to float32 CPU tensors cropped per
    sentence ("fwd+post").
``extract_ola``
    the whole ``extract_ola(...)`` call on that batch's sentences (tokenisation, bucketing,
    capture, cropping, CPU copies).
``default call`` (causal LMs, ``--default-call``)
    ``model(**inputs)`` with the model's defaults: KV cache built and the vocabulary
    projection over every position. Shows what the capture's call arguments save.

``tokenize_words`` on all sentences is timed once per repeat.

After a warm-up pass, each repeat times every variant on every batch. Reported: the sum over
batches of each batch's fastest repeat (robust to load spikes), and the median over repeats
of the per-repeat ratio (variants of one repeat ran interleaved, so load drift cancels).
Overhead = t_variant / t_plain - 1.

    python benchmarks/extraction_overhead.py [--models minilm-l6 ...] [--sentences 64]
        [--batch-size 8] [--orders 1 2 3] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import inspect
import time

import torch  # noqa: E402  (after common, which fixes sys.path)
from common import (
    ewt_sentences,
    machine_line,
    make_batches,
    median,
    model_inputs,
    quiet,
    rotated,
    run_ola_batch,
    set_threads,
    timed,
)

from olas_utils.align import tokenize_words  # noqa: E402
from olas_utils.capture.attention import AttentionCapture  # noqa: E402
from olas_utils.extract import extract_ola, length_buckets, max_tokens  # noqa: E402
from olas_utils.zoo import DEFAULT_MODELS, load_model  # noqa: E402


def lean_kwargs(model) -> dict:
    """The call arguments ``AttentionCapture.forward`` adds (outputs are discarded)."""
    params = inspect.signature(model.forward).parameters
    return {k: v for k, v in (("use_cache", False), ("logits_to_keep", 1)) if k in params}


def bench_model(name: str, sentences: list[list[str]], args) -> dict:
    t_load = time.perf_counter()
    lm = load_model(name, device="cpu")
    t_load = time.perf_counter() - t_load
    model, tok = lm.model, lm.tokenizer
    n_layers = lm.num_layers
    orders = sorted(set(args.orders))
    layers = [] if args.no_rollout else list(args.layers)
    layer_idx = [i % n_layers for i in layers]
    rollout = not args.no_rollout
    cap_kw = dict(max_order=max(orders), rollout=rollout, keep_layers=layer_idx)

    def tokenise():
        return tokenize_words(tok, sentences, max_length=max_tokens(model, tok))

    tb = tokenise()
    lengths = tb.lengths
    batches = make_batches(tb, length_buckets(lengths, args.batch_size))
    padded = sum(b["input_ids"].numel() for b in batches)
    plain_kw = lean_kwargs(model)
    default = bool(plain_kw) and args.default_call
    variants = ["plain", "ola", "extract"] + (["default"] if default else [])

    def one(v, b) -> tuple[float, float]:
        """Seconds of variant v on batch b: (main part, post-processing part)."""
        if v == "plain":
            return timed(lambda: model(**model_inputs(b), **plain_kw)), 0.0
        if v == "default":
            return timed(lambda: model(**model_inputs(b))), 0.0
        if v == "extract":
            sents = [sentences[i] for i in b["idx"]]
            return timed(
                lambda: extract_ola(
                    model,
                    tok,
                    sents,
                    orders=orders,
                    rollout=rollout,
                    layers=layers,
                    level="subword",
                    batch_size=args.batch_size,
                    progress=False,
                )
            ), 0.0
        with AttentionCapture(model, **cap_kw) as cap:
            return run_ola_batch(cap, b, orders, rollout, layers, layer_idx)

    with torch.no_grad():
        for b in batches:  # warm-up: every batch shape once through every variant
            for v in variants:
                one(v, b)
        # t[v][r][j] = (main, post) seconds of variant v, repeat r, batch j
        t = {v: [] for v in variants}
        tok_s = []
        for r in range(args.repeats):
            for v in variants:
                t[v].append([None] * len(batches))
            for j, b in enumerate(batches):
                for v in rotated(variants, r + j):
                    t[v][r][j] = one(v, b)
            tok_s.append(timed(tokenise))
            tot = {v: sum(sum(x) for x in t[v][r]) for v in variants}
            print(
                f"  [{name}] repeat {r + 1}/{args.repeats}: " + ", ".join(f"{v} {tot[v]:.2f}s" for v in variants),
                flush=True,
            )

    def best(v, part=None):
        """Sum over batches of each batch's fastest repeat."""

        def f(x):
            return sum(x) if part is None else x[part]

        return sum(min(f(t[v][r][j]) for r in range(args.repeats)) for j in range(len(batches)))

    def rep_ratio(v, part=None):
        """Median over repeats of (variant total / plain total) within the repeat."""

        def tot(w, r):
            return sum((sum(x) if part is None else x[part]) for x in t[w][r])

        return median([tot(v, r) / tot("plain", r) for r in range(args.repeats)])

    plain = best("plain")
    out = {
        "name": name,
        "layers": n_layers,
        "causal": lm.is_causal,
        "path": AttentionCapture(model, **cap_kw).path,
        "tokens": sum(lengths),
        "padded": padded,
        "batches": len(batches),
        "load_s": t_load,
        "plain": plain,
        "ola_fwd": best("ola", 0),
        "ola_all": best("ola"),
        "extract": best("extract"),
        "tokenise": min(tok_s),
        "r_fwd": best("ola", 0) / plain,
        "r_all": best("ola") / plain,
        "r_extract": best("extract") / plain,
        "r_tok": min(tok_s) / plain,
        "m_all": rep_ratio("ola"),
        "m_extract": rep_ratio("extract"),
        "r_default": best("default") / plain if default else None,
        "plain_kw": plain_kw,
    }
    lm = model = None  # release the model before the next one loads
    return out


def pct(r: float) -> str:
    return f"{100 * (r - 1):+.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--sentences", type=int, default=64, help="first N EWT dev sentences")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--layers", type=int, nargs="*", default=[0, -1], help="layer baselines kept (extract_ola default)")
    ap.add_argument("--no-rollout", action="store_true", help="orders only: no rollout, no layer baselines")
    ap.add_argument(
        "--default-call",
        action="store_true",
        help="causal LMs: also time model(**inputs) with its defaults (KV cache, full LM head)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)
    sentences = ewt_sentences(args.sentences)
    what = f"orders {min(args.orders)}..{max(args.orders)}" + (
        "" if args.no_rollout else f" + rollout + layers {args.layers}"
    )
    print(machine_line())
    print(
        f"{len(sentences)} EWT dev sentences, batch {args.batch_size} (length-bucketed), {what}, "
        f"{args.repeats} interleaved repeats, float32",
        flush=True,
    )
    rows = []
    for name in args.models:
        rows.append(bench_model(name, sentences, args))
    n = len(sentences)
    print()
    print(
        "Throughput (seconds per pass over all sentences, each batch's fastest repeat summed; sentences/s in brackets)"
    )
    print(
        f"{'model':<14} {'N':>3} {'path':<9} {'tokens':>6} {'padded':>6} {'plain s':>14} {'OLA fwd s':>14} "
        f"{'OLA fwd+post s':>15} {'extract_ola s':>15} {'tokenise s':>10}"
    )
    for r in rows:

        def c(t, w=14):
            return f"{t:7.2f} ({n / t:4.0f})".rjust(w)

        print(
            f"{r['name']:<14} {r['layers']:>3} {r['path']:<9} {r['tokens']:>6} {r['padded']:>6} {c(r['plain'])} "
            f"{c(r['ola_fwd'])} {c(r['ola_all'], 15)} {c(r['extract'], 15)} {r['tokenise']:>10.3f}"
        )
    print()
    print(
        "Overhead vs plain forward, t/t_plain - 1 (target <= +15%); 'median' columns: median over repeats of the "
        "per-repeat ratio"
    )
    print(
        f"{'model':<14} {'OLA fwd':>8} {'OLA fwd+post':>12} {'(median)':>9} {'extract_ola':>11} {'(median)':>9} "
        f"{'tokenise':>9} {'default call/plain':>18}  plain call arguments"
    )
    for r in rows:
        dflt = f"{r['r_default']:>17.2f}x" if r["r_default"] is not None else f"{'-':>18}"
        kw = ", ".join(f"{k}={v}" for k, v in r["plain_kw"].items()) or "-"
        print(
            f"{r['name']:<14} {pct(r['r_fwd']):>8} {pct(r['r_all']):>12} {pct(r['m_all']):>9} "
            f"{pct(r['r_extract']):>11} {pct(r['m_extract']):>9} {100 * r['r_tok']:>8.1f}% {dflt}  {kw}"
        )


if __name__ == "__main__":
    main()
