"""Chapter 6's picture: where the layer normalization sits on the residual path, Post-LN beside
Pre-LN.

Each panel is one encoder layer, drawn from the bottom up: the residual stream (残差流) is the
straight vertical line; each sub-layer (self-attention, then the feed-forward network) branches off
it and adds its output back at a ``+``. In Post-LN (the paper) a LayerNorm sits *on* the stream
after every addition; in Pre-LN the LayerNorm sits on the branch, before the sub-layer, so the
stream carries nothing but additions, and the stack ends with one final LayerNorm.

The order of the boxes is the order in which :class:`~transformer_lib.EncoderLayer` calls its
modules (``norm_first=False`` or ``True``); the final norm is drawn where
:class:`~transformer_lib.Encoder` has one.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_lib.nn.layers import Encoder, LayerSpec

from ._style import FONT, INK, MUTED, SMALL, TITLE, arrow, box, canvas, dashed_frame, plus

__all__ = ["FIGURES", "norm_placement_figure"]

BRANCH_X = 2.6  # the sub-layer branch, right of the stream at x = 0
BOX_W, BOX_H = 2.9, 0.62
NORM_W = 2.0
BLOCK = 3.3  # height of one sub-layer block (branch, box(es), addition)
SUBLAYERS = (("self-attention", "attention"), ("feed-forward", "feedforward"))


def _line(
    ax: Axes, xs: list[float], ys: list[float], width: float = 1.0, colour: str = INK
) -> None:
    ax.plot(xs, ys, color=colour, lw=width, solid_capstyle="butt", zorder=1)


def _block(ax: Axes, x0: float, y: float, label: str, kind: str, norm_first: bool) -> float:
    """One sub-layer with its residual connection and norm, from height ``y``; returns the block's
    top.
    """
    bx = x0 + BRANCH_X
    top = y + BLOCK
    add_y = y + (2.55 if norm_first else 1.75)
    # the branch: off the stream to the right, up through the box(es), back to the addition
    _line(ax, [x0, bx, bx], [y + 0.25, y + 0.25, y + 0.55])
    if norm_first:
        box(ax, bx, y + 0.9, NORM_W, BOX_H, "LayerNorm", "norm")
        arrow(ax, (bx, y + 0.9 + BOX_H / 2), (bx, y + 1.7 - BOX_H / 2))
        box(ax, bx, y + 1.7, BOX_W, BOX_H, label, kind)
        _line(ax, [bx, bx], [y + 1.7 + BOX_H / 2, add_y])
    else:
        arrow(ax, (bx, y + 0.25), (bx, y + 0.95 - BOX_H / 2))
        box(ax, bx, y + 0.95, BOX_W, BOX_H, label, kind)
        _line(ax, [bx, bx], [y + 0.95 + BOX_H / 2, add_y])
    arrow(ax, (bx, add_y), (x0 + 0.26, add_y))
    # the stream: straight up to the addition, then (Post-LN) through the norm
    arrow(ax, (x0, y), (x0, add_y - 0.26), width=2.2)
    plus(ax, x0, add_y, 0.24, FONT + 2)
    if norm_first:
        _line(ax, [x0, x0], [add_y + 0.24, top], width=2.2)
    else:
        norm_y = add_y + 0.85
        arrow(ax, (x0, add_y + 0.24), (x0, norm_y - BOX_H / 2), width=2.2)
        box(ax, x0, norm_y, NORM_W, BOX_H, "LayerNorm", "norm")
        _line(ax, [x0, x0], [norm_y + BOX_H / 2, top], width=2.2)
    return top


def _panel(ax: Axes, x0: float, norm_first: bool) -> None:
    """One arrangement: the input, one layer (two sub-layer blocks), the final norm where the stack
    has one.
    """
    ax.text(x0, -0.2, "x", ha="center", va="top", fontsize=FONT, color=INK, style="italic")
    y = 0.0
    for label, kind in SUBLAYERS:
        y = _block(ax, x0, y, label, kind, norm_first)
    dashed_frame(ax, (x0 - 1.35, 0.05), BRANCH_X + BOX_W / 2 + 1.6, y - 0.05, MUTED, rounding=0.2)
    ax.text(
        x0 + BRANCH_X + BOX_W / 2 + 0.1,
        y - 0.15,
        "N ×",
        ha="right",
        va="top",
        fontsize=FONT,
        color=INK,
        fontweight="bold",
    )
    ax.text(
        x0 + 0.3,
        -0.2,
        "the residual stream (thick line)",
        ha="left",
        va="top",
        fontsize=SMALL,
        color=MUTED,
    )
    # the library's stack
    final = (
        Encoder(LayerSpec(d_model=8, num_heads=2, d_ff=16, norm_first=norm_first), 1).norm
        is not None
    )
    if final:
        arrow(ax, (x0, y), (x0, y + 0.75 - BOX_H / 2), width=2.2)
        box(ax, x0, y + 0.75, 2.6, BOX_H, "final LayerNorm", "norm")
        arrow(ax, (x0, y + 0.75 + BOX_H / 2), (x0, y + 1.6), width=2.2)
    else:
        arrow(ax, (x0, y), (x0, y + 1.6), width=2.2)
    ax.text(x0, y + 1.7, "output", ha="center", va="bottom", fontsize=FONT, color=INK)
    title = "Pre-LN\nx + F(LN(x))" if norm_first else "Post-LN (the paper)\nLN(x + F(x))"
    ax.text(
        x0 + 1.0,
        y + 2.45,
        title,
        ha="center",
        va="bottom",
        fontsize=TITLE,
        color=INK,
        fontweight="bold",
    )


def norm_placement_figure() -> Figure:
    """Post-LN (left) and Pre-LN (right): one encoder layer each, the residual stream as the
    straight line.
    """
    fig, ax = canvas(7.9, 6.2)
    left, right = 1.4, 8.6
    _panel(ax, left, norm_first=False)
    _panel(ax, right, norm_first=True)
    ax.set_xlim(left - 1.5, right + BRANCH_X + BOX_W / 2 + 0.3)
    ax.set_ylim(-0.75, 2 * BLOCK + 3.1)
    fig.tight_layout()
    return fig


FIGURES = {"norm_placement.svg": norm_placement_figure}
