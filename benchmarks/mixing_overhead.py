"""Cost of the context-mixing baselines in the captured pass, per zoo model, and the arithmetic
they add.

For each model, real UD English-EWT dev sentences are tokenised once and grouped into the
length-bucketed, right-padded batches that :func:`~olas_utils.extract.extract_ola` uses. On
those batches, interleaved batch by batch (which variant runs first rotates):

``plain``
    the model's eager forward pass, no capture, with the call arguments
    ``AttentionCapture.forward`` adds (``use_cache=False``, ``logits_to_keep=1`` where taken).
``OLA``
    ``AttentionCapture(max_order=3, rollout=True, keep_layers=(0, -1))``: what
    ``extract_ola`` computes by default, maps cropped per sentence to CPU float32.
``+vnorm``
    the same capture with ``mixing=("valuenorm",)`` (head outputs and value norms).
``goal``
    ``mixing=("valuenorm", "alti", "alti:1")``: the set issue 42 asks to cost <= 1.3x ``plain``.
``all``
    ``valuenorm``, ``alti`` (and ``globenc`` on post-LN encoders), each as its bare key and
    orders 1..3, all maps cropped (the set this benchmark measured before the fused kernel).
``goal-blk`` (``--blocked``)
    the goal set with ALTI through the blocked torch loop (``layer_mixing(fused=False)``, the
    implementation before the fused kernel), for the kernel's gain in the same run.

After a warm-up pass, each repeat times every variant on every batch; reported: the median
over repeats of the per-repeat total (seconds per pass over all sentences) and of the
per-repeat ratio to ``plain`` (variants of one repeat ran interleaved, so load drift cancels).
The time of each map is the difference of two variants (``OLA - plain``, ``+vnorm - OLA``,
``goal - +vnorm``), so where the time of a pass goes is read off the same run.

Arithmetic (counted per batch, as executed on the padded ``B x T``, multiply-adds): the model's
own forward (every ``nn.Linear`` as it ran, by forward hooks on one extra pass, plus the
attention products ``2·B·H·T²·dh`` a layer); head outputs ``B·T·H·dh·d`` and value norms
(Gram matrices ``B·T·H²·d`` + quadratic forms ``B·T²·H²``) a layer; ALTI ``(H + 1)·d`` per
reached (query, key) pair a layer (one product and one L1 distance: the fused kernel's work;
pairs counted from the attention mask: ``T²`` per encoder sentence, ``T(T+1)/2`` causal). The
achieved rate of each is its count over its time difference; ``limit`` is the ratio the goal set
would have if every map ran at the model's own rate (``1 + extra MACs / model MACs``), the
arithmetic bound of the pass on this machine.

Memory (computed, float32, for the largest batch ``B × T`` of the run): the streaming pass
keeps one layer's per-head weights ``B·H·T²``, the Gram-matrix intermediate ``B·H·T²``, head
outputs ``B·T·H·d``, Gram matrices ``B·T·H²`` and the fused kernel's ``(T, d)`` buffer (the
blocked torch path, ``fused=False``, one block of ``B·R·T·d`` with ``R`` =
:data:`olas_utils.maths.mixing.BLOCK_ROWS`); the published ALTI / GlobEnc code materialises the
per-head tensor ``B·H·T²·d`` of a layer (``α^h_ij f^h(x_j)``) before summing over heads.

``--flow``: attention flow instead (item 5 of issue 42): chunks of consecutive EWT dev words
(50 words, the paper's chunk) through ``extract_ola(mixing=("flow",))`` against the same
extraction without flow, at the full chunk and at length caps (the first ``cap`` words).

    python benchmarks/mixing_overhead.py [--models minilm-l6 smollm2-135m] [--sentences 32]
        [--batch-size 8] [--repeats 3] [--threads 1]
    python benchmarks/mixing_overhead.py --flow [--models minilm-l6] [--chunks 4] [--caps 50 32 20]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import time

import torch  # noqa: E402  (after common, which fixes sys.path)
from common import ewt_sentences, machine_line, make_batches, median, model_inputs, quiet, rotated, set_threads, timed

from olas_utils.align import tokenize_words  # noqa: E402
from olas_utils.capture import mixing_hooks  # noqa: E402
from olas_utils.capture.attention import AttentionCapture  # noqa: E402
from olas_utils.capture.mixing_specs import mixing_problem  # noqa: E402
from olas_utils.extract import length_buckets, max_tokens  # noqa: E402
from olas_utils.maths.mixing import layer_mixing  # noqa: E402
from olas_utils.zoo import DEFAULT_MODELS, load_model  # noqa: E402

ORDERS = (1, 2, 3)
GOAL = ("valuenorm", "alti", "alti:1")
VARIANTS = ("plain", "ola", "vnorm", "goal", "all")


def lean_kwargs(model) -> dict:
    """The call arguments ``AttentionCapture.forward`` adds (outputs are discarded)."""
    params = inspect.signature(model.forward).parameters
    return {k: v for k, v in (("use_cache", False), ("logits_to_keep", 1)) if k in params}


def captured(model, batch, n_layers: int, mixing: list[str], fused: bool | None = None) -> None:
    """One captured pass and what extract_ola does after it: maps cropped to CPU float32."""
    orders = [k for k in ORDERS if k <= n_layers]
    mixing_hooks.layer_mixing = functools.partial(layer_mixing, fused=fused)
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


def shape(model) -> dict:
    """Layers' hidden size d, query heads H, value heads KV and head size dh, from the config."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    h, d = cfg.num_attention_heads, cfg.hidden_size
    dh = getattr(cfg, "head_dim", None) or d // h
    return {"d": d, "h": h, "kv": getattr(cfg, "num_key_value_heads", None) or h, "dh": dh}


