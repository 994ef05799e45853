"""Cost of the context-mixing baselines in the captured pass, per zoo model.

For each model, real UD English-EWT dev sentences are tokenised once and grouped into the
length-bucketed, right-padded batches that :func:`~olas_utils.extract.extract_ola` uses. On
those batches, interleaved batch by batch (which variant runs first alternates):

``plain``
    the model's eager forward pass, no capture, with the call arguments
    ``AttentionCapture.forward`` adds (``use_cache=False``, ``logits_to_keep=1`` where taken).
``OLA``
    ``AttentionCapture(max_order=3, rollout=True, keep_layers=(0, -1))``: what
    ``extract_ola`` computes by default, maps cropped per sentence to CPU float32.
``OLA+mixing``
    the same capture with ``mixing=`` ``valuenorm``, ``alti`` (and ``globenc`` on post-LN
    encoders), each as its bare key and orders 1..3, in the same forward pass, all maps cropped.

After a warm-up pass, each repeat times every variant on every batch; reported: the median
over repeats of the per-repeat total (seconds per pass over all sentences) and of the
per-repeat ratio to ``plain`` (variants of one repeat ran interleaved, so load drift cancels).

Memory (computed, float32, for the largest batch ``B × T`` of the run): the streaming pass
keeps one layer's per-head weights ``B·H·T²``, the Gram-matrix intermediate ``B·H·T²``, head
outputs ``B·T·H·d`` (transformed in place), Gram matrices ``B·T·H²`` and one buffer of
``T_i(x_j)`` vectors, ``B·R·T·d`` with ``R`` = :data:`olas_utils.maths.mixing.BLOCK_ROWS` (every
block's operations run in place in it); the published ALTI / GlobEnc code materialises the
per-head tensor ``B·H·T²·d`` of a layer (``α^h_ij f^h(x_j)``) before summing over heads.

    python benchmarks/mixing_overhead.py [--models minilm-l6 smollm2-135m] [--sentences 32]
        [--batch-size 8] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import inspect

import torch  # noqa: E402  (after common, which fixes sys.path)
from common import ewt_sentences, machine_line, make_batches, median, model_inputs, quiet, rotated, set_threads, timed

from olas_utils.align import tokenize_words  # noqa: E402
from olas_utils.capture.attention import AttentionCapture  # noqa: E402
from olas_utils.capture.mixing_specs import mixing_problem  # noqa: E402
from olas_utils.extract import length_buckets, max_tokens  # noqa: E402
from olas_utils.maths.mixing import BLOCK_ELEMENTS, BLOCK_ROWS  # noqa: E402
from olas_utils.zoo import DEFAULT_MODELS, load_model  # noqa: E402

ORDERS = (1, 2, 3)


def lean_kwargs(model) -> dict:
    """The call arguments ``AttentionCapture.forward`` adds (outputs are discarded)."""
    params = inspect.signature(model.forward).parameters
    return {k: v for k, v in (("use_cache", False), ("logits_to_keep", 1)) if k in params}


def captured(model, batch, n_layers: int, mixing: list[str]) -> None:
    """One captured pass and what extract_ola does after it: maps cropped to CPU float32."""
    orders = [k for k in ORDERS if k <= n_layers]
    with AttentionCapture(
        model, max_order=max(orders), rollout=True, keep_layers=(0, n_layers - 1), mixing=mixing
    ) as cap:
        acc, mix = cap.forward_with_mixing(**model_inputs(batch))
    maps = [acc.ola(k) for k in orders] + [acc.rollout_map()] + list(acc.layers.values())
    for key in mixing:
        method, _, k = key.partition(":")
        m = mix.accumulators[method]
        maps.append(m.aggregate() if not k else m.order(int(k)))
    for val in maps:
        val = val.float().cpu()
        _ = [val[row, :n, :n].contiguous() for row, n in enumerate(batch["lengths"])]


def memory_mib(model, batches) -> tuple[float, float]:
    """(streaming scratch, materialised per-head tensor) in MiB for the largest batch."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    h, d = cfg.num_attention_heads, cfg.hidden_size
    b, t = max((x["input_ids"].shape for x in batches), key=lambda s: s[0] * s[1] * s[1])
    block = min(BLOCK_ELEMENTS, b * min(BLOCK_ROWS, t) * t * d)
    stream = 2 * b * h * t * t + b * t * h * d + b * t * h * h + block
    return 4 * stream / 2**20, 4 * b * h * t * t * d / 2**20


