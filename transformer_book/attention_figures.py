"""The pictures that chapters 3, 4, 5 and 11 draw in their cells, from the tensors the cell just
computed.

Two kinds, both readable at the page's width (at most ``PAGE_WIDTH``, 7.5 inches, wide, no text
under 10.5 pt):

* :func:`bar_panels`: one row per word, one panel of horizontal bars per quantity, each bar with
  its number (a softmax built from ``exp``, the weights and gradients with and without the scale);
* :func:`maps_figure`: attention maps (all but chapter 10's, which
  :func:`~transformer_book.plotting.plot_attention_heads` draws), as grids of one row per query
  and one column per key, side by side or a few to a row (one per head): the weights written in
  the cells where they fit (or each row's largest), masked pairs grey, one row framed, and the
  word each row learns to predict on its right (the causal mask's next-word pairs).

The concept figures that open the chapters (:mod:`~transformer_book.concepts`) share their look.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from .concepts._style import COLOURS, FONT, INK, SMALL
from .plotting import PAGE_WIDTH

__all__ = ["Panel", "bar_panels", "maps_figure"]

ROW = 0.34  # inches per word in bar_panels
NUMBERED_CELL = 0.42  # inches per cell of a map whose weights are written in it ("0.61" at 10.5 pt)
PLAIN_CELL = 0.22  # the smallest cell of a map without numbers: a label's height
LABELS = 0.8  # inches left of a map for its row labels


def _vector(values: Tensor | Sequence[float], name: str, size: int) -> Tensor:
    vector = torch.as_tensor(values).detach().float().cpu()
    if vector.shape != (size,):
        raise ValueError(
            f"{name} must have shape ({size},), one value per label; got {tuple(vector.shape)}"
        )
    return vector


def _number(fmt: str, value: float) -> str:
    """``fmt.format(value)``, without the minus sign of a value that rounds to zero ("-0.000")."""
    text = fmt.format(value)
    digits = text.lstrip("-").replace(",", "").replace("0", "").replace(".", "")
    return text.lstrip("-") if text.startswith("-") and not digits else text


def _bars(ax: Axes, vector: Tensor, fmt: str, limits: tuple[float, float]) -> None:
    """One panel's bars, each with its value written beside it, on the x range ``limits``."""
    low, high = limits
    span = (high - low) or 1.0
    ax.barh(range(len(vector)), vector.numpy(), color=COLOURS["attention"], edgecolor=INK, lw=0.6)
    for i, value in enumerate(vector.tolist()):
        right = value >= 0
        x = value + (0.03 if right else -0.03) * span
        side = "left" if right else "right"
        ax.text(x, i, _number(fmt, value), ha=side, va="center", fontsize=SMALL, color=INK)
    # room for the numbers beside the longest bars
    ax.set_xlim(low - (0.55 * span if low < 0 else 0.02 * span), high + 0.6 * span)
    ax.axvline(0.0, color=INK, linewidth=0.8)
    ax.set_xticks([])
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


