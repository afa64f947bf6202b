"""Chapter 5's pictures: why several heads, and each step of multi-head attention (多头注意力).

All of them are drawn on the running example, "Two dogs play in the grass." as chapters 1 and 2
leave it (:func:`~transformer_book.example.embed`, ``d_model = 8``), with ``h = 2`` heads of
``d_k = 4`` features, and with chapter 3's hand-set keys and values: every word offers some of the
four :data:`~transformer_book.example.FEATURES` (noun, plural, verb, number). Only *play* asks:

* one head, asking for a noun, finds *dogs* and *grass* and can only hand over a blend of them;
* two heads ask two questions: head 1 for a plural noun (*dogs*), head 2 for a noun that is not
  plural (*grass*); each fetches one word.

The figures: ``multi_head_why.svg`` (the reason), ``multi_head_split.svg`` (one product computes
every head's queries; the split hands each head its columns), ``multi_head_heads.svg`` (each head
attends on its own features) and ``multi_head_merge.svg`` (the outputs side by side, times
``W_O``). ``W_O`` is set by hand too (:func:`output_projection`), so that *play*'s output carries
features one can name (:data:`OUTPUT_FEATURES`). The chapter builds the same numbers in the open and
checks them against :func:`example_heads`. The split's two groupings (the labelled tensor) are in
:mod:`.head_split`.
"""

from __future__ import annotations

import math

import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from ..example import ENGLISH, FEATURES, embed, hand_set_projections, words
from ._style import COLOURS, FONT, INK, MUTED, SMALL, TITLE, arrow, box, canvas

__all__ = [
    "FIGURES",
    "HEAD_ASKS",
    "HEAD_COLOURS",
    "LOUD",
    "ONE_HEAD_ASKS",
    "OUTPUT_FEATURES",
    "asks",
    "example_heads",
    "example_projections",
    "heads_figure",
    "merge_figure",
    "one_head",
    "output_projection",
    "split_figure",
    "why_figure",
]

HEAD_COLOURS = ("#e8892b", "#3a8fd0")  # head 1, head 2: the frames of their blocks in every picture
SCALE = colormaps["RdBu"]  # as in chapters 1-3: blue positive, red negative
LOUD = 8.0  # the size of play's query entries: large enough that each head's choice is clear
ONE_HEAD_ASKS = {"noun": 1.0}  # one head: a noun (dogs and grass both are)
HEAD_ASKS = ({"noun": 1.0, "plural": 1.0}, {"noun": 1.0, "plural": -1.0})  # dogs; grass
ASKER = "play"
OUTPUT_FEATURES = ("plural", "singular noun", "nouns")
"""What the hand-set ``W_O`` writes into output features 0-2: head 1's plural (head 1 fetches a
plural noun), head 2's noun (head 2 fetches a noun that is not plural), and the two heads' nouns
added up. It writes nothing into features 3-7."""


def asks(wants: dict[str, float]) -> Tensor:
    """Queries for the running example: *play* (``ASKER``) asks ``LOUD * wants``, the other words
    nothing. One head's ``W_Q, W_K, W_V`` are then
    :func:`~transformer_book.example.hand_set_projections` of these queries.

    Shape:
        ``(T, len(FEATURES))``: one row per word of ENGLISH, zero except *play*'s row.
    """
    tokens = words(ENGLISH)
    unknown = sorted(set(wants) - set(FEATURES))
    if unknown:
        raise ValueError(f"wants must name FEATURES {FEATURES}; got {wants}")
    table = torch.zeros(len(tokens), len(FEATURES))
    for feature, weight in wants.items():
        table[tokens.index(ASKER), FEATURES.index(feature)] = LOUD * weight
    return table


def output_projection() -> Tensor:
    """The chapter's hand-set ``W_O``: it names three output features, :data:`OUTPUT_FEATURES`.

    Rows 0-3 read head 1's four features (noun, plural, verb, number), rows 4-7 head 2's. Output
    feature 0 takes head 1's plural, feature 1 head 2's noun, feature 2 the sum of both heads'
    nouns; features 3-7 stay 0.

    Shape:
        ``(8, 8)``, used as ``concat @ W_O``.
    """
    d_k, noun, plural = len(FEATURES), FEATURES.index("noun"), FEATURES.index("plural")
    w_o = torch.zeros(2 * d_k, 2 * d_k)
    w_o[plural, 0] = 1.0  # head 1's plural -> "plural"
    w_o[d_k + noun, 1] = 1.0  # head 2's noun -> "singular noun"
    w_o[[noun, d_k + noun], 2] = 1.0  # head 1's noun + head 2's noun -> "nouns"
    return w_o


