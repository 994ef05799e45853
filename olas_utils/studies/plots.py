"""Heatmaps of OLA maps (matplotlib): the drawing primitives of the studies' figures and
of the explorer widget. Functions return figures; nothing is shown or saved unless asked.

It lives in ``studies`` (not ``ui``) because every study draws with it and a lower layer
never imports a higher one; the widget in ``ui`` reuses it from here.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = [
    "heatmap",
    "wrap_caption",
    "grouped_heatmaps",
    "row_range",
    "grid_shape",
    "save_figure",
    "tick_positions",
    "short_label",
    "value_range_label",
]

#: At most this many tick labels per axis; longer sentences show every k-th word.
MAX_TICK_LABELS = 40
#: Tick labels longer than this are cut with an ellipsis (the full word stays in the data).
MAX_LABEL_CHARS = 16


def tick_positions(n: int, max_labels: int = MAX_TICK_LABELS) -> list[int]:
    """Which of ``n`` rows/columns get a tick label: all when ``n <= max_labels``, else
    every ``ceil(n / max_labels)``-th, starting at 0 (so at most ``max_labels``).

    Raises:
        ValueError: if ``max_labels < 1`` or ``n < 0``.
    """
    if max_labels < 1 or n < 0:
        raise ValueError(f"need n >= 0 and max_labels >= 1, got n={n}, max_labels={max_labels}")
    step = max(1, math.ceil(n / max_labels))
    return list(range(0, n, step))


def short_label(label: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """``label`` cut to ``max_chars`` characters (the last one an ellipsis) if longer."""
    label = str(label)
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def value_range_label(values, what: str = "weight") -> str:
    """``"<what>: <min> to <max>"`` over the finite entries of ``values`` (3 significant
    digits), the text written on every colour bar; ``"<what>: no finite value"`` if none."""
    a = np.asarray(values, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return f"{what}: no finite value"
    return f"{what}: {a.min():.3g} to {a.max():.3g}"


def heatmap(
    ax,
    matrix,
    labels: Sequence[str] | None = None,
    *,
    title: str = "",
    cmap: str = "viridis",
    colorbar: bool = True,
    value_label: str = "weight",
    max_labels: int = MAX_TICK_LABELS,
    vmin: float | None = None,
    vmax: float | None = None,
):
    """Draw one ``(T, T)`` map on ``ax`` (query on the y axis, key on the x axis), with a
    colour bar stating the map's value range.

    Args:
        ax: a matplotlib Axes.
        matrix: ``(T, T)`` tensor or array.
        labels: T axis labels (words or tokens); None for no labels. With more than
            ``max_labels`` labels only every k-th is written (:func:`tick_positions`), and
            labels longer than :data:`MAX_LABEL_CHARS` are cut (:func:`short_label`).
        title: axes title.
        cmap: colour map.
        colorbar: add a colour bar labelled with the value range
            (:func:`value_range_label`); the bar's ends are the map's minimum and maximum.
        value_label: what the values are (written on the colour bar).
        max_labels: most tick labels per axis.
        vmin, vmax: ends of the colour scale (None: the map's own minimum / maximum);
            :func:`grouped_heatmaps` passes a row's range to put its panels on one scale.

    Returns:
        The ``AxesImage``.

    Raises:
        ValueError: if ``matrix`` is not square 2-D, or ``labels`` has the wrong length.
    """
    m = matrix.detach().float().cpu().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must be square (T, T), got shape {tuple(m.shape)}")
    if labels is not None and len(labels) != m.shape[0]:
        raise ValueError(f"labels has {len(labels)} entries for a {m.shape[0]}x{m.shape[0]} map")
    im = ax.imshow(m, cmap=cmap, interpolation="nearest", aspect="equal", vmin=vmin, vmax=vmax)
    if labels is not None:
        n = len(labels)
        pos = tick_positions(n, max_labels)
        fs = max(5, min(8, int(200 / max(len(pos), 1))))
        shown = [short_label(labels[i]) for i in pos]
        ax.set_xticks(pos, shown, rotation=90, fontsize=fs)
        ax.set_yticks(pos, shown, fontsize=fs)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.ax.tick_params(labelsize=6)
        cb.set_label(value_range_label(m, value_label), fontsize=7)
    return im


def row_range(maps) -> tuple[float, float]:
    """``(min, max)`` over the finite entries of every map in ``maps`` (tensors or arrays of
    any shape): the colour scale a row of panels shares; ``(nan, nan)`` if none is finite."""
    vals = [_as_array(m).ravel() for m in maps]
    a = np.concatenate(vals) if vals else np.zeros(0)
    a = a[np.isfinite(a)]
    return (float(a.min()), float(a.max())) if a.size else (math.nan, math.nan)


def _as_array(m) -> np.ndarray:
    return m.detach().float().cpu().numpy() if isinstance(m, torch.Tensor) else np.asarray(m, dtype=np.float64)


def grid_shape(n_cols: int, max_cols: int | None) -> tuple[int, int]:
    """How a row of ``n_cols`` panels wraps: ``(sub_rows, columns)`` with at most ``max_cols``
    columns and the panels spread evenly (7 panels at most 4 wide: 4 + 3); ``(1, n_cols)``
    when ``max_cols`` is None or not exceeded.

    Raises:
        ValueError: if ``n_cols < 1`` or ``max_cols < 1``.
    """
    if n_cols < 1 or (max_cols is not None and max_cols < 1):
        raise ValueError(f"need n_cols >= 1 and max_cols >= 1, got n_cols={n_cols}, max_cols={max_cols}")
    if max_cols is None or n_cols <= max_cols:
        return 1, n_cols
    sub = math.ceil(n_cols / max_cols)
    return sub, math.ceil(n_cols / sub)


def grouped_heatmaps(
    panels: Sequence[Sequence[tuple[str, torch.Tensor, Sequence[str]]]],
    *,
    row_titles: Sequence[str],
    group_titles: Sequence[tuple[str, int]] = (),
    suptitle: str = "",
    caption: str = "",
    cell_inches: float = 2.6,
    shared_scale: bool = False,
    max_cols: int | None = None,
    value_label: str = "weight",
) -> matplotlib.figure.Figure:
    """A grid of heatmaps: one row per condition (e.g. with / without sinks), one column per
    model, models grouped under titles (e.g. encoders, causal LMs).

    With ``shared_scale`` every panel of a row is drawn on the row's one colour scale (the
    minimum and maximum over all its maps, :func:`row_range`) and the row has one colour bar
    stating that range, so panels can be compared by eye; without it every panel has its
    own colour bar and range (:func:`heatmap`). A row wider than ``max_cols`` panels wraps
    onto sub-rows (:func:`grid_shape`), each panel then titled; y tick labels are written
    once per grid row when its panels share their labels.

    Args:
        panels: ``panels[r][c] = (title, (T_c, T_c) map, labels)``; every row has the same
            number of columns.
        row_titles: one title per row, written left of the row.
        group_titles: ``(title, n_columns)`` per group of consecutive columns (only for a
            row that does not wrap).
        suptitle: figure title.
        caption: text written under the panels (wrapped), e.g. models, order, protocol
            and sizes; it is inside the saved image (:func:`save_figure` crops tightly).
        cell_inches: size of one panel.
        shared_scale: one colour scale and colour bar per row (else one per panel).
        max_cols: most panels side by side (None: no wrapping).
        value_label: what the values are (written on the colour bars).

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: if rows differ in length or ``row_titles`` in number, or
            ``group_titles`` is given for a row that wraps.
    """
    n_rows, n_cols = len(panels), len(panels[0])
    if any(len(row) != n_cols for row in panels) or len(row_titles) != n_rows:
        raise ValueError(f"need {n_rows} rows of {n_cols} panels and one title per row")
    sub, per = grid_shape(n_cols, max_cols)
    if sub > 1 and group_titles:
        raise ValueError(f"group titles need one line of panels, but {n_cols} panels wrap at {max_cols}")
    bar_inches = 1.0 if shared_scale else 0.0
    width = cell_inches * (1.08 if shared_scale else 1.3) * per + 0.6 + bar_inches
    height = (cell_inches + (0.25 if sub > 1 else 0.0)) * n_rows * sub + 1.0
    fig, axes = plt.subplots(n_rows * sub, per, figsize=(width, height), squeeze=False)
    ims: list[list] = []
    for r, row in enumerate(panels):
        lo, hi = row_range(m for _, m, _ in row) if shared_scale else (None, None)
        ims.append([])
        for c, (title, m, labels) in enumerate(row):
            ax = axes[r * sub + c // per][c % per]
            shown = title if (r == 0 or sub > 1) else ""
            ims[r].append(
                heatmap(
                    ax, m, labels, title=shown, colorbar=not shared_scale, value_label=value_label, vmin=lo, vmax=hi
                )
            )
            first = row[(c // per) * per][2]
            if c % per and labels is not None and first is not None and list(labels) == list(first):
                ax.tick_params(labelleft=False)
        for c in range(n_cols, sub * per):  # the last sub-row's empty places
            axes[r * sub + c // per][c % per].axis("off")
        for s in range(sub):
            axes[r * sub + s][0].set_ylabel(row_titles[r], fontsize=9)
    right = 1 - bar_inches / width
    fig.tight_layout(rect=(0, 0, right, 0.9 if group_titles else 0.95))
    if shared_scale:
        for ax in axes.flat:
            ax.apply_aspect()  # square panels sit inside their cells: the bars go beside the panels
        boxes = [[axes[r * sub + c // per][c % per].get_position() for c in range(n_cols)] for r in range(n_rows)]
        x_bar = max(b.x1 for row in boxes for b in row) + 0.15 / width
        for r, row in enumerate(panels):
            y0, y1 = min(b.y0 for b in boxes[r]), max(b.y1 for b in boxes[r])
            cax = fig.add_axes((x_bar, y0, 0.12 / width, y1 - y0))
            cb = fig.colorbar(ims[r][0], cax=cax)
            cb.ax.tick_params(labelsize=7)
            cb.set_label(
                value_range_label(np.concatenate([_as_array(m).ravel() for _, m, _ in row]), value_label), fontsize=8
            )
    start = 0
    for title, width_cols in group_titles:
        left = axes[0][start].get_position().x0
        right_edge = axes[0][start + width_cols - 1].get_position().x1
        fig.text((left + right_edge) / 2, 0.93, title, ha="center", va="bottom", fontsize=11, fontweight="bold")
        start += width_cols
    if suptitle:
        fig.suptitle(suptitle, y=0.995, fontsize=11)
    if caption:
        fig.text(0.01, -0.005, wrap_caption(caption, width), ha="left", va="top", fontsize=8)
    return fig


def wrap_caption(text: str, inches: float) -> str:
    """``text`` wrapped for a figure ``inches`` wide at fontsize 8: about 15 characters an inch,
    never fewer than 60 a line."""
    return textwrap.fill(text, width=max(60, int(inches * 15)))


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Save ``fig`` to ``path`` in the format its suffix names (folders created; written
    atomically, :func:`olas_utils.infra.atomic.write_atomic`, so a half-written file never
    appears) and return the path."""
    from olas_utils.infra.atomic import write_atomic

    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or None
    return write_atomic(path, lambda fh: fig.savefig(fh, format=fmt, dpi=dpi, bbox_inches="tight"), what="figure")
