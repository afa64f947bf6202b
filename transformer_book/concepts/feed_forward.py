"""Chapter 7's picture: one feed-forward network, the same two matrices, applied at every position
on its own.

The running example's seven positions (:func:`~transformer_book.example.embed`, ``d_model = 8``)
stand side by side as columns. Each column goes up through the same ``W1, b1`` to ``d_ff = 32``
hidden numbers, through the ReLU, and through the same ``W2, b2`` back to ``d_model`` numbers. The
colour of a cell is its value (blue positive, red negative, as in chapters 1 to 3; white exactly
zero), so the hidden layer shows the zeros that the ReLU makes, and no arrow crosses from one
position to another. The weights are :func:`example_weights`, the ones chapter 7 builds.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle
from torch import Tensor

from ..example import ENGLISH, embed, words
from ._style import COLOURS, FONT, INK, SMALL, TITLE, arrow, canvas

__all__ = ["FIGURES", "example_weights", "feed_forward_figure"]

PITCH = 0.84  # inches between the centres of two positions
CELL_W = 0.34
LEFT = 1.75  # room for the row labels


def example_weights() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``W1, b1, W2, b2`` of a small random FFN (``d_model = 8``, ``d_ff = 32``), drawn right after
    ``torch.manual_seed(0)``.

    Shape:
        ``W1``: ``(d_model, d_ff)``; ``b1``: ``(d_ff,)``; ``W2``: ``(d_ff, d_model)``; ``b2``:
        ``(d_model,)``.
    """
    d_model, d_ff = 8, 32
    torch.manual_seed(0)
    w1 = torch.randn(d_model, d_ff) / d_model**0.5
    b1 = torch.randn(d_ff) * 0.1
    w2 = torch.randn(d_ff, d_model) / d_ff**0.5
    b2 = torch.randn(d_model) * 0.1
    return w1, b1, w2, b2


def _colour_scale(values: Tensor) -> Callable[[float], tuple[float, ...] | str]:
    """Value -> colour: exactly zero is white; otherwise blue for positive and red for negative,
    never pale.

    The sides are those of the ``RdBu`` maps of chapters 1 to 3, so that a vector of the running
    example has the same colours here as there.

    The darkness grows with the size of the value, from a visible tint for the smallest to the full
    colour for the largest absolute value in ``values``.
    """
    top = float(values.abs().max())
    reds, blues = colormaps["Reds"], colormaps["Blues"]

    def colour(v: float) -> tuple[float, ...] | str:
        if v == 0:
            return "#ffffff"
        shade = 0.2 + 0.75 * abs(v) / top
        return blues(shade) if v > 0 else reds(shade)

    return colour


def _column(
    ax: Axes,
    x: float,
    y: float,
    values: Tensor,
    cell_h: float,
    colour: Callable[[float], tuple[float, ...] | str],
) -> None:
    """One vector as a column of cells from height ``y`` up, its first entry at the top; colour =
    value.
    """
    n = len(values)
    for i, v in enumerate(values.tolist()):
        ax.add_patch(
            Rectangle(
                (x - CELL_W / 2, y + (n - 1 - i) * cell_h),
                CELL_W,
                cell_h,
                facecolor=colour(v),
                edgecolor=INK,
                linewidth=0.4,
            )
        )


def _band(ax: Axes, left: float, right: float, y: float, h: float) -> None:
    """The shared weights: one band behind every position's arrow."""
    ax.add_patch(
        FancyBboxPatch(
            (left, y),
            right - left,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=COLOURS["feedforward"],
            edgecolor=INK,
            linewidth=0.8,
            zorder=0,
        )
    )


def feed_forward_figure() -> Figure:
    """The running example through one position-wise FFN: ``d_model -> d_ff -> d_model``, one column
    per position.

    Shape:
        input ``(T, d_model)``, hidden ``(T, d_ff)``, output ``(T, d_model)``, ``T =
        len(words(ENGLISH))``.
    """
    x = embed(ENGLISH)  # (T, d_model)
    w1, b1, w2, b2 = example_weights()
    d_model, d_ff = w1.shape
    hidden = torch.relu(x @ w1 + b1)  # (T, d_ff)
    out = hidden @ w2 + b2  # (T, d_model)
    labels = words(ENGLISH)
    T = len(labels)

    small_h, big_h, band_h, gap = 0.13, 1.44 / d_ff, 0.42, 0.12  # inches
    rows = {"input": 0.45}
    rows["band1"] = rows["input"] + d_model * small_h + gap
    rows["hidden"] = rows["band1"] + band_h + gap
    rows["band2"] = rows["hidden"] + d_ff * big_h + gap
    rows["output"] = rows["band2"] + band_h + gap
    top = rows["output"] + d_model * small_h
    width = LEFT + T * PITCH
    fig, ax = canvas(min(7.9, width + 0.1), top + 0.75)
    centres = [LEFT + (t + 0.5) * PITCH for t in range(T)]
    left, right = centres[0] - PITCH / 2 + 0.04, centres[-1] + PITCH / 2 - 0.04
    _band(ax, left, right, rows["band1"], band_h)
    _band(ax, left, right, rows["band2"], band_h)
    scales = [_colour_scale(v) for v in (x, hidden, out)]  # one scale per row
    for c, word, xt, ht, yt in zip(centres, labels, x, hidden, out, strict=True):
        _column(ax, c, rows["input"], xt, small_h, scales[0])
        _column(ax, c, rows["hidden"], ht, big_h, scales[1])
        _column(ax, c, rows["output"], yt, small_h, scales[2])
        arrow(ax, (c, rows["band1"] - gap + 0.02), (c, rows["hidden"] - 0.02))
        arrow(ax, (c, rows["band2"] - gap + 0.02), (c, rows["output"] - 0.02))
        ax.text(c, rows["input"] - 0.1, word, ha="center", va="top", fontsize=FONT, color=INK)
    row_labels = {
        "input": f"input x_t\nd_model = {d_model}",
        "band1": "x_t W1 + b1,\nthen ReLU",
        "hidden": f"hidden\nd_ff = {d_ff}",
        "band2": "h_t W2 + b2",
        "output": f"output\nd_model = {d_model}",
    }
    heights = {
        "input": d_model * small_h,
        "band1": band_h,
        "hidden": d_ff * big_h,
        "band2": band_h,
        "output": d_model * small_h,
    }
    for key, text in row_labels.items():
        ax.text(
            LEFT - 0.15,
            rows[key] + heights[key] / 2,
            text,
            ha="right",
            va="center",
            fontsize=SMALL,
            color=INK,
        )
    ax.text(
        (left + right) / 2,
        top + 0.2,
        "the same W1, b1, W2, b2 at every position",
        ha="center",
        va="bottom",
        fontsize=TITLE,
        color=INK,
    )
    ax.set_xlim(0, width + 0.1)
    ax.set_ylim(0, top + 0.75)
    fig.subplots_adjust(0, 0, 1, 1)
    return fig


FIGURES = {"feed_forward.svg": feed_forward_figure}
