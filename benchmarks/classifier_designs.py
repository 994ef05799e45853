"""Which visual-classifier design transfers best? Chosen on the HELD-OUT SOURCE, never the target.

Notebook 02's classifier (a ResNet-18 trained to tell which text chunk an OLA image comes
from, on the source models of a family, tested on an unseen target model) barely beats
chance in the quick profile. This study compares designs under one protocol and picks one
from the held-out *source* accuracy alone.

Protocol (leave one model out, within each family of the ImageSet): every model of a family
is the target once; of the other models (the sources) the last one, in the family's
extraction order, is held out for selection (as ``train_classifier``'s default); the rest
are the *fit sources*. Every design sees the same fit sources, the held-out source only for
its selection (epoch, ``C``) and the target only to be scored afterwards.

Designs (``--designs``)

``resnet18``
    :func:`olas_utils.similarity.classifier.train_classifier` with its defaults (ResNet-18,
    ImageNet stem, SGD 0.007 / 0.9 / 5e-4, batch 20, the paper's augmentation), early
    stopping on the held-out source after ``--patience`` epochs without improvement, not
    before ``--min-epochs``, at most ``--epochs``.
``small-cnn``
    :class:`SmallCNN` (4 conv blocks, 0.24 M weights + the head), AdamW with a one-cycle
    schedule over ``--epochs``, the same augmentation and the same selection rule (best
    held-out top-1, ties: lower held-out loss, then the earlier epoch; patience, min epochs).
``logistic``
    multinomial logistic regression (scikit-learn, lbfgs) on images average-pooled to
    ``--logistic-size`` and standardised per image; ``C`` chosen from ``--logistic-c`` on
    the held-out source (ties: lower log-loss, then the smaller ``C``). Deterministic: one run.
``nn-ssim``, ``nn-pearson``
    training-free multi-source nearest neighbour: image i's predicted chunk is the argmax
    over chunks j of the mean over fit sources of sim(image i, that source's image j)
    (:func:`olas_utils.similarity.ssim_matrix`, torchmetrics' SSIM; or
    :func:`olas_utils.similarity.pearson_matrix`). Its held-out-source accuracy is the
    held-out source's images classified this way against the fit sources.

Every prediction is scored with :func:`olas_utils.similarity.evaluation.class_ranks` (a hit
when the true chunk scores highest; ties: the first index wins, as ``argmax``).

Reported per (design, family, key, target): held-out-source top-1 with a 95 % bootstrap
interval (:func:`olas_utils.stats.uncertainty.interval` over the (seed, image) outcomes: images and
seeds resampled), epochs run / chosen epoch (or ``C``) per seed and how many runs the cap
stopped while still at their best, and, apart, the target's top-1 — not used for any choice.
Then the design with the best mean held-out-source accuracy per family and key (mean over
targets and seeds, interval over targets, seeds and images) and its paired margin over the
runner-up (:func:`olas_utils.stats.uncertainty.margin`), and the chance level 1/n_chunks.

Images: notebook 02's cache (:func:`olas_utils.studies.crosslm.extract_images` called as the
notebook does with the quick profile's settings: the default zoo, its orders, baselines and
batch size, the CoNLL-2003 corpus of the profile's 128 chunks, seed 0). ``--chunks`` below
the profile's size uses the first chunks of those images (a smaller corpus would be another
cache); above it, or with a cache that is not complete, the script stops unless
``--allow-extract`` (which runs the models).

    python benchmarks/classifier_designs.py [--keys ola:1 ...] [--designs ...] [--seeds 0 1 2]
        [--epochs 40] [--patience 5] [--min-epochs 10] [--chunks 128] [--protocol paper]
        [--models ...] [--threads 1] [--out results/benchmarks/classifier_designs.csv]

``--out X.csv`` writes the table's rows; ``X_items.csv`` beside it the per-image outcomes
(rank of the true chunk, per design, target, seed and image, held-out source and target).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from common import machine_line, quiet, set_threads  # benchmarks/common.py; puts the repository on sys.path
from torch import nn
from tqdm.auto import tqdm

from olas_utils.maths.augment import PAPER_CLASSIFIER, Augmentation, augment_batch
from olas_utils.similarity import pearson_matrix, ssim_matrix
from olas_utils.similarity.evaluation import accuracy_and_loss, batched_logits, class_ranks, predict_ranks
from olas_utils.similarity.inputs import as_images, standardize
from olas_utils.similarity.logistic import logistic_features
from olas_utils.stats import uncertainty
from olas_utils.studies import crosslm
from olas_utils.vocabulary import FAMILIES, Control

DESIGNS = ("resnet18", "small-cnn", "logistic", "nn-ssim", "nn-pearson")
TRAINED = ("resnet18", "small-cnn")  # trained once per seed
KEYS = ("ola:1", "ola:2", "ola:3", "rollout", "layer:0", "layer:-1")
CORPUS, CORPUS_SEED = "conll2003", 0  # notebook 02's defaults (corpus_source, seed)


# --------------------------------------------------------------------------------------
# the small CNN
# --------------------------------------------------------------------------------------


class SmallCNN(nn.Module):
    """A CPU-sized chunk classifier: 4 blocks of ``Conv3x3 → BatchNorm → ReLU → MaxPool2``
    (32, 64, 128, 128 channels), global average pooling, dropout, a linear head.

    Shapes: ``(B, C, S, S)`` → ``(B, n_classes)``; a 50 × 50 image is 25, 12, 6, 3 pixels a
    side after the blocks (28 M multiply-adds per image, a quarter of the ResNet-18 with
    the ImageNet stem's 120 M), 0.24 M weights plus the head's ``129 · n_classes``.
    """

    def __init__(self, n_classes: int, in_channels: int = 1, widths=(32, 64, 128, 128), dropout: float = 0.3):
        super().__init__()
        layers, c = [], in_channels
        for w in widths:
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
            layers.append(nn.MaxPool2d(2))
            c = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(c, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, S, S)`` standardised images → ``(B, n_classes)`` logits."""
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1))


