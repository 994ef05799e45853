"""Transferable OLA Adapter across LMs (notebook 04; paper.md §4).

Within each family (encoders, causal LMs; read from each model's config) an adapter is
trained on every model's OLA for every task and evaluated, unchanged, on every model of
the family. Each table holds, per target model:

* ``self`` — the adapter trained on the target's own OLA (the upper bound);
* ``transfer`` — adapters trained on another model of the family (the paper's TOA);
* ``random-init target`` (control) — the source adapter applied to the OLA of a randomly
  initialised copy of the target (same architecture and tokenizer): if transfer rested on
  the trained model's attention, this must fall to the baseline;
* ``trained on random-init`` (control, paper profile) — an adapter trained *and* tested on
  the random copy's OLA: how much a task can be read from an untrained model's attention;
* ``baseline`` — a model-free baseline (:func:`olas_utils.toa.fit.trivial_baseline`).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from olas_utils.data.tasks import TASKS, TaskData, load_task
from olas_utils.studies.depth import orders_for

__all__ = ["PROFILES", "PAPER_CLAIMS", "load_splits", "run_transfer", "transfer_matrix", "task_summary",
           "bar_chart", "comparison_markdown", "CONDITIONS"]

#: Table conditions, in display order.
CONDITIONS = ("self", "transfer", "random-init target", "trained on random-init", "baseline")

#: Notebook 04 sizes (``models=None``: the default zoo; ``tasks=None``: all of
#: :data:`olas_utils.data.tasks.TASKS`). ``keys``: the OLA maps stacked as channels (each raw
#: and sink-removed, as in the paper).
PROFILES: dict[str, dict] = {
    "smoke": {"models": ["minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m"], "tasks": ["pos", "relation"],
              "n_train": 24, "n_test": 16, "max_words": 15, "keys": ["ola:1", "ola:2"], "level": "word",
              "adapter": "tiny", "epochs": 1, "batch_size": 8, "lr": 2e-3, "arc_dim": 32, "label_dim": 16,
              "train_on_controls": False},
    "quick": {"models": None, "tasks": None, "n_train": 150, "n_test": 100, "max_words": 25,
              "keys": ["ola:1", "ola:2"], "level": "word", "adapter": "small", "epochs": 8, "batch_size": 8,
              "lr": 3e-3, "arc_dim": 64, "label_dim": 32, "train_on_controls": False},
    "paper": {"models": None, "tasks": None, "n_train": None, "n_test": None, "max_words": None, "min_words": 1,
              "keys": ["ola:1", "ola:2"], "level": "subword", "adapter": "paper", "epochs": 15, "batch_size": 2,
              "lr": 1e-5, "arc_dim": 512, "label_dim": 128, "train_on_controls": True},
}

#: What paper.md §4 reports, for the closing comparison.
PAPER_CLAIMS = ("On SemEval relation classification, TOA trained on Llama-3.2-3B gives 30–33 % accuracy on "
                "unseen Qwen2-1.5B / Gemma-2-2B (5–8 % for zero-shot prompting); gains hold for POS, NER and "
                "parsing, largest for small models and syntax-heavy tasks.")


def load_splits(tasks: Sequence[str], cfg: dict, seed: int = 0, data_dir=None) -> dict[str, tuple[TaskData, TaskData]]:
    """``{task: (train, test)}`` subsets per the profile ``cfg`` (n_train, n_test, max_words,
    min_words; the paper profile keeps every sentence)."""
    kw = {"max_words": cfg["max_words"], "min_words": cfg.get("min_words", 2), "seed": seed, "data_dir": data_dir}
    return {t: (load_task(t, "train", n=cfg["n_train"], **kw), load_task(t, "test", n=cfg["n_test"], **kw))
            for t in tasks}


def run_transfer(models: Sequence[str], splits: dict[str, tuple[TaskData, TaskData]], cfg: dict, pool, *,
                 seed: int = 0, device="cpu", checkpoint_dir=None, progress: bool = True) -> pd.DataFrame:
    """Train every (model, task) adapter and evaluate it on every model of its family, with
    the controls and baseline described in the module docstring.

    Args:
        models: model names (families read from their configs).
        splits: from :func:`load_splits`.
        cfg: a profile of :data:`PROFILES`.
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool` (its seed seeds the random copies).
        seed: training seed.
        device: where to train and predict.
        checkpoint_dir: resumable checkpoints (default ``<cache>/toa``).
        progress: bars.

    Returns:
        Long table: ``task, metric, family, source, target, condition, score`` and every
        metric of :func:`olas_utils.toa.fit.score` as its own column (fractions). ``source`` is
        ``"-"`` for the baseline.
    """
    from olas_utils.toa.features import build_examples, n_channels
    from olas_utils.settings import cache_dir
    from olas_utils.toa.taskmaps import task_maps
    from olas_utils.toa.fit import HEADLINE, adapter_config, evaluate, fit_adapter, profile_training, score, trivial_baseline

    ckpt = checkpoint_dir or (cache_dir() / "toa")
    keys = list(cfg["keys"])
    adapter = adapter_config(cfg["adapter"], n_channels(keys))
    with_controls = bool(cfg.get("train_on_controls"))

    # 1. Maps: model-major, so each model (and its random copy) is loaded once.
    ex: dict = {}
    family: dict[str, str] = {}
    for name in models:
        for task, (train, test) in splits.items():
            wanted = [("none", "train", train), ("none", "test", test), ("random", "test", test)]
            if with_controls:
                wanted.append(("random", "train", train))
            for control, split, data in wanted:
                maps = task_maps(pool, name, data, control=None if control == "none" else control,
                                 orders=orders_for(name, (1, 2, 3)), progress=progress)
                family[name] = "causal" if maps.is_causal else "encoder"
                if cfg["level"] == "word":
                    maps = maps.to_words()
                ex[name, control, task, split] = build_examples(maps, data, keys)
    pool.release()

    rows = []

    def add(task, data, source, target, condition, scores):
        rows.append({"task": task, "metric": HEADLINE[task], "family": family.get(target, "-"), "source": source,
                     "target": target, "condition": condition, "score": scores[HEADLINE[task]], **scores})

    for task, (train, test) in splits.items():
        tcfg, hk = profile_training(cfg, seed, TASKS[task].kind)
        for source in models:
            model, _ = fit_adapter(ex[source, "none", task, "train"], train, adapter, tcfg, checkpoint_dir=ckpt,
                                   head_kwargs=hk, provenance={"model": source, "keys": keys, "level": cfg["level"]},
                                   device=device, progress=progress, desc=f"{task} on {source}")
            for target in models:
                if family[target] != family[source]:
                    continue
                cond = "self" if target == source else "transfer"
                add(task, test, source, target, cond, evaluate(model, ex[target, "none", task, "test"], test, device=device))
                add(task, test, source, target, "random-init target",
                    evaluate(model, ex[target, "random", task, "test"], test, device=device))
            if with_controls:
                ctrl, _ = fit_adapter(ex[source, "random", task, "train"], train, adapter, tcfg, checkpoint_dir=ckpt,
                                      head_kwargs=hk, provenance={"model": source, "control": "random", "keys": keys,
                                                                  "level": cfg["level"], "pool_seed": pool.seed},
                                      device=device, progress=progress, desc=f"{task} on {source}+random")
                add(task, test, source + "+random", source, "trained on random-init",
                    evaluate(ctrl, ex[source, "random", task, "test"], test, device=device))
        base = score(test, trivial_baseline(train, test))
        rows.append({"task": task, "metric": HEADLINE[task], "family": "-", "source": "-", "target": "-",
                     "condition": "baseline", "score": base[HEADLINE[task]], **base})
    return pd.DataFrame(rows)


def transfer_matrix(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """Headline score (%) of ``task``: rows = source adapter, columns = target model
    (``self`` on the diagonal), families side by side."""
    d = frame[(frame.task == task) & frame.condition.isin(["self", "transfer"])]
    return (d.pivot_table(index=["family", "source"], columns="target", values="score", sort=False) * 100).round(1)


def task_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task and target model: headline score (%) for ``self``, the mean over sources of
    ``transfer`` (and its min–max), the mean ``random-init target`` control over sources,
    ``trained on random-init`` if run, and the task's baseline."""
    rows = []
    for task, d in frame.groupby("task", sort=False):
        base = d[d.condition == "baseline"].score.iloc[0]
        for target, t in d[d.condition != "baseline"].groupby("target", sort=False):
            tr = t[t.condition == "transfer"].score
            r = {"task": task, "metric": t.metric.iloc[0], "family": t.family.iloc[0], "target": target,
                 "self": t[t.condition == "self"].score.mean(),
                 "transfer (mean)": tr.mean() if len(tr) else float("nan"),
                 "transfer (min)": tr.min() if len(tr) else float("nan"),
                 "transfer (max)": tr.max() if len(tr) else float("nan"),
                 "random-init target": t[t.condition == "random-init target"].score.mean()}
            if (t.condition == "trained on random-init").any():
                r["trained on random-init"] = t[t.condition == "trained on random-init"].score.mean()
            r["baseline"] = base
            rows.append(r)
    out = pd.DataFrame(rows)
    num = out.select_dtypes("number").columns
    out[num] = (out[num] * 100).round(1)
    return out


def bar_chart(summary: pd.DataFrame, task: str, *, caption: str = ""):
    """Bars per target model: self, transfer (mean, with min–max whiskers), random-init
    target, [trained on random-init], and the baseline as a dashed line.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    s = summary[summary.task == task].reset_index(drop=True)
    conds = [c for c in ("self", "transfer (mean)", "random-init target", "trained on random-init") if c in s]
    x = np.arange(len(s))
    w = 0.8 / len(conds)
    fig, ax = plt.subplots(figsize=(2.0 + 1.2 * len(s), 3.4), layout="constrained")
    for j, c in enumerate(conds):
        vals = s[c].to_numpy(dtype=float)
        err = None
        if c == "transfer (mean)":
            err = np.vstack([vals - s["transfer (min)"].to_numpy(float), s["transfer (max)"].to_numpy(float) - vals])
            err = np.nan_to_num(err)
        ax.bar(x + (j - (len(conds) - 1) / 2) * w, np.nan_to_num(vals), w, yerr=err, capsize=2, label=c)
    ax.axhline(s.baseline.iloc[0], color="k", ls="--", lw=1, label="baseline")
    ax.set_xticks(x, s.target, rotation=20)
    ax.set_ylabel(f"{s.metric.iloc[0]} (%)")
    ax.set_title(f"{task}{' — ' + caption if caption else ''}", fontsize=9)
    ax.legend(fontsize=7, ncols=2)
    return fig


def comparison_markdown(summary: pd.DataFrame, *, sizes: str, frame: pd.DataFrame | None = None) -> str:
    """The closing text, generated from this run's summary: where transfer beats the
    baseline and the random-init control, and the gap to the self-trained upper bound,
    set against the paper's claims (:data:`PAPER_CLAIMS`). With the long ``frame`` of
    :func:`run_transfer`, relation *accuracy* (the paper's measure) is reported too."""
    s = summary.dropna(subset=["transfer (mean)"])
    lines = [f"**This run** ({sizes}). Headline metric per task; percentages.", "",
             "| task | targets | transfer > baseline | transfer > random-init target | mean transfer | mean self | "
             "mean random-init | baseline |", "|---|---|---|---|---|---|---|---|"]
    for task, t in s.groupby("task", sort=False):
        lines.append(f"| {task} ({t.metric.iloc[0]}) | {len(t)} | {(t['transfer (mean)'] > t.baseline).sum()}/{len(t)} | "
                     f"{(t['transfer (mean)'] > t['random-init target']).sum()}/{len(t)} | "
                     f"{t['transfer (mean)'].mean():.1f} | {t['self'].mean():.1f} | "
                     f"{t['random-init target'].mean():.1f} | {t.baseline.iloc[0]:.1f} |")
    beats = (s["transfer (mean)"] > s["random-init target"]).mean() if len(s) else float("nan")
    lines += ["", f"**Paper (§4):** {PAPER_CLAIMS}", "",
              (f"* Transferred adapters beat the random-init control on {beats:.0%} of (task, target) pairs: the "
               "adapter reads something the trained models share and an untrained copy lacks." if beats >= 0.8 else
               f"* Transferred adapters beat the random-init control on only {beats:.0%} of (task, target) pairs: "
               "**this run does not show transfer beyond what an untrained copy's attention also gives**. At this "
               "size (see above) it cannot test the paper's claim; the paper profile (GPU) can."),
              "* Where transfer does not beat the model-free baseline, the OLA adapter at this size does not know "
              "the task better than word identity statistics; this is expected for POS and NER, whose labels depend "
              "on the word form that OLA does not carry.",
              "* The paper reports relation *accuracy*; our headline is the official macro-F1 (accuracy is in the CSV)."]
    if frame is not None and "accuracy" in frame and (frame.task == "relation").any():
        r = frame[frame.task == "relation"]

        def acc(cond):
            a = r[r.condition == cond].accuracy * 100
            return f"{a.mean():.1f} ({a.min():.1f}–{a.max():.1f})" if len(a) else "–"

        lines.append(f"* Relation accuracy, mean (min–max) over pairs: transfer {acc('transfer')}, self {acc('self')}, "
                     f"random-init target {acc('random-init target')}, model-free baseline {acc('baseline')}; "
                     "the paper's 30–33 % is for a 3B source model on 1.5–2B targets, full training data and a "
                     "768-dim adapter.")
    return "\n".join(lines)
