"""Attention flow: scipy's integer max-flow (:func:`olas_utils.maths.flow.attention_flow`) vs
networkx's default max-flow on the same layered graphs.

For each of a few real UD English-EWT dev sentences, a zoo model's head-averaged attention
of every layer is extracted once (``extract_ola(..., layers=range(N))``). On that one stack:

* *scipy dinic*: ``attention_flow(layers)`` — validation, capacities, the CSR built once,
  every (output, input) pair solved (several pairs per scipy call);
* *scipy edmonds_karp*: the same with ``method="edmonds_karp"`` (``--methods dinic
  edmonds_karp``; not by default: on minilm-l6 it took 175× Dinic's time);
* *networkx*: the paper's graph as a ``networkx.DiGraph`` with the same float capacities
  ``Â = (A + I) / rowsum``, then ``networkx.maximum_flow_value`` (its default algorithm,
  preflow-push) for each of the T² pairs, as the authors' code does. Building the graph is
  timed separately and not included.

Variants run side by side per sentence, in rotating order: Dinic ``--repeats`` times, the
slow ones (networkx, Edmonds–Karp) ``--slow-repeats`` times, interleaved with Dinic's first
repeats; each variant's fastest repeat is kept. Printed per sentence: T, N, max-flows, the seconds of each,
the ratio networkx / scipy, and the largest difference between networkx and each scipy run
beside the stated rounding bound (:func:`olas_utils.maths.flow.flow_error_bound`).

    python benchmarks/flow_maxflow.py [--model minilm-l6] [--sentences 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import ewt_sentences, machine_line, quiet, rotated, set_threads  # puts the repository on sys.path

from olas_utils.extract import extract_ola
from olas_utils.maths.flow import attention_flow, flow_error_bound


def networkx_graph(layers: torch.Tensor):
    """The layered graph with float capacities: node (l, k) → (l−1, m), capacity Â_l[k, m]."""
    import networkx as nx

    a = layers.double().numpy()
    n, t, _ = a.shape
    res = (a + np.eye(t)) / (a + np.eye(t)).sum(-1, keepdims=True)
    g = nx.DiGraph()
    for l in range(1, n + 1):
        k, m = np.nonzero(res[l - 1])
        g.add_edges_from(((l, int(x)), (l - 1, int(y)), {"capacity": float(res[l - 1, x, y])}) for x, y in zip(k, m))
    return g


def networkx_flow(g, n: int, t: int) -> np.ndarray:
    import networkx as nx

    return np.array([[nx.maximum_flow_value(g, (n, i), (0, j)) for j in range(t)] for i in range(t)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm-l6", help="zoo model (default minilm-l6, 6 layers)")
    ap.add_argument("--sentences", type=int, default=3)
    ap.add_argument("--min-words", type=int, default=8)
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of scipy Dinic")
    ap.add_argument("--slow-repeats", type=int, default=1, help="repeats of networkx and scipy Edmonds-Karp")
    ap.add_argument("--methods", nargs="+", default=["dinic"], choices=["dinic", "edmonds_karp"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is the stable choice on a busy machine)")
    args = ap.parse_args()
    quiet()
    set_threads(args.threads)
    from olas_utils.zoo import load_model

    lm = load_model(args.model, device="cpu")
    pool = [w for w in ewt_sentences(400) if args.min_words <= len(w) <= args.max_words]
    step = max(1, len(pool) // args.sentences)
    sentences = pool[::step][: args.sentences]  # spread over the lengths in the window
    n = lm.model.config.num_hidden_layers
    res = extract_ola(lm.model, lm.tokenizer, sentences, orders=(1,), rollout=False, layers=range(n), progress=False)
    print(machine_line())
    print(
        f"model {args.model} (N = {n} layers), {len(sentences)} EWT dev sentences of {args.min_words}-{args.max_words} "
        f"words, repeats: dinic {args.repeats}, networkx/edmonds_karp {args.slow_repeats} (fastest kept), networkx {__import__('networkx').__version__}, "
        f"scipy {__import__('scipy').__version__}, {torch.get_num_threads()} thread(s)"
    )
    head = f"{'T':>4} {'N':>3} {'flows':>6} " + " ".join(f"{'scipy ' + m + ' s':>20}" for m in args.methods)
    head += f" {'networkx s':>11} {'(build s)':>9} " + " ".join(f"{'nx/' + m:>14}" for m in args.methods)
    head += f" {'max |diff|':>11} {'bound':>8}"
    print(head)
    totals = {m: 0.0 for m in [*args.methods, "networkx"]}
    for s in range(len(sentences)):
        layers = torch.stack([res[f"layer:{i}"][s] for i in range(n)])
        t = layers.shape[-1]
        t0 = time.perf_counter()
        g = networkx_graph(layers)
        build = time.perf_counter() - t0
        best = {m: float("inf") for m in totals}
        out = {}
        for rep in range(max(args.repeats, args.slow_repeats)):
            for m in rotated(list(totals), rep + s):
                if rep >= (args.repeats if m == "dinic" else args.slow_repeats):
                    continue
                t0 = time.perf_counter()
                if m == "networkx":
                    out[m] = networkx_flow(g, n, t)
                else:
                    out[m] = attention_flow(layers, method=m).double().numpy()
                best[m] = min(best[m], time.perf_counter() - t0)
        for m in totals:
            totals[m] += best[m]
        diff = max(np.abs(out[m] - out["networkx"]).max() for m in args.methods)
        line = f"{t:>4} {n:>3} {t * t:>6} " + " ".join(f"{best[m]:>20.3f}" for m in args.methods)
        line += f" {best['networkx']:>11.2f} {build:>9.3f} " + " ".join(
            f"{best['networkx'] / best[m]:>13.1f}x" for m in args.methods
        )
        print(line + f" {diff:>11.2e} {flow_error_bound(t, n):>8.1e}", flush=True)
    print(
        "total: "
        + ", ".join(f"{m} {totals[m]:.2f} s" for m in totals)
        + "; networkx / "
        + ", ".join(f"{m} {totals['networkx'] / totals[m]:.1f}x" for m in args.methods)
    )


if __name__ == "__main__":
    main()