def bench_model(name: str, sentences: list[list[str]], args) -> dict:
    lm = load_model(name, device="cpu")
    model, tok, n_layers = lm.model, lm.tokenizer, lm.num_layers
    methods = ["valuenorm", "alti"] + ([] if mixing_problem(model, ["globenc"]) else ["globenc"])
    mixing = [k for m in methods for k in [m] + [f"{m}:{o}" for o in ORDERS if o <= n_layers]]
    tb = tokenize_words(tok, sentences, max_length=max_tokens(model, tok))
    batches = make_batches(tb, length_buckets(tb.lengths, args.batch_size))
    plain_kw = lean_kwargs(model)
    variants = {
        "plain": lambda b: model(**model_inputs(b), **plain_kw),
        "ola": lambda b: captured(model, b, n_layers, []),
        "mixing": lambda b: captured(model, b, n_layers, mixing),
    }
    totals = {v: [] for v in variants}
    with torch.no_grad():
        for b in batches:  # warm-up
            for fn in variants.values():
                fn(b)
        for r in range(args.repeats):
            tot = dict.fromkeys(variants, 0.0)
            for j, b in enumerate(batches):
                for v in rotated(list(variants), r + j):
                    tot[v] += timed(lambda v=v, b=b: variants[v](b))
            for v in variants:
                totals[v].append(tot[v])
            print(
                f"  [{name}] repeat {r + 1}/{args.repeats}: " + ", ".join(f"{v} {tot[v]:.2f}s" for v in tot), flush=True
            )
    stream, full = memory_mib(model, batches)
    out = {
        "name": name,
        "layers": n_layers,
        "methods": "+".join(methods),
        "tokens": sum(tb.lengths),
        "tmax": max(tb.lengths),
        **{v: median(totals[v]) for v in variants},
        "r_ola": median([o / p for o, p in zip(totals["ola"], totals["plain"])]),
        "r_mix": median([o / p for o, p in zip(totals["mixing"], totals["plain"])]),
        "r_mix_ola": median([o / p for o, p in zip(totals["mixing"], totals["ola"])]),
        "stream_mib": stream,
        "full_mib": full,
    }
    lm = model = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--sentences", type=int, default=32, help="first N EWT dev sentences")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)
    sentences = ewt_sentences(args.sentences)
    print(machine_line())
    print(
        f"{len(sentences)} EWT dev sentences, batch {args.batch_size} (length-bucketed), OLA orders 1..3 + rollout + "
        f"layers 0/-1; mixing: bare key and orders 1..3 of each method; {args.repeats} interleaved repeats, float32",
        flush=True,
    )
    rows = [bench_model(name, sentences, args) for name in args.models]
    print()
    print(
        "seconds per pass over all sentences (median of repeats); ratios: median of per-repeat ratios (goal <= 1.30x)"
    )
    print(
        f"{'model':<14} {'N':>3} {'methods':<24} {'tokens':>6} {'Tmax':>4} {'plain s':>8} {'OLA s':>7} "
        f"{'+mixing s':>9} {'OLA/plain':>9} {'mix/plain':>9} {'mix/OLA':>8} {'stream MiB':>10} {'per-head MiB':>12}"
    )
    for r in rows:
        print(
            f"{r['name']:<14} {r['layers']:>3} {r['methods']:<24} {r['tokens']:>6} {r['tmax']:>4} {r['plain']:>8.2f} "
            f"{r['ola']:>7.2f} {r['mixing']:>9.2f} {r['r_ola']:>8.2f}x {r['r_mix']:>8.2f}x {r['r_mix_ola']:>7.2f}x "
            f"{r['stream_mib']:>10.1f} {r['full_mib']:>12.1f}"
        )
    print(
        "memory: computed float32 scratch of one layer for the largest batch (streaming) vs the per-head "
        "(B, H, T, T, d) tensor of one layer"
    )


if __name__ == "__main__":
    main()
