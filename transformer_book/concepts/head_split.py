"""Chapter 5's picture of the split: the right grouping and the wrong one, on a labelled tensor.

Entry ``(t, f)`` of a ``(T, d_model) = (3, 4)`` tensor holds ``10 t + f`` (word ``t``, feature
``f``), and each word has its own colour. Split into ``h = 2`` heads of ``d_k = 2``:

* ``view(B, T, h, d_k).transpose(1, 2)`` gives head ``i`` features ``2i`` and ``2i + 1`` of every
  word, each word in its own row;
* ``view(B, h, T, d_k)`` gives the same shape, but cuts the memory word after word into ``h``
  blocks: a head's row ``t`` then holds pieces of other words, so a mask that works row by row
  lets a word read a later one.
"""

from __future__ import annotations

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from ._style import FONT, INK, MUTED, SMALL, arrow
from .multi_head import HEAD_COLOURS, _frame, _page, _text

__all__ = ["FIGURES", "labelled_split", "split_view_figure"]

WORD_COLOURS = ("#dff0d8", "#f3efb0", "#f4c5d1")  # words 0, 1, 2
CELL = 0.34  # inches


def labelled_split() -> dict[str, Tensor]:
    """The labelled tensor (entry ``10 t + f``) of 3 words and 4 features split into 2 heads, the
    right way and the wrong way.

    Shape:
        ``"input"``: ``(T, d_model)`` = ``(3, 4)``; ``"right"``, ``"wrong"``: ``(h, T, d_k)`` =
        ``(2, 3, 2)``.
    """
    length, d_model, num_heads, d_k = 3, 4, 2, 2
    labels = 10 * torch.arange(length)[:, None] + torch.arange(d_model)  # (T, d_model)
    right = labels.view(length, num_heads, d_k).transpose(0, 1)  # (T, h, d_k) -> (h, T, d_k)
    wrong = labels.view(num_heads, length, d_k)  # the same shape, grouped differently
    return {"input": labels, "right": right, "wrong": wrong}


def _cells(ax: Axes, left: float, top: float, values: Tensor) -> None:
    """Labelled entries as squares in their word's colour (the word is ``value // 10``)."""
    for r, row in enumerate(values.tolist()):
        for c, value in enumerate(row):
            colour = WORD_COLOURS[value // 10]
            square = Rectangle(
                (left + c * CELL, top - (r + 1) * CELL),
                CELL,
                CELL,
                facecolor=colour,
                edgecolor=INK,
                lw=0.6,
            )
            ax.add_patch(square)
            _text(ax, left + (c + 0.5) * CELL, top - (r + 0.5) * CELL, str(value), size=FONT)


def _rows(ax: Axes, right: float, top: float, count: int) -> None:
    for r in range(count):
        _text(ax, right, top - (r + 0.5) * CELL, f"word {r}", ha="right")


def _heads(ax: Axes, left: float, top: float, heads: Tensor, title: str) -> None:
    """The heads' blocks side by side, with the rows the mask reads as words 0, 1, 2."""
    _rows(ax, left - 0.08, top, heads.size(1))
    for h in range(heads.size(0)):
        x = left + h * (heads.size(2) * CELL + 0.25)
        _cells(ax, x, top, heads[h])
        _frame(ax, x, top, heads.size(2) * CELL, heads.size(1) * CELL, HEAD_COLOURS[h])
        _text(
            ax, x + CELL, top - heads.size(1) * CELL - 0.18, f"head {h + 1}", color=HEAD_COLOURS[h]
        )
    _text(ax, left + CELL * 2 + 0.12, top + 0.12, title, va="bottom")


def split_view_figure() -> Figure:
    """The labelled tensor, and the two heads it gives split the right way and the wrong way."""
    split = labelled_split()
    fig, ax = _page(8.0, 3.05, "The same shape, two groupings: whose features does each row hold?")
    top = 1.8
    _rows(ax, 0.62, top, 3)
    _cells(ax, 0.7, top, split["input"])
    for h in range(2):
        _frame(ax, 0.7 + 2 * CELL * h, top, 2 * CELL, 3 * CELL, HEAD_COLOURS[h])
    _text(ax, 0.7 + 2 * CELL, top + 0.12, "x: entry 10 t + f", va="bottom")
    arrow(ax, (0.7 + 4 * CELL + 0.1, top - 1.5 * CELL), (2.75, top - 1.5 * CELL))
    _heads(ax, 3.45, top, split["right"], "right: view(B, T, h, d_k)\n.transpose(1, 2)")
    _heads(ax, 6.25, top, split["wrong"], "wrong: view(B, h, T, d_k)")
    note = "word 1's row holds 2, 3:\nword 0's features"
    _text(ax, 6.25 + 2 * CELL + 0.12, top - 3 * CELL - 0.4, note, va="top", color=MUTED, size=SMALL)
    return fig


FIGURES = {"multi_head_view.svg": split_view_figure}