def example_projections() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The chapter's ``W_Q, W_K, W_V, W_O`` for two heads: each head's matrices side by side.

    Columns 0-3 of ``W_Q``, ``W_K`` and ``W_V`` are head 1's (the hand-set projections of
    :func:`asks` of ``HEAD_ASKS[0]``), columns 4-7 head 2's; rows 0-3 of ``W_O`` read head 1's
    output, rows 4-7 head 2's. ``W_O`` is :func:`output_projection`.

    Shape:
        four ``(8, 8)`` tensors.
    """
    first, second = (hand_set_projections(asks(wants)) for wants in HEAD_ASKS)
    w_q, w_k, w_v = (torch.cat([a, b], dim=1) for a, b in zip(first, second, strict=True))
    return w_q, w_k, w_v, output_projection()


def example_heads() -> dict[str, Tensor]:
    """Two-head attention over the running example (:func:`example_projections`), every step kept.

    Returns ``x`` (the sentence), ``q``, ``k``, ``v`` (both heads' projections), ``weights`` (each
    head's map), ``heads`` (each head's output), ``concat`` (the outputs side by side) and
    ``output`` (``concat @ W_O``). Every query may see every word (no mask).

    Shape:
        x, q, k, v, concat, output: ``(T, 8)``; weights: ``(2, T, T)``; heads: ``(2, T, 4)``.
    """
    x = embed(ENGLISH)  # (T, 8)
    w_q, w_k, w_v, w_o = example_projections()
    length, num_heads, d_k = x.size(0), 2, 4
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, 8) each

    def split(t: Tensor) -> Tensor:  # (T, 8) -> (T, h, d_k) -> (h, T, d_k)
        return t.view(length, num_heads, d_k).transpose(0, 1)

    weights = (split(q) @ split(k).transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)  # (h, T, T)
    heads = weights @ split(v)  # (h, T, d_k)
    concat = heads.transpose(0, 1).reshape(length, num_heads * d_k)  # (T, 8)
    return {
        "x": x,
        "q": q,
        "k": k,
        "v": v,
        "weights": weights,
        "heads": heads,
        "concat": concat,
        "output": concat @ w_o,
    }


def one_head() -> dict[str, Tensor]:
    """A single head of 4 features over the running example, *play* asking for a noun.

    Returns ``weights`` (its map) and ``output`` (its weights times the values).

    Shape:
        weights: ``(T, T)``; output: ``(T, 4)``.
    """
    x = embed(ENGLISH)
    w_q, w_k, w_v = hand_set_projections(asks(ONE_HEAD_ASKS))
    weights = ((x @ w_q) @ (x @ w_k).T / math.sqrt(w_q.size(1))).softmax(dim=-1)  # (T, T)
    return {"weights": weights, "output": weights @ (x @ w_v)}


# ----------------------------------------------------------------------------- drawing helpers


def _norm(*tensors: Tensor) -> Normalize:
    """One symmetric colour scale for all the given tensors."""
    size = max(float(t.abs().max()) for t in tensors)
    return Normalize(-size, size)


def _grid(ax: Axes, left: float, top: float, values: Tensor, norm: Normalize, cell: float) -> None:
    """A matrix as coloured squares, its top-left corner at ``(left, top)``, row 0 at the top.

    Shape:
        values: ``(rows, cols)``.
    """
    for r, row in enumerate(values.tolist()):
        for c, value in enumerate(row):
            corner = (left + c * cell, top - (r + 1) * cell)
            square = Rectangle(
                corner, cell, cell, facecolor=SCALE(norm(value)), edgecolor=INK, lw=0.4
            )
            ax.add_patch(square)


def _frame(ax: Axes, left: float, top: float, width: float, height: float, colour: str) -> None:
    """A thick coloured frame around a block whose top-left corner is ``(left, top)``."""
    rect = Rectangle(
        (left, top - height), width, height, facecolor="none", edgecolor=colour, lw=2.6
    )
    ax.add_patch(rect)


def _text(ax: Axes, x: float, y: float, text: str, size: float = SMALL, **options) -> None:
    """A label in the book's ink, centred at ``(x, y)`` unless ``options`` say otherwise."""
    settings = {"ha": "center", "va": "center", "color": INK, **options}
    ax.text(x, y, text, fontsize=size, **settings)


