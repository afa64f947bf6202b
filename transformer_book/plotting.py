"""Matplotlib helpers for the book's figures (a leaf: nothing in the library imports it).

Needs ``matplotlib`` (the ``book`` extra). :func:`use_book_figures` makes a chapter's figures what
the book shows: call it once, in the chapter's imports cell. The other functions draw on axes they
are given, or on new ones, and return what they drew on; the caller ends the cell with
``plt.show()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

__all__ = [
    "BOOK_FIGURES",
    "PAGE_WIDTH",
    "plot_attention",
    "plot_attention_heads",
    "use_book_figures",
]

# The page shows a figure of up to about 7.2 inches at its natural size, and shrinks a wider one to
# fit: with labels of 11 pt, a figure up to 8 inches wide keeps every label above 12.5 px (the body
# text is 16 px), which tests/test_browser.py measures on every page.
PAGE_WIDTH = 7.5  # inches: the width of a figure that fills the page
BOOK_FIGURES = {
    "svg.fonttype": "none",  # text stays text: sharp at any zoom, and measurable in the browser
    "svg.hashsalt": "build-a-transformer",  # fixed ids: the same figure gives the same bytes
    "font.size": 11.0,  # labels, ticks, legends and titles (suptitles 13.2, "large")
    "axes.titlesize": "medium",  # side by side, two panels' titles must fit their own widths
    "figure.facecolor": "white",  # an opaque card, readable in the dark theme as in the light one
    "figure.dpi": 144,  # heatmaps (imshow) are embedded at 2 pixels per point: sharp on any screen
}


def use_book_figures() -> None:
    """Draw figures as the book shows them: SVG with the text kept as text, labels of 11 pt, white.

    Sets ``BOOK_FIGURES`` in matplotlib's ``rcParams``; in Jupyter or on Colab, figures then
    display as SVG, without a date, so a figure drawn again is the same file. The browser test
    measures each label of a stored figure at the width the page shows it.
    """
    plt.rcParams.update(BOOK_FIGURES)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # plain Python: there is no inline display to set
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg", metadata={"Date": None})


def _as_matrix(weights: Tensor | Any, name: str, dims: int) -> Tensor:
    matrix = torch.as_tensor(weights).detach().float().cpu()
    if matrix.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(matrix.shape)}")
    return matrix


def plot_attention(
    weights: Tensor,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    vmax: float | None = 1.0,
    cmap: str = "viridis",
) -> Axes:
    """Draw one attention map: row ``i`` is query ``i``'s weights over the keys (columns).

    Args:
        weights: the map, e.g. ``maps[name][0, head]`` from :func:`~.record_attention`.
        keys, queries: tick labels of the columns and rows (e.g. tokens); ``None``: positions.
        ax: axes to draw on (``None``: a new figure).
        title: axes title.
        vmax: top of the colour scale (1.0 so that maps are comparable; ``None``: the map's max).

    Shape:
        weights: ``(T_q, T_k)``.
    """
    matrix = _as_matrix(weights, "weights", 2)  # (T_q, T_k)
    for label_name, labels, size in (
        ("keys", keys, matrix.size(1)),
        ("queries", queries, matrix.size(0)),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"{label_name} has {len(labels)} labels but the map has {size} of them"
            )
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 3.5))
    ax.imshow(matrix.numpy(), cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    if keys is not None:
        ax.set_xticks(range(len(keys)), list(keys), rotation=90)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are whole numbers
    if queries is not None:
        ax.set_yticks(range(len(queries)), list(queries))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    return ax


def plot_attention_heads(
    weights: Tensor,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int | None = None,
    size: float | None = None,
) -> Figure:
    """One :func:`~.plot_attention` panel per head, in rows of ``ncols``, sharing the colours 0..1.

    By default as many panels share a row as fit ``PAGE_WIDTH`` with their tick labels
    readable (a token label takes about a fifth of an inch), and ``size`` (inches, a panel's width
    and height) fills the row.

    Shape:
        weights: ``(H, T_q, T_k)``, e.g. ``maps[name][0]``.
    """
    maps = _as_matrix(weights, "weights", 3)  # (H, T_q, T_k)
    heads = maps.size(0)
    labelled = max(len(keys or ()), len(queries or ()))
    panel = 0.9 + 0.2 * labelled if labelled else 1.8  # inches a panel needs for its labels
    ncols = ncols or max(1, min(heads, int(PAGE_WIDTH // panel)))
    size = size or min(PAGE_WIDTH / ncols, 3.2)
    nrows = (heads + ncols - 1) // ncols
    figsize = (size * ncols, size * nrows + 0.4)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        plot_attention(maps[head], keys, queries, ax=ax, title=f"head {head}")
        if head % ncols:  # only the first column keeps its query labels
            ax.set_ylabel("")
            ax.tick_params(labelleft=False)
        if head + ncols < heads:  # and only the lowest panel of a column its key labels
            ax.set_xlabel("")
            ax.tick_params(labelbottom=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
