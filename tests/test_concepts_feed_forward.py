"""Chapter 7's opening picture: the running example through one FFN, drawn from the computed
numbers."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from transformer_book.concepts.feed_forward import example_weights, feed_forward_figure  # noqa: E402
from transformer_book.example import ENGLISH, embed, words  # noqa: E402
from transformer_lib import FeedForward  # noqa: E402

pytestmark = pytest.mark.book


def test_one_column_per_word_and_white_cells_where_the_relu_gives_zero() -> None:
    fig = feed_forward_figure()
    ax = fig.axes[0]
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    d_model, d_ff, T = 8, 32, len(words(ENGLISH))
    assert len(cells) == T * (2 * d_model + d_ff)
    shown = [t.get_text() for t in ax.texts]
    assert all(word in shown for word in words(ENGLISH))
    assert "hidden\nd_ff = 32" in shown and "input x_t\nd_model = 8" in shown
    white = sum(p.get_facecolor()[:3] == (1.0, 1.0, 1.0) for p in cells)
    w1, b1, _, _ = example_weights()
    zeros = int((torch.relu(embed(ENGLISH) @ w1 + b1) == 0).sum())
    # only the ReLU's zeros are white (no input or output is exactly 0)
    assert zeros > 0 and white == zeros
    assert fig.get_size_inches()[0] <= 8.0
    plt.close(fig)


def test_the_weights_are_a_feedforward_that_the_library_computes_the_same_way() -> None:
    w1, b1, w2, b2 = example_weights()
    ff = FeedForward(8, 32).eval()
    with torch.no_grad():
        for linear, w, b in ((ff.linear1, w1, b1), (ff.linear2, w2, b2)):
            linear.weight.copy_(w.T)
            linear.bias.copy_(b)
        x = embed(ENGLISH)
        torch.testing.assert_close(ff(x), torch.relu(x @ w1 + b1) @ w2 + b2)
