"""Chapter 1's picture: a token embedding (词嵌入) is a table read by id, then scaled by
sqrt(d_model).

The figure shows the running example of :mod:`~transformer_book.example`: the vocabulary of
"Two dogs play in the grass." (special tokens first), the table ``E`` of ``V x d_model`` numbers
that :class:`~transformer_lib.TokenEmbedding` starts from, and the sentence's seven rows after the
scale. Every entry is a coloured square on one colour scale, so the scale shows as stronger colours.
"""

from __future__ import annotations

import math

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from transformer_lib.nn.embedding import TokenEmbedding

from ..example import ENGLISH, encode, vocabulary
from . import _style

__all__ = ["FIGURES", "example_table", "token_embedding_figure"]

CELL = 0.5  # side of one entry's square, in data units


def example_table() -> Tensor:
    """The running example's embedding table, as ``example.embed`` builds it (``d_model = 8``, seed
    0; the global RNG is left alone).

    Shape:
        ``(V, d_model)``, ``V = len(vocabulary(ENGLISH))``; row 0 (``<pad>``) is zero.
    """
    vocab = vocabulary(ENGLISH)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        table = TokenEmbedding(len(vocab), 8, padding_idx=vocab["<pad>"])
    return table.embedding.weight.detach().clone()


def _grid(ax, x: float, top: float, values: Tensor, colour, first_row: int = 0) -> None:
    """Squares for a ``(rows, cols)`` tensor; row ``r`` is drawn at table row ``first_row + r``."""
    for r, row in enumerate(values.tolist()):
        for c, value in enumerate(row):
            y = top - (first_row + r + 1) * CELL
            face = colour(value)
            square = Rectangle((x + c * CELL, y), CELL, CELL, facecolor=face, edgecolor=_style.INK)
            square.set_linewidth(0.4)
            ax.add_patch(square)


def token_embedding_figure() -> Figure:
    """Words -> ids -> rows of ``E`` -> times ``sqrt(d_model)``, for the running example.

    Shape:
        left: the vocabulary, ``V`` words with their ids; middle: ``E``, ``(V, d_model)``;
        right: the sentence's rows times ``sqrt(d_model)``, ``(T, d_model)``.
    """
    vocab = vocabulary(ENGLISH)
    ids = encode(ENGLISH, vocab)  # (T,)
    table = example_table()  # (V, d_model)
    d_model = table.size(1)
    scale = math.sqrt(d_model)
    rows = table[ids] * scale  # (T, d_model): the sentence, as embed(positions=False) gives it
    first = int(ids.min())
    if ids.tolist() != list(range(first, first + len(ids))):
        raise ValueError(
            "the figure lines up each word with its row: the sentence's ids must be consecutive"
        )
    limit = float(rows.abs().max())
    cmap = matplotlib.colormaps["RdBu"]
    norm = matplotlib.colors.Normalize(-limit, limit)

    def colour(value: float):
        return cmap(norm(value))

    width = d_model * CELL
    fig, ax = _style.canvas(8.0, 4.9)
    top = 0.0
    # left: the vocabulary, word -> id; the sentence's words in token boxes, the specials in grey
    for word, i in vocab.items():
        y = top - (i + 0.5) * CELL
        if i in ids.tolist():
            _style.box(ax, 0.75, y, 1.3, CELL * 0.8, word, kind="token")
        else:
            ax.text(
                0.75, y, word, ha="center", va="center", fontsize=_style.SMALL, color=_style.MUTED
            )
        ax.text(1.85, y, str(i), ha="center", va="center", fontsize=_style.FONT, color=_style.INK)
        _style.arrow(ax, (2.15, y), (2.75, y), colour=_style.MUTED, width=0.8)
    ax.text(
        1.2,
        top + 0.35,
        "vocabulary\nword → id",
        ha="center",
        va="bottom",
        fontsize=_style.FONT,
        color=_style.INK,
    )
    # middle: the table E, one row per id
    x_table = 2.85
    _grid(ax, x_table, top, table, colour)
    read = (x_table, top - (first + len(ids)) * CELL)  # the corner of the rows the sentence reads
    frame = Rectangle(read, width, len(ids) * CELL, facecolor="none", edgecolor=_style.INK)
    frame.set_linewidth(2.0)
    ax.add_patch(frame)
    ink = {"fontsize": _style.FONT, "color": _style.INK}
    muted = {"fontsize": _style.SMALL, "color": _style.MUTED}
    x_mid = x_table + width / 2
    x_right = x_table + width
    table_label = f"table E\nV × d_model = {len(vocab)} × {d_model}"
    ax.text(x_mid, top + 0.35, table_label, ha="center", va="bottom", **ink)
    ax.text(x_right + 0.12, top - 0.5 * CELL, "← <pad>: zeros", ha="left", va="center", **muted)
    bottom = top - len(vocab) * CELL - 0.2
    ax.text(x_mid, bottom, "row i is the vector of id i", ha="center", va="top", **muted)
    # right: the rows the sentence reads, times sqrt(d_model)
    x_out = x_table + width + 2.6
    mid = top - (first + len(ids) / 2) * CELL
    _style.arrow(ax, (x_table + width + 0.15, mid), (x_out - 0.15, mid), width=1.4)
    scale_label = f"× √d_model\n= × {scale:.2f}"
    ax.text((x_table + width + x_out) / 2, mid + 0.15, scale_label, ha="center", va="bottom", **ink)
    _grid(ax, x_out, top, rows, colour, first_row=first)
    sentence_label = f"the sentence\nT × d_model = {len(ids)} × {d_model}"
    above = top - first * CELL + 0.35
    ax.text(x_out + width / 2, above, sentence_label, ha="center", va="bottom", **ink)
    colours_label = "one colour scale for both grids:\nred below 0, blue above"
    ax.text(x_out + width / 2, bottom, colours_label, ha="center", va="top", **muted)
    ax.set_xlim(-0.1, x_out + width + 0.2)
    ax.set_ylim(top - len(vocab) * CELL - 1.0, top + 0.9)
    fig.tight_layout()
    return fig


FIGURES = {"token_embedding.svg": token_embedding_figure}