def _page(width: float, height: float, title: str) -> tuple[Figure, Axes]:
    """A white canvas whose data units are inches, with a title at its top-left corner."""
    fig, ax = canvas(width, height)
    fig.subplots_adjust(0, 0, 1, 1)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    _text(ax, 0.05, height - 0.05, title, size=TITLE, ha="left", va="top")
    return fig, ax


def _word_labels(ax: Axes, right: float, top: float, labels: list[str], cell: float) -> None:
    """The words, one per row of a grid whose rows start at ``top``, right-aligned at ``right``."""
    for r, word in enumerate(labels):
        _text(ax, right, top - (r + 0.5) * cell, word, ha="right")


# ----------------------------------------------------------------------------- the reason

FEATURE_CELL = 0.32  # inches: a feature's cell, wide enough for ".96" at 10.5 pt


def _features(
    ax: Axes, left: float, y: float, values: Tensor, frames: tuple[str, ...] = ()
) -> None:
    """Feature values in [0, 1] as a row of labelled cells (white to blue) centred on height ``y``.

    ``frames`` colours a frame around each block of 4 cells (one per head).
    """
    blues = colormaps["Blues"]
    for c, value in enumerate(values.tolist()):
        corner = (left + c * FEATURE_CELL, y - FEATURE_CELL / 2)
        cell = Rectangle(
            corner, FEATURE_CELL, FEATURE_CELL, facecolor=blues(0.8 * value), edgecolor=INK, lw=0.5
        )
        ax.add_patch(cell)
        text = "1" if value > 0.995 else ("" if value < 0.005 else f"{value:.2f}"[1:])
        _text(ax, left + (c + 0.5) * FEATURE_CELL, y, text, color="white" if value > 0.6 else INK)
    for h, colour in enumerate(frames):
        _frame(
            ax,
            left + 4 * h * FEATURE_CELL,
            y + FEATURE_CELL / 2,
            4 * FEATURE_CELL,
            FEATURE_CELL,
            colour,
        )


def _bars(ax: Axes, x: float, top: float, weights: Tensor, row: float, colour: str) -> None:
    """One weight per row as a bar from a baseline at ``x``; weights above 0.1 printed."""
    ax.plot([x, x], [top, top - len(weights) * row], color=MUTED, lw=0.8)
    for r, weight in enumerate(weights.tolist()):
        y = top - (r + 0.5) * row
        if weight > 0.05:  # a smaller bar would not show, only thicken the baseline
            bar = Rectangle(
                (x, y - 0.1), 0.8 * weight, 0.2, facecolor=colour, edgecolor=INK, lw=0.6
            )
            ax.add_patch(bar)
        if weight > 0.1:
            _text(ax, x + 0.8 * weight + 0.05, y, f"{weight:.2f}", ha="left")