def bar_panels(
    labels: Sequence[str],
    panels: Sequence[tuple[str, Tensor | Sequence[float], str]],
    highlight: str | None = None,
    share: Sequence[Sequence[int]] = (),
) -> Figure:
    """Side-by-side panels of horizontal bars, one row per label, each bar with its value written.

    Args:
        labels: the rows, top to bottom (e.g. the words of a sentence).
        panels: ``(title, values, fmt)`` per panel; ``fmt`` formats a value (``"{:.3f}"``).
        highlight: a label whose row gets a coloured band across every panel.
        share: groups of panel indices drawn on one scale, so that their bars compare (each other
            panel gets its own scale).

    Shape:
        each panel's values: ``(len(labels),)``.
    """
    if not panels:
        raise ValueError("panels must hold at least one (title, values, fmt)")
    if highlight is not None and highlight not in labels:
        raise ValueError(f"highlight={highlight!r} is not one of the labels {list(labels)}")
    grouped = [i for group in share for i in group]
    if any(not 0 <= i < len(panels) for i in grouped) or len(set(grouped)) != len(grouped):
        raise ValueError(
            f"share must name each of the {len(panels)} panels at most once, got {share}"
        )
    vectors = [_vector(v, f"the values of panel {t!r}", len(labels)) for t, v, _ in panels]
    limits = [(min(0.0, float(v.min())), max(0.0, float(v.max()))) for v in vectors]
    for group in share:
        common = (min(limits[i][0] for i in group), max(limits[i][1] for i in group))
        for i in group:
            limits[i] = common
    size = (PAGE_WIDTH, ROW * len(labels) + 0.9)
    fig, axes = plt.subplots(1, len(panels), sharey=True, figsize=size, squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, (title, _, fmt), vector, span in zip(axes[0], panels, vectors, limits, strict=True):
        _bars(ax, vector, fmt, span)
        ax.set_title(title, fontsize=FONT, color=INK)
        if highlight is not None:
            row = list(labels).index(highlight)
            ax.axhspan(row - 0.5, row + 0.5, color=COLOURS["token"], zorder=0)
    axes[0][0].set_yticks(range(len(labels)), list(labels), fontsize=FONT)
    axes[0][0].invert_yaxis()  # the first word on top, as in a printed table
    fig.tight_layout()
    return fig


class Panel(NamedTuple):
    """One map of :func:`maps_figure`: ``weights[i, j]``, the weight of ``rows[i]`` on ``cols[j]``.

    ``rows`` and ``cols`` name the queries and the keys (e.g. tokens); ``None`` numbers them by
    position. ``mask`` (``True`` = may attend) greys the forbidden pairs; ``None``: none are.
    """

    title: str
    weights: Tensor
    rows: Sequence[str] | None = None
    cols: Sequence[str] | None = None
    mask: Tensor | None = None


def _check_panel(panel: Panel) -> Tensor:
    weights = torch.as_tensor(panel.weights).detach().float().cpu()
    if weights.dim() != 2:
        raise ValueError(
            f"panel {panel.title!r}: weights must be a (T_q, T_k) grid, got shape "
            f"{tuple(weights.shape)}"
        )
    for name, labels, size in (("rows", panel.rows, 0), ("cols", panel.cols, 1)):
        if labels is not None and len(labels) != weights.size(size):
            raise ValueError(
                f"panel {panel.title!r}: weights have shape {tuple(weights.shape)}, but "
                f"{len(labels)} labels for its {name}"
            )
    if panel.mask is not None:
        shape = tuple(weights.shape)
        if torch.broadcast_shapes(panel.mask.shape, shape) != shape:
            got = tuple(panel.mask.shape)
            raise ValueError(
                f"panel {panel.title!r}: a mask of shape {got} does not broadcast to {shape}"
            )
    return weights


def _short(value: float, high: float) -> str:
    """A weight with two decimals, "0.61"; a score, which can be large, with one, "16.9"."""
    return f"{value:.1f}" if high > 1.0 else f"{value:.2f}"


def _write(ax: Axes, i: int, j: int, text: str, dark: bool) -> None:
    colour = "white" if dark else INK
    ax.text(j, i, text, ha="center", va="center", fontsize=SMALL, color=colour)


def _ticks(ax: Axes, panel: Panel, weights: Tensor, every: int) -> None:
    """The words on both axes, or every ``every``-th position on an axis without them."""
    t_q, t_k = weights.shape
    if panel.cols is None:
        ax.set_xticks(range(0, t_k, every))
        ax.set_xlabel("key position", fontsize=SMALL)
    else:
        ax.set_xticks(range(t_k), list(panel.cols), rotation=90)
    if panel.rows is None:
        ax.set_yticks(range(0, t_q, every))
        ax.set_ylabel("query position", fontsize=SMALL)
    else:
        ax.set_yticks(range(t_q), list(panel.rows))
    ax.tick_params(labelsize=SMALL, length=0)


def _draw_map(
    ax: Axes, panel: Panel, weights: Tensor, numbers: str | None, framed: int | None, every: int
) -> None:
    """One grid: blue as dark as the weight, grey where masked; ``numbers="all"`` writes every
    allowed weight, ``"largest"`` each row's largest.
    """
    allowed = torch.ones_like(weights, dtype=torch.bool)
    if panel.mask is not None:
        allowed = panel.mask.to(torch.bool).cpu().expand(weights.shape)
    low, high = 0.0, 1.0  # weights; scores get their own range
    if weights.min() < 0.0 or weights.max() > 1.0:
        low, high = float(weights.min()), float(weights.max())
    shown = weights.masked_fill(~allowed, float("nan")).numpy()
    cmap = plt.get_cmap("Blues").with_extremes(bad=COLOURS["mask"])
    ax.imshow(shown, cmap=cmap, vmin=float(low), vmax=float(high), aspect="equal")
    span = (high - low) or 1.0
    if numbers == "all":
        for i, row in enumerate(weights.tolist()):
            for j, value in enumerate(row):
                if allowed[i, j]:
                    _write(ax, i, j, _short(value, high), (value - low) / span > 0.55)
    elif numbers == "largest":
        for i, j in enumerate(weights.masked_fill(~allowed, -torch.inf).argmax(-1).tolist()):
            value = float(weights[i, j])
            # ".61" and "1" fit the small cells that leave no room for every weight
            text = "1" if value >= 0.995 else _short(value, high).removeprefix("0")
            _write(ax, i, j, text, (value - low) / span > 0.55)
    if framed is not None:
        frame = Rectangle(
            (-0.5, framed - 0.5), weights.size(1), 1.0, fill=False, edgecolor=INK, lw=2.2
        )
        ax.add_patch(frame)
    _ticks(ax, panel, weights, every)
    ax.set_title(panel.title, fontsize=FONT, color=INK)


def maps_figure(
    panels: Sequence[Panel],
    highlight: str | None = None,
    predicts: Sequence[str] | None = None,
    columns: int | None = None,
    largest: bool = False,
    every: int = 1,
) -> Figure:
    """Attention maps as grids of query rows and key columns, side by side, ``columns`` to a row.

    The cells are as large as the page's width allows; where a cell is large enough each weight is
    written in it, otherwise ``largest=True`` writes only each row's largest.

    Args:
        panels: the maps, left to right and then top to bottom.
        highlight: a row label whose row is framed in every panel that has it.
        predicts: for the last panel, the word each row learns to predict, written to its right.
        columns: panels per row; ``None``: all in one row.
        largest: where the cells are too small for every weight, write each row's largest.
        every: in a panel without labels, a tick at every ``every``-th position.

    Shape:
        each panel's weights: ``(T_q, T_k)``, its labels of those lengths; its mask broadcasts to
        that.
    """
    if not panels:
        raise ValueError("panels must hold at least one Panel")
    per_row = len(panels) if columns is None else columns
    if isinstance(per_row, bool) or not isinstance(per_row, int) or per_row < 1:
        raise ValueError(f"columns must be a positive int or None, got {columns!r}")
    per_row = min(per_row, len(panels))
    grids = [_check_panel(panel) for panel in panels]
    if predicts is not None and len(predicts) != grids[-1].size(0):
        raise ValueError(
            f"predicts has {len(predicts)} words, the last panel {grids[-1].size(0)} rows"
        )
    lines = [grids[i : i + per_row] for i in range(0, len(grids), per_row)]
    one_line = len(lines) == 1
    # One row of maps keeps each map's own width; a grid gives every map the widest's.
    ratios = [g.size(1) for g in grids] if one_line else [max(g.size(1) for g in grids)] * per_row
    labelled = all(p.rows is not None and p.cols is not None for p in panels)
    extra = 1.1 if predicts is not None else 0.0
    cell = min(NUMBERED_CELL, (PAGE_WIDTH - 0.2 - extra - LABELS * per_row) / sum(ratios))
    if labelled and cell < PLAIN_CELL:
        raise ValueError(
            f"{sum(ratios)} columns in {per_row} panels a row do not fit in {PAGE_WIDTH} inches"
        )
    numbers = "all" if cell >= NUMBERED_CELL - 1e-9 else ("largest" if largest else None)
    margin = 1.6 if labelled else 1.0  # inches for a map's title and the labels under it
    height = max(g.size(0) for g in grids) * cell + margin
    size = (sum(ratios) * cell + LABELS * per_row + extra + 0.2, height * len(lines))
    fig, axes = plt.subplots(
        len(lines), per_row, figsize=size, squeeze=False, gridspec_kw={"width_ratios": ratios}
    )
    fig.patch.set_facecolor("white")
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.remove()  # the last row's empty places
            continue
        panel = panels[i]
        framed = (
            list(panel.rows).index(highlight) if panel.rows and highlight in panel.rows else None
        )
        _draw_map(ax, panel, grids[i], numbers, framed, every)
    if predicts is not None:
        ax = axes.flat[len(panels) - 1]
        for i, word in enumerate(predicts):
            x = grids[-1].size(1) - 0.3  # just right of the last column
            ax.text(x, i, f"\u2192 {word}", ha="left", va="center", fontsize=SMALL, color=INK)
    fig.tight_layout()
    return fig
