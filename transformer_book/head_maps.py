"""Attention maps of single heads, side by side, readable at the page's width (chapter 5).

:func:`head_maps_figure` draws a few heads' maps (rows: queries, columns: keys) in a grid of panels
at most 8 inches wide, with every label at least 10.5 pt (``concepts._style.SMALL``), so that the
page shows them at about the size of its text. Chapter 5 draws the four heads of its offset task
and single heads of the trained translator with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from .concepts._style import FONT, INK, MAX_WIDTH, SMALL

__all__ = ["HeadMap", "head_maps_figure"]


@dataclass(frozen=True)
class HeadMap:
    """One panel: a title, one head's weights, and the labels of its rows and columns.

    ``rows`` and ``cols`` name the queries and the keys (e.g. tokens); ``None`` numbers them.

    Shape:
        weights: ``(T_q, T_k)``.
    """

    title: str
    weights: Tensor
    rows: Sequence[str] | None = None
    cols: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Tensor) or self.weights.dim() != 2:
            got = getattr(self.weights, "shape", type(self.weights).__name__)
            raise ValueError(f"weights must be a (T_q, T_k) tensor, got {got}")
        for name, labels, size in (("rows", self.rows, 0), ("cols", self.cols, 1)):
            if labels is not None and len(labels) != self.weights.size(size):
                count = self.weights.size(size)
                raise ValueError(f"{name} has {len(labels)} labels but the map has {count} {name}")


def _ticks(ax: Axes, panel: HeadMap, every: int, first_column: bool) -> None:
    """Token labels on every row and column, or every ``every``-th position when there are none."""
    t_q, t_k = panel.weights.shape
    if panel.cols is None:
        ax.set_xticks(range(0, t_k, every))
    else:
        ax.set_xticks(range(t_k), list(panel.cols), rotation=90)
    if panel.rows is None:
        ax.set_yticks(range(0, t_q, every))
    else:
        ax.set_yticks(range(t_q), list(panel.rows))
    if not first_column and panel.rows is None:
        ax.tick_params(labelleft=False)
    ax.tick_params(labelsize=SMALL, length=2, pad=2)


def _largest(ax: Axes, weights: Tensor) -> None:
    """Each row's largest weight printed in its cell, without the leading zero."""
    for r, c in enumerate(weights.argmax(dim=-1).tolist()):
        value = float(weights[r, c])
        text = "1" if value >= 0.995 else f"{value:.2f}"[1:]
        colour = "white" if value > 0.55 else INK
        ax.text(c, r, text, ha="center", va="center", fontsize=SMALL, color=colour)


def head_maps_figure(
    panels: Sequence[HeadMap],
    columns: int = 2,
    panel_width: float = 3.0,
    every: int = 1,
    numbers: bool = False,
) -> Figure:
    """One panel per head, ``columns`` to a row, on one colour scale from 0 to 1 (white to blue).

    Args:
        panels: the heads to draw.
        columns: panels per row.
        panel_width: inches per panel; the figure is ``columns * panel_width`` wide, at most 8.
        every: without labels, a tick at every ``every``-th position.
        numbers: print each row's largest weight in its cell.
    """
    if not panels or not all(isinstance(p, HeadMap) for p in panels):
        raise ValueError("panels must be a non-empty sequence of HeadMap")
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise ValueError(f"columns must be a positive int, got {columns!r}")
    columns = min(columns, len(panels))
    width = columns * panel_width
    if width > MAX_WIDTH:
        raise ValueError(f"columns * panel_width = {width} inches is wider than {MAX_WIDTH}")
    rows = -(-len(panels) // columns)  # ceiling division
    size = (width, rows * panel_width * 1.05)
    fig, axes = plt.subplots(rows, columns, figsize=size, squeeze=False, constrained_layout=True)
    fig.patch.set_facecolor("white")
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.axis("off")
            continue
        panel = panels[i]
        weights = panel.weights.detach().float().cpu()
        ax.imshow(weights.numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
        _ticks(ax, panel, every, first_column=i % columns == 0)
        if numbers:
            _largest(ax, weights)
        ax.set_title(panel.title, fontsize=FONT, color=INK)
        if panel.rows is None and i % columns == 0:
            ax.set_ylabel("query position", fontsize=SMALL)
        if panel.cols is None:
            ax.set_xlabel("key position", fontsize=SMALL)
    return fig