def why_figure() -> Figure:
    """*play* needs *dogs* and *grass*: one head blends their features, two heads fetch one each.

    Middle, the seven words and what each offers (its value: some of noun, plural, verb, number).
    Left, one head asking for a noun: its weights for *play*, shared by *dogs* and *grass*, and its
    output, a blend. Right, two heads, one asking for a plural noun and one for a noun that is not
    plural: each puts nearly all its weight on one word, and their outputs side by side hold both
    words' features, which ``W_O`` then mixes.
    """
    tokens, single, step = words(ENGLISH), one_head(), example_heads()
    play = tokens.index(ASKER)
    values = step["v"][:, :4]  # (T, 4): what each word offers (both heads see the same)
    row, top, words_x = 0.34, 4.3, 3.45
    fig, ax = _page(
        8.0, 5.4, "play needs two words: one head blends them, two heads fetch one each"
    )
    _text(ax, 0.8, top + 0.25, "one head", size=FONT, weight="bold")
    _text(ax, 0.8, top + 0.02, "asks: a noun", color=MUTED)
    for h, question in enumerate(("a plural noun", "a noun, not plural")):
        centre = 5.6 + 1.4 * h
        _text(
            ax, centre, top + 0.25, f"head {h + 1}", size=FONT, weight="bold", color=HEAD_COLOURS[h]
        )
        _text(ax, centre, top + 0.02, question, color=MUTED)
    for c, feature in enumerate(FEATURES):
        _text(
            ax,
            words_x + 0.15 + (c + 0.5) * FEATURE_CELL,
            top + 0.05,
            feature,
            va="bottom",
            rotation=90,
        )
    _bars(ax, 0.35, top - 0.15, single["weights"][play], row, COLOURS["attention"])
    for h in range(2):
        _bars(ax, 5.2 + 1.4 * h, top - 0.15, step["weights"][h, play], row, HEAD_COLOURS[h])
    for r, word in enumerate(tokens):
        y = top - 0.15 - (r + 0.5) * row
        _text(ax, words_x, y, word, size=FONT, ha="right", weight="bold" if r == play else None)
        _features(ax, words_x + 0.15, y, values[r])
    under = top - 0.15 - 7 * row
    _text(ax, 0.8, under - 0.1, "play's weights", va="top", color=MUTED)
    _text(ax, 6.35, under - 0.1, "play's weights in each head", va="top", color=MUTED)

    out_y = 0.75  # the outputs' row
    arrow(ax, (0.8, under - 0.4), (0.8, out_y + 0.25))
    _features(ax, 0.2, out_y, single["output"][play])
    _text(ax, 0.2, out_y - 0.3, "a noun, half plural:\nneither dogs nor grass", ha="left", va="top")
    arrow(ax, (6.35, under - 0.4), (6.35, out_y + 0.25))
    _features(ax, 4.75, out_y, step["concat"][play], frames=HEAD_COLOURS)
    _text(
        ax,
        4.75,
        out_y - 0.3,
        "dogs' features, then grass':\nboth words, side by side",
        ha="left",
        va="top",
    )
    arrow(ax, (4.75 + 8 * FEATURE_CELL + 0.06, out_y), (7.4, out_y))
    box(ax, 7.67, out_y, 0.5, 0.34, "W_O", kind="attention", size=FONT)
    return fig


# ----------------------------------------------------------------------------- the split


def _numbers(ax: Axes, left: float, top: float, values: Tensor, cell: float) -> None:
    """The non-zero entries of a matrix drawn by :func:`_grid`, written in their cells."""
    for r, row in enumerate(values.tolist()):
        for c, value in enumerate(row):
            if abs(value) > 0.5:
                _text(
                    ax,
                    left + (c + 0.5) * cell,
                    top - (r + 0.5) * cell,
                    f"{value:.0f}",
                    color="white",
                )


def split_figure() -> Figure:
    """``Q = x W_Q`` computes every head's queries at once; the split hands each head its columns.

    Left to right: the sentence ``x`` (7 words x 8 features), ``W_Q`` (8 x 8, its column blocks
    framed in the heads' colours), their product ``Q`` (only *play*'s row is not zero: head 1's
    question, then head 2's), and the two heads' blocks after ``view(T, h, d_k)`` and
    ``transpose``: head ``i`` holds features ``4i`` to ``4i + 3`` of every word.
    """
    step = example_heads()
    x, q, w_q = step["x"], step["q"], example_projections()[0]
    cell, labels = 0.2, words(ENGLISH)
    fig, ax = _page(
        8.0, 4.45, "One product computes every head's queries; the split hands them out"
    )
    top = 3.25
    x_left, w_left, q_left, heads_left = 0.55, 2.45, 4.35, 6.95
    _word_labels(ax, x_left - 0.08, top, labels, cell)
    for name, left, values in (("x", x_left, x), ("W_Q", w_left, w_q), ("Q = x W_Q", q_left, q)):
        _grid(ax, left, top, values, _norm(values), cell)
        _text(ax, left + 4 * cell, top + 0.2, f"{name} ({values.size(0)} × 8)")
    _numbers(ax, q_left, top, q, cell)
    _text(ax, w_left - 0.2, top - 3.5 * cell, "×", size=FONT)
    _text(ax, q_left - 0.2, top - 3.5 * cell, "=", size=FONT)
    for h in range(2):
        _frame(ax, w_left + 4 * cell * h, top, 4 * cell, 8 * cell, HEAD_COLOURS[h])
        _frame(ax, q_left + 4 * cell * h, top, 4 * cell, 7 * cell, HEAD_COLOURS[h])
    note = "columns 0-3: head 1's W_Q\ncolumns 4-7: head 2's"
    _text(ax, w_left + 4 * cell, top - 8 * cell - 0.12, note, va="top", color=MUTED)
    _text(ax, q_left + 4 * cell, top - 7 * cell - 0.12, "only play asks", va="top", color=MUTED)
    middle = top - 3.5 * cell
    arrow(ax, (q_left + 8 * cell + 0.1, middle), (heads_left - 0.1, middle))
    _text(
        ax,
        (q_left + 8 * cell + heads_left) / 2,
        middle - 0.15,
        "split:\nview,\ntranspose",
        va="top",
    )
    for h in range(2):
        block_top = top + 0.25 - h * (7 * cell + 0.55)
        block = q[:, 4 * h : 4 * h + 4]
        _grid(ax, heads_left, block_top, block, _norm(q), cell)
        _numbers(ax, heads_left, block_top, block, cell)
        _frame(ax, heads_left, block_top, 4 * cell, 7 * cell, HEAD_COLOURS[h])
        name = f"head {h + 1}: features {4 * h}-{4 * h + 3}"
        _text(ax, heads_left + 2 * cell, block_top + 0.05, name, va="bottom", color=HEAD_COLOURS[h])
    return fig


