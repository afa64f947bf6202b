"""Chapter 3's reason for attention: what a recurrent network's fixed-size state loses.

Top, a recurrent network reads "Zwei Hunde spielen im Gras." one word at a time. Each word goes
into one state of fixed size, ``h_t``, computed from the word and the state before it; a decoder
without attention, which writes the English, gets the last state alone. *Hunde* reaches *spielen*
only inside ``h_2``, mixed with *Zwei*; the path from *Hunde* to that decoder passes through every
state after it. Bottom, attention: *spielen* compares itself with every word and reads *Hunde*
directly, in one step, however far apart the two are.

The words come from :data:`~transformer_book.example.GERMAN`; the figure prints no numbers.
"""

from __future__ import annotations

import re

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..example import GERMAN
from ._style import COLOURS, FONT, HIGHLIGHT, INK, MUTED, SMALL, TITLE, arrow, box, canvas

__all__ = ["FIGURES", "GLOSSES", "german_words", "recurrent_bottleneck_figure"]

# The English word each German word of the running example becomes ("im" is "in dem": in the).
GLOSSES = {"Zwei": "two", "Hunde": "dogs", "spielen": "play", "im": "in the", "Gras": "grass"}
READER, SUBJECT = "spielen", "Hunde"  # the word that reads, and the word it needs
WIDTH, HEIGHT = 8.0, 5.4  # inches; the axes' data units are inches
STEP = 1.05  # inches between two words
LEFT = 0.75  # x of the first word
WORD_W, WORD_H = 0.96, 0.42
STATE_W, STATE_H = 0.62, 0.5
RNN_WORDS, RNN_STATES = 4.45, 3.3  # y of the top panel's words and states
ATTENTION_WORDS = 0.6  # y of the bottom panel's words
TOP_TITLE, SEPARATOR, BOTTOM_TITLE = 5.15, 2.4, 2.1  # y of the titles and the line between


def german_words() -> list[str]:
    """The words of :data:`~transformer_book.example.GERMAN` as written, the full stop a word of its
    own: ``["Zwei", "Hunde", "spielen", "im", "Gras", "."]``.
    """
    return re.findall(r"\w+|[^\w\s]", GERMAN)


def _state(i: int) -> str:
    """The name of the state after word ``i`` (counted from 0): h₁, h₂, ..."""
    return "h" + str(i + 1).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _word(ax: Axes, x: float, y: float, word: str, strong: bool) -> None:
    """A German word in a token box, its English gloss under it in grey."""
    weight = "bold" if strong else "normal"
    box(ax, x, y, WORD_W, WORD_H, word, kind="token", size=FONT, fontweight=weight)
    gloss = GLOSSES.get(word, word)
    ax.text(x, y - WORD_H / 2 - 0.05, gloss, ha="center", va="top", fontsize=SMALL, color=MUTED)


def _heading(ax: Axes, y: float, title: str, note_x: float, note: str) -> None:
    """A panel's bold title at the left edge, and a grey note after it from ``note_x``."""
    ax.text(0.2, y, title, fontsize=TITLE, color=INK, fontweight="bold", va="center")
    ax.text(note_x, y, note, fontsize=SMALL, color=MUTED, va="center")


def _recurrent(ax: Axes, tokens: list[str]) -> None:
    """The top panel: word by word into one state of fixed size, and the decoder after the last."""
    subject, reader = tokens.index(SUBJECT), tokens.index(READER)
    note = "reads one word at a time into one state of fixed size"
    _heading(ax, TOP_TITLE, "A recurrent network", 3.0, note)
    for i, word in enumerate(tokens):
        x = LEFT + i * STEP
        _word(ax, x, RNN_WORDS, word, strong=i in (subject, reader))
        colour = HIGHLIGHT if i == subject else INK
        arrow(ax, (x, RNN_WORDS - WORD_H / 2 - 0.3), (x, RNN_STATES + STATE_H / 2), colour)
        box(ax, x, RNN_STATES, STATE_W, STATE_H, _state(i), kind="feedforward")
        if i > 0:
            colour = HIGHLIGHT if i - 1 >= subject else INK  # from Hunde's state on
            arrow(
                ax,
                (x - STEP + STATE_W / 2, RNN_STATES),
                (x - STATE_W / 2, RNN_STATES),
                colour,
                width=1.6 if colour == HIGHLIGHT else 1.0,
            )
    last = LEFT + (len(tokens) - 1) * STEP
    decoder_x = last + 1.25
    box(ax, decoder_x, RNN_STATES, 1.0, STATE_H + 0.1, "decoder", kind="attention", size=FONT)
    arrow(ax, (last + STATE_W / 2, RNN_STATES), (decoder_x - 0.5, RNN_STATES), HIGHLIGHT, 1.6)
    below = RNN_STATES - STATE_H / 2 - 0.12
    ax.text(
        LEFT - WORD_W / 2,
        below,
        f"{READER} gets {SUBJECT} only inside {_state(subject)}, mixed with "
        f"{tokens[0]};\nwithout attention, the decoder gets {_state(len(tokens) - 1)} alone: "
        f"{len(tokens)} words in one state of the same size",
        ha="left",
        va="top",
        fontsize=SMALL,
        color=INK,
        linespacing=1.3,
    )


def _attention(ax: Axes, tokens: list[str]) -> None:
    """The bottom panel: spielen compares itself with every word and reads Hunde directly."""
    subject, reader = tokens.index(SUBJECT), tokens.index(READER)
    note = f"{READER} looks at every word, and reads {SUBJECT} directly, in one step"
    _heading(ax, BOTTOM_TITLE, "Attention", 1.55, note)
    top = ATTENTION_WORDS + WORD_H / 2 + 0.04
    start = LEFT + reader * STEP
    for i, word in enumerate(tokens):
        x = LEFT + i * STEP
        _word(ax, x, ATTENTION_WORDS, word, strong=i in (subject, reader))
        if i == reader:
            continue
        strong = i == subject
        bend = 0.55 if i < reader else -0.55  # arcs above the words, either way
        ax.annotate(
            "",
            xy=(x, top),
            xytext=(start, top),
            arrowprops={
                "arrowstyle": "-|>",
                "color": HIGHLIGHT if strong else MUTED,
                "lw": 2.4 if strong else 0.8,
                "connectionstyle": f"arc3,rad={bend}",
                "shrinkA": 2,
                "shrinkB": 2,
            },
        )


def recurrent_bottleneck_figure() -> Figure:
    """A recurrent network's fixed-size state against attention's direct look, on the example.

    Top: the words of the German sentence enter states ``h_1 .. h_S`` one at a time, each state
    made from the word and the state before it; the decoder, without attention, gets the last state.
    The path from *Hunde* on is drawn in the highlight colour. Bottom: *spielen* looks at every word
    with one arrow each, the one to *Hunde* drawn strong.

    Shape:
        one box per word, ``S = 6`` for the running example.
    """
    tokens = german_words()
    fig, ax = canvas(WIDTH, HEIGHT)
    _recurrent(ax, tokens)
    ax.plot([0.2, WIDTH - 0.2], [SEPARATOR, SEPARATOR], color=COLOURS["mask"], lw=1.0)
    _attention(ax, tokens)
    ax.set_xlim(0.0, WIDTH)
    ax.set_ylim(0.0, HEIGHT)
    return fig


FIGURES = {"recurrent_bottleneck.svg": recurrent_bottleneck_figure}
