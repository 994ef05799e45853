"""Notebook 02's extraction time per model, against one plain forward pass over the same chunks.

For each model, the notebook's corpus (CoNLL-2003 50-word chunks, ``build_chunks``) is cut
into the batches the image cache uses (``length_buckets`` of ``--batch-size``). In each
repeat, in rotating order, from empty temporary caches:

``plain``
    one plain forward pass per batch (``model(**inputs)`` with ``use_cache=False`` and
    ``logits_to_keep=1`` where the model takes them; no attention output, no capture).
``one pass``
    ``extract_protocols(model, protocols=["released", "paper", "word"])``: what notebook 02
    does per model — one captured forward pass per batch serves every protocol and key.
``per protocol``
    the former way: ``extract_to_cache`` once per protocol (three forward passes).
``with controls``
    ``crosslm.extract_images([model], controls=["uniform", "random", "shuffled"])``: the
    model plus its three controls on every protocol (uniform runs no forward pass; the
    random and shuffled copies one each), i.e. the notebook's whole extraction for that model.

Reported: seconds of each variant (fastest repeat) and the median over repeats of the ratio
to ``plain`` (variants of a repeat run interleaved, so load drift cancels).

    python benchmarks/notebook02_extraction.py [--models minilm-l6 ...] [--chunks 48]
        [--batch-size 8] [--repeats 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import inspect
import tempfile

import torch  # noqa: E402  (after common, which fixes sys.path)
from common import machine_line, median, quiet, rotated, set_threads, timed

from olas_utils.align import tokenize_words  # noqa: E402
from olas_utils.data.corpus import build_chunks  # noqa: E402
from olas_utils.extract import length_buckets, max_tokens  # noqa: E402
from olas_utils.similarity.imagecache import extract_protocols, extract_to_cache  # noqa: E402
from olas_utils.studies import crosslm  # noqa: E402
from olas_utils.studies.depth import orders_for  # noqa: E402
from olas_utils.zoo import DEFAULT_MODELS, load_model  # noqa: E402

PROTOCOLS = ["released", "paper", "word"]
CONTROLS = ["uniform", "random", "shuffled"]


def bench(name: str, chunks, args) -> dict:
    lm = load_model(name, device="cpu")
    model, tok = lm.model, lm.tokenizer
    tb = tokenize_words(tok, chunks, max_length=max_tokens(model, tok))
    batches = length_buckets(tb.lengths, args.batch_size)
    params = inspect.signature(model.forward).parameters
    lean = {k: v for k, v in (("use_cache", False), ("logits_to_keep", 1)) if k in params}
    orders = list(orders_for(name, (1, 2, 3), lm.num_layers))  # splade-tiny has 2 layers: no order 3
    kw = dict(orders=orders, baselines=("rollout", "layer:0", "layer:-1"), batch_size=args.batch_size, progress=False)

    def plain():
        with torch.no_grad():
            for idx in batches:
                t = max(tb.lengths[i] for i in idx)
                model(input_ids=tb.input_ids[idx, :t], attention_mask=tb.attention_mask[idx, :t], **lean)

    def one_pass():
        with tempfile.TemporaryDirectory() as d:
            extract_protocols(lm, chunks, protocols=PROTOCOLS, cache_dir=d, **kw)

    def per_protocol():
        with tempfile.TemporaryDirectory() as d:
            for p in PROTOCOLS:
                extract_to_cache(lm, chunks, protocol=p, cache_dir=d, **kw)

    def with_controls():
        with tempfile.TemporaryDirectory() as d:
            crosslm.extract_images(
                [name],
                chunks,
                orders=[1, 2, 3],
                baselines=["rollout", "layer:0", "layer:-1"],
                protocols=PROTOCOLS,
                controls=CONTROLS,
                batch_size=args.batch_size,
                progress=False,
                cache_dir=d,
            )

    variants = {"plain": plain, "one pass": one_pass, "per protocol": per_protocol, "with controls": with_controls}
    plain()  # warm-up
    t = {v: [] for v in variants}
    for r in range(args.repeats):
        for v in rotated(list(variants), r):
            t[v].append(timed(variants[v]))
        print(f"  [{name}] repeat {r + 1}: " + ", ".join(f"{v} {t[v][-1]:.1f}s" for v in variants), flush=True)
    out = {"name": name, "tokens": sum(tb.lengths), "batches": len(batches)}
    for v in variants:
        out[v] = min(t[v])
        out[f"r {v}"] = median([t[v][r] / t["plain"][r] for r in range(args.repeats)])
    lm = model = None  # release the model before the next one loads
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--chunks", type=int, default=48, help="50-word chunks (the quick profile uses 200)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    quiet()
    threads = set_threads(args.threads)
    chunks = build_chunks(n_chunks=args.chunks, seed=0)
    print(machine_line())
    print(
        f"{args.chunks} chunks of 50 words, batch {args.batch_size}, {args.repeats} repeats, orders 1-3 + rollout "
        f"+ first/last layer, protocols {PROTOCOLS}, {threads} thread(s)"
    )
    rows = [bench(m, chunks, args) for m in args.models]
    print()
    print(
        "| model | tokens | plain s | one pass s (× plain) | per protocol s (× plain) | with 3 controls s (× plain) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['name']} | {r['tokens']} | {r['plain']:.1f} | {r['one pass']:.1f} ({r['r one pass']:.2f}×) | "
            f"{r['per protocol']:.1f} ({r['r per protocol']:.2f}×) | {r['with controls']:.1f} "
            f"({r['r with controls']:.2f}×) |"
        )


if __name__ == "__main__":
    main()