# ----------------------------------------------------------------------------- each head attends


def _head_row(ax: Axes, top: float, head: int, step: dict[str, Tensor], norm: Normalize) -> None:
    """One head: its map of weights (play's row printed), times its values, gives its output."""
    labels, cell, small = words(ENGLISH), 0.27, 0.2
    weights, d_k = step["weights"][head], step["heads"].size(-1)
    colour, columns = HEAD_COLOURS[head], slice(head * d_k, (head + 1) * d_k)
    map_left = 0.75
    _word_labels(ax, map_left - 0.06, top, labels, cell)
    ax.imshow(
        weights.numpy(),
        cmap="Greys",
        vmin=0.0,
        vmax=1.0,
        extent=(map_left, map_left + 7 * cell, top - 7 * cell, top),
        zorder=1,
    )
    play = labels.index(ASKER)
    for c, value in enumerate(weights[play].tolist()):  # play's row: the only word that asks
        if value < 0.05:
            continue
        ink = "white" if value > 0.45 else INK
        _text(
            ax,
            map_left + (c + 0.5) * cell,
            top - (play + 0.5) * cell,
            f"{value:.2f}"[1:],
            color=ink,
            zorder=2,
        )
    row = Rectangle(
        (map_left, top - (play + 1) * cell), 7 * cell, cell, facecolor="none", edgecolor=INK, lw=1.6
    )
    ax.add_patch(row)
    _frame(ax, map_left, top, 7 * cell, 7 * cell, colour)
    for c, word in enumerate(labels):
        _text(ax, map_left + (c + 0.5) * cell, top + 0.06, word, va="bottom", rotation=90)
    _text(ax, map_left + 7 * cell + 0.35, top - 3.5 * cell, "×", size=FONT)
    blocks = (
        ("v", step["v"][:, columns], map_left + 7 * cell + 0.6),
        ("out", step["heads"][head], 4.6),
    )
    for name, block, left in blocks:
        _grid(ax, left, top - (7 * cell - 7 * small) / 2, block, norm, small)
        _frame(ax, left, top - (7 * cell - 7 * small) / 2, 4 * small, 7 * small, colour)
        _text(
            ax,
            left + 2 * small,
            top + 0.12,
            f"{name}{head + 1}",
            va="bottom",
            color=colour,
            size=FONT,
        )
    _text(ax, 4.38, top - 3.5 * cell, "=", size=FONT)
    _text(
        ax,
        5.55,
        top - 3.5 * cell,
        f"head {head + 1}: softmax(q{head + 1} k{head + 1}ᵀ / √4),\n"
        f"on features {head * d_k}-{(head + 1) * d_k - 1} only;\nits weights × its values",
        ha="left",
        color=colour,
    )


