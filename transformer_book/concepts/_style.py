"""The look shared by the concept pictures: colours, sizes and a few drawing helpers.

Sizes are chosen for the page: a figure is at most 8 inches wide, so that the book shows it at about
its natural size, and no label is smaller than ``SMALL`` points (about the body text's size on the
page). Every figure sits on an opaque white card, readable in the light and dark themes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

INK = "#1a1a1a"
MUTED = "#666666"
HIGHLIGHT = "#b5401f"  # what a figure points at: a traced position, a path, a first step
# One colour per kind of thing, the same in every chapter and in diagrams.py's architecture.
COLOURS = {
    "attention": "#f9d3a5",
    "feedforward": "#bcdcf3",
    "norm": "#f3efb0",
    "add": "#e6e6e6",
    "embedding": "#f4c5d1",
    "output": "#d8caf0",
    "token": "#dff0d8",
    "mask": "#cfcfcf",
}
MAX_WIDTH = 8.0  # inches
FONT = 12.0  # points: labels
SMALL = 10.5  # points: the smallest text in any figure
TITLE = 13.0


def canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A white figure with one axes without ticks, in data units equal in x and y."""
    if width > MAX_WIDTH:
        raise ValueError(f"width={width} inches is wider than a page's figure ({MAX_WIDTH} inches)")
    fig, ax = plt.subplots(figsize=(width, height))
    fig.patch.set_facecolor("white")
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    label: str = "",
    kind: str = "add",
    size: float = FONT,
    **text,
) -> None:
    """A rounded box centred at ``(x, y)``, filled with ``COLOURS[kind]``, with a centred label."""
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0.02,rounding_size=0.1",
        facecolor=COLOURS[kind],
        edgecolor=INK,
        linewidth=0.9,
    )
    ax.add_patch(patch)
    if label:
        ax.text(x, y, label, ha="center", va="center", fontsize=size, color=INK, **text)


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    colour: str = INK,
    width: float = 1.0,
) -> None:
    """An arrow from ``start`` to ``end``."""
    ax.annotate(
        "", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width}
    )


def dashed_frame(
    ax: Axes,
    corner: tuple[float, float],
    width: float,
    height: float,
    colour: str,
    fill: str = "none",
    pad: float = 0.02,
    rounding: float = 0.15,
) -> None:
    """A dashed rounded frame from its lower-left ``corner``: a repeated block, or a group."""
    frame = FancyBboxPatch(
        corner,
        width,
        height,
        boxstyle=f"round,pad={pad},rounding_size={rounding}",
        facecolor=fill,
        edgecolor=colour,
        linewidth=1.0,
        linestyle="--",
    )
    ax.add_patch(frame)


def plus(ax: Axes, x: float, y: float, radius: float, size: float) -> None:
    """A residual connection's addition: a circled ``+`` on the stream, its sign ``size`` pt."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor=INK, linewidth=1.1, zorder=3))
    ax.text(x, y - 0.01, "+", ha="center", va="center", fontsize=size, color=INK, zorder=4)
