"""Matplotlib helpers for the book's figures (a leaf: nothing in the library imports it).

Needs ``matplotlib`` (the ``plots`` extra). Each function draws on axes it is given, or on new
ones, and returns what it drew on; the caller ends the cell with ``plt.show()``.
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

__all__ = ["plot_attention", "plot_attention_heads"]


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
        ax.set_xticks(range(len(keys)), list(keys), rotation=90, fontsize=8)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are whole numbers
    if queries is not None:
        ax.set_yticks(range(len(queries)), list(queries), fontsize=8)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def plot_attention_heads(
    weights: Tensor,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int | None = None,
    size: float = 2.4,
) -> Figure:
    """One :func:`~.plot_attention` panel per head, side by side, with a shared colour scale 0..1.

    Shape:
        weights: ``(H, T_q, T_k)``, e.g. ``maps[name][0]``.
    """
    maps = _as_matrix(weights, "weights", 3)  # (H, T_q, T_k)
    heads = maps.size(0)
    ncols = ncols or heads
    nrows = (heads + ncols - 1) // ncols
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(size * ncols, size * nrows + 0.4), squeeze=False
    )
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        plot_attention(maps[head], keys, queries, ax=ax, title=f"head {head}")
        if head % ncols:  # only the first column keeps its query labels
            ax.set_ylabel("")
            ax.tick_params(labelleft=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
