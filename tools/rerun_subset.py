"""Re-run a subset of notebook 03's quick parsers (minilm-l6, ola:3 and rollout, seeds 4 and 5) in a fresh process and
compare every run row and per-sentence outcome with the committed ones (docs/reproducibility.md).

Run from empty caches: ``OLAS_CACHE_DIR=<empty folder with a models/ link> OMP_NUM_THREADS=2
python tools/rerun_subset.py results``."""

import sys
from dataclasses import replace

import pandas as pd

from olas_utils.data.tasks import load_task
from olas_utils.studies import syntax
from olas_utils.toa.taskmaps import ModelPool


def main():
    cfg = syntax.PROFILES["quick"]
    cfg = replace(cfg, keys=("ola:3", "rollout"), training=replace(cfg.training, seeds=(4, 5)))
    kw = dict(max_words=cfg.sizes.max_words, min_words=cfg.sizes.min_words, seed=0)
    train = load_task("dependency", "train", n=cfg.sizes.n_train, **kw)
    dev = load_task("dependency", "dev", n=cfg.sizes.n_dev, **kw)
    test = load_task("dependency", "test", n=cfg.sizes.n_test, **kw)
    parser, items = syntax.parser_frame(["minilm-l6"], train, dev, test, ModelPool(seed=0), cfg, progress=False)
    committed = pd.read_csv(sys.argv[1] + "/03_parser.csv")
    citems = pd.read_parquet(sys.argv[1] + "/03_parser_items.parquet")
    runs = parser[parser.model != syntax.BASELINE_MODEL]
    key = ["model", "key", "condition", "seed"]
    mine = runs.merge(committed, on=key, suffixes=("", "_c"))
    print(f"{len(runs)} re-run rows, {len(mine)} matched committed rows")
    cols = [c for c in runs.columns if c not in key]
    bad = 0
    for c in cols:
        a, b = mine[c].astype(str), mine[c + "_c"].astype(str)
        if c in ("uas", "las", "uas_nopunct", "las_nopunct", "uas_greedy", "las_greedy"):
            a, b = mine[c].round(4).astype(str), mine[c + "_c"].round(4).astype(str)
        if c in ("best_epoch", "epochs_run"):
            a, b = mine[c].astype(int).astype(str), mine[c + "_c"].astype(int).astype(str)
        if c == "stopped_early":
            a, b = mine[c].astype(bool).astype(str), mine[c + "_c"].astype(bool).astype(str)
        n = int((a != b).sum())
        bad += n
        if n:
            print(f"column {c}: {n} differ")
    ir = items[items.model != syntax.BASELINE_MODEL]
    m = ir.merge(citems, on=key + ["sentence"], suffixes=("", "_c"))
    diff = sum(int((m[c] != m[c + "_c"]).sum()) for c in ir.columns if c + "_c" in m)
    print(f"{len(ir)} re-run item rows, {len(m)} matched, {diff} differing values")
    print("runs:", sorted(set(map(tuple, runs[["key", "condition", "seed"]].values.tolist()))))
    print(
        "RESULT:",
        "identical" if bad == 0 and diff == 0 and len(m) == len(ir) and len(mine) == len(runs) else "DIFFERENT",
    )


if __name__ == "__main__":
    main()