def _batches(n: int, batch_size: int, g: torch.Generator) -> list[torch.Tensor]:
    """A shuffled split of ``range(n)``; a trailing batch of one image joins the previous one (BatchNorm)."""
    parts = list(torch.randperm(n, generator=g).split(batch_size))
    if len(parts) > 1 and parts[-1].numel() == 1:
        last = parts.pop()
        parts[-1] = torch.cat([parts[-1], last])
    return parts


@dataclass
class Fit:
    """A trained design's outcome for one seed: ranks of the true chunk on the held-out
    source and on the target, plus what the selection did."""

    heldout_ranks: np.ndarray
    target_ranks: np.ndarray
    epochs_run: int | None = None
    chosen: str = "-"
    capped: bool | None = None
    curve: list[float] = field(default_factory=list)
    seconds: float = 0.0


def fit_small_cnn(
    x: torch.Tensor,
    y: torch.Tensor,
    heldout: torch.Tensor,
    target: torch.Tensor,
    *,
    epochs: int,
    patience: int,
    min_epochs: int,
    seed: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    augmentation: Augmentation,
    device: torch.device,
) -> Fit:
    """Train :class:`SmallCNN` on ``x`` ``(N, C, S, S)`` / ``y`` ``(N,)`` with AdamW and a
    one-cycle schedule spanning ``epochs``; after each epoch score ``heldout`` ``(n, C, S, S)``
    (image i = chunk i), keep the best epoch's weights (top-1, then lower loss, then earlier)
    and stop once ``patience`` epochs have not improved on it, not before ``min_epochs``.
    ``target`` is scored once, with the kept weights."""
    n_classes = heldout.shape[0]
    s_shuffle, s_aug = (int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = SmallCNN(n_classes, x.shape[1]).to(device)
    g_shuffle, g_aug = torch.Generator().manual_seed(s_shuffle), torch.Generator().manual_seed(s_aug)
    steps = len(_batches(x.shape[0], batch_size, torch.Generator().manual_seed(0)))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps)
    labels = torch.arange(n_classes)
    best_key, best_epoch, best_state, curve = None, 0, None, []
    epoch = 0
    for epoch in range(1, epochs + 1):
        net.train()
        for idx in _batches(x.shape[0], batch_size, g_shuffle):
            xb = standardize(augment_batch(x[idx], g_aug, augmentation)).to(device)
            loss = F.cross_entropy(net(xb), y[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        t1, _, ls = accuracy_and_loss(batched_logits(net, heldout, device), labels)
        curve.append(t1)
        if best_key is None or (t1, -ls) > best_key:
            best_key, best_epoch = (t1, -ls), epoch
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        if epoch >= min_epochs and epoch - best_epoch >= patience:
            break
    net.load_state_dict(best_state)
    return Fit(
        heldout_ranks=class_ranks(batched_logits(net, heldout, device), labels).numpy(),
        target_ranks=class_ranks(batched_logits(net, target, device), labels).numpy(),
        epochs_run=epoch,
        chosen=str(best_epoch),
        capped=bool(epoch == epochs and best_epoch == epoch),
        curve=curve,
    )


def fit_resnet(fit: dict, held_name: str, heldout, target, *, epochs, patience, min_epochs, seed, device) -> Fit:
    """``train_classifier`` (its defaults) on ``fit`` + the held-out source, selecting on it."""
    from olas_utils.similarity.classifier import train_classifier

    res = train_classifier(
        {**fit, held_name: heldout},
        select_on=held_name,
        epochs=epochs,
        patience=patience,
        min_epochs=min_epochs,
        seed=seed,
        device=device,
        progress=False,
    )
    run = len(res.train_loss)
    return Fit(
        heldout_ranks=predict_ranks(res, heldout, device=device),
        target_ranks=predict_ranks(res, target, device=device),
        epochs_run=run,
        chosen=str(res.chosen_epoch),
        capped=bool(run == epochs and res.chosen_epoch == run),
        curve=list(res.selection_top1),
    )


# --------------------------------------------------------------------------------------
# logistic regression and nearest neighbour
# --------------------------------------------------------------------------------------


def fit_logistic(x, y, heldout, target, *, size: int, cs, max_iter: int, threads: int) -> Fit:
    """Multinomial logistic regression per ``C`` of ``cs``; keep the ``C`` with the best
    held-out top-1 (ties: lower held-out log-loss, then the smaller ``C``)."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    xf, hf, tf = (logistic_features(a, size) for a in (x, heldout, target))
    labels = torch.arange(heldout.shape[0])
    best = None
    with threadpool_limits(threads):
        for c in sorted(cs):
            clf = LogisticRegression(C=c, max_iter=max_iter).fit(xf, y.numpy())
            if list(clf.classes_) != list(range(heldout.shape[0])):
                raise RuntimeError("logistic regression did not see every chunk in training")
            lh = torch.from_numpy(clf.decision_function(hf)).float()
            t1, _, ls = accuracy_and_loss(lh, labels)
            if best is None or (t1, -ls) > best[0]:
                best = ((t1, -ls), c, clf, lh)
    _, c, clf, lh = best
    n_iter = int(np.max(clf.n_iter_))
    return Fit(
        heldout_ranks=class_ranks(lh, labels).numpy(),
        target_ranks=class_ranks(torch.from_numpy(clf.decision_function(tf)).float(), labels).numpy(),
        epochs_run=n_iter,
        chosen=f"C={c:g}",
        capped=bool(n_iter >= max_iter),
    )


class PairSims:
    """Similarity matrices of model pairs of one family and key, each computed once:
    ``sim(a, b)[i, j]`` between image i of ``a`` and image j of ``b`` (``(n, n)`` float64)."""

    def __init__(self, images: dict[str, np.ndarray], metric: str):
        self.images, self.metric, self._cache = images, metric, {}

    def __call__(self, a: str, b: str) -> torch.Tensor:
        if (b, a) in self._cache:
            return self._cache[b, a].t()
        if (a, b) not in self._cache:
            qa, kb = self.images[a], self.images[b]
            f = ssim_matrix if self.metric == "ssim" else pearson_matrix
            self._cache[a, b] = f(qa, kb).double().cpu()
        return self._cache[a, b]


def nn_ranks(sims: PairSims, query: str, fit_sources: list[str]) -> np.ndarray:
    """Rank of each ``query`` image's true chunk when chunks are scored by the mean over
    ``fit_sources`` of their similarity to it (``(n,)`` int64; NaN similarities count as −∞)."""
    score = torch.stack([sims(query, s) for s in fit_sources]).mean(0)
    return class_ranks(score, torch.arange(score.shape[0])).numpy()


# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------


def load_images(args) -> tuple[crosslm.ImageSet, int]:
    """Notebook 02's ImageSet for the quick profile's settings (``--models`` and
    ``--protocol`` aside), read from the cache; returns it and the corpus size extracted."""
    import gc

    from olas_utils.data.corpus import build_chunks
    from olas_utils.infra import settings
    from olas_utils.similarity.imagecache import cache_complete
    from olas_utils.studies.depth import orders_for
    from olas_utils.zoo import DEFAULT_MODELS, load_model

    cfg = crosslm.PROFILES["quick"]
    n_extract = max(args.chunks, cfg.n_chunks)
    chunks = build_chunks(CORPUS, n_chunks=n_extract, seed=CORPUS_SEED)
    models = list(args.models or cfg.models or DEFAULT_MODELS)
    missing = []
    t0 = time.perf_counter()
    for m in tqdm(models, desc="checking the image caches", unit="model"):  # so that a miss never runs a model unasked
        lm = load_model(m, device="cpu")
        kw = dict(orders=orders_for(m, cfg.orders, lm.num_layers), baselines=cfg.baselines, batch_size=cfg.batch_size)
        if not cache_complete(lm, chunks, protocols=[args.protocol], seed=CORPUS_SEED, **kw):
            missing.append(m)
        del lm
        gc.collect()
    if missing and not args.allow_extract:
        raise SystemExit(
            f"no complete {args.protocol!r} cache of {n_extract} chunks for {missing} under "
            f"{settings.cache_dir() / 'ola'}: run notebook 02 (quick profile) first, or pass --allow-extract "
            "to run the models here"
        )
    images = crosslm.extract_images(
        models,
        chunks,
        orders=list(cfg.orders),
        baselines=list(cfg.baselines),
        protocols=[args.protocol],
        controls=(),
        batch_size=cfg.batch_size,
        seed=CORPUS_SEED,
        device="cpu",
        progress=bool(missing),
    )
    print(f"images of {len(models)} models read in {time.perf_counter() - t0:.0f} s ({n_extract} chunks cached)")
    return images, n_extract


# --------------------------------------------------------------------------------------
# the study
# --------------------------------------------------------------------------------------


def run_family(images, family: str, key: str, args, n: int, bar) -> tuple[list[dict], list[dict]]:
    """All designs and targets of one family and key: table rows and per-image items."""
    fam = images.with_key(key, images.family_models(family))
    raw = images.images(Control.TRAINED, args.protocol, key, fam)
    imgs = {m: as_images(np.asarray(raw[m])[:n]) for m in fam}
    sims = {metric: PairSims({m: imgs[m][:, 0].numpy() for m in fam}, metric) for metric in ("ssim", "pearson")}
    dev = torch.device(args.device)
    rows, items = [], []
    for target in fam:
        sources = [m for m in fam if m != target]
        held, fit_sources = sources[-1], sources[:-1]
        x = torch.cat([imgs[m] for m in fit_sources])
        y = torch.arange(n).repeat(len(fit_sources))
        for design in args.designs:
            fits: dict[int | None, Fit] = {}
            for seed in args.seeds if design in TRAINED else [None]:
                bar.set_postfix_str(f"{family} {key} target {target}: {design}" + ("" if seed is None else f" s{seed}"))
                t0 = time.perf_counter()
                if design == "resnet18":
                    f = fit_resnet(
                        {m: imgs[m] for m in fit_sources},
                        held,
                        imgs[held],
                        imgs[target],
                        epochs=args.epochs,
                        patience=args.patience,
                        min_epochs=args.min_epochs,
                        seed=seed,
                        device=dev,
                    )
                elif design == "small-cnn":
                    f = fit_small_cnn(
                        x,
                        y,
                        imgs[held],
                        imgs[target],
                        epochs=args.epochs,
                        patience=args.patience,
                        min_epochs=args.min_epochs,
                        seed=seed,
                        lr=args.cnn_lr,
                        weight_decay=args.cnn_weight_decay,
                        batch_size=args.cnn_batch_size,
                        augmentation=PAPER_CLASSIFIER,
                        device=dev,
                    )
                elif design == "logistic":
                    f = fit_logistic(
                        x,
                        y,
                        imgs[held],
                        imgs[target],
                        size=args.logistic_size,
                        cs=args.logistic_c,
                        max_iter=args.logistic_max_iter,
                        threads=args.threads,
                    )
                else:
                    s = sims[design.split("-", 1)[1]]
                    f = Fit(heldout_ranks=nn_ranks(s, held, fit_sources), target_ranks=nn_ranks(s, target, fit_sources))
                f.seconds = time.perf_counter() - t0
                fits[seed] = f
                bar.update(1)
                for which, ranks in (("heldout", f.heldout_ranks), ("target", f.target_ranks)):
                    for chunk, r in enumerate(ranks.tolist()):
                        items.append(
                            {
                                "design": design,
                                "family": family,
                                "key": key,
                                "target": target,
                                "seed": -1 if seed is None else seed,
                                "set": which,
                                "model": held if which == "heldout" else target,
                                "chunk": chunk,
                                "rank": r,
                            }
                        )
            hits = np.stack([f.heldout_ranks < 1 for f in fits.values()]).astype(float)  # (seed, image)
            ci = uncertainty.interval(hits)
            t_hits = np.stack([f.target_ranks < 1 for f in fits.values()]).astype(float)
            ran = [f.epochs_run for f in fits.values()]
            trained_epochs = [f.epochs_run for f in fits.values() if design in TRAINED]
            rows.append(
                {
                    "design": design,
                    "family": family,
                    "key": key,
                    "protocol": args.protocol,
                    "target": target,
                    "heldout_source": held,
                    "fit_sources": "+".join(fit_sources),
                    "n": n,
                    "chance": 1.0 / n,
                    "seeds": ";".join("-" if s is None else str(s) for s in fits),
                    "heldout_top1": ci.estimate,
                    "heldout_low": ci.low,
                    "heldout_high": ci.high,
                    "heldout_top1_per_seed": ";".join(f"{v:.4f}" for v in hits.mean(1)),
                    "max_epochs": args.epochs
                    if design in TRAINED
                    else (args.logistic_max_iter if design == "logistic" else None),
                    "epochs_run": ";".join("-" if r is None else str(r) for r in ran),
                    "chosen": ";".join(f.chosen for f in fits.values()),
                    "capped": sum(bool(f.capped) for f in fits.values()) if ran[0] is not None else None,
                    "runs": len(fits),
                    "target_top1": float(t_hits.mean()),
                    "target_top1_per_seed": ";".join(f"{v:.4f}" for v in t_hits.mean(1)),
                    "seconds": sum(f.seconds for f in fits.values()),
                    "epoch_image_seconds": (
                        sum(f.seconds for f in fits.values()) / (sum(trained_epochs) * (x.shape[0] + n))
                        if trained_epochs
                        else None
                    ),
                    "curves": " | ".join(";".join(f"{v:.3f}" for v in f.curve) for f in fits.values() if f.curve),
                }
            )
    return rows, items


def _cell(r: dict) -> str:
    return f"{100 * r['heldout_top1']:.1f} [{100 * r['heldout_low']:.1f}, {100 * r['heldout_high']:.1f}]"


def print_family(df: pd.DataFrame, items: pd.DataFrame, family: str, key: str, n_seeds: int) -> dict | None:
    """The table of one family and key, and its choice (returned as a dict)."""
    d = df[(df.family == family) & (df.key == key)]
    if d.empty:
        return None
    n = int(d.n.iloc[0])
    print(f"\n## {family}, {key} ({n} chunks, chance {100 / n:.2f} %; top-1 in %)")
    head = (
        f"{'design':<11} {'target':<21} {'held-out source':<21} {'held-out top-1 [95% CI]':>24} "
        f"{'epochs run':>12} {'chosen':>12} {'capped':>6}   {'target top-1 (not used for the choice)':>38}"
    )
    print(head)
    for _, r in d.iterrows():
        capped = "-" if r["capped"] is None or pd.isna(r["capped"]) else f"{int(r['capped'])}/{r['runs']}"
        print(
            f"{r['design']:<11} {r['target']:<21} {r['heldout_source']:<21} {_cell(r):>24} "
            f"{r['epochs_run']:>12} {r['chosen']:>12} {capped:>6}   {100 * r['target_top1']:>38.1f}"
        )
    print(
        "(epochs run, chosen: per seed; logistic: lbfgs iterations and the chosen C. capped: runs the cap stopped "
        "while at their best (logistic: lbfgs reached max_iter), a lower bound)"
    )
    # per design: mean over targets (and seeds) of the held-out accuracy, from the items
    it = items[(items.family == family) & (items.key == key) & (items.set == "heldout")]
    cells = {}
    for design in dict.fromkeys(d.design):
        e = it[it.design == design]
        targets = list(dict.fromkeys(e.target))
        arr = []
        for t in targets:
            et = e[e.target == t]
            seeds = sorted(set(et.seed))
            a = np.stack([et[et.seed == s].sort_values("chunk")["rank"].to_numpy() < 1 for s in seeds])
            arr.append(np.repeat(a, n_seeds, axis=0) if a.shape[0] == 1 else a)  # a deterministic design: tiled
        cells[design] = np.stack(arr).astype(float)  # (target, seed, image)
    summary = {k: uncertainty.interval(v) for k, v in cells.items()}
    ranked = sorted(summary, key=lambda k: -summary[k].estimate)
    tgt = d.groupby("design", sort=False).target_top1.mean()
    print("\nmean over targets and seeds (interval over targets, seeds and images):")
    for k in ranked:
        print(
            f"  {k:<11} held-out source {summary[k].format(100, 1)}   "
            f"target (not used for the choice) {100 * tgt[k]:.1f}"
        )
    best = ranked[0]
    line = f"choice for {family}, {key}: {best} (best mean held-out-source top-1, {summary[best].format(100, 1)} %)"
    out = {"family": family, "key": key, "choice": best, "heldout": summary[best].estimate}
    if len(ranked) > 1:
        m = uncertainty.margin(cells[best], cells[ranked[1]])
        line += f"; margin over {ranked[1]}: {m.format(100, 1)} points, p = {m.p_value:.3g}"
        out["margin_over"] = ranked[1]
        out["margin_low"] = m.low
    print(line + f"; chance {100 / n:.2f} %")
    return out


def main() -> None:
    cfg = crosslm.PROFILES["quick"]
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--keys", nargs="+", default=["ola:1"], choices=KEYS, help="map keys, one channel, each separately")
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=DESIGNS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="training seeds of resnet18 and small-cnn")
    ap.add_argument("--epochs", type=int, default=40, help="epoch cap of the trained designs")
    ap.add_argument("--patience", type=int, default=5, help="epochs without held-out improvement before stopping")
    ap.add_argument(
        "--min-epochs", type=int, default=None, help="never stop before this many epochs [None: min(10, --epochs)]"
    )
    ap.add_argument("--chunks", type=int, default=cfg.n_chunks, help="images per model (the first of the cache's)")
    ap.add_argument("--protocol", default=cfg.classifier.protocol, choices=("released", "paper", "word"))
    ap.add_argument("--models", nargs="+", default=None, help="a subset of the default zoo (families from the cache)")
    ap.add_argument("--cnn-lr", type=float, default=3e-3, help="small-cnn: AdamW peak learning rate (one-cycle)")
    ap.add_argument("--cnn-weight-decay", type=float, default=0.05)
    ap.add_argument("--cnn-batch-size", type=int, default=32)
    ap.add_argument("--logistic-size", type=int, default=25, help="logistic: images pooled to this size")
    ap.add_argument("--logistic-c", nargs="+", type=float, default=[0.01, 0.1, 1.0, 10.0])
    ap.add_argument("--logistic-max-iter", type=int, default=1000)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch (and BLAS) threads; 0: torch's default")
    ap.add_argument("--allow-extract", action="store_true", help="run the models on a cache miss")
    ap.add_argument("--out", type=Path, default=None, help="CSV of the table's rows (and <stem>_items.csv)")
    args = ap.parse_args()
    if len(set(args.seeds)) != len(args.seeds):
        ap.error("--seeds must differ")
    if args.min_epochs is None:
        args.min_epochs = min(10, args.epochs)
    if not 1 <= args.min_epochs <= args.epochs:
        ap.error("--min-epochs must be in 1..--epochs")
    quiet()
    threads = set_threads(args.threads)
    args.threads = threads
    print(machine_line())
    images, n_cached = load_images(args)
    if args.chunks > n_cached or args.chunks < 6:
        raise SystemExit(f"--chunks must be in 6..{n_cached}")
    missing = [k for k in args.keys if k not in images.keys]
    if missing:
        raise SystemExit(f"keys {missing} are not in the image cache ({images.keys})")
    print(
        f"sizes: {args.chunks} chunks (of {n_cached} cached), protocol {args.protocol}, keys {args.keys}, "
        f"families {dict((f, images.family_models(f)) for f in FAMILIES)}; designs {args.designs}; "
        f"seeds {args.seeds} (trained designs), epochs <= {args.epochs}, patience {args.patience}, "
        f"min epochs {args.min_epochs}; {threads} thread(s); intervals: {uncertainty.CONFIDENCE:.0%} percentile "
        f"bootstrap, {uncertainty.N_RESAMPLES} resamples"
    )
    plan = []
    for key in args.keys:
        for family in FAMILIES:
            fam = images.with_key(key, images.family_models(family))
            if len(fam) < 3:
                print(f"skip {family}, {key}: {len(fam)} model(s), need a target, a held-out source and a fit source")
                continue
            plan.append((family, key, len(fam)))
    per_target = sum(len(args.seeds) if d in TRAINED else 1 for d in args.designs)
    total = sum(k * per_target for _, _, k in plan)
    rows, items = [], []
    t0 = time.perf_counter()
    with tqdm(total=total, desc="designs x targets x seeds", unit="fit") as bar:
        for family, key, _ in plan:
            r, i = run_family(images, family, key, args, args.chunks, bar)
            rows += r
            items += i
    df, it = pd.DataFrame(rows), pd.DataFrame(items)
    choices = [c for f, k, _ in plan if (c := print_family(df, it, f, k, len(args.seeds))) is not None]
    print("\n## choice (from the held-out source only; the target column was not used)")
    for c in choices:
        extra = (
            f", ahead of {c['margin_over']} ({'interval above 0' if c['margin_low'] > 0 else 'not separated'})"
            if "margin_over" in c
            else ""
        )
        print(f"  {c['family']:<8} {c['key']:<9} {c['choice']}{extra}")
    print(f"chance: 1/{args.chunks} = {100 / args.chunks:.2f} %")
    print(
        "\ntimes (s): " + ", ".join(f"{d} {s:.1f}" for d, s in df.groupby("design", sort=False).seconds.sum().items())
    )
    for d in TRAINED:
        e = df[df.design == d].epoch_image_seconds.dropna()
        if len(e):
            print(f"  {d}: {1e3 * e.mean():.3f} ms per image and epoch (training + held-out evaluation)")
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        items_path = args.out.with_name(args.out.stem + "_items.csv")
        it.to_csv(items_path, index=False)
        print(f"wrote {args.out} ({len(df)} rows) and {items_path} ({len(it)} rows)")


if __name__ == "__main__":
    main()
