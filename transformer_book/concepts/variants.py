"""Chapter 15's picture: one layer of the model, and the place where each variant switch acts.

The layer is drawn from the bottom up as :class:`~transformer_lib.EncoderLayer` runs it with
``norm_first=True`` (Pre-LN, the copy and translation models' layout): the embeddings with their
positions, then two sub-layers (self-attention, feed-forward), each behind a norm on its branch and
added back to the residual stream (残差流), then the stack's final norm. A label beside each box
names the :class:`~transformer_lib.TransformerConfig` field that changes it, with the values the
field accepts (read from the library, the paper's default first) and what the variant does there.
"""

from __future__ import annotations

from dataclasses import fields

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_lib.config import POSITIONALS, TransformerConfig
from transformer_lib.nn.feedforward import ACTIVATIONS
from transformer_lib.nn.norms import NORMS

from ._style import FONT, INK, MUTED, SMALL, arrow, box, canvas, dashed_frame, plus

__all__ = ["FIGURES", "switch_values", "variants_figure"]

STREAM_X, BRANCH_X = 1.0, 2.75  # the residual stream and the sub-layer branch
BOX_W, BOX_H, NORM_W = 2.0, 0.55, 1.4
BLOCK = 2.5  # height of one sub-layer block: branch, norm, sub-layer, addition
LABEL_X = 4.15  # where the labels start


def _default(name: str) -> object:
    return next(f.default for f in fields(TransformerConfig) if f.name == name)


def switch_values(name: str) -> list[str]:
    """The values a switch accepts, the paper's default first, as the figure writes them."""
    choices: list[object] = {
        "positional": list(POSITIONALS),
        "norm": list(NORMS),
        "activation": sorted(ACTIVATIONS),
        "norm_first": [False, True],
        "num_kv_heads": [None, "fewer than num_heads"],
    }[name]
    default = _default(name)
    return [str(v) for v in [default, *(c for c in choices if c != default)]]


def _label(ax: Axes, y: float, name: str, what: str, anchor: tuple[float, float]) -> None:
    """A switch: its name, its values (the paper's first), and what it changes; a dotted line to
    ``anchor``.
    """
    values = switch_values(name)
    ax.text(
        LABEL_X, y + 0.32, name, ha="left", va="bottom", fontsize=FONT, color=INK, fontweight="bold"
    )
    ax.text(
        LABEL_X,
        y + 0.3,
        f"{values[0]} (paper) | " + " | ".join(values[1:]),
        ha="left",
        va="top",
        fontsize=SMALL,
        color=INK,
    )
    ax.text(
        LABEL_X, y + 0.06, what, ha="left", va="top", fontsize=SMALL, color=MUTED, linespacing=1.2
    )
    ax.plot(
        [anchor[0] + 0.05, LABEL_X - 0.1],
        [anchor[1], y + 0.3],
        color=MUTED,
        lw=0.9,
        linestyle=":",
        zorder=0,
    )


def _sublayer(ax: Axes, y: float, label: str, kind: str) -> tuple[float, float, float]:
    """A norm, then the sub-layer, on the branch from height ``y``; returns (norm y, sub-layer y,
    top).
    """
    norm_y, sub_y, add_y = y + 0.75, y + 1.6, y + 2.25
    ax.plot(
        [STREAM_X, BRANCH_X, BRANCH_X], [y + 0.2, y + 0.2, norm_y - BOX_H / 2], color=INK, lw=1.0
    )
    box(ax, BRANCH_X, norm_y, NORM_W, BOX_H, "norm", "norm")
    arrow(ax, (BRANCH_X, norm_y + BOX_H / 2), (BRANCH_X, sub_y - BOX_H / 2))
    box(ax, BRANCH_X, sub_y, BOX_W, BOX_H, label, kind)
    ax.plot([BRANCH_X, BRANCH_X], [sub_y + BOX_H / 2, add_y], color=INK, lw=1.0)
    arrow(ax, (BRANCH_X, add_y), (STREAM_X + 0.22, add_y))
    arrow(ax, (STREAM_X, y), (STREAM_X, add_y - 0.22), width=2.2)
    plus(ax, STREAM_X, add_y, 0.2, FONT + 1)
    return norm_y, sub_y, y + BLOCK


def variants_figure() -> Figure:
    """One Pre-LN layer, bottom to top, with the five variant switches labelled where they act."""
    fig, ax = canvas(7.9, 7.4)
    box(ax, STREAM_X, 0.5, 1.8, BOX_H, "embeddings", "embedding")
    ax.text(STREAM_X, 0.12, "tokens", ha="center", va="top", fontsize=SMALL, color=MUTED)
    bottom = 1.05
    ax.plot([STREAM_X, STREAM_X], [0.5 + BOX_H / 2, bottom], color=INK, lw=2.2)
    norm1, attention, top = _sublayer(ax, bottom, "self-attention", "attention")
    ax.plot([STREAM_X, STREAM_X], [top - BLOCK + 2.45, top], color=INK, lw=2.2)
    norm2, feed_forward, top = _sublayer(ax, top, "feed-forward", "feedforward")
    dashed_frame(ax, (0.1, bottom - 0.05), BRANCH_X + BOX_W / 2 + 0.1, top - bottom + 0.05, MUTED)
    ax.text(0.2, top - 0.1, "N ×", ha="left", va="top", fontsize=FONT, color=INK, fontweight="bold")
    ax.plot([STREAM_X, STREAM_X], [top - BLOCK + 2.45, top], color=INK, lw=2.2)
    arrow(ax, (STREAM_X, top), (STREAM_X, top + 0.5 - BOX_H / 2), width=2.2)
    box(ax, STREAM_X, top + 0.5, 1.8, BOX_H, "final norm", "norm")
    arrow(ax, (STREAM_X, top + 0.5 + BOX_H / 2), (STREAM_X, top + 1.05), width=2.2)
    ax.text(STREAM_X, top + 1.1, "output", ha="center", va="bottom", fontsize=FONT, color=INK)

    edge = BRANCH_X + BOX_W / 2
    labels = [  # (height, switch, what it changes, the point it labels)
        (
            0.35,
            "positional",
            "learned: a trained table added here; rope: nothing\nadded, q and k rotated in "
            "self-attention",
            (STREAM_X + 0.9, 0.5),
        ),
        (
            1.55,
            "norm_first",
            "Pre-LN (drawn): the norm on the branch;\nPost-LN: after the +",
            (BRANCH_X + NORM_W / 2, norm1),
        ),
        (
            2.9,
            "num_kv_heads",
            "fewer key/value heads, each shared by a\ngroup of query heads (grouped-query "
            "attention)",
            (edge, attention),
        ),
        (4.15, "norm", "rmsnorm: no mean subtracted, no bias", (BRANCH_X + NORM_W / 2, norm2)),
        (5.25, "activation", "swiglu: a gated unit with a third matrix", (edge, feed_forward)),
    ]
    for y, name, what, anchor in labels:
        _label(ax, y, name, what, anchor)
    ax.set_xlim(0, 7.9)
    ax.set_ylim(-0.2, top + 1.5)
    fig.tight_layout()
    return fig


FIGURES = {"variants.svg": variants_figure}
