"""Chapter 1's concept picture shows the running example's real table, ids and scale."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from transformer_book.concepts.embedding import CELL, example_table, token_embedding_figure  # noqa: E402
from transformer_book.example import ENGLISH, embed, encode, vocabulary  # noqa: E402

pytestmark = pytest.mark.book


def test_the_table_is_the_one_the_running_example_reads_and_the_rng_is_left_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    table = example_table()
    assert torch.equal(torch.random.get_rng_state(), before)
    vocab = vocabulary(ENGLISH)
    assert table.shape == (len(vocab), 8) and not table[0].any()  # the <pad> row is zero
    torch.testing.assert_close(table[encode(ENGLISH, vocab)] * math.sqrt(8), embed(positions=False))


def test_the_figure_labels_every_id_and_the_computed_scale_and_draws_every_entry():
    fig = token_embedding_figure()
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.texts]
    vocab = vocabulary(ENGLISH)
    assert all(str(i) in shown for i in vocab.values()) and all(word in shown for word in vocab)
    scale = f"× √d_model\n= × {math.sqrt(8):.2f}"
    assert scale in shown and scale.endswith("2.83")
    assert "table E\nV × d_model = 10 × 8" in shown and "the sentence\nT × d_model = 7 × 8" in shown
    squares = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() == CELL]
    assert len(squares) == 10 * 8 + 7 * 8  # the table, then the sentence's scaled rows
    # the <pad> row is zero: the middle of the colour map, the same colour in every column
    assert len({sq.get_facecolor() for sq in squares[:8]}) == 1
    assert fig.get_size_inches()[0] <= 8.0
    assert min(t.get_fontsize() for t in ax.texts if t.get_text()) >= 10.5
    plt.close(fig)
