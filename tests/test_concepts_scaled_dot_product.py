"""Chapter 3's opening picture shows the running example's own scores, weights and new vector for
one word."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.concepts.scaled_dot_product import FIGURES, attention_steps_figure, one_query  # noqa: E402
from transformer_book.example import ENGLISH, embed, words  # noqa: E402
from transformer_lib import scaled_dot_product_attention  # noqa: E402


def test_one_query_is_a_row_of_the_librarys_attention_over_the_sentence() -> None:
    x = embed(ENGLISH)  # (T, 8): queries = keys = values
    output, weights = scaled_dot_product_attention(x, x, x)
    step = one_query("play")
    play = words(ENGLISH).index("play")
    assert step["index"] == play == 2
    torch.testing.assert_close(step["scores"], x @ x[play] / math.sqrt(8))
    torch.testing.assert_close(step["weights"], weights[play])
    torch.testing.assert_close(step["output"], output[play])
    with pytest.raises(ValueError, match="'cat' is not a word"):
        one_query("cat")


def test_the_figure_labels_every_word_with_its_score_and_weight() -> None:
    step = one_query("play")
    fig = attention_steps_figure("play")
    shown = [t.get_text() for t in fig.axes[0].texts]
    for word, score, weight in zip(
        step["words"], step["scores"].tolist(), step["weights"].tolist(), strict=True
    ):
        assert word in shown
        assert f"{score:.2f}" in shown and f"{weight:.3f}" in shown
    assert "0.911" in shown  # play on itself: the number chapter 3's text quotes
    assert "sum 1.000" in shown and "query (play)" in shown and "new vector for play" in shown
    assert fig.get_size_inches()[0] <= 8.0
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 10.5
    plt.close(fig)


def test_the_figure_is_registered_under_its_file_name() -> None:
    assert FIGURES == {"scaled_dot_product.svg": attention_steps_figure}
