"""Chapter 4's picture: the three attentions of a Transformer and their masks, side by side.

The encoder's self-attention (自注意力) lets every German word see every German word, except the
padding; the decoder's masked self-attention (掩码自注意力) lets an English word see itself and the
words before it (the lower triangle); cross-attention (交叉注意力) lets every English word see every
German word, again except the padding: a ``T x S`` grid. The grids are the library's own masks
(:func:`~transformer_lib.padding_mask`, :func:`~transformer_lib.causal_mask`) for the running
example of :mod:`~transformer_book.example`, with the German sentence padded as it would be in a
batch next to a longer one.
"""

from __future__ import annotations

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from transformer_lib.nn.masks import causal_mask, padding_mask

from ..example import ENGLISH, GERMAN, SPECIALS, encode, vocabulary, words
from ._style import COLOURS, FONT, INK, SMALL, TITLE, canvas

__all__ = ["FIGURES", "attention_kinds_figure", "attention_kinds_masks"]

GERMAN_INK = "#1f4e8c"  # the labels of the German (source) side
ENGLISH_INK = "#2d6a2d"  # the labels of the English (target) side
CELL = 0.22  # inches: one query-key pair
LABEL_W = 0.62  # inches left of a grid for its query labels
PAD = SPECIALS[0]


def attention_kinds_masks(pads: int = 2) -> dict[str, tuple[Tensor, list[str], list[str]]]:
    """The three masks of the running example: ``{kind: (mask, query words, key words)}``, ``True``
    = may attend.

    The German sentence gets ``pads`` padding tokens at its end; the English one none.

    Shape:
        ``"self-attention"``: ``(S, S)``; ``"masked self-attention"``: ``(T, T)``;
        ``"cross-attention"``: ``(T, S)``, with ``S`` = 6 German words + ``pads`` and ``T`` = 7
        English words.
    """
    if isinstance(pads, bool) or not isinstance(pads, int) or not 0 <= pads <= 4:
        raise ValueError(f"pads must be an int from 0 to 4, got {pads!r}")
    vocab = vocabulary(GERMAN)
    ids = torch.cat([encode(GERMAN, vocab), torch.full((pads,), vocab[PAD])])[None]  # (1, S)
    german = words(GERMAN) + [PAD] * pads
    english = words(ENGLISH)
    keep = padding_mask(ids, vocab[PAD])[0, 0, 0]  # (S,): True for the real words
    source, target = len(german), len(english)
    return {
        "self-attention": (keep.expand(source, source), german, german),
        "masked self-attention": (causal_mask(target), english, english),
        "cross-attention": (keep.expand(target, source), english, german),
    }


def _grid(
    ax: Axes,
    left: float,
    top: float,
    mask: Tensor,
    rows: list[str],
    cols: list[str],
    row_ink: str,
    col_ink: str,
) -> float:
    """Draw ``mask`` with its top-left corner at ``(left + LABEL_W, top)``; return the grid's
    bottom.
    """
    x0 = left + LABEL_W
    for i, word in enumerate(rows):
        y = top - (i + 1) * CELL
        ax.text(
            x0 - 0.06, y + CELL / 2, word, ha="right", va="center", fontsize=SMALL, color=row_ink
        )
        for j in range(len(cols)):
            allowed = bool(mask[i, j])
            colour = COLOURS["attention"] if allowed else COLOURS["mask"]
            ax.add_patch(
                Rectangle(
                    (x0 + j * CELL, y), CELL, CELL, facecolor=colour, edgecolor="white", lw=1.0
                )
            )
    bottom = top - len(rows) * CELL
    for j, word in enumerate(cols):
        ax.text(
            x0 + (j + 0.5) * CELL,
            bottom - 0.06,
            word,
            ha="center",
            va="top",
            rotation=90,
            fontsize=SMALL,
            color=col_ink,
        )
    return bottom


def attention_kinds_figure(pads: int = 2) -> Figure:
    """The three attentions side by side: which query (row) may see which key (column).

    Shape:
        the grids of :func:`attention_kinds_masks`: ``(S, S)``, ``(T, T)`` and ``(T, S)``.
    """
    masks = attention_kinds_masks(pads)
    panels = [
        ("self-attention", "encoder", "Q, K, V: German", GERMAN_INK, GERMAN_INK),
        ("masked self-attention", "decoder", "Q, K, V: English", ENGLISH_INK, ENGLISH_INK),
        ("cross-attention", "decoder", "Q: English;  K, V: German", ENGLISH_INK, GERMAN_INK),
    ]
    widths = [LABEL_W + masks[kind][0].size(1) * CELL for kind, *_ in panels]
    gap, top = 0.42, 3.0
    width = sum(widths) + gap * (len(panels) - 1) + 0.2
    longest = max(masks[kind][0].size(0) for kind, *_ in panels)
    # one line for the three shapes, under the longest column labels
    shape_y = top - longest * CELL - 0.8
    legend_y = shape_y - 0.65
    fig, ax = canvas(width, top + 1.15 - legend_y)
    ax.set_position((0.0, 0.0, 1.0, 1.0))  # one data unit = one inch
    left = 0.1
    symbols = {
        "self-attention": "S × S",
        "masked self-attention": "T × T",
        "cross-attention": "T × S",
    }
    for (kind, where, inputs, row_ink, col_ink), panel_w in zip(panels, widths, strict=True):
        mask, rows, cols = masks[kind]
        centre = left + LABEL_W + mask.size(1) * CELL / 2
        ax.text(
            centre,
            top + 0.62,
            kind,
            ha="center",
            va="bottom",
            fontsize=TITLE,
            color=INK,
            weight="bold",
        )
        ax.text(
            centre, top + 0.36, f"({where})", ha="center", va="bottom", fontsize=FONT, color=INK
        )
        ax.text(centre, top + 0.08, inputs, ha="center", va="bottom", fontsize=SMALL, color=INK)
        _grid(ax, left, top, mask, rows, cols, row_ink, col_ink)
        shape = f"{symbols[kind]} = {mask.size(0)} × {mask.size(1)}"
        ax.text(centre, shape_y, shape, ha="center", va="top", fontsize=SMALL, color=INK)
        left += panel_w + gap
    x = 0.1 + LABEL_W
    for kind, text in (("attention", "may attend"), ("mask", "masked: weight 0")):
        ax.add_patch(
            Rectangle((x, legend_y), CELL, CELL, facecolor=COLOURS[kind], edgecolor=INK, lw=0.5)
        )
        ax.text(
            x + CELL + 0.1,
            legend_y + CELL / 2,
            text,
            ha="left",
            va="center",
            fontsize=SMALL,
            color=INK,
        )
        x += 2.3
    ax.text(
        x,
        legend_y + CELL / 2,
        "rows: queries,  columns: keys",
        ha="left",
        va="center",
        fontsize=SMALL,
        color=INK,
    )
    ax.set_xlim(0.0, width)
    ax.set_ylim(legend_y - 0.15, top + 1.0)
    return fig


FIGURES = {"attention_kinds.svg": attention_kinds_figure}