def linear_macs(model, batch, kw) -> int:
    """Multiply-adds of every ``nn.Linear`` as one plain pass runs them (forward hooks)."""
    total = [0]

    def hook(mod, inp, out):
        total[0] += inp[0].numel() // mod.in_features * mod.in_features * mod.out_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad():
            model(**model_inputs(batch), **kw)
    finally:
        for h in handles:
            h.remove()
    return total[0]


def counted_macs(model, batch, n_layers: int, causal: bool, kw) -> dict:
    """Multiply-adds of one batch: the model's own forward and each map of the goal set."""
    sh = shape(model)
    b, t = batch["input_ids"].shape
    d, h, dh = sh["d"], sh["h"], sh["dh"]
    lengths = batch["lengths"]
    pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lengths) + sum(t - n for n in lengths)
    return {
        "model": linear_macs(model, batch, kw) + n_layers * 2 * b * h * t * t * dh,
        "heads": n_layers * b * t * h * dh * d,
        "vnorm": n_layers * (b * t * h * h * d + b * t * t * h * h),
        "alti": n_layers * pairs * (h + 1) * d,
    }


def memory_mib(model, batches) -> tuple[float, float]:
    """(streaming scratch, materialised per-head tensor) in MiB for the largest batch."""
    sh = shape(model)
    h, d = sh["h"], sh["d"]
    b, t = max((x["input_ids"].shape for x in batches), key=lambda s: s[0] * s[1] * s[1])
    stream = 2 * b * h * t * t + b * t * h * d + b * t * h * h + t * d
    return 4 * stream / 2**20, 4 * b * h * t * t * d / 2**20


def rate_of(macs: float, seconds: float) -> float | None:
    """Multiply-adds per second, or None for a time difference that is not positive."""
    return macs / seconds if seconds > 0 else None


def gmacs(rate: float | None) -> str:
    return "-" if rate is None else f"{rate / 1e9:.1f}"


