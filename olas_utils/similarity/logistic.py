"""A linear visual classifier: multinomial logistic regression on downsampled OLA images, the
design notebook 02's quick profile uses (chosen on held-out-source accuracy in
``benchmarks/classifier_designs.py``, never on the target's).

Each ``(channel, query, key)`` image is average-pooled to ``(channel, P, P)``, standardised per
image and channel and flattened; scikit-learn's ``LogisticRegression`` (lbfgs, multinomial, L2 of
strength ``1 / C``) is fitted on the sources' features, one class per chunk; ``C`` is chosen on a
held-out source (or an augmented copy), never on the target. Why one BLAS thread per fit, and
what that changes: ``docs/method.md#visual-classifier``.

Importing this module does no work (scikit-learn is imported when a model is fitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from olas_utils.maths.augment import PAPER_CLASSIFIER, augment_batch
from olas_utils.similarity.inputs import as_images, source_images, standardize

__all__ = [
    "LOGISTIC_CS",
    "MAX_LOGISTIC_WORKERS",
    "LogisticResult",
    "logistic_features",
    "logistic_workers",
    "train_logistic",
    "train_logistic_many",
]

#: The regularisation strengths ``C`` tried (the one selected on held-out data).
LOGISTIC_CS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)


def logistic_features(images: torch.Tensor, pool_size: int) -> np.ndarray:
    """``(chunk, channel, query, key)`` images → ``(chunk, channel·P²)`` float64 features:
    average-pooled to ``P × P`` (``P = pool_size``; the image side itself when smaller),
    standardised per image and channel, flattened."""
    x = as_images(images, name="images")
    p = min(int(pool_size), int(x.shape[-1]))
    return standardize(F.adaptive_avg_pool2d(x.float(), p)).flatten(1).numpy().astype(np.float64)


@dataclass
class LogisticResult:
    """A fitted logistic chunk classifier and how it was chosen (the fields
    :func:`olas_utils.studies.crosslm.classifier_frame` reads from a classifier result).

    Attributes:
        model: the fitted ``sklearn.linear_model.LogisticRegression``.
        n_classes, in_channels, image_size: the images it was fitted on.
        pool_size: P, the pooled image side.
        c: the chosen regularisation strength; ``cs``: those tried, in order.
        selection: ``"source:<name>"`` or ``"augmented"``.
        train_models: source models whose images fitted the returned model.
        selection_top1: top-1 on the selection set per ``C`` of ``cs``.
        n_iter: lbfgs iterations of the returned fit; ``max_iter``: its cap (``n_iter >= max_iter``:
            the solver stopped by its cap, not by convergence).
        refit: whether the returned model was refitted on all sources with the chosen ``C``.
        seed: seeds the augmented selection copy (the fit itself is deterministic).
    """

    model: Any = field(repr=False)
    n_classes: int
    in_channels: int
    image_size: tuple[int, int]
    pool_size: int
    c: float
    cs: tuple[float, ...]
    selection: str
    train_models: tuple[str, ...]
    selection_top1: list[float]
    n_iter: int
    max_iter: int
    refit: bool
    seed: int

    @property
    def capped(self) -> bool:
        """Whether lbfgs stopped at ``max_iter`` rather than by convergence."""
        return self.n_iter >= self.max_iter

    @property
    def chosen_index(self) -> int:
        """1-based position of the chosen ``C`` in ``cs``."""
        return self.cs.index(self.c) + 1

    def logits(self, images) -> torch.Tensor:
        """Decision scores ``(chunk, class)`` float32 of ``images`` ``(chunk, channel, query, key)``
        (of the training shape).

        Raises:
            ValueError: images of another channel count or size.
        """
        x = as_images(images, name="images")
        if tuple(x.shape[1:]) != (self.in_channels, *self.image_size):
            raise ValueError(
                f"images of shape {tuple(x.shape[1:])}, the classifier was fitted on "
                f"{(self.in_channels, *self.image_size)}"
            )
        return torch.from_numpy(self.model.decision_function(logistic_features(x, self.pool_size))).float()


def _fit(x: np.ndarray, y: np.ndarray, c: float, max_iter: int):
    import warnings

    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():  # one image per chunk and source: many classes, few samples, by design
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
        model = LogisticRegression(C=c, max_iter=max_iter).fit(x, y)
    if list(model.classes_) != list(range(int(y.max()) + 1)):
        raise RuntimeError("the logistic regression did not see every chunk in training")
    return model


def train_logistic(
    train_images: Mapping[str, Any],
    *,
    select_on: str | None = None,
    cs: Sequence[float] = LOGISTIC_CS,
    pool_size: int = 25,
    max_iter: int = 1000,
    refit: bool = False,
    seed: int = 0,
) -> LogisticResult:
    """Fit the logistic chunk classifier on source models' images, choosing ``C`` without the target.

    Args:
        train_images: source model name → images ``(chunk, channel, query, key)`` (or ``(chunk,
            query, key)``); image i of every model is chunk i (class i).
        select_on: the source held out to choose ``C`` (default: the last, with at least 2 sources);
            with one source, ``C`` is chosen on a fixed augmented copy of it (sink columns and noise
            always applied, seeded by ``seed``, :data:`olas_utils.maths.augment.PAPER_CLASSIFIER`).
        cs: regularisation strengths tried; the best held-out top-1 wins (ties: lower held-out
            log-loss, then the smaller ``C``).
        pool_size: P, the pooled side (25 for 50 × 50 images).
        max_iter: lbfgs iteration cap.
        refit: with a held-out source, refit on all sources with the chosen ``C``.
        seed: seeds the augmented selection copy.

    Returns:
        A :class:`LogisticResult`.

    Raises:
        ValueError: no source, sources of different shapes, fewer than 2 classes, NaN or infinite
            values (:func:`~olas_utils.similarity.inputs.as_images`), an empty ``cs`` or a ``C`` that is not positive, or a ``select_on`` that is not
            a source (or the only one).
    """
    data, (n, ch, h, w) = source_images(train_images)
    cs = tuple(float(c) for c in cs)
    if not cs or any(not c > 0 for c in cs):
        raise ValueError(f"cs must be positive regularisation strengths, got {cs}")
    names = list(data)
    if select_on is None:
        select_on = names[-1] if len(names) >= 2 else "augmented"
    if select_on == "augmented":
        fit_names = names
        aug = replace(PAPER_CLASSIFIER, sink_p=1.0, noise_p=1.0)
        sel = torch.cat(
            [augment_batch(data[k], torch.Generator().manual_seed(seed + i), aug) for i, k in enumerate(names)]
        )
        selection = "augmented"
    else:
        if select_on not in data or len(names) < 2:
            raise ValueError(f"select_on={select_on!r} must be one of at least two sources {names}")
        fit_names = [k for k in names if k != select_on]
        sel = data[select_on]
        selection = f"source:{select_on}"
    x = np.concatenate([logistic_features(data[k], pool_size) for k in fit_names])
    y = np.tile(np.arange(n), len(fit_names))
    xs, ys = logistic_features(sel, pool_size), np.tile(np.arange(n), sel.shape[0] // n)
    best, tops = None, []
    for c in cs:
        model = _fit(x, y, c, max_iter)
        scores = model.decision_function(xs)
        top1 = float((scores.argmax(1) == ys).mean())
        logp = scores - scores.max(1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
        loss = float(-logp[np.arange(len(ys)), ys].mean())
        tops.append(top1)
        if best is None or (top1, -loss, -c) > best[0]:
            best = ((top1, -loss, -c), c, model)
    _, c, model = best
    refitted = bool(refit and selection != "augmented")
    if refitted:
        fit_names = names
        model = _fit(
            np.concatenate([logistic_features(data[k], pool_size) for k in names]),
            np.tile(np.arange(n), len(names)),
            c,
            max_iter,
        )
    return LogisticResult(
        model=model,
        n_classes=n,
        in_channels=ch,
        image_size=(h, w),
        pool_size=min(int(pool_size), int(w)),
        c=c,
        cs=cs,
        selection=selection,
        train_models=tuple(fit_names),
        selection_top1=tops,
        n_iter=int(np.max(model.n_iter_)),
        max_iter=int(max_iter),
        refit=refitted,
        seed=int(seed),
    )


def _one_thread() -> None:
    """A worker's initialiser: one BLAS / OpenMP thread (threadpoolctl) and one torch thread.
    scikit-learn (and with it scipy's BLAS) is imported first: threadpoolctl limits only the
    libraries already loaded."""
    import sklearn.linear_model  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    torch.set_num_threads(1)


def _fit_job(index: int, job: dict) -> LogisticResult:
    try:
        return train_logistic(**job)
    except Exception as e:  # noqa: BLE001 - re-raised in the parent with the job named
        raise RuntimeError(f"logistic job {index} failed in a worker process: {type(e).__name__}: {e}") from None


#: The most worker processes :func:`train_logistic_many` starts by default (each holds about
#: 0.65 GB once torch and scikit-learn are imported).
MAX_LOGISTIC_WORKERS = 8


def logistic_workers(workers: int | None, n_jobs: int) -> int:
    """The worker processes :func:`train_logistic_many` uses for ``n_jobs`` fits: ``workers``, or by
    default :func:`olas_utils.infra.settings.cpu_workers` up to :data:`MAX_LOGISTIC_WORKERS`; never
    more than the jobs (at least 1).

    Raises:
        ValueError: ``workers`` not a positive integer.
    """
    import numbers

    from olas_utils.infra.settings import cpu_workers

    if workers is None:
        workers = min(cpu_workers(), MAX_LOGISTIC_WORKERS)
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return max(1, min(int(workers), int(n_jobs)))


def train_logistic_many(
    jobs: Sequence[Mapping[str, Any]], *, workers: int | None = None, progress: bool = True, desc: str = "logistic fits"
) -> list[LogisticResult]:
    """:func:`train_logistic` for many cells, each fit with one BLAS thread, ``workers`` fits at a time.

    Each result is bit for bit :func:`train_logistic`'s at one BLAS thread, whether a worker or
    this process fitted it (``docs/method.md#visual-classifier``).

    Args:
        jobs: keyword arguments of :func:`train_logistic`, one mapping per fit; ``train_images``
            maps source names to numpy arrays or tensors (tensors are copied to numpy here, so
            that no shared-memory handle per tensor stays open while the jobs wait).
        workers: processes fitting side by side (spawned, one thread each); default
            :func:`logistic_workers`; 1 fits in this process, still with one BLAS thread.
        progress: a progress bar over fits; desc: its label.

    Returns:
        One :class:`LogisticResult` per job, in the jobs' order.

    Raises:
        ValueError: ``workers`` not a positive integer; a job whose ``train_images`` is missing, not
            a mapping or refused by :func:`train_logistic` (named by its index, before any fit).
        RuntimeError: a fit that failed in a worker (its index, the error's type and message), or a
            worker process that died (killed for memory, a signal): the remaining fits are
            cancelled and the workers stopped at once. With ``workers=1`` a failing fit raises
            what :func:`train_logistic` raises.
    """
    from threadpoolctl import threadpool_limits

    from olas_utils.infra.progress import tqdm

    ready = []
    for i, job in enumerate(jobs):  # a bad job fails here, before minutes of fits elsewhere
        job = dict(job)
        imgs = job.get("train_images")
        if not isinstance(imgs, Mapping):
            raise ValueError(
                f"logistic job {i}: train_images must map source model names to images, got {type(imgs).__name__}"
            )
        job["train_images"] = {
            k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in imgs.items()
        }
        try:
            source_images(job["train_images"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"logistic job {i}: {e}") from None
        ready.append(job)
    workers = logistic_workers(workers, len(ready))
    label = f"{desc} ({workers} worker{'s' * (workers > 1)} × 1 thread)"
    out: list[LogisticResult | None] = [None] * len(ready)
    with tqdm(total=len(ready), desc=label, unit="fit", disable=not progress) as bar:
        if workers == 1:
            import sklearn.linear_model  # noqa: F401 - loaded before the limit, which covers loaded libraries only

            with threadpool_limits(1):
                for i, job in enumerate(ready):
                    out[i] = train_logistic(**job)
                    bar.update(1)
        else:
            _run_pool(ready, workers, out, bar)
    return out  # type: ignore[return-value]


def _run_pool(jobs: list[dict], workers: int, out: list, bar) -> None:
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    from olas_utils.infra.pools import spawn_pool

    # an interrupt or a failed fit stops every worker at once: no fit is kept from this call
    with spawn_pool(workers, initializer=_one_thread) as pool:
        futures = {pool.submit(_fit_job, i, job): i for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            try:
                out[futures[fut]] = fut.result()
            except BrokenProcessPool as e:
                left = sorted(i for f, i in futures.items() if not f.done() or f.exception() is not None)
                raise RuntimeError(
                    f"a worker process died while fitting (killed: out of memory, a signal, or a crash in native "
                    f"code); {len(left)} fit(s) not finished, jobs {left[:10]}{' …' if len(left) > 10 else ''}. "
                    "Run again with fewer workers if memory ran out"
                ) from e
            bar.update(1)
