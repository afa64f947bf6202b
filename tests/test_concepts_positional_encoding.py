"""Chapter 2's concept picture shows the library's own table: its waves, its wavelengths and its
values."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.concepts.positional_encoding import positional_encoding_figure, wavelengths  # noqa: E402
from transformer_book.example import ENGLISH, words  # noqa: E402
from transformer_lib import sinusoidal_table  # noqa: E402

pytestmark = pytest.mark.book


def test_wavelengths_grow_tenfold_per_pair_at_width_8():
    assert wavelengths(8) == pytest.approx([2 * math.pi * 10**k for k in range(4)])


def test_the_dots_are_the_table_and_the_legend_gives_each_wavelength():
    fig = positional_encoding_figure()
    waves, heat = fig.axes
    table = sinusoidal_table(41, 8)
    dots = [line for line in waves.get_lines() if line.get_marker() == "o"]
    assert len(dots) == 4  # one per sine column: 0, 2, 4, 6
    for i, line in enumerate(dots):
        torch.testing.assert_close(
            torch.tensor(line.get_ydata(), dtype=torch.float32), table[:, 2 * i]
        )
    legend = [t.get_text() for t in waves.get_legend().get_texts()]
    wavelengths_shown = ["6.3", "62.8", "628.3", "6,283.2"]
    assert legend == [f"column {2 * i}: wavelength {w}" for i, w in enumerate(wavelengths_shown)]
    plt.close(fig)


def test_the_table_shows_every_value_of_the_running_examples_positions():
    fig = positional_encoding_figure()
    heat = fig.axes[1]
    sentence = words(ENGLISH)
    values = [t.get_text() for t in heat.texts]
    expected = [f"{v:.2f}" for v in sinusoidal_table(len(sentence), 8).flatten().tolist()]
    assert values == expected
    assert [t.get_text() for t in heat.get_yticklabels()] == [
        f"{p}  {w}" for p, w in enumerate(sentence)
    ]
    assert fig.get_size_inches()[0] <= 8.0
    sizes = [
        t.get_fontsize()
        for ax in fig.axes
        for t in ax.texts + ax.get_xticklabels() + ax.get_yticklabels()
    ]
    assert min(sizes) >= 10.5
    plt.close(fig)
