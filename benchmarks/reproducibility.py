"""Are extracted maps bit-reproducible across processes, and what changes them?

Each variant extracts the same real sentences (UD English-EWT dev, word level) from a zoo model
in a *fresh* Python process (so no state carries over), with a given thread setting, and saves
its maps; the parent compares every key byte for byte and prints the largest absolute and
relative difference against the reference variant (1 thread, ``torch.set_num_threads(1)``), and
the SSIM similarity matrix between the two models' images (:func:`olas_utils.similarity.ssim.
ssim_matrix` of :func:`olas_utils.similarity.images.to_image`), with its retrieval ranks::

    python benchmarks/reproducibility.py                       # minilm-l6 and smollm2-135m, 12 sentences
    python benchmarks/reproducibility.py --sentences 6 --variants t1 t1b t2

Variants (``--variants``; default all):

=========  ======================================================================
``t1``     ``torch.set_num_threads(1)`` (the reference)
``t1b``    the same again in another process
``t2``     ``torch.set_num_threads(2)``
``t2b``    the same again in another process
``omp1``   ``OMP_NUM_THREADS=1`` in the environment, no ``set_num_threads``
``omp2``   ``OMP_NUM_THREADS=2`` in the environment, no ``set_num_threads``
``mkl1``   ``MKL_NUM_THREADS=1`` only (torch left at its default thread count)
``det2``   2 threads with ``torch.use_deterministic_algorithms(True)``
``cbwr1``  1 thread with ``MKL_CBWR=AVX2,STRICT`` (MKL's strict conditional numerical
           reproducibility: GEMM results independent of the thread count)
``cbwr2``  the same at 2 threads (compared with ``cbwr1``)
``mkldnn`` 2 threads with ``torch.backends.mkldnn`` disabled
``bs1``    1 thread, ``batch_size=1`` (no padding, no length buckets)
``half``   1 thread, only the first half of the sentences (other bucket neighbours)
=========  ======================================================================

``--compare-results A B`` compares two results folders of the same notebooks (e.g. a smoke run
at 1 thread and one at 2 threads, each from empty caches): per CSV table, byte-identical or not,
the largest difference of its numeric columns, and every row whose ``verdict`` /
``across_verdict`` differs::

    python benchmarks/reproducibility.py --compare-results runs/t1/results runs/t2/results

Not part of the library; see docs/reproducibility.md for the numbers it printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

#: variant → (environment additions, child options)
VARIANTS: dict[str, tuple[dict[str, str], dict]] = {
    "t1": ({}, {"threads": 1}),
    "t1b": ({}, {"threads": 1}),
    "t2": ({}, {"threads": 2}),
    "t2b": ({}, {"threads": 2}),
    "omp1": ({"OMP_NUM_THREADS": "1"}, {}),
    "omp2": ({"OMP_NUM_THREADS": "2"}, {}),
    "mkl1": ({"MKL_NUM_THREADS": "1"}, {}),
    "det2": ({}, {"threads": 2, "deterministic": True}),
    "cbwr1": ({"MKL_CBWR": "AVX2,STRICT"}, {"threads": 1}),
    "cbwr2": ({"MKL_CBWR": "AVX2,STRICT"}, {"threads": 2}),
    "mkldnn": ({}, {"threads": 2, "no_mkldnn": True}),
    "bs1": ({}, {"threads": 1, "batch_size": 1}),
    "half": ({}, {"threads": 1, "half": True}),
}
MODELS = ("minilm-l6", "smollm2-135m")
#: variant → the variant it is compared with (default: the first variant run, ``t1``)
REFERENCE = {"t2b": "t2", "omp2": "t2", "det2": "t2", "mkldnn": "t2", "cbwr2": "cbwr1", "omp1": "t1", "bs1": "t1"}


def sentences(n: int) -> list[list[str]]:
    """The first ``n`` sentences of UD English-EWT dev with 5 to 40 words (word lists)."""
    from olas_utils.data import load_ud_ewt

    words = [list(w) for w in load_ud_ewt("dev")["words"] if 5 <= len(w) <= 40]
    return words[:n]


def child(args) -> None:
    """Extract in this (fresh) process and save ``{model: {key: [maps]}}`` and the thread facts."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    import warnings

    warnings.filterwarnings("ignore")
    from olas_utils.extract import extract_ola
    from olas_utils.zoo import load_model

    sents = sentences(args.sentences)
    if args.half:
        sents = sents[: len(sents) // 2]
    out = {"threads": torch.get_num_threads(), "maps": {}}
    for name in args.models:
        lm = load_model(name, device="cpu")
        res = extract_ola(
            lm, sents, orders=(1, 2, 3), level="word", batch_size=args.batch_size, progress=False, mixing=("alti",)
        )
        out["maps"][name] = {k: [m.clone() for m in res[k]] for k in res.keys()}
    torch.save(out, args.out)


def digest(maps: list) -> str:
    """SHA-256 of a list of tensors' bytes (shapes included)."""
    h = hashlib.sha256()
    for m in maps:
        h.update(str(tuple(m.shape)).encode())
        h.update(m.contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def run_variant(name: str, args, folder: Path) -> dict:
    env_add, opts = VARIANTS[name]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR")}
    env.update(env_add)
    out = folder / f"{name}.pt"
    cmd = [sys.executable, __file__, "--child", "--out", str(out), "--sentences", str(args.sentences)]
    cmd += ["--models", *args.models, "--batch-size", str(opts.get("batch_size", args.batch_size))]
    if "threads" in opts:
        cmd += ["--threads", str(opts["threads"])]
    for flag in ("deterministic", "no_mkldnn", "half"):
        if opts.get(flag):
            cmd.append("--" + flag.replace("_", "-"))
    subprocess.run(cmd, env=env, check=True)
    import torch

    return torch.load(out, weights_only=False)


def ssim_table(maps: dict, models: list[str]) -> tuple:
    """SSIM matrix (model 0's images × model 1's, key ``ola:1``) and the true-match ranks."""
    import torch

    from olas_utils.similarity.images import to_image
    from olas_utils.similarity.retrieval import true_match_ranks
    from olas_utils.similarity.ssim import ssim_matrix

    causal = {"minilm-l6": False}
    imgs = [
        torch.stack([to_image(m, causal=causal.get(n, True)) for m in maps[n]["ola:1"]])[:, None] for n in models[:2]
    ]
    sim = ssim_matrix(imgs[0], imgs[1])
    return sim, true_match_ranks(sim.numpy())


def _diffs(x, y) -> tuple[float, float, int]:
    """Largest absolute and relative difference over the entries finite in both, and the number
    of entries finite in one map only (or non-finite and unequal)."""
    x, y = x.double(), y.double()
    fin = x.isfinite() & y.isfinite()
    odd = int((~fin & ~((x == y) | (x.isnan() & y.isnan()))).sum())
    if not fin.any():
        return 0.0, 0.0, odd
    d = (x[fin] - y[fin]).abs()
    return float(d.max()), float((d / x[fin].abs().clamp_min(1e-30)).max()), odd


def compare(ref: dict, other: dict, models: list[str], common: int | None = None) -> list[dict]:
    """Per model and key: byte-identical or not, largest absolute / relative difference (finite
    entries), the largest finite value, and the entries non-finite in one of the two only."""
    rows = []
    for name in models:
        for key, a in ref["maps"][name].items():
            b = other["maps"][name][key]
            n = min(len(a), len(b)) if common is None else common
            a2, b2 = a[:n], b[:n]
            d = [_diffs(x, y) for x, y in zip(a2, b2)]
            rows.append(
                {
                    "model": name,
                    "key": key,
                    "identical": digest(a2) == digest(b2),
                    "max_abs": max(x[0] for x in d),
                    "max_rel": max(x[1] for x in d),
                    "nonfinite_mismatch": sum(x[2] for x in d),
                    "scale": max(float(x[x.isfinite()].abs().max()) for x in a2),
                    "nonfinite": sum(int((~x.isfinite()).sum()) for x in a2),
                }
            )
    return rows


def compare_results(a: Path, b: Path) -> int:
    """Print, per CSV table in both folders, whether it is byte-identical, the largest numeric
    difference and the verdicts that flip; return the number of flipped verdicts."""
    import pandas as pd

    flips = 0
    names = sorted({p.name for p in a.glob("*.csv")} & {p.name for p in b.glob("*.csv")})
    for name in names:
        if (a / name).read_bytes() == (b / name).read_bytes():
            print(f"{name}: byte-identical")
            continue
        x, y = pd.read_csv(a / name), pd.read_csv(b / name)
        if x.shape != y.shape or list(x.columns) != list(y.columns):
            print(f"{name}: different shapes {x.shape} / {y.shape}")
            continue
        num = [
            c
            for c in x.columns
            if all(pd.api.types.is_numeric_dtype(t[c]) and not pd.api.types.is_bool_dtype(t[c]) for t in (x, y))
        ]
        other = [c for c in x.columns if c not in num and (x[c].astype(str) != y[c].astype(str)).any()]
        diff = max(((x[c] - y[c]).abs().max() for c in num), default=0.0)
        worst = max(num, key=lambda c: (x[c] - y[c]).abs().max()) if num else None
        cells = int(sum(((x[c] - y[c]).abs() > 0).sum() for c in num))
        print(
            f"{name}: differs, {cells} numeric cells, largest |diff| {diff:.4g} (column {worst!r})"
            + (f"; other columns that differ: {other}" if other else "")
        )
        for col in [c for c in x.columns if c in ("verdict", "across_verdict")]:
            changed = x[col].astype(str) != y[col].astype(str)
            flips += int(changed.sum())
            ids = [c for c in x.columns if x[c].dtype == object and c not in ("verdict", "across_verdict")][:5]
            for i in changed[changed].index:
                row = " ".join(str(x.at[i, c]) for c in ids)
                print(f"  {col} flips: {row}: {x.at[i, col]} -> {y.at[i, col]}")
    print(f"{len(names)} tables compared, {flips} verdict(s) flipped")
    return flips


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--deterministic", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-mkldnn", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--half", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--compare-results", nargs=2, metavar="DIR", help="compare two results folders' tables")
    args = ap.parse_args(argv)
    if args.compare_results:
        compare_results(*(Path(d) for d in args.compare_results))
        return 0
    if args.child:
        child(args)
        return 0
    import platform

    import torch
    import transformers

    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPU cores, {args.sentences} EWT dev sentences, word level, batch size {args.batch_size}"
    )
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for v in args.variants:
            results[v] = run_variant(v, args, Path(tmp))
    all_rows = {}
    for v in args.variants[1:]:
        ref_name = REFERENCE.get(v, args.variants[0])
        ref_name = ref_name if ref_name in results else args.variants[0]
        ref = results[ref_name]
        common = args.sentences // 2 if v == "half" else None
        rows = compare(ref, results[v], args.models, common)
        all_rows[f"{v} vs {ref_name}"] = rows
        same = sum(r["identical"] for r in rows)
        print(
            f"\n{v} (threads {results[v]['threads']}) vs {ref_name} (threads {ref['threads']}): {same}/{len(rows)} keys byte-identical"
        )
        for r in rows:
            if not r["identical"]:
                extra = f", {r['nonfinite']} non-finite entries" if r["nonfinite"] else ""
                extra += f", {r['nonfinite_mismatch']} non-finite in one only" if r["nonfinite_mismatch"] else ""
                print(
                    f"  {r['model']:13s} {r['key']:8s} max |diff| {r['max_abs']:.3g} "
                    f"(largest finite value {r['scale']:.3g}), max rel {r['max_rel']:.3g}{extra}"
                )
    print()
    for v in args.variants:
        if v != "half":
            per_model = " ".join(
                f"{n} {digest([m for k in sorted(results[v]['maps'][n]) for m in results[v]['maps'][n][k]])}"
                for n in args.models
            )
            print(f"all maps, {v} (threads {results[v]['threads']}): sha256 {per_model}")
    if len(args.models) >= 2:
        print()
        for v in args.variants:
            sim, ranks = ssim_table(results[v]["maps"], args.models)
            h = hashlib.sha256(sim.numpy().tobytes()).hexdigest()[:12]
            print(f"SSIM {args.models[0]} × {args.models[1]} (ola:1), {v}: sha256 {h}, ranks {ranks.tolist()}")
    if args.json:
        Path(args.json).write_text(json.dumps(all_rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