def bench_model(name: str, sentences: list[list[str]], args) -> dict:
    lm = load_model(name, device="cpu")
    model, tok, n_layers = lm.model, lm.tokenizer, lm.num_layers
    methods = ["valuenorm", "alti"] + ([] if mixing_problem(model, ["globenc"]) else ["globenc"])
    every = [k for m in methods for k in [m] + [f"{m}:{o}" for o in ORDERS if o <= n_layers]]
    tb = tokenize_words(tok, sentences, max_length=max_tokens(model, tok))
    batches = make_batches(tb, length_buckets(tb.lengths, args.batch_size))
    plain_kw = lean_kwargs(model)
    variants = {
        "plain": lambda b: model(**model_inputs(b), **plain_kw),
        "ola": lambda b: captured(model, b, n_layers, []),
        "vnorm": lambda b: captured(model, b, n_layers, ["valuenorm"]),
        "goal": lambda b: captured(model, b, n_layers, list(GOAL)),
        "all": lambda b: captured(model, b, n_layers, every),
    }
    if args.skip_all:
        del variants["all"]
    if args.blocked:
        variants["goal-blk"] = lambda b: captured(model, b, n_layers, list(GOAL), fused=False)
    totals = {v: [] for v in variants}
    with torch.no_grad():
        macs = {}
        for b in batches:  # counted once, then a warm-up
            for k, v in counted_macs(model, b, n_layers, lm.is_causal, plain_kw).items():
                macs[k] = macs.get(k, 0) + v
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
    med = {v: median(totals[v]) for v in variants}
    ratio = {v: median([o / p for o, p in zip(totals[v], totals["plain"])]) for v in variants}
    rate = macs["model"] / med["plain"]
    out = {
        "name": name,
        "layers": n_layers,
        "methods": "+".join(methods),
        "tokens": sum(tb.lengths),
        "tmax": max(tb.lengths),
        **med,
        **{f"r_{v}": ratio[v] for v in variants},
        "macs": macs,
        "rate_model": rate,
        # each map's time: the difference of two variants of the same repeats (medians)
        # None where the difference is not positive (within the noise of a busy machine)
        "rate_vnorm": rate_of(macs["heads"] + macs["vnorm"], med["vnorm"] - med["ola"]),
        "rate_alti": rate_of(macs["alti"], med["goal"] - med["vnorm"]),
        "limit": 1 + (macs["heads"] + macs["vnorm"] + macs["alti"]) / macs["model"],
        "stream_mib": stream,
        "full_mib": full,
    }
    lm = model = None
    return out


def chunks_of(words: list[str], size: int, count: int) -> list[list[str]]:
    return [words[i * size : (i + 1) * size] for i in range(count)]


