"""Chapter 11's concept picture: from a German caption to a BLEU score (机器翻译的流水线).

The running example's German caption enters at the top left; a subword tokenizer turns it into
tokens and the tokens into ids; the encoder reads the ids once; the decoder writes English ids one
at a time (greedy or beam search), which become English words; sacreBLEU compares them with the
reference translation. The figure names the stages and does not invent their contents: the two
sentences come from :mod:`~transformer_book.example`, and every size it prints (vocabulary,
layers, width, beam) is read from the ``cpu`` translation profile that the chapter trains.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_tasks.translation.profiles import translation_profile

from ..example import ENGLISH, GERMAN
from ._style import FONT, INK, MUTED, SMALL, arrow, box, canvas

__all__ = ["FIGURES", "pipeline_figure"]

BOX_W, BOX_H = 1.72, 0.92  # inches (the axes' data units are inches)
COLUMNS = (0.92, 2.9, 4.88, 6.86)  # x of the four boxes of each row
TOP, BOTTOM = 3.55, 1.05  # y of the two rows


def _stage(ax: Axes, x: float, y: float, name: str, detail: str, kind: str) -> None:
    """A box with the stage's name in the upper half and one or two lines of detail below it."""
    box(ax, x, y, BOX_W, BOX_H, kind=kind)
    ax.text(x, y + 0.2, name, ha="center", va="center", fontsize=FONT, color=INK, fontweight="bold")
    ax.text(
        x, y - 0.17, detail, ha="center", va="center", fontsize=SMALL, color=INK, linespacing=1.1
    )


def _sentence(ax: Axes, x: float, y: float, heading: str, text: str) -> None:
    """A sentence of the running example on two balanced lines, with a heading above its box."""
    words = text.split()
    cut = min(
        range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(" ".join(words[i:])))
    )
    lines = " ".join(words[:cut]) + "\n" + " ".join(words[cut:])
    box(ax, x, y, BOX_W, BOX_H, lines, kind="token", size=SMALL)
    ax.text(x, y + BOX_H / 2 + 0.08, heading, ha="center", va="bottom", fontsize=SMALL, color=MUTED)


def pipeline_figure() -> Figure:
    """The translation pipeline of chapter 11, drawn on the running example.

    Top row, left to right: German text, subword tokens, token ids, encoder. Bottom row, right to
    left: decoder (fed the encoder's memory), English words, sacreBLEU against the reference.

    Shape:
        token ids ``(1, S)`` for a source of ``S`` subword tokens; the encoder's memory
        ``(1, S, d_model)``; the decoder's output ids ``(1, T)``, written one position at a time.
    """
    profile = translation_profile("cpu")
    fig, ax = canvas(8.0, 4.4)
    x1, x2, x3, x4 = COLUMNS
    # the source side, left to right
    _sentence(ax, x1, TOP, "German source", GERMAN)
    _stage(ax, x2, TOP, "subwords", f"BPE vocabulary\nof {profile.data.vocab_size:,} tokens", "add")
    _stage(ax, x3, TOP, "token ids", "(1, S) integers", "embedding")
    _stage(ax, x4, TOP, "encoder", f"{profile.model.num_encoder_layers} layers", "attention")
    for left, right in ((x1, x2), (x2, x3), (x3, x4)):
        arrow(ax, (left + BOX_W / 2, TOP), (right - BOX_W / 2, TOP))
    # the encoder's memory goes down to the decoder's cross-attention
    arrow(ax, (x4, TOP - BOX_H / 2), (x4, BOTTOM + BOX_H / 2))
    ax.text(
        x4 - 0.1,
        (TOP + BOTTOM) / 2,
        f"memory\n(1, S, {profile.model.d_model})",
        ha="right",
        va="center",
        fontsize=SMALL,
        color=INK,
    )
    # the target side, right to left
    _stage(ax, x4, BOTTOM, "decoder", "greedy or\nbeam search", "attention")
    _stage(ax, x3, BOTTOM, "English", "ids decoded\nto words", "add")
    _stage(ax, x2, BOTTOM, "sacreBLEU", "n-gram overlap\n0 to 100", "output")
    _sentence(ax, x1, BOTTOM, "reference", ENGLISH)
    for right, left in ((x4, x3), (x3, x2)):
        arrow(ax, (right - BOX_W / 2, BOTTOM), (left + BOX_W / 2, BOTTOM))
    arrow(ax, (x1 + BOX_W / 2, BOTTOM), (x2 - BOX_W / 2, BOTTOM))
    # the decoder feeds each token it writes back in as its next input
    ax.annotate(
        "",
        xy=(x4 + BOX_W / 2, BOTTOM + 0.25),
        xytext=(x4 + BOX_W / 2, BOTTOM - 0.25),
        arrowprops={
            "arrowstyle": "-|>",
            "color": INK,
            "lw": 1.0,
            "connectionstyle": "arc3,rad=1.6",
        },
    )
    layers, beam = profile.model.num_decoder_layers, profile.decode.beam_size
    note = f"{layers} layers, beam width {beam};\nwrites one token at a time"
    ax.text(x4, BOTTOM - BOX_H / 2 - 0.1, note, ha="center", va="top", fontsize=SMALL, color=MUTED)
    ax.set_xlim(0.0, 8.0)
    ax.set_ylim(0.0, 4.4)
    return fig


FIGURES = {"translation_pipeline.svg": pipeline_figure}
