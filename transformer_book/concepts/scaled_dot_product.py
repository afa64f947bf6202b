"""Chapter 3's pictures: one word of the running example attends to the sentence; the projections.

The query word (``"play"``) is compared with the key of every word of "Two dogs play in the grass.":

1. each comparison is a score, ``q · k / sqrt(d_k)``;
2. the softmax turns the seven scores into weights that are positive and sum to 1;
3. the word's new vector is the sum of the values, each multiplied by its weight.

The queries, keys and values are the running example's vectors
(:func:`~transformer_book.example.embed`) times the projections that chapter 3 sets by hand
(:func:`~transformer_book.example.hand_set_projections`): each word offers a few of four features
(noun, plural, verb, number) as its key and hands them over as its value, and *play* asks for a
plural noun, its subject. So play's largest weight goes to *dogs*, and its new vector carries
"plural". :func:`projections_figure` draws how the three matrices turn the sentence's vectors into
those tables.
"""

from __future__ import annotations

import math

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from ..example import ENGLISH, FEATURES, embed, hand_set_projections, words
from ._style import COLOURS, FONT, INK, MUTED, SMALL, TITLE, arrow, canvas

__all__ = ["FIGURES", "attention_steps_figure", "one_query", "projections_figure"]

CELL = 0.45  # inches: one feature's cell in a strip of numbers
ROW = 0.42  # inches: one word's row
KEY_X, SCORE_X, WEIGHT_X, BAR_X, VALUE_X = 0.95, 3.2, 4.2, 4.65, 5.95
BAR_LENGTH = 0.9  # the bar of a weight of 1


def one_query(word: str = "play") -> dict[str, object]:
    """Chapter 3's hand-set attention of one word of the running example over the sentence.

    Returns a dict with ``words``, ``index`` (the query word's position), ``query``, ``keys``,
    ``values`` (the projected vectors), ``scores`` (``q · k / sqrt(d_k)``), ``weights`` (their
    softmax) and ``output`` (the weighted sum of the values).

    Shape:
        query, output: ``(d_k,)``; keys, values: ``(T, d_k)``; scores, weights: ``(T,)``, with
        ``T = 7`` words and ``d_k = 4`` features.
    """
    tokens = words(ENGLISH)
    if word not in tokens:
        raise ValueError(f"word={word!r} is not a word of {ENGLISH!r}: {tokens}")
    x = embed(ENGLISH)  # (T, d_model)
    w_q, w_k, w_v = hand_set_projections()
    index = tokens.index(word)
    query, keys, values = x[index] @ w_q, x @ w_k, x @ w_v
    scores = keys @ query / math.sqrt(query.numel())  # (T,)
    weights = scores.softmax(dim=0)
    return {
        "words": tokens,
        "index": index,
        "query": query,
        "keys": keys,
        "values": values,
        "scores": scores,
        "weights": weights,
        "output": weights @ values,
    }


def _say(ax: Axes, x: float, y: float, text: str, **style: object) -> None:
    """A label at ``(x, y)``: centred, ``FONT`` points, in ink, unless ``style`` says otherwise."""
    ax.text(x, y, text, **{"ha": "center", "va": "center", "fontsize": FONT, "color": INK, **style})


def _numbers(
    ax: Axes, x: float, y: float, vector: Tensor, fmt: str = "{:.2f}", cell: float = CELL
) -> None:
    """A vector as a row of cells, blue as dark as the entry (up to 1), zeros left blank."""
    cmap, norm = colormaps["Blues"], Normalize(0.0, 1.8)  # never so dark that the digits vanish
    for i, value in enumerate(vector.tolist()):
        shown = abs(value) > 5e-3
        colour = cmap(norm(min(abs(value), 1.0))) if shown else "white"
        corner = (x + i * cell, y - ROW * 0.4)
        ax.add_patch(Rectangle(corner, cell, ROW * 0.8, facecolor=colour, edgecolor=INK, lw=0.4))
        if shown:
            _say(ax, x + (i + 0.5) * cell, y, fmt.format(value), fontsize=SMALL)


def _features(ax: Axes, x: float, y: float, cell: float = CELL) -> None:
    """The names of the four features, slanted, above a strip whose left edge is at ``x``."""
    for i, name in enumerate(FEATURES):
        style = {"ha": "left", "va": "bottom", "fontsize": SMALL, "color": MUTED, "rotation": 30}
        _say(ax, x + (i + 0.3) * cell, y, name, **style)


def _rows(ax: Axes, step: dict[str, object], top: float) -> None:
    """One row per word: its key, its score, its weight with a bar, its weighted value."""
    keys, values, scores, weights = step["keys"], step["values"], step["scores"], step["weights"]
    for i, token in enumerate(step["words"]):
        y = top - i * ROW
        if i == step["index"]:  # the query word's own row
            band = Rectangle((0.05, y - ROW / 2), 7.9, ROW, facecolor=COLOURS["token"], zorder=0)
            ax.add_patch(band)
        _say(ax, KEY_X - 0.12, y, token, ha="right")
        _numbers(ax, KEY_X, y, keys[i], "{:.0f}")
        _say(ax, SCORE_X, y, f"{round(float(scores[i]), 2) + 0.0:.2f}")  # + 0.0: no "-0.00"
        _say(ax, WEIGHT_X, y, f"{weights[i]:.3f}")
        bar_length = max(BAR_LENGTH * float(weights[i]), 0.01)
        colour = COLOURS["attention"]
        bar = Rectangle(
            (BAR_X, y - 0.11), bar_length, 0.22, facecolor=colour, edgecolor=INK, lw=0.6
        )
        ax.add_patch(bar)
        _numbers(ax, VALUE_X, y, weights[i] * values[i])


