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
from ..plotting import PAGE_WIDTH
from ._style import COLOURS, FONT, INK, SMALL, TITLE, canvas

__all__ = [
    "FIGURES",
    "attention_kinds_figure",
    "attention_kinds_masks",
    "cross_attention_shapes_figure",
    "masks_figure",
]

GERMAN_INK = "#1f4e8c"  # the labels of the German (source) side
ENGLISH_INK = "#2d6a2d"  # the labels of the English (target) side
CELL = 0.22  # inches: one query-key pair
SHAPE_CELL = 0.2  # inches: one entry of a matrix in the shapes figure
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
    corner: tuple[float, float],
    mask: Tensor,
    labels: tuple[list[str], list[str]],
    inks: tuple[str, str] = (INK, INK),
    cell: float = CELL,
) -> float:
    """Draw ``mask``, rows ``labels[0]`` and columns ``labels[1]``, with its top-left corner at
    ``(corner[0] + LABEL_W, corner[1])``; return the grid's bottom.
    """
    (left, top), (rows, cols), (row_ink, col_ink) = corner, labels, inks
    x0 = left + LABEL_W
    for i, word in enumerate(rows):
        y = top - (i + 1) * cell
        ax.text(
            x0 - 0.06, y + cell / 2, word, ha="right", va="center", fontsize=SMALL, color=row_ink
        )
        for j in range(len(cols)):
            colour = COLOURS["attention"] if bool(mask[i, j]) else COLOURS["mask"]
            square = Rectangle(
                (x0 + j * cell, y), cell, cell, facecolor=colour, edgecolor="white", lw=1.0
            )
            ax.add_patch(square)
    bottom = top - len(rows) * cell
    for j, word in enumerate(cols):
        style = {"ha": "center", "va": "top", "rotation": 90, "fontsize": SMALL, "color": col_ink}
        ax.text(x0 + (j + 0.5) * cell, bottom - 0.06, word, **style)
    return bottom


def attention_kinds_figure() -> Figure:
    """The three attentions side by side: which query (row) may see which key (column).

    Shape:
        the grids of :func:`attention_kinds_masks`: ``(S, S)``, ``(T, T)`` and ``(T, S)``.
    """
    masks = attention_kinds_masks()
    panels = [
        ("self-attention", "encoder", "Q, K, V: German", GERMAN_INK, GERMAN_INK),
        ("masked self-attention", "decoder", "Q, K, V: English", ENGLISH_INK, ENGLISH_INK),
        ("cross-attention", "decoder", "Q: English;  K, V: German", ENGLISH_INK, GERMAN_INK),
    ]
    widths = [LABEL_W + masks[kind][0].size(1) * CELL for kind, *_ in panels]
    gap, top = 0.42, 3.0
    width = sum(widths) + gap * (len(panels) - 1) + 0.2
    longest = max(masks[kind][0].size(0) for kind, *_ in panels)
    shape_y = (
        top - longest * CELL - 0.8
    )  # one line for the three shapes, under the longest column labels
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
        _grid(ax, (left, top), mask, (rows, cols), (row_ink, col_ink))
        shape = f"{symbols[kind]} = {mask.size(0)} × {mask.size(1)}"
        ax.text(centre, shape_y, shape, ha="center", va="top", fontsize=SMALL, color=INK)
        left += panel_w + gap
    _legend(ax, 0.1 + LABEL_W, legend_y)
    ax.set_xlim(0.0, width)
    ax.set_ylim(legend_y - 0.15, top + 1.0)
    return fig


def _legend(ax: Axes, x: float, y: float) -> None:
    """The two colours of a mask grid, and which way round it reads, on one line from ``(x, y)``."""
    for kind, text in (("attention", "may attend"), ("mask", "masked: weight 0")):
        ax.add_patch(Rectangle((x, y), CELL, CELL, facecolor=COLOURS[kind], edgecolor=INK, lw=0.5))
        ax.text(
            x + CELL + 0.1, y + CELL / 2, text, ha="left", va="center", fontsize=SMALL, color=INK
        )
        x += 2.3
    legend = "rows: queries,  columns: keys"
    ax.text(x, y + CELL / 2, legend, ha="left", va="center", fontsize=SMALL, color=INK)


def masks_figure(masks: dict[str, tuple[Tensor, list[str], list[str]]]) -> Figure:
    """Masks side by side: ``{title: (mask, query words, key words)}``, ``True`` = may attend.

    Shape:
        each mask: ``(len(query words), len(key words))``.
    """
    if not masks:
        raise ValueError("masks must hold at least one (mask, query words, key words)")
    for title, (mask, rows, cols) in masks.items():
        if tuple(mask.shape) != (len(rows), len(cols)):
            words_shape = (len(rows), len(cols))
            raise ValueError(
                f"mask {title!r} has shape {tuple(mask.shape)}, its words {words_shape}"
            )
    gap, top = 0.35, 3.0
    columns = sum(mask.size(1) for mask, _, _ in masks.values())
    room = PAGE_WIDTH - 0.2 - (gap + LABEL_W) * len(masks)  # drawn in a chapter's cell
    cell = min(CELL, room / columns)  # as large as the page allows
    widths = [LABEL_W + mask.size(1) * cell for mask, _, _ in masks.values()]
    width = max(sum(widths) + gap * (len(masks) - 1) + 0.2, 6.9)  # as wide as the legend at least
    longest = max(mask.size(0) for mask, _, _ in masks.values())
    legend_y = top - longest * cell - 0.95  # under the longest column labels
    fig, ax = canvas(width, top + 0.5 - legend_y + 0.15)
    ax.set_position((0.0, 0.0, 1.0, 1.0))  # one data unit = one inch
    left = 0.1
    for (title, (mask, rows, cols)), panel_w in zip(masks.items(), widths, strict=True):
        centre = left + LABEL_W + mask.size(1) * cell / 2
        ax.text(centre, top + 0.1, title, ha="center", va="bottom", fontsize=FONT, color=INK)
        _grid(ax, (left, top), mask, (rows, cols), cell=cell)
        left += panel_w + gap
    _legend(ax, 0.1 + LABEL_W, legend_y)
    ax.set_xlim(0.0, width)
    ax.set_ylim(legend_y - 0.15, top + 0.5)
    return fig


