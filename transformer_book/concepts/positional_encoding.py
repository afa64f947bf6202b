"""Chapter 2's picture: the sinusoidal positional encoding (位置编码) as waves over the positions,
and as a table.

Top, the sine columns of the table for the running example's width (``d_model = 8``): each is a wave
over the positions, with its own wavelength, and the dots are the values at the integer positions,
taken from :func:`~transformer_lib.sinusoidal_table`. Bottom, the table's rows for the seven
positions of "Two dogs play in the grass.", with their values: row ``p`` is what chapter 2 adds to
the vector of the word at position ``p``.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from transformer_lib.nn.positional import sinusoidal_table

from ..example import ENGLISH, words
from . import _style

__all__ = ["FIGURES", "positional_encoding_figure", "wavelengths"]

LINE_COLOURS = ("#1f5fa8", "#d9822b", "#3a9a4a", "#8e5cc4", "#b8434f", "#4f9fb0")


def wavelengths(d_model: int) -> list[float]:
    """The wavelength of each sine/cosine pair, ``2 * pi * 10000 ** (2i / d_model)`` positions.

    Shape:
        a list of ``d_model / 2`` floats.
    """
    return [2 * math.pi * 10000 ** (2 * i / d_model) for i in range(d_model // 2)]


def positional_encoding_figure() -> Figure:
    """The sine columns (``d_model = 8``) as waves over positions ``0..40``, and the table for the
    running example's positions.

    Shape:
        top: one curve per pair (``d_model / 2`` curves), dots at the integer positions;
        bottom: the table ``(T, d_model)``, ``T = len(words(ENGLISH))``.
    """
    d_model, span = 8, 40
    sentence = words(ENGLISH)
    length = len(sentence)
    table = sinusoidal_table(span + 1, d_model)  # (span + 1, d_model): the dots
    ink = {"color": _style.INK, "fontsize": _style.SMALL}

    fig, (waves, heat) = plt.subplots(
        2, 1, figsize=(8.0, 7.4), gridspec_kw={"height_ratios": [1.0, 1.15]}
    )
    fig.patch.set_facecolor("white")
    # top: the sine columns 0, 2, 4, ... over the positions
    smooth = torch.linspace(0, span, 400, dtype=torch.float64)
    waves.axvspan(-0.4, length - 0.6, color=_style.COLOURS["token"], zorder=0)
    waves.text(length / 2 - 0.5, 1.12, "our\nsentence", ha="center", va="bottom", **ink)
    for i, wavelength in enumerate(wavelengths(d_model)):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        wave = torch.sin(2 * math.pi * smooth / wavelength)
        label = f"column {2 * i}: wavelength {wavelength:,.1f}"
        waves.plot(smooth.tolist(), wave.tolist(), color=colour, lw=1.6, label=label)
        waves.plot(range(span + 1), table[:, 2 * i].tolist(), "o", color=colour, markersize=3.5)
    waves.set_xlim(-0.5, span + 0.5)
    waves.set_ylim(-1.15, 2.0)
    waves.set_yticks([-1.0, -0.5, 0.0, 0.5, 1.0])
    waves.set_xlabel("position p", **ink)
    waves.set_ylabel("PE(p, column)", **ink)
    waves.tick_params(labelsize=_style.SMALL, colors=_style.INK)
    waves.axhline(0, color=_style.MUTED, lw=0.6)
    waves.legend(loc="upper right", fontsize=_style.SMALL, ncol=2, frameon=True, framealpha=0.95)
    title = f"the sine columns of the table, d_model = {d_model}: one wavelength each"
    waves.set_title(title, fontsize=_style.FONT, color=_style.INK)
    # bottom: the table for the sentence's positions, with its values
    rows = table[:length]  # (T, d_model)
    heat.imshow(rows.tolist(), cmap="RdBu", vmin=-1.6, vmax=1.6, aspect="auto")
    for p in range(length):
        for c in range(d_model):
            heat.text(c, p, f"{rows[p, c]:.2f}", ha="center", va="center", **ink)
    heat.set_xticks(
        range(d_model), [f"{c}\n{'sin' if c % 2 == 0 else 'cos'}" for c in range(d_model)]
    )
    heat.set_yticks(range(length), [f"{p}  {word}" for p, word in enumerate(sentence)])
    heat.tick_params(labelsize=_style.SMALL, colors=_style.INK, length=0)
    heat.set_xlabel("column (pair i = column // 2)", **ink)
    heat.set_ylabel("position p and its word", **ink)
    size = f"T × d_model = {length} × {d_model}"
    title = f"the table for our sentence: {size}, added to the word vectors"
    heat.set_title(title, fontsize=_style.FONT, color=_style.INK)
    fig.tight_layout(h_pad=1.8)
    return fig


FIGURES = {"positional_encoding.svg": positional_encoding_figure}