def attention_steps_figure() -> Figure:
    """Query -> scores -> softmax -> weighted sum of the values, for *play*."""
    word = "play"
    step = one_query(word)
    strip = len(FEATURES) * CELL
    # heights, bottom up: the new vector, the sums, the words' rows, the headings, the query
    sum_y = 0.55
    line_y = sum_y + 0.32
    top = line_y + 0.75 * ROW + (len(step["words"]) - 1) * ROW  # the first word's row
    query_y = top + 1.3
    height = query_y + 1.0
    fig, ax = canvas(8.0, height)
    ax.set_xlim(0, 8.0)
    ax.set_ylim(0, height)
    title = f"{word} asks for a plural noun in \u201c{ENGLISH}\u201d"
    _say(ax, 0.05, height - 0.05, title, ha="left", va="top", fontsize=TITLE)
    _say(ax, KEY_X - 0.12, query_y, f"query ({word})", ha="right")
    _features(ax, KEY_X, query_y + 0.22)
    _numbers(ax, KEY_X, query_y, step["query"], "{:.0f}")
    _say(ax, KEY_X + strip + 0.15, query_y, "is compared with every key", ha="left", color=MUTED)
    _features(ax, VALUE_X, query_y + 0.22)
    headings = {
        KEY_X + strip / 2: "keys",
        SCORE_X: "1. score\nq · k / √4",
        WEIGHT_X + 0.3: "2. softmax\nweight",
        VALUE_X + strip / 2: "3. weight × value",
    }
    for x, text in headings.items():
        _say(ax, x, top + 0.3, text, va="bottom", fontsize=SMALL, fontweight="bold")
    _rows(ax, step, top)
    # the sums: the weights add up to 1, the weighted values to the new vector
    ax.plot([WEIGHT_X - 0.35, BAR_X + BAR_LENGTH], [line_y, line_y], color=INK, lw=0.8)
    ax.plot([VALUE_X - 0.1, VALUE_X + strip + 0.1], [line_y, line_y], color=INK, lw=0.8)
    _say(
        ax, WEIGHT_X, sum_y, f"sum {float(step['weights'].sum()):.3f}", fontsize=SMALL, color=MUTED
    )
    _say(ax, VALUE_X - 0.12, sum_y, "sum =", ha="right")
    _numbers(ax, VALUE_X, sum_y, step["output"])
    _say(ax, VALUE_X + strip / 2, sum_y - 0.4, f"new vector for {word}")
    return fig


def _vectors(ax: Axes, x: float, top: float, vectors: Tensor) -> None:
    """The sentence's vectors as strips of small cells, blue positive and red negative."""
    cmap, size, width = colormaps["RdBu"], float(vectors.abs().max()), 0.16
    norm = Normalize(-size, size)
    for i, row in enumerate(vectors.tolist()):
        for j, value in enumerate(row):
            corner = (x + j * width, top - i * ROW - ROW * 0.4)
            colour = cmap(norm(value))
            ax.add_patch(
                Rectangle(corner, width, ROW * 0.8, facecolor=colour, edgecolor=INK, lw=0.3)
            )


def projections_figure() -> Figure:
    """The vectors times ``W_Q``, ``W_K``, ``W_V``: what a word asks for, offers, hands over."""
    tokens = words(ENGLISH)
    x = embed(ENGLISH)  # (T, d_model)
    w_q, w_k, w_v = hand_set_projections()
    tables = {
        "Q = x W_Q\nasks for": x @ w_q,
        "K = x W_K\noffers": x @ w_k,
        "V = x W_V\nhands over": x @ w_v,
    }
    cell = 0.36
    top, left = 0.0, 0.75  # the first word's row; the left edge of the vectors
    bottom = top - (len(tokens) - 1) * ROW - 0.35
    fig, ax = canvas(8.0, 1.75 + top - bottom)
    ax.set_position((0.0, 0.0, 1.0, 1.0))  # one data unit = one inch
    ax.set_xlim(0, 8.0)
    ax.set_ylim(bottom, top + 1.75)
    for i, token in enumerate(tokens):
        _say(ax, left - 0.1, top - i * ROW, token, ha="right")
    _vectors(ax, left, top, x)
    _say(ax, left + 0.64, top + 0.4, "x: the words\nof chapter 2", va="bottom")
    start = left + 8 * 0.16 + 0.15  # the arrow, then the three tables
    arrow(ax, (start, top - 3 * ROW), (start + 0.45, top - 3 * ROW))
    for k, (title, table) in enumerate(tables.items()):
        x0 = start + 0.55 + k * (len(FEATURES) * cell + 0.2)
        middle = x0 + len(FEATURES) * cell / 2
        _say(ax, middle, top + 1.0, title, va="bottom")
        _features(ax, x0, top + 0.22, cell)
        for i in range(len(tokens)):
            _numbers(ax, x0, top - i * ROW, table[i], "{:.0f}", cell)
    return fig


FIGURES = {"scaled_dot_product.svg": attention_steps_figure, "projections.svg": projections_figure}
