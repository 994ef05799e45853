"""Heatmaps of OLA maps (matplotlib): the drawing primitives of the studies' figures and
of the explorer widget. Functions return figures; nothing is shown or saved unless asked.

It lives in ``studies`` (not ``ui``) because every study draws with it and a lower layer
never imports a higher one; the widget in ``ui`` reuses it from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

import matplotlib.pyplot as plt
import torch

__all__ = ["heatmap", "grouped_heatmaps", "save_figure"]


def heatmap(ax, matrix: torch.Tensor, labels: Sequence[str] | None = None, *, title: str = "", cmap: str = "viridis", colorbar: bool = False):
    """Draw one ``(T, T)`` map on ``ax`` (query on the y axis, key on the x axis).

    Args:
        ax: a matplotlib Axes.
        matrix: ``(T, T)`` tensor or array.
        labels: T axis labels (words or tokens); None for no labels.
        title: axes title.
        cmap: colour map.
        colorbar: add a colour bar.

    Returns:
        The ``AxesImage``.
    """
    m = matrix.detach().float().cpu().numpy() if isinstance(matrix, torch.Tensor) else matrix
    im = ax.imshow(m, cmap=cmap, interpolation="nearest", aspect="equal")
    if labels is not None:
        n = len(labels)
        fs = max(4, min(8, int(160 / max(n, 1))))
        ax.set_xticks(range(n), labels, rotation=90, fontsize=fs)
        ax.set_yticks(range(n), labels, fontsize=fs)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im


def grouped_heatmaps(
    panels: Sequence[Sequence[tuple[str, torch.Tensor, Sequence[str]]]],
    *,
    row_titles: Sequence[str],
    group_titles: Sequence[tuple[str, int]] = (),
    suptitle: str = "",
    cell_inches: float = 2.6,
) -> matplotlib.figure.Figure:
    """A grid of heatmaps: one row per condition (e.g. with / without sinks), one column per
    model, models grouped under titles (e.g. encoders, causal LMs).

    Args:
        panels: ``panels[r][c] = (title, (T, T) map, labels)``; every row has the same
            number of columns.
        row_titles: one title per row, written left of the row.
        group_titles: ``(title, n_columns)`` per group of consecutive columns.
        suptitle: figure title.
        cell_inches: size of one panel.

    Returns:
        The matplotlib Figure.
    """
    n_rows, n_cols = len(panels), len(panels[0])
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(cell_inches * n_cols + 0.6, cell_inches * n_rows + 1.0), squeeze=False)
    for r, row in enumerate(panels):
        for c, (title, m, labels) in enumerate(row):
            heatmap(axes[r][c], m, labels, title=title if r == 0 else "")
        axes[r][0].set_ylabel(row_titles[r], fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.9 if group_titles else 0.95))
    start = 0
    for title, width in group_titles:
        left = axes[0][start].get_position().x0
        right = axes[0][start + width - 1].get_position().x1
        fig.text((left + right) / 2, 0.93, title, ha="center", va="bottom", fontsize=11, fontweight="bold")
        start += width
    if suptitle:
        fig.suptitle(suptitle, y=0.995, fontsize=11)
    return fig


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Save ``fig`` to ``path`` (folders created; written to a temporary name first, then
    renamed, so a half-written file never appears) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    tmp.replace(path)
    return path
