"""OLA and syntax (notebook 03; ``docs/method.md#ola-and-syntax``): training-free probes of word-level OLA and a
biaffine dependency parser trained on each model's OLA, per order and for rollout.

Sizes live in :data:`PROFILES`; the notebook calls :func:`probe_frame`,
:func:`parser_frame`, :func:`uas_figure` and :func:`comparison_markdown` in that order.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from olas_utils.data.tasks import TaskData
from olas_utils.sinks import preprocess
from olas_utils.studies.depth import keys_for, orders_for
from olas_utils.studies.profiles import AdapterSettings, SplitSizes, SyntaxProfile
from olas_utils.vocabulary import CAUSAL, ENCODER, Control, MapKey, family_of

__all__ = [
    "PROFILES",
    "PAPER_PARSER",
    "PROBE_VARIANTS",
    "PARSER_CONTROLS",
    "probe_maps",
    "probe_frame",
    "parser_frame",
    "parser_table",
    "uas_figure",
    "comparison_markdown",
]

#: Notebook 03 sizes (``models=None``: the default zoo; a model shallower than an order skips
#: that order's key, see :mod:`olas_utils.studies.depth`). ``n_*`` are sentences of UD
#: English-EWT train / dev / test with ``min_words..max_words`` words (dev chooses the epoch); ``level`` is the adapter's
#: input level; ``adapter`` a size of :data:`olas_utils.toa.adapter.ADAPTER_SIZES`; ``workers``
#: adapters trained at the same time, one thread each (:func:`olas_utils.toa.parallel.fit_many`;
#: None: one per core). The quick training settings equal notebook 04's, so the dependency
#: adapters of the models both notebooks use (and the controls) are trained once for both.
PROFILES: dict[str, SyntaxProfile] = {
    "smoke": SyntaxProfile(
        models=("minilm-l6", "smollm2-135m"),
        sizes=SplitSizes(n_train=24, n_dev=12, n_test=16, max_words=15),
        keys=("ola:1", "rollout"),
        level="word",
        training=AdapterSettings(
            adapter="tiny", epochs=2, patience=1, batch_size=8, lr=2e-3, arc_dim=32, label_dim=16, workers=1
        ),
    ),
    "quick": SyntaxProfile(
        models=("minilm-l6", "smollm2-135m"),
        sizes=SplitSizes(n_train=2000, n_dev=300, n_test=500, min_words=3, max_words=30),
        keys=("ola:1", "ola:2", "ola:3", "rollout"),
        level="word",
        training=AdapterSettings(
            adapter="small", epochs=5, patience=2, batch_size=8, lr=3e-3, arc_dim=128, label_dim=64, workers=2
        ),
    ),
    "paper": SyntaxProfile(
        models=None,
        sizes=SplitSizes(n_train=None, n_dev=None, n_test=None, max_words=None, min_words=1),
        keys=("ola:1", "ola:2", "ola:3", "rollout"),
        level="subword",
        training=AdapterSettings(
            adapter="paper", epochs=15, patience=3, batch_size=2, lr=3e-5, arc_dim=512, label_dim=128, workers=None
        ),
    ),
}

#: Condition names of the trained parser and of the model-free baseline.
_OLA, _BASELINE = Control.TRAINED.condition, Control.BASELINE.condition

#: What acceptance asks of the OLA parser (issue #11): ola:1 UAS above the neighbour chain by
#: at least this many points, per family.
MIN_MARGIN = {ENCODER: 20.0, CAUSAL: 15.0}

#: Reported UAS / LAS (%) of the paper's OLA parser (``docs/method.md#reported-parser-numbers``, BERT-base).
PAPER_PARSER: dict[str, tuple[float, float]] = {
    "ola:1": (81.3, 72.2),
    "ola:2": (72.9, 61.1),
    "ola:3": (66.4, 53.2),
    "rollout": (46.2, 30.7),
}


#: Map variants the probes are run on: ``"raw"`` (the word map as extracted) and
#: ``"sinks removed"`` (:func:`olas_utils.sinks.outlier_mask` zeroed). The outlier rule
#: always includes each row's maximum, so the second variant asks about the strongest word
#: *after* the row's top entry (often an attention sink) is gone; both are reported.
PROBE_VARIANTS = ("raw", "sinks removed")


def probe_maps(maps, key: str, *, remove_sinks: bool = True) -> list:
    """Word-level maps of ``key`` prepared for the probes: optionally attention-sink
    outliers removed (which includes each row's maximum), rows renormalised, causal maps
    symmetrised (:func:`olas_utils.sinks.preprocess`).

    Args:
        maps: :class:`~olas_utils.extract.OLAMaps` at word level.
        key: e.g. ``"ola:1"``.
        remove_sinks: zero the outliers first.

    Returns:
        One ``(W, W)`` tensor per sentence.

    Raises:
        ValueError: subword-level maps.
    """
    if maps.level != "word":
        raise ValueError("the probes need word-level maps (OLAMaps.to_words())")
    return [
        preprocess(m[None], causal=maps.is_causal, remove_sinks=remove_sinks, renormalize=True, symmetrize=True)[0]
        for m in maps[key]
    ]


def probe_frame(
    models: Sequence[str], test: TaskData, pool, *, keys: Sequence[str], batch_size: int = 8, progress: bool = True
) -> pd.DataFrame:
    """Training-free probes (:func:`olas_utils.toa.probes.probe_corpus`) per model and key, plus
    the neighbouring-word baseline (:func:`olas_utils.toa.probes.adjacent_baseline`).

    Args:
        models: model names.
        test: the EWT split to probe (``load_task("dependency", "test", ...)``).
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool`.
        keys: maps to probe (a model shallower than an order skips its key).
        batch_size, progress: extraction settings.

    Returns:
        Rows ``model, family, maps, key, head_acc, dependent_acc, either_acc, uuas`` (``maps``:
        one of :data:`PROBE_VARIANTS`); the baseline rows have ``model="baseline: next word"``
        (and ``"previous word"``) and ``maps = key = "-"``.
    """
    from olas_utils.toa.probes import adjacent_baseline, probe_corpus
    from olas_utils.toa.taskmaps import task_maps

    rows = []
    for name in models:
        maps = task_maps(
            pool, name, test, orders=orders_for(name, (1, 2, 3)), batch_size=batch_size, progress=progress
        ).to_words()
        for variant in PROBE_VARIANTS:
            for key in keys_for(name, keys):
                r = probe_corpus(probe_maps(maps, key, remove_sinks=variant == "sinks removed"), test.heads)
                rows.append(
                    {
                        "model": name,
                        "family": family_of(maps.is_causal),
                        "maps": variant,
                        "key": key,
                        **{k: r[k] for k in ("head_acc", "dependent_acc", "either_acc", "uuas")},
                    }
                )
    b = adjacent_baseline(test.heads)
    for side, label in (("next", "next word"), ("prev", "previous word")):
        rows.append(
            {
                "model": f"baseline: {label}",
                "family": "-",
                "maps": "-",
                "key": "-",
                "head_acc": b[f"{side}_head_acc"],
                "dependent_acc": b[f"{side}_dependent_acc"],
                "either_acc": b[f"{side}_either_acc"],
                "uuas": b["uuas"],
            }
        )
    return pd.DataFrame(rows)


def parser_frame(
    models: Sequence[str],
    train: TaskData,
    dev: TaskData,
    test: TaskData,
    pool,
    cfg: SyntaxProfile,
    *,
    seed: int = 0,
    device="cpu",
    checkpoint_dir=None,
    progress: bool = True,
    store=None,
) -> pd.DataFrame:
    """The biaffine OLA parser trained per model and key (``docs/method.md#ola-and-syntax``) beside its controls,
    with early stopping on EWT dev.

    Each key is one adapter with 2 channels (the map raw and sink-removed), trained on
    ``train`` with the epoch chosen on ``dev`` (never on ``test``). Rows per model and key:

    * ``ola`` — trained and tested on the model's maps;
    * ``random-init target`` — that adapter tested on a randomly initialised copy's maps;
    * ``tokenizer-only`` / ``position-only`` — the same adapter trained and tested on
      uniform-attention maps / relative-position channels
      (:mod:`olas_utils.studies.adapters`; at word level they are the same for every model
      and key of a family, so each is trained once per family);

    and one ``baseline`` row (:func:`olas_utils.toa.fit.trivial_baseline`, the neighbour chain).

    Args:
        models: model names.
        train, dev, test: EWT splits (``load_task("dependency", "train" | "dev" | "test", ...)``).
        pool: a :class:`~olas_utils.toa.taskmaps.ModelPool`.
        cfg: a profile of :data:`PROFILES` (its keys, level and training settings;
            ``training.workers``: adapters trained at the same time on a CPU, see
            :func:`olas_utils.toa.parallel.fit_many`); a model shallower than an order skips its key.
        seed: training seed.
        device: where to train.
        checkpoint_dir: resumable checkpoints (default ``<cache>/toa``).
        progress: bars.
        store: a :class:`~olas_utils.studies.adapters.MapStore` to share maps with other
            studies (default: a new one on ``pool``).

    Returns:
        Rows ``model, family, key, condition, uas, las, uas_nopunct, las_nopunct,
        uas_greedy, las_greedy`` (fractions; ``*_greedy``: heads by greedy argmax as the
        released code scores them, ``docs/method.md#released-code``; the others use Chu–Liu/Edmonds trees) and
        ``best_epoch, epochs_run, dev_curve`` (the dev UAS after each epoch).
    """
    from olas_utils.studies.adapters import MapStore, adapter_job, provenance, train_adapters
    from olas_utils.toa.fit import evaluate, score, trivial_baseline

    store = store or MapStore(pool, level=cfg.level, progress=progress)
    plan = {}
    for name in models:  # 1. maps, model-major (each model and its random copy loaded once), and the runs
        for data in (train, dev, test):
            store.maps(name, data)
            store.maps(name, data, Control.TOKENIZER_ONLY)
        store.maps(name, test, Control.RANDOM_INIT_TARGET.maps)
        store.release()
        for key in keys_for(name, cfg.keys):
            for inputs in (Control.TRAINED, Control.TOKENIZER_ONLY, Control.POSITION_ONLY):
                x = {s: store.examples(name, d, [key], inputs=inputs) for s, d in (("train", train), ("dev", dev))}
                plan[name, key, inputs] = adapter_job(
                    (x["train"], train),
                    (x["dev"], dev),
                    cfg.training,
                    seed=seed,
                    device=device,
                    provenance=provenance([name], [key], cfg.level, inputs=inputs),
                    checkpoint_dir=checkpoint_dir,
                    desc=f"parser {name} {key} {inputs.condition}",
                )
    trained = train_adapters(plan, cfg.training, progress=progress)  # 2. every distinct run once, in parallel on a CPU

    rows = []

    def add(name, key, condition, model, info, x_test):
        r = evaluate(model, x_test, test, device=device)
        g = evaluate(model, x_test, test, device=device, tree="greedy")
        rows.append(
            {
                "model": name,
                "family": store.family(name),
                "key": key,
                "condition": condition,
                **r,
                "uas_greedy": g["uas"],
                "las_greedy": g["las"],
                "best_epoch": info["best_epoch"],
                "epochs_run": info["epochs_run"],
                "dev_curve": " ".join(f"{v:.3f}" for v in info["curve"]),
            }
        )

    for (name, key, inputs), (model, info) in trained.items():  # 3. test
        add(name, key, inputs.condition, model, info, store.examples(name, test, [key], inputs=inputs))
        if inputs is Control.TRAINED:
            add(
                name,
                key,
                Control.RANDOM_INIT_TARGET.condition,
                model,
                info,
                store.examples(name, test, [key], control=Control.RANDOM_INIT_TARGET),
            )
    rows.append(
        {
            "model": "baseline: neighbour chain",
            "family": "-",
            "key": "-",
            "condition": _BASELINE,
            **score(test, trivial_baseline(train, test)),
        }
    )
    return pd.DataFrame(rows)


#: Controls of the parser table, in display order (condition names of
#: :class:`~olas_utils.vocabulary.Control`).
PARSER_CONTROLS = tuple(
    c.condition for c in (Control.TOKENIZER_ONLY, Control.POSITION_ONLY, Control.RANDOM_INIT_TARGET, Control.BASELINE)
)


def parser_table(frame: pd.DataFrame, metric: str = "uas") -> pd.DataFrame:
    """Wide view of :func:`parser_frame`: per model and key, ``metric`` (%) of the OLA
    parser and of every control side by side, the strongest control and the margin
    ``ola − strongest`` (positive: OLA beats every control)."""
    base = 100 * frame[frame.condition == _BASELINE][metric].iloc[0]
    d = frame[frame.condition != _BASELINE]
    wide = d.pivot_table(index=["model", "family", "key"], columns="condition", values=metric, sort=False) * 100
    wide[_BASELINE] = base
    controls = [c for c in PARSER_CONTROLS if c in wide]
    out = wide[[_OLA] + controls].copy()
    out["strongest control"] = wide[controls].idxmax(axis=1)
    out["margin"] = wide[_OLA] - wide[controls].max(axis=1)
    epochs = d[d.condition == _OLA].set_index(["model", "family", "key"])[["best_epoch", "epochs_run"]]
    return out.join(epochs).reset_index().round(1)


def uas_figure(frame: pd.DataFrame, metric: str = "uas"):
    """Grouped bars: ``metric`` per (model, key) for the OLA parser and each trained
    control, the model-free baseline as a dashed line.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    base = frame[frame.condition == _BASELINE]
    data = frame[frame.condition != _BASELINE].assign(where=lambda d: d.model + "\n" + d.key)
    piv = data.pivot_table(index="where", columns="condition", values=metric, sort=False)
    piv = piv[[c for c in (_OLA,) + PARSER_CONTROLS if c in piv]]
    fig, ax = plt.subplots(figsize=(1.6 + 0.9 * len(piv), 3.6), layout="constrained")
    (piv * 100).plot.bar(ax=ax, rot=0, width=0.8)
    for _, r in base.iterrows():
        ax.axhline(100 * r[metric], color="k", ls="--", lw=1, label=r["model"])
    ax.set_ylabel(f"{metric.upper()} (%)")
    ax.set_xlabel("")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, ncols=3)
    return fig


def _still_improving(runs: pd.DataFrame) -> str:
    """A line counting the adapters whose best dev epoch was the last one run (still
    improving when training ended: more epochs would likely raise them)."""
    last = runs[runs.best_epoch == runs.epochs_run]
    return (
        f"* Adapters whose best dev epoch was their last (still improving when training ended, so these numbers "
        f"are lower bounds for the recipe): **{len(last)}/{len(runs)}**"
        + (f" (at most {int(runs.epochs_run.max())} epochs)." if len(runs) else ".")
    )


def comparison_markdown(parser: pd.DataFrame, probes: pd.DataFrame, *, sizes: str) -> str:
    """The notebook's closing text, generated from this run's tables: OLA against its
    strongest control per model and key, the acceptance margins over the neighbour chain
    (:data:`MIN_MARGIN`), the order ranking and the paper's BERT-base numbers
    (:data:`PAPER_PARSER`)."""
    table = parser_table(parser)
    base = parser[parser.condition == _BASELINE].iloc[0]
    ola = parser[parser.condition == _OLA]
    lines = [
        f"**This run** ({sizes}; UAS/LAS with punctuation, trees by Chu–Liu/Edmonds; epoch chosen on EWT dev).",
        "",
        "| model | key | OLA UAS | strongest control | its UAS | margin | OLA LAS | greedy UAS (released) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        o = ola[(ola.model == r.model) & (ola.key == r.key)].iloc[0]
        lines.append(
            f"| {r.model} | {r.key} | {r.ola:.1f} | {r['strongest control']} | "
            f"{r.ola - r.margin:.1f} | {r.margin:+.1f} | {100 * o.las:.1f} | {100 * o.uas_greedy:.1f} |"
        )
    beats = (table.margin > 0).sum()
    lines += [
        "",
        f"* OLA beats its strongest control (tokenizer-only, position-only, random-init target, neighbour "
        f"chain) on **{beats}/{len(table)}** (model, key) pairs"
        + (
            "."
            if beats == len(table)
            else "; where it does not, the parser reads no more syntax from OLA than from that control."
        ),
    ]
    for _, r in ola[ola.key == "ola:1"].iterrows():
        need = MIN_MARGIN[r.family]
        gap = 100 * (r.uas - base.uas)
        lines.append(
            f"* {r.model} ({r.family}): ola:1 UAS {100 * r.uas:.1f} = neighbour chain "
            f"{100 * base.uas:.1f} **{gap:+.1f}** points (asked: ≥ {need:.0f}): "
            + ("met." if gap >= need else f"**not met** (dev curve {r.dev_curve}).")
        )
    mean = ola.groupby("key", sort=False)[["uas", "las"]].mean() * 100
    order = [k for k in mean.index if MapKey.parse(k).order is not None]
    ranked = order == sorted(order, key=lambda k: -mean.loc[k, "uas"])
    ro = "rollout" in mean.index and all(mean.loc["rollout", "uas"] <= mean.loc[k, "uas"] for k in order)
    lines += [
        f"* Lower orders carry more syntax than higher orders (paper's finding): "
        f"**{'yes' if ranked else 'no'}** in this run (mean UAS by key: "
        + ", ".join(f"{k} {v:.1f}" for k, v in mean.uas.items())
        + "; paper, BERT-base: "
        + ", ".join(f"{k} {v[0]}" for k, v in PAPER_PARSER.items())
        + ").",
        f"* Rollout below every OLA order: **{'yes' if ro else 'no'}**.",
        _still_improving(ola),
        "* LAS trails UAS by more than in the paper: OLA carries no word identity, and relation labels "
        "depend on it (the neighbour chain's LAS uses each word's most frequent relation).",
    ]
    pb = probes[probes.key == "-"]["uuas"].iloc[0] * 100
    for variant, pv in probes[probes.key != "-"].groupby("maps", sort=False):
        pm = pv.groupby("key", sort=False)["uuas"].mean() * 100
        best = pv.loc[pv.uuas.idxmax()]
        lines.append(
            f"* Training-free MST of the symmetrised word map ({variant}), mean UUAS over models: "
            + ", ".join(f"{k} {v:.1f}" for k, v in pm.items())
            + f"; best {best.model} {best.key} {100 * best.uuas:.1f} (neighbour-chain baseline {pb:.1f})."
        )
    return "\n".join(lines)
