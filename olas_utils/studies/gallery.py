"""The OLA gallery (notebook 01): word-level OLA heatmaps of the same real sentences across
models, per order, with and without attention sinks.

The notebook only calls :func:`gallery_sentences`, :func:`extract_gallery` and
:func:`gallery_figures`; profiles (sizes) live in :data:`PROFILES`.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import torch

from olas_utils.extract import OLAMaps, extract_ola
from olas_utils.maths.sinks import outlier_mask, remove_outliers, renormalize_rows
from olas_utils.studies.depth import orders_for
from olas_utils.studies.plots import grouped_heatmaps, save_figure
from olas_utils.studies.profiles import GalleryProfile
from olas_utils.vocabulary import MapKey, family_of

__all__ = [
    "PROFILES",
    "GALLERY_SENT_IDS",
    "gallery_sentences",
    "extract_gallery",
    "gallery_figures",
    "gallery_caption",
    "FAMILY_SUFFIX",
    "FAMILY_TITLE",
    "without_sinks",
]

#: Notebook 01 sizes per profile. ``models=None`` means the default zoo (a model shallower
#: than an order is drawn without it, see :mod:`olas_utils.studies.depth`).
PROFILES: dict[str, GalleryProfile] = {
    "smoke": GalleryProfile(models=("minilm-l6", "smollm2-135m"), n_sentences=1, orders=(1, 2)),
    "quick": GalleryProfile(models=None, n_sentences=4, orders=(1, 2, 3)),
    "paper": GalleryProfile(models=None, n_sentences=4, orders=(1, 2, 3)),
}


#: The gallery's default sentences: UD English-EWT dev ``sent_id``s of four short English
#: sentences of different shapes (a clause with a participle, a long noun phrase subject, a
#: prepositional chain, a copula with a proper-name object).
GALLERY_SENT_IDS: tuple[str, ...] = (
    "weblog-juancole.com_juancole_20040114085100_ENG_20040114_085100-0005",
    "weblog-blogspot.com_thelameduck_20041119192207_ENG_20041119_192207-0001",
    "weblog-blogspot.com_alaindewitt_20060827093500_ENG_20060827_093500-0001",
    "weblog-typepad.com_ripples_20050410122300_ENG_20050410_122300-0005",
)


def gallery_sentences(
    n: int = 4, *, sent_ids: Sequence[str] = GALLERY_SENT_IDS, split: str = "dev", data_dir=None
) -> list[list[str]]:
    """Words of the first ``n`` of ``sent_ids`` from UD English-EWT ``split`` (real text).

    Args:
        n: how many sentences.
        sent_ids: EWT ``sent_id`` values, in the order wanted.
        split: ``"train"``, ``"dev"`` or ``"test"``.
        data_dir: data folder (see :func:`olas_utils.infra.settings.data_dir`).

    Returns:
        ``n`` lists of words.

    Raises:
        FileNotFoundError: if the EWT data is missing (see :mod:`olas_utils.data`).
        ValueError: if ``n`` exceeds ``len(sent_ids)`` or a sentence id is not in the split.
    """
    from olas_utils.data import load_ud_ewt

    if n > len(sent_ids):
        raise ValueError(f"asked for {n} sentences but only {len(sent_ids)} sentence ids were given")
    ds = load_ud_ewt(split, data_dir=data_dir)
    by_id = dict(zip(ds["sent_id"], ds["words"]))
    missing = [s for s in sent_ids[:n] if s not in by_id]
    if missing:
        raise ValueError(f"sentence id(s) {missing} are not in EWT {split}")
    return [list(by_id[s]) for s in sent_ids[:n]]


@dataclass
class GalleryModel:
    """Word-level maps of one model, with its display name and causality."""

    name: str
    is_causal: bool
    maps: OLAMaps


def extract_gallery(
    models: Sequence[str],
    sentences: Sequence[Sequence[str]],
    orders: Sequence[int],
    *,
    device=None,
    progress: bool = True,
) -> list[GalleryModel]:
    """Word-level OLA of ``sentences`` for each model (loaded one at a time and released).

    Args:
        models: zoo names / folders / Hugging Face ids.
        sentences: lists of words.
        orders: OLA orders; a model with fewer layers than an order gets the orders it
            has (:func:`olas_utils.studies.depth.orders_for`).
        device: where to run (None: CUDA if available).
        progress: progress bars.

    Returns:
        One :class:`GalleryModel` per model, encoders first, then causal models (the paper's
        two groups), each group in the given order; maps ``(W_i, W_i)`` float32.

    Raises:
        ValueError, TypeError: from :func:`olas_utils.extract.extract_ola` (bad sentences,
            orders out of range, a sentence longer than a model's maximum).
        UnknownModelError, FileNotFoundError: from :func:`olas_utils.zoo.load_model`.
    """
    from olas_utils.zoo import load_model

    out = []
    for name in models:
        lm = load_model(name, device=device)
        mine = orders_for(name, orders, lm.num_layers)
        maps = extract_ola(
            lm.model,
            lm.tokenizer,
            sentences,
            orders=mine,
            rollout=False,
            layers=(),
            level="word",
            progress=progress,
            model_name=name,
        )
        out.append(GalleryModel(name, lm.is_causal, maps))
        del lm
        gc.collect()
    return sorted(out, key=lambda g: g.is_causal)


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def without_sinks(m: torch.Tensor, *, causal: bool) -> torch.Tensor:
    """A ``(T, T)`` map with its attention-sink outliers zeroed and rows renormalised.

    Args:
        m: ``(T, T)`` map of one sentence.
        causal: outliers are searched on the lower triangle (the map is not symmetrised).

    Returns:
        A new ``(T, T)`` tensor; rows with any mass left sum to 1.
    """
    return renormalize_rows(remove_outliers(m, outlier_mask(m, causal=causal)))


#: File-name suffix of each family's gallery figure (``ola_gallery_s{i}_order{k}_<suffix>.png``).
FAMILY_SUFFIX: dict[bool, str] = {False: "encoders", True: "causal"}
#: Title of each family's group of panels.
FAMILY_TITLE: dict[bool, str] = {False: "Encoders (bidirectional)", True: "Causal LMs"}


def gallery_caption(gallery: Sequence[GalleryModel], i: int, k: int, *, shared_scale: bool = True) -> str:
    """The caption under a gallery figure: models (layers, encoder or causal), order,
    protocol (word pooling, sink removal), sizes (sentence ``i`` of how many, words) and
    colour scale (one per row, or one per panel).

    Raises:
        IndexError: if sentence ``i`` was not extracted.
    """
    words = gallery[0].maps.words[i]
    models = ", ".join(f"{g.name} ({g.maps.num_layers} layers, {family_of(g.is_causal)})" for g in gallery)
    order = (
        "the mean of the layers' head-averaged attention"
        if k == 1
        else f"the mean over all products of {k} distinct layers' head-averaged attention"
    )
    scale = (
        "the panels of a row share one colour scale (range on the row's bar), so models compare by eye"
        if shared_scale
        else "each panel has its own colour scale (range on its bar)"
    )
    return (
        f"Models: {models}. Order {k}: {order}. Protocol: word level, neutral pooling (each entry is the "
        f"attention divided by what uniform attention would give the same word pair, so 1 = uniform and "
        f"tokenisation alone leaves no trace; special tokens left out); bottom row: attention-sink outliers "
        f"(entries above row mean + 3 sd, and each row's maximum) zeroed and rows renormalised. "
        f"Sizes: sentence {i + 1} of {len(gallery[0].maps)}, {len(words)} words, so each map is "
        f"{len(words)}x{len(words)}; {scale}."
    )


def gallery_figures(
    gallery: Sequence[GalleryModel],
    orders: Sequence[int],
    out_dir: str | Path,
    *,
    close: bool = True,
    by_family: bool = True,
    shared_scale: bool = True,
    max_cols: int | None = 4,
    dpi: int = 110,
) -> list[Path]:
    """The gallery's figures, one per sentence and order (and family): top row with sinks,
    bottom row without, one panel per model.

    By default one figure per family, ``out_dir/ola_gallery_s{i}_order{k}_encoders.png`` and
    ``..._causal.png`` (:data:`FAMILY_SUFFIX`), at most ``max_cols`` panels side by side
    (the zoo's 7 encoders: 4 + 3) and one colour scale per row, so a figure stays under
    1,600 px wide at 110 dpi and its models compare by eye. ``by_family=False`` draws every
    model in one figure, ``out_dir/ola_gallery_s{i}_order{k}.png``, grouped into encoders and
    causal LMs (no wrapping, so wide for a full zoo).

    Args:
        gallery: from :func:`extract_gallery` (same sentences for every model).
        orders: orders to draw (each extracted).
        out_dir: folder for the PNG files (created).
        close: close each figure after saving (frees memory in long runs).
        by_family: one figure per family (else one for all models).
        shared_scale: one colour scale per row (else one per panel,
            :func:`olas_utils.studies.plots.grouped_heatmaps`).
        max_cols: most panels side by side in a family's figure (None: one line).
        dpi: resolution of the saved PNGs.

    Returns:
        The written paths, sentence-major, then order, then family (encoders first).

    Raises:
        KeyError: if an order was extracted for no model (models shallower than an order
            are left out of its figures).
        OSError: if a file cannot be written.
    """
    out_dir = Path(out_dir)
    paths = []
    n_sent = len(gallery[0].maps)
    for i in range(n_sent):
        for k in orders:
            key = str(MapKey.ola(k))
            have = [g for g in gallery if key in g.maps.keys()]  # a model shallower than k has no order k
            if not have:
                raise KeyError(f"order {k} was not extracted for any model")
            title = f"Order-{k} OLA, word level — sentence {i + 1}: " + _short(" ".join(gallery[0].maps.words[i]))
            if by_family:
                parts = [
                    (f"_{FAMILY_SUFFIX[c]}", [g for g in have if g.is_causal == c], [], f"{FAMILY_TITLE[c]}: ")
                    for c in (False, True)
                ]
            else:
                groups = [(FAMILY_TITLE[c], sum(g.is_causal == c for g in have)) for c in (False, True)]
                parts = [("", have, [(t, n) for t, n in groups if n], "")]
            for suffix, models, groups, prefix in parts:
                if not models:
                    continue
                rows = [[], []]
                for g in models:
                    m = g.maps[key][i]
                    words = g.maps.words[i]
                    rows[0].append((g.name, m, words))
                    rows[1].append((g.name, without_sinks(m, causal=g.is_causal), words))
                fig = grouped_heatmaps(
                    rows,
                    row_titles=["with sinks", "sinks removed"],
                    group_titles=groups,
                    suptitle=prefix + title,
                    caption=gallery_caption(models, i, k, shared_scale=shared_scale),
                    shared_scale=shared_scale,
                    max_cols=max_cols if by_family else None,
                )
                paths.append(save_figure(fig, out_dir / f"ola_gallery_s{i + 1}_order{k}{suffix}.png", dpi=dpi))
                if close:
                    plt.close(fig)
    return paths