def _matrix(
    ax: Axes, corner: tuple[float, float], shape: tuple[int, int], colour: str
) -> tuple[float, float]:
    """An empty grid of ``shape`` cells, down and right from ``corner``; return its far corner."""
    (left, top), (rows, cols) = corner, shape
    for i in range(rows):
        for j in range(cols):
            square = (left + j * SHAPE_CELL, top - (i + 1) * SHAPE_CELL)
            ax.add_patch(
                Rectangle(
                    square, SHAPE_CELL, SHAPE_CELL, facecolor=colour, edgecolor="white", lw=0.8
                )
            )
    return left + cols * SHAPE_CELL, top - rows * SHAPE_CELL


def _words(
    ax: Axes, words_: list[str], at: tuple[float, float], ink: str, down: bool = True
) -> None:
    """Words along a grid's rows (``down``: right-aligned at ``at``) or above its columns."""
    x, y = at
    for i, word in enumerate(words_):
        if down:
            ax.text(
                x,
                y - (i + 0.5) * SHAPE_CELL,
                word,
                ha="right",
                va="center",
                fontsize=SMALL,
                color=ink,
            )
        else:
            style = {
                "ha": "center",
                "va": "bottom",
                "rotation": 90,
                "fontsize": SMALL,
                "color": ink,
            }
            ax.text(x + (i + 0.5) * SHAPE_CELL, y + 0.05, word, **style)


def cross_attention_shapes_figure() -> Figure:
    """Cross-attention's shapes on the running example: ``softmax(Q K^T / sqrt(d_k)) V``.

    The queries come from the English sentence (``T`` rows), the keys and values from the German
    one (``S`` rows), so the weights are ``T x S`` and the output has the English length and the
    German content (``d_k = 8``).
    """
    d_k = 8
    english, german = words(ENGLISH), words(GERMAN)
    t, s = len(english), len(german)
    fig, ax = canvas(8.0, 5.7)
    ax.set_position((0.0, 0.0, 1.0, 1.0))  # one data unit = one inch
    ax.set_xlim(0.0, 8.0)
    ax.set_ylim(0.0, 5.7)
    english_tint, german_tint = "#cfe6cf", "#cddcf0"

    def say(x: float, y: float, text: str, size: float = SMALL, va: str = "top") -> None:
        ax.text(x, y, text, ha="center", va=va, fontsize=size, color=INK)

    def matrix(left: float, top: float, shape: tuple[int, int], colour: str, label: str) -> float:
        right, bottom = _matrix(ax, (left, top), shape, colour)
        say((left + right) / 2, bottom - 0.1, label)
        return right

    # row 1: Q (T x d_k) times K^T (d_k x S) gives the scores; the softmax turns them into weights
    top = 4.8
    middle = top - t * SHAPE_CELL / 2
    _words(ax, english, (0.72, top), ENGLISH_INK)
    right = matrix(0.8, top, (t, d_k), english_tint, f"Q: T × d_k\n= {t} × {d_k}")
    say(right + 0.2, middle, "·", TITLE, "center")
    _words(ax, german, (right + 0.4, top), GERMAN_INK, down=False)
    right = matrix(right + 0.4, top, (d_k, s), german_tint, f"Kᵀ: d_k × S\n= {d_k} × {s}")
    say(right + 0.55, middle, "softmax\n→", FONT, "center")
    _words(ax, german, (right + 1.05, top), GERMAN_INK, down=False)
    matrix(right + 1.05, top, (t, s), COLOURS["attention"], f"weights: T × S\n= {t} × {s}")
    # row 2: the weights times V (S x d_k) give the output (T x d_k): English rows, German content
    top = 2.3
    middle = top - t * SHAPE_CELL / 2
    _words(ax, english, (0.72, top), ENGLISH_INK)
    right = matrix(0.8, top, (t, s), COLOURS["attention"], f"weights\n{t} × {s}")
    say(right + 0.2, middle, "·", TITLE, "center")
    _words(ax, german, (right + 0.97, top), GERMAN_INK)
    right = matrix(right + 1.05, top, (s, d_k), german_tint, f"V: S × d_k\n= {s} × {d_k}")
    say(right + 0.3, middle, "=", TITLE, "center")
    _words(ax, english, (right + 0.97, top), ENGLISH_INK)
    label = f"output: T × d_k = {t} × {d_k}\nEnglish rows, German content"
    matrix(right + 1.05, top, (t, d_k), german_tint, label)
    return fig


FIGURES = {
    "attention_kinds.svg": attention_kinds_figure,
    "cross_attention_shapes.svg": cross_attention_shapes_figure,
}
