"""Throughput of OLA extraction vs batch size, with and without length bucketing.

Real UD English-EWT dev sentences are tokenised once. For each batch size, two batchings
of the same sentences:

``bucketed``
    sorted by length and cut into batches, each padded to its longest sentence
    (:func:`~olas_utils.extract.length_buckets`, what ``extract_ola`` does);
``corpus order``
    consecutive sentences in corpus order, each batch padded to its longest sentence.

Both give the same number of batches; batch j of one and batch j of the other run back to
back (which goes first alternates), so load drift on a shared machine hits both alike. The
work per batch is ``extract_ola``'s at subword level: the streaming capture forward (orders
1..K, rollout, layer 0 / last layer) and the maps copied to float32 CPU tensors, cropped
per sentence. Tokenisation is excluded (it is the same for both). With ``--repeats`` > 1 the
batch sizes are visited in alternating order and the median time is reported.

    python benchmarks/batching.py [--models minilm-l6 smollm2-135m] [--sentences 256]
        [--batch-sizes 1 2 4 8 16 32] [--orders 1 2 3] [--repeats 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch  # noqa: E402
from common import (
    corpus_order_groups,
    ewt_sentences,
    machine_line,
    make_batches,
    median,
    quiet,
    rotated,
    run_ola_batch,
    set_threads,
)

from olas_utils.align import tokenize_words  # noqa: E402
from olas_utils.capture.attention import AttentionCapture  # noqa: E402
from olas_utils.extract import length_buckets, max_tokens  # noqa: E402
from olas_utils.zoo import load_model  # noqa: E402

SCHEMES = ("bucketed", "corpus")


def bench_model(name: str, sentences: list[list[str]], args) -> list[dict]:
    lm = load_model(name, device="cpu")
    model, tok = lm.model, lm.tokenizer
    n_layers = lm.num_layers
    orders = sorted(set(args.orders))
    layers = [0, -1]
    layer_idx = [i % n_layers for i in layers]
    tb = tokenize_words(tok, sentences, max_length=max_tokens(model, tok))
    lengths = tb.lengths
    n = len(sentences)
    plans = {}
    for bs in args.batch_sizes:
        plans[bs] = {
            "bucketed": make_batches(tb, length_buckets(lengths, bs)),
            "corpus": make_batches(tb, corpus_order_groups(n, bs)),
        }
    times = {(bs, s): [] for bs in args.batch_sizes for s in SCHEMES}
    with torch.no_grad(), AttentionCapture(model, max_order=max(orders), rollout=True, keep_layers=layer_idx) as cap:
        warm = make_batches(tb, [list(range(min(8, n)))])[0]
        run_ola_batch(cap, warm, orders, True, layers, layer_idx)  # warm-up
        for r in range(args.repeats):
            sizes = args.batch_sizes if r % 2 == 0 else list(reversed(args.batch_sizes))
            for bs in sizes:
                tot = dict.fromkeys(SCHEMES, 0.0)
                nb = len(plans[bs]["bucketed"])
                assert nb == len(plans[bs]["corpus"])
                for j in range(nb):
                    for s in rotated(SCHEMES, r + j):
                        f, p = run_ola_batch(cap, plans[bs][s][j], orders, True, layers, layer_idx)
                        tot[s] += f + p
                for s in SCHEMES:
                    times[(bs, s)].append(tot[s])
                print(
                    f"  [{name}] repeat {r + 1}/{args.repeats} batch {bs:>2}: bucketed {tot['bucketed']:6.2f}s, "
                    f"corpus order {tot['corpus']:6.2f}s",
                    flush=True,
                )
    rows = []
    for bs in args.batch_sizes:
        t_b = median(times[(bs, "bucketed")])
        t_c = median(times[(bs, "corpus")])
        ratio = median([c / b for b, c in zip(times[(bs, "bucketed")], times[(bs, "corpus")])])
        rows.append(
            {
                "model": name,
                "layers": n_layers,
                "bs": bs,
                "n": n,
                "tokens": sum(lengths),
                "t_b": t_b,
                "t_c": t_c,
                "ratio": ratio,
                "pad_b": sum(b["input_ids"].numel() for b in plans[bs]["bucketed"]),
                "pad_c": sum(b["input_ids"].numel() for b in plans[bs]["corpus"]),
            }
        )
    del lm, model
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["minilm-l6", "smollm2-135m"])
    ap.add_argument("--sentences", type=int, default=256, help="first N EWT dev sentences")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)
    sentences = ewt_sentences(args.sentences)
    print(machine_line())
    print(
        f"{len(sentences)} EWT dev sentences, orders {sorted(set(args.orders))} + rollout + layers 0/-1, "
        f"subword level, float32, {args.repeats} repeat(s), bucketed/corpus-order batches interleaved",
        flush=True,
    )
    rows = []
    for name in args.models:
        t0 = time.perf_counter()
        rows += bench_model(name, sentences, args)
        print(f"  [{name}] {time.perf_counter() - t0:.0f} s", flush=True)
    print()
    print(
        "Sentences per second (padded tokens / real tokens in brackets); speed-up = corpus-order time / bucketed time"
    )
    print(
        f"{'model':<14} {'batch':>5} {'bucketed':>16} {'corpus order':>16} {'speed-up':>9} {'bucketed vs batch 1':>20}"
    )
    for name in args.models:
        mine = [r for r in rows if r["model"] == name]
        base = next((r for r in mine if r["bs"] == 1), mine[0])
        for r in mine:
            b = f"{r['n'] / r['t_b']:6.1f} ({r['pad_b'] / r['tokens']:.2f})"
            c = f"{r['n'] / r['t_c']:6.1f} ({r['pad_c'] / r['tokens']:.2f})"
            print(f"{name:<14} {r['bs']:>5} {b:>16} {c:>16} {r['ratio']:>8.2f}x {base['t_b'] / r['t_b']:>19.2f}x")


if __name__ == "__main__":
    main()
