"""Chapter 5's concept picture: the running example split across two heads (多头注意力).

The seven words of "Two dogs play in the grass." (``d_model = 8``, from
:func:`~transformer_book.example.embed`) are projected to queries, keys and values, the features
are cut into ``h = 2`` heads of ``d_k = 4``, and each head computes its own attention weights over
the sentence. The heads' outputs are put side by side and mixed by ``W_O``.

The projections are the chapter's: ``torch.manual_seed(0)``, then ``torch.randn(4, 8, 8) / sqrt(8)``
gives ``W_Q, W_K, W_V, W_O`` (no biases). The chapter computes the same weights in the open and
checks them against :func:`example_head_weights`.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from ..example import ENGLISH, embed, words
from ._style import FONT, INK, MAX_WIDTH, MUTED, SMALL, TITLE, arrow, box

__all__ = ["FIGURES", "HEAD_COLOURS", "example_head_weights", "example_projections", "heads_figure"]

HEAD_COLOURS = ("#f9a65a", "#6bb6e8")  # head 1, head 2: as in diagrams.multi_head_figure
HEAD_MAPS = ("Oranges", "Blues")


def example_projections(d_model: int = 8, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The chapter's four projection matrices ``W_Q, W_K, W_V, W_O``, drawn after
    ``torch.manual_seed(seed)``.

    Each is ``torch.randn(d_model, d_model) / sqrt(d_model)`` (one call for all four), applied as
    ``x @ W``; the columns ``i * d_k .. (i + 1) * d_k - 1`` of ``W_Q``, ``W_K``, ``W_V`` belong to
    head ``i``.

    Shape:
        four ``(d_model, d_model)`` tensors.
    """
    torch.manual_seed(seed)
    w_q, w_k, w_v, w_o = torch.randn(4, d_model, d_model) / math.sqrt(d_model)
    return w_q, w_k, w_v, w_o


def example_head_weights(num_heads: int = 2, d_model: int = 8, seed: int = 0) -> Tensor:
    """Each head's attention weights over the running example, with :func:`example_projections`.

    Head ``i`` attends with the ``i``-th block of ``d_k = d_model / num_heads`` features of the
    queries and keys: ``softmax(q_i k_i^T / sqrt(d_k))``, every query may see every word.

    Shape:
        ``(num_heads, T, T)``, ``T = 7`` words; row ``t`` (a query) sums to 1 over the keys.
    """
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
    x = embed(ENGLISH, d_model=d_model, seed=seed)  # (T, d_model)
    w_q, w_k, _, _ = example_projections(d_model, seed)
    d_k, length = d_model // num_heads, x.size(0)
    q = (x @ w_q).view(length, num_heads, d_k).transpose(0, 1)  # (T, d_model) -> (h, T, d_k)
    k = (x @ w_k).view(length, num_heads, d_k).transpose(0, 1)  # (T, d_model) -> (h, T, d_k)
    return (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)  # (h, T, T)


def _word_column(ax: plt.Axes, x: float, top: float, step: float, labels: list[str]) -> None:
    """The sentence as a column of word boxes, first word at the top."""
    for i, word in enumerate(labels):
        box(ax, x, top - i * step, 0.75, step * 0.78, word, kind="token", size=SMALL)


def heads_figure() -> Figure:
    """The running example split across two heads: the words, each head's weights, the
    concatenation.

    Left, the seven words (each an 8-number vector). Middle, the two heads' attention weights
    (rows: the word that asks, columns: the word it reads); each row's largest weight is printed in
    its cell, without its leading zero. Right, the two heads' 4-wide outputs side by side, which
    ``W_O`` mixes back into 8 features.
    """
    labels = words(ENGLISH)
    weights = example_head_weights()  # (2, T, T)
    heads, length = weights.shape[0], weights.shape[1]
    width, height, cell = 7.9, 4.3, 0.28
    if width > MAX_WIDTH:
        raise ValueError(f"the figure is wider than {MAX_WIDTH} inches")
    fig = plt.figure(figsize=(width, height))
    fig.patch.set_facecolor("white")
    bg = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    bg.set_xlim(0, width)
    bg.set_ylim(0, height)
    bg.axis("off")

    top, bottom = 3.35, 3.35 - length * cell  # the rows of every block: one word each
    middle, header = (top + bottom) / 2, top + 0.38
    word_x = 0.42
    _word_column(bg, word_x, top - cell / 2, cell, labels)
    bg.text(
        word_x, header, "7 words,\n8 features", ha="center", va="center", fontsize=SMALL, color=INK
    )
    arrow(bg, (word_x + 0.45, middle), (1.42, middle))
    bg.text(
        1.15, middle + 0.1, "q, k, v\n= x W", ha="center", va="bottom", fontsize=SMALL, color=INK
    )

    map_left = (1.98, 4.12)
    for h in range(heads):
        left = map_left[h]
        ax = fig.add_axes(
            (left / width, bottom / height, length * cell / width, length * cell / height)
        )
        ax.imshow(weights[h].numpy(), cmap=HEAD_MAPS[h], vmin=0.0, vmax=0.7)
        for r, c in enumerate(weights[h].argmax(dim=-1).tolist()):  # each word's largest weight
            value = weights[h, r, c].item()
            ax.text(
                c,
                r,
                f"{value:.2f}".removeprefix("0"),
                ha="center",
                va="center",
                fontsize=SMALL,
                color="white" if value > 0.3 else INK,
            )
        ax.set_xticks(range(length), labels, rotation=90, fontsize=SMALL)
        ax.set_yticks(range(length), labels if h == 0 else [], fontsize=SMALL)
        ax.tick_params(length=0, pad=2)
        for spine in ax.spines.values():
            spine.set_color(HEAD_COLOURS[h])
            spine.set_linewidth(2.0)
        bg.text(
            left + length * cell / 2,
            header,
            f"head {h + 1}: features {4 * h}-{4 * h + 3}",
            ha="center",
            va="center",
            fontsize=SMALL,
            color=INK,
        )

    # the concatenation: 7 rows x (4 + 4) features, each half coloured by its head, then W_O
    cat_left, cat_cell = 6.62, 0.14
    arrow(bg, (map_left[1] + length * cell + 0.06, middle), (cat_left - 0.06, middle))
    for r in range(length):
        for c in range(8):
            bg.add_patch(
                Rectangle(
                    (cat_left + c * cat_cell, top - (r + 1) * cell),
                    cat_cell,
                    cell,
                    facecolor=HEAD_COLOURS[c // 4],
                    edgecolor=INK,
                    lw=0.5,
                )
            )
    cat_mid = cat_left + 4 * cat_cell
    bg.text(cat_mid, header, "side by side", ha="center", va="center", fontsize=SMALL, color=INK)
    arrow(bg, (cat_mid, bottom - 0.04), (cat_mid, bottom - 0.5))
    box(bg, cat_mid, bottom - 0.76, 1.0, 0.44, "× W_O", kind="attention", size=FONT)
    bg.text(
        (map_left[0] + map_left[1] + length * cell) / 2,
        0.08,
        "a row: how much one word reads from each word (sums to 1); the number: its largest weight",
        ha="center",
        va="bottom",
        fontsize=SMALL,
        color=MUTED,
    )
    bg.text(
        width / 2,
        height - 0.05,
        "Two heads read the same sentence in two ways",
        ha="center",
        va="top",
        fontsize=TITLE,
        color=INK,
    )
    return fig


FIGURES = {"multi_head_heads.svg": heads_figure}