def bench_flow(args) -> None:
    """Attention flow's cost on 50-word chunks, and what a length cap buys (issue 42, item 5)."""
    from olas_utils.extract import extract_ola

    words = [w for s in ewt_sentences(400) for w in s]
    size = max(args.caps)
    chunks = chunks_of(words, size, args.chunks)
    print(f"{args.chunks} chunks of {size} consecutive EWT dev words; caps: the first n words of each chunk")
    print(f"{'model':<14} {'N':>3} {'cap':>4} {'Tmax':>4} {'OLA s/chunk':>11} {'+flow s/chunk':>13} {'flow/OLA':>9}")
    for name in args.models:
        lm = load_model(name, device="cpu")
        for cap in args.caps:
            sents = [c[:cap] for c in chunks]
            tmax = max(tokenize_words(lm.tokenizer, sents).lengths)
            kw = dict(orders=ORDERS, progress=False, batch_size=1)
            extract_ola(lm.model, lm.tokenizer, sents[:1], **kw)  # warm-up
            t = {"ola": [], "flow": []}
            for s in sents:  # interleaved, one chunk at a time
                for v in rotated(["ola", "flow"], len(t["ola"])):
                    t0 = time.perf_counter()
                    extract_ola(lm.model, lm.tokenizer, [s], mixing=("flow",) if v == "flow" else (), **kw)
                    t[v].append(time.perf_counter() - t0)
            o, f = median(t["ola"]), median(t["flow"])
            print(f"{name:<14} {lm.num_layers:>3} {cap:>4} {tmax:>4} {o:>11.2f} {f:>13.2f} {f / o:>8.1f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--sentences", type=int, default=32, help="first N EWT dev sentences")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    ap.add_argument("--skip-all", action="store_true", help="leave out the 'all' set (big models, busy machine)")
    ap.add_argument("--blocked", action="store_true", help="also the goal set through the blocked ALTI loop")
    ap.add_argument("--flow", action="store_true", help="attention flow on word chunks instead")
    ap.add_argument("--chunks", type=int, default=4, help="--flow: chunks timed")
    ap.add_argument("--caps", type=int, nargs="+", default=[50, 32, 20], help="--flow: words kept per chunk")
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)
    print(machine_line())
    if args.flow:
        bench_flow(args)
        return
    sentences = ewt_sentences(args.sentences)
    print(
        f"{len(sentences)} EWT dev sentences, batch {args.batch_size} (length-bucketed), OLA orders 1..3 + rollout + "
        f"layers 0/-1; goal: + {', '.join(GOAL)}; all: bare key and orders 1..3 of each method; "
        f"{args.repeats} interleaved repeats, float32",
        flush=True,
    )
    rows = [bench_model(name, sentences, args) for name in args.models]
    print()
    print("seconds per pass over all sentences (median of repeats); ratios to plain: median of per-repeat ratios")
    print(
        f"{'model':<20} {'N':>3} {'tokens':>6} {'Tmax':>4} {'plain s':>8} {'OLA':>6} {'+vnorm':>7} {'goal':>6} "
        f"{'all':>6} {'goal-blk':>8}  {'limit':>6} {'goal<=1.3':>9}  methods in all"
    )
    for r in rows:
        blk = f"{r['r_goal-blk']:.2f}x" if "r_goal-blk" in r else "-"
        all_ = f"{r['r_all']:.2f}x" if "r_all" in r else "-"
        print(
            f"{r['name']:<20} {r['layers']:>3} {r['tokens']:>6} {r['tmax']:>4} {r['plain']:>8.2f} {r['r_ola']:>5.2f}x "
            f"{r['r_vnorm']:>6.2f}x {r['r_goal']:>5.2f}x {all_:>6} {blk:>8}  {r['limit']:>5.2f}x "
            f"{'yes' if r['r_goal'] <= 1.3 else 'no':>9}  {r['methods']}"
        )
    print()
    print("arithmetic (multiply-adds counted as executed on the padded batches); GMAC/s = count / time difference")
    print(
        f"{'model':<20} {'model GMAC':>10} {'GMAC/s':>7} {'heads+vnorm':>11} {'% model':>7} {'GMAC/s':>7} "
        f"{'ALTI GMAC':>9} {'% model':>7} {'GMAC/s':>7}  time of goal pass, x plain: OLA / vnorm / ALTI"
    )
    for r in rows:
        m = r["macs"]
        vn = m["heads"] + m["vnorm"]
        split = [r["r_ola"] - 1, r["r_vnorm"] - r["r_ola"], r["r_goal"] - r["r_vnorm"]]
        print(
            f"{r['name']:<20} {m['model'] / 1e9:>10.2f} {r['rate_model'] / 1e9:>7.1f} {vn / 1e9:>11.3f} "
            f"{100 * vn / m['model']:>6.1f}% {gmacs(r['rate_vnorm']):>7} {m['alti'] / 1e9:>9.3f} "
            f"{100 * m['alti'] / m['model']:>6.1f}% {gmacs(r['rate_alti']):>7}  "
            + " / ".join(f"{x:+.2f}" for x in split)
        )
    print(
        "limit: the goal ratio if every map ran at the model's own GMAC/s; memory (float32 scratch of one layer, largest "
        "batch): "
        + ", ".join(f"{r['name']} {r['stream_mib']:.1f} MiB (per-head tensor {r['full_mib']:.0f})" for r in rows)
    )


if __name__ == "__main__":
    main()
