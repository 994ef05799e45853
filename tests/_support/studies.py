"""Hand-built study inputs shared by the tests of tests/studies/: a stand-in for an image cache
and per-sentence dependency outcomes with known answers (notebooks 02–04)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from olas_utils.studies import crossfamily, crosslm


class FakeImages:
    """A stand-in for one model's image cache: ``keys`` and ``images(key)`` over fixed arrays."""

    def __init__(self, arrays):
        self.arrays = arrays
        self.keys = list(arrays)

    def images(self, key):
        return self.arrays[key]


N = 300  # test sentences
WORDS = np.random.default_rng(0).integers(3, 30, size=N)


def arcs(rng, p):
    """Correct arcs per sentence: Binomial(words, p)."""
    return rng.binomial(WORDS, p)


def dep_rows(run: dict, arcs) -> list[dict]:
    """Per-sentence dependency item rows of one run (labels correct for half the arcs)."""
    cols = (
        "arcs",
        "labels",
        "words",
        "arcs_nopunct",
        "labels_nopunct",
        "words_nopunct",
        "arcs_greedy",
        "labels_greedy",
    )
    return [
        {**run, "sentence": i, **dict(zip(cols, (a, a // 2, w, a, a // 2, w, a, a // 2)))}
        for i, (a, w) in enumerate(zip(arcs, WORDS))
    ]


def syntax_tables(seeds=(0, 1, 2)):
    """Model m: ola:1 clearly above every control, ola:2 the tokenizer-only control's very
    outcomes, ola:3 clearly below; the controls at 0.30 (tokenizer-only), 0.25, 0.10."""
    rng = np.random.default_rng(1)
    items, runs = [], []
    for s in seeds:
        tok = arcs(rng, 0.30)
        ctrl = {"tokenizer-only": tok, "position-only": arcs(rng, 0.25), "random-init target": arcs(rng, 0.10)}
        ola = {"ola:1": arcs(rng, 0.60), "ola:2": tok, "ola:3": arcs(rng, 0.15)}
        for key, a in ola.items():
            for cond, got in (("ola", a), *ctrl.items()):
                run = {"model": "m", "family": "encoder", "key": key, "condition": cond, "seed": s}
                items += dep_rows(run, got)
                runs.append({**run, "uas": got.sum() / WORDS.sum(), "best_epoch": 5 if s == 0 else 3, "epochs_run": 5})
    run = {"model": "baseline: neighbour chain", "family": "-", "key": "-", "condition": "baseline", "seed": 0}
    items += dep_rows(run, arcs(rng, 0.29))
    return pd.DataFrame(runs), pd.DataFrame(items)


def transfer_tables(toa: dict[str, float], seeds=(0, 1, 2)):
    """Dependency transfer among three encoders; each target's single-source transfer from the
    two others at ``toa[target]`` (None: position-only's very outcomes), every control at most
    0.30 (position-only), self at 0.7; every trained run once per seed of ``seeds``."""
    rng = np.random.default_rng(3)
    models = list(toa)
    items, frame = [], []

    def add(source, target, cond, variant, seed, p=None, got=None):
        got = arcs(rng, p) if got is None else got
        run = {"task": "dependency", "family": "encoder" if target != "-" else "-", "source": source, "target": target}
        run |= {"condition": cond, "variant": variant, "seed": seed}
        items.extend(dep_rows(run, got))
        u = got.sum() / WORDS.sum()
        frame.append({**run, "metric": "uas", "score": u, "uas": u, "best_epoch": 3, "epochs_run": 5})
        return u

    for t in models:
        others = [s for s in models if s != t]
        for k in seeds:
            pos = arcs(rng, 0.30)
            add(t, t, "self", "plain", k, 0.7)
            for s in models:
                add(s, t, "random-init target", "plain", k, 0.1)
            got = [add(s, t, "transfer", "plain", k, got=pos if toa[t] is None else None, p=toa[t]) for s in others]
            for v in ("rank", "augmented"):
                for s in others:
                    add(s, t, f"transfer ({v})", v, k, 0.2)
            add("others", t, "transfer (multi-source)", "plain", k, 0.5)
            frame.append({**frame[-1], "source": "chosen", "condition": "TOA (headline)", "variant": "plain"})
            frame[-1]["score"] = frame[-1]["uas"] = float(np.mean(got))
            add(t, t, "tokenizer-only", "plain", k, 0.2)
            add(t, t, "position-only", "plain", k, got=pos)
    add("-", "-", "baseline", "-", 0, 0.25)
    return pd.DataFrame(frame), pd.DataFrame(items)


def cross_items(encoders, causal, p_trained, p_control=0.05, n=60, seed=0):
    """Hand-made cross-family items: every ordered (encoder, causal) pair both ways; trained hit
    probability ``p_trained(target, source)``, tokenizer-only ``p_control``."""
    rng = np.random.default_rng(seed)
    pairs = [(e, c) for e in encoders for c in causal] + [(c, e) for e in encoders for c in causal]
    rows = {c: [] for c in crosslm.RETRIEVAL_ITEM_COLUMNS}
    for control in ("none", "uniform"):
        for t, s in pairs:
            p = p_trained(t, s) if control == "none" else p_control
            ranks = np.where(rng.random(n) < p, 0, rng.integers(1, n, n))
            for i, r in enumerate(ranks):
                for col, v in zip(rows, (crossfamily.CROSS_FAMILY, control, "word", "ola:1", "ssim", t, s, i, int(r))):
                    rows[col].append(v)
    return pd.DataFrame(rows)
