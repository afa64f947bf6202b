"""Matplotlib helpers for the book's figures (a leaf: nothing in the library imports it).

Needs ``matplotlib`` (the ``book`` extra). :func:`use_book_figures` makes a chapter's figures what
the book shows: call it once, in the chapter's imports cell. :func:`plot_attention_heads` draws
the maps of a layer's heads (chapter 10) and returns the figure; the caller ends the cell with
``plt.show()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

__all__ = [
    "BOOK_FIGURES",
    "PAGE_WIDTH",
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


def _plot_attention(
    ax: Axes,
    matrix: Tensor,
    keys: Sequence[str] | None,
    queries: Sequence[str] | None,
    title: str,
) -> None:
    """One head's map on ``ax``: row ``i`` is query ``i``'s weights over the keys (columns), on the
    colours 0..1; without labels, the ticks are positions.
    """
    ax.imshow(matrix.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
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
    ax.set_title(title)


def plot_attention_heads(
    weights: Tensor,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """One attention map per head, in rows, sharing the colours 0..1: row ``i`` of a map is query
    ``i``'s weights over the keys (columns).

    ``keys`` and ``queries`` label the columns and rows (e.g. tokens); ``None``: positions. As
    many panels share a row as fit ``PAGE_WIDTH`` with their tick labels readable (a token label
    takes about a fifth of an inch), and square panels of at most 3.2 inches fill the row.

    Shape:
        weights: ``(H, T_q, T_k)``, e.g. ``maps[name][0]`` from :func:`~.record_attention`.
    """
    maps = torch.as_tensor(weights).detach().float().cpu()  # (H, T_q, T_k)
    if maps.dim() != 3:
        raise ValueError(f"weights must have 3 dimensions, got shape {tuple(maps.shape)}")
    heads, t_q, t_k = maps.shape
    for name, labels, count in (("keys", keys, t_k), ("queries", queries, t_q)):
        if labels is not None and len(labels) != count:
            raise ValueError(f"{name} has {len(labels)} labels but the map has {count} of them")
    labelled = max(len(keys or ()), len(queries or ()))
    panel = 0.9 + 0.2 * labelled if labelled else 1.8  # inches a panel needs for its labels
    ncols = max(1, min(heads, int(PAGE_WIDTH // panel)))
    size = min(PAGE_WIDTH / ncols, 3.2)  # inches: a panel's width and height
    nrows = (heads + ncols - 1) // ncols
    figsize = (size * ncols, size * nrows + 0.4)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        _plot_attention(ax, maps[head], keys, queries, f"head {head}")
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
