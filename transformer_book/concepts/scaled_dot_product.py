"""Chapter 3's picture: one word of the running example attends to the sentence, in three steps.

The query word (``"play"``) is compared with the key of every word of "Two dogs play in the grass.":

1. each comparison is a score, ``q · k / sqrt(d_k)``;
2. the softmax turns the seven scores into weights that are positive and sum to 1;
3. the word's new vector is the sum of the values, each multiplied by its weight.

The numbers are the running example's (:func:`~transformer_book.example.embed`, ``d_model = 8``),
with the sentence's vectors used directly as queries, keys and values: the first version chapter 3
builds, before it adds the learned projections. Each vector is drawn as a strip of eight coloured
cells on the colour scale of chapters 1 and 2 (blue positive, red negative); each value strip is as
opaque as its weight is large.
"""

from __future__ import annotations

import math

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from ..example import ENGLISH, embed, words
from ._style import COLOURS, FONT, INK, MUTED, SMALL, TITLE, canvas

__all__ = ["FIGURES", "attention_steps_figure", "one_query"]

CELL = 0.16  # width of one feature's cell in a strip (inches)
ROW = 0.42  # height of one word's row
KEY_X, SCORE_X, WEIGHT_X, BAR_X, VALUE_X = 1.05, 2.95, 4.0, 4.5, 6.25
BAR_LENGTH = 1.35  # the bar of a weight of 1


def one_query(
    word: str = "play", sentence: str = ENGLISH, d_model: int = 8, seed: int = 0
) -> dict[str, object]:
    """Scaled dot-product attention of one word of ``sentence`` over all of its words, without
    projections.

    The query, the keys and the values are the sentence's vectors from
    :func:`~transformer_book.example.embed` (``seed`` and ``d_model`` as there).

    Returns a dict with ``words`` (the sentence's words), ``index`` (the query word's position),
    ``vectors``, ``scores`` (``q · k / sqrt(d_model)``), ``weights`` (their softmax) and ``output``
    (the weighted sum of the values).

    Shape:
        vectors: ``(T, d_model)``; scores, weights: ``(T,)``; output: ``(d_model,)``.
    """
    tokens = words(sentence)
    if word not in tokens:
        raise ValueError(f"word={word!r} is not a word of {sentence!r}: {tokens}")
    x = embed(sentence, d_model=d_model, seed=seed)  # (T, d_model)
    index = tokens.index(word)
    scores = x @ x[index] / math.sqrt(d_model)  # (T,)
    weights = scores.softmax(dim=0)  # (T,)
    return {
        "words": tokens,
        "index": index,
        "vectors": x,
        "scores": scores,
        "weights": weights,
        "output": weights @ x,
    }


def _strip(
    ax: Axes, x: float, y: float, vector: Tensor, norm: Normalize, alpha: float = 1.0
) -> None:
    """A vector as a row of coloured cells whose left edge is at ``x``, centred on height ``y``."""
    cmap = colormaps["RdBu"]  # as in chapters 1 and 2: blue positive, red negative
    for i, value in enumerate(vector.tolist()):
        ax.add_patch(
            Rectangle(
                (x + i * CELL, y - CELL * 0.8),
                CELL,
                CELL * 1.6,
                facecolor=cmap(norm(value)),
                edgecolor=INK,
                linewidth=0.4,
                alpha=alpha,
            )
        )


def attention_steps_figure(word: str = "play") -> Figure:
    """Query -> scores -> softmax -> weighted sum of the values, for one word of the running
    example.
    """
    step = one_query(word)
    tokens, index = step["words"], step["index"]
    vectors, scores, weights, output = (
        step["vectors"],
        step["scores"],
        step["weights"],
        step["output"],
    )
    size = float(max(vectors.abs().max(), output.abs().max()))
    norm = Normalize(-size, size)
    count = len(tokens)
    width = len(vectors[0]) * CELL
    # heights, from the bottom up: the new vector, the sums, the words' rows, the headings, the
    # query, the title
    sum_y = 0.62
    line_y = sum_y + 0.32
    top = line_y + 0.75 * ROW + (count - 1) * ROW  # the first word's row
    query_y = top + 1.05
    height = query_y + 0.75
    fig, ax = canvas(8.0, height)
    ax.set_xlim(0, 8.0)
    ax.set_ylim(0, height)
    ax.text(
        0.05,
        height - 0.05,
        f"One word attends to \u201c{ENGLISH}\u201d",
        ha="left",
        va="top",
        fontsize=TITLE,
        color=INK,
    )

    # the query, then the column headings
    ax.text(
        KEY_X - 0.15, query_y, f"query ({word})", ha="right", va="center", fontsize=FONT, color=INK
    )
    _strip(ax, KEY_X, query_y, vectors[index], norm)
    ax.text(
        KEY_X + width + 0.15,
        query_y,
        "is compared with every key",
        ha="left",
        va="center",
        fontsize=FONT,
        color=MUTED,
    )
    headings = (
        (KEY_X + width / 2, "keys"),
        (SCORE_X, "1. score\nq · k / √8"),
        (WEIGHT_X + 0.45, "2. softmax\nweight"),
        (VALUE_X + width / 2, "3. weight\n× value"),
    )
    for x, text in headings:
        ax.text(
            x,
            top + 0.3,
            text,
            ha="center",
            va="bottom",
            fontsize=FONT,
            color=INK,
            fontweight="bold",
        )

    for i, token in enumerate(tokens):
        y = top - i * ROW
        if i == index:  # the query word's own row
            ax.add_patch(
                Rectangle(
                    (0.05, y - ROW / 2),
                    7.9,
                    ROW,
                    facecolor=COLOURS["token"],
                    edgecolor="none",
                    zorder=0,
                )
            )
        ax.text(KEY_X - 0.15, y, token, ha="right", va="center", fontsize=FONT, color=INK)
        _strip(ax, KEY_X, y, vectors[i], norm)
        ax.text(SCORE_X, y, f"{scores[i]:.2f}", ha="center", va="center", fontsize=FONT, color=INK)
        ax.text(
            WEIGHT_X, y, f"{weights[i]:.3f}", ha="center", va="center", fontsize=FONT, color=INK
        )
        ax.add_patch(
            Rectangle(
                (BAR_X, y - 0.11),
                max(BAR_LENGTH * float(weights[i]), 0.01),
                0.22,
                facecolor=COLOURS["attention"],
                edgecolor=INK,
                linewidth=0.6,
            )
        )
        _strip(ax, VALUE_X, y, vectors[i], norm, alpha=max(float(weights[i]), 0.08))

    # the sums: the weights add up to 1, the weighted values to the new vector
    ax.plot([WEIGHT_X - 0.35, BAR_X + BAR_LENGTH], [line_y, line_y], color=INK, lw=0.8)
    ax.plot([VALUE_X - 0.1, VALUE_X + width + 0.1], [line_y, line_y], color=INK, lw=0.8)
    ax.text(
        WEIGHT_X,
        sum_y,
        f"sum {float(weights.sum()):.3f}",
        ha="center",
        va="center",
        fontsize=SMALL,
        color=MUTED,
    )
    ax.text(VALUE_X - 0.2, sum_y, "sum =", ha="right", va="center", fontsize=FONT, color=INK)
    _strip(ax, VALUE_X, sum_y, output, norm)
    ax.text(
        VALUE_X + width / 2,
        sum_y - 0.38,
        f"new vector for {word}",
        ha="center",
        va="center",
        fontsize=FONT,
        color=INK,
    )
    return fig


FIGURES = {"scaled_dot_product.svg": attention_steps_figure}