def heads_figure() -> Figure:
    """Each head attends with its own 4 features: its own map of weights, its own 4-wide output.

    One row per head: the head's attention weights over the running example (rows: the word that
    asks, columns: the word it reads; the largest weight of each row printed, without its leading
    zero), times the head's values, gives the head's output. Both heads run chapter 3's attention.
    """
    step = example_heads()
    norm = _norm(step["v"], step["heads"])
    fig, ax = _page(8.0, 5.55, "Each head attends on its own features")
    for head in range(2):
        _head_row(ax, 4.5 - head * 2.45, head, step, norm)
    ax.set_aspect("equal")  # imshow would otherwise set its own aspect
    return fig


# ----------------------------------------------------------------------------- the merge


def merge_figure() -> Figure:
    """The heads' outputs side by side, times ``W_O``: each head writes through its own rows.

    Top: ``concat`` (7 x 8, head 1's output then head 2's) times ``W_O`` (8 x 8) gives the output,
    whose first three columns are :data:`OUTPUT_FEATURES`.
    Bottom: the same output as ``out1 @ W_O[0:4] + out2 @ W_O[4:8]``: each head writes into all 8
    features through its own 4 rows of ``W_O``.
    """
    step = example_heads()
    w_o = example_projections()[3]
    heads, concat, output = step["heads"], step["concat"], step["output"]
    norm, cell = _norm(concat, w_o, output), 0.17
    fig, ax = _page(8.0, 4.7, "Side by side, then W_O: each head writes through its own rows")
    top = 3.95
    _word_labels(ax, 0.62, top, words(ENGLISH), cell)
    _grid(ax, 0.7, top, concat, norm, cell)
    _text(ax, 0.7 + 4 * cell, top + 0.2, "out1 | out2")
    _text(ax, 2.3, top - 3.5 * cell, "×", size=FONT)
    _grid(ax, 2.55, top, w_o, norm, cell)
    _text(ax, 2.55 + 4 * cell, top + 0.2, "W_O (8 × 8)")
    _text(ax, 4.15, top - 3.5 * cell, "=", size=FONT)
    _grid(ax, 4.4, top, output, norm, cell)
    _text(ax, 4.4 + 4 * cell, top + 0.2, "output")
    for h in range(2):
        _frame(ax, 0.7 + 4 * cell * h, top, 4 * cell, 7 * cell, HEAD_COLOURS[h])
        _frame(ax, 2.55, top - 4 * cell * h, 8 * cell, 4 * cell, HEAD_COLOURS[h])
    first, second, third = OUTPUT_FEATURES
    _text(
        ax,
        5.95,
        top - 3.5 * cell,
        "rows 0-3 of W_O read\nhead 1's features,\nrows 4-7 head 2's.\n"
        f"Output columns 0-2:\n{first}, {second},\n{third}",
        ha="left",
        color=MUTED,
    )

    low = 1.85  # the second line: the same output as a sum over the heads
    left = 0.25
    for h in range(2):
        _grid(ax, left, low, heads[h], norm, cell)
        _frame(ax, left, low, 4 * cell, 7 * cell, HEAD_COLOURS[h])
        _text(ax, left + 2 * cell, low + 0.2, f"out{h + 1}", color=HEAD_COLOURS[h])
        _text(ax, left + 4 * cell + 0.15, low - 3.5 * cell, "×", size=FONT)
        rows = w_o[4 * h : 4 * h + 4]
        _grid(ax, left + 4 * cell + 0.3, low, rows, norm, cell)
        _frame(ax, left + 4 * cell + 0.3, low, 8 * cell, 4 * cell, HEAD_COLOURS[h])
        _text(
            ax,
            left + 8 * cell + 0.3,
            low + 0.2,
            f"W_O rows {4 * h}-{4 * h + 3}",
            color=HEAD_COLOURS[h],
        )
        sign = "+" if h == 0 else "="
        _text(ax, left + 12 * cell + 0.45, low - 3.5 * cell, sign, size=FONT)
        left += 12 * cell + 0.7
    _grid(ax, left, low, output, norm, cell)
    _text(ax, left + 4 * cell, low + 0.2, "the same output")
    _text(
        ax,
        0.25,
        low - 7 * cell - 0.15,
        "each head's 4 features reach all 8 output features, through its own 4 rows of W_O",
        ha="left",
        va="top",
        color=MUTED,
    )
    return fig


FIGURES = {
    "multi_head_why.svg": why_figure,
    "multi_head_split.svg": split_figure,
    "multi_head_heads.svg": heads_figure,
    "multi_head_merge.svg": merge_figure,
}
