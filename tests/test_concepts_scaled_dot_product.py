"""Chapter 3's pictures and its hand-set attention: play finds dogs, and the figures show the
numbers.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.concepts.scaled_dot_product import (  # noqa: E402
    attention_steps_figure,
    one_query,
    projections_figure,
)
from transformer_book.example import (  # noqa: E402
    ENGLISH,
    FEATURES,
    embed,
    feature_rows,
    hand_set_projections,
    next_word_pairs,
    words,
)
from transformer_lib import scaled_dot_product_attention  # noqa: E402

pytestmark = pytest.mark.book


def test_the_hand_set_projections_give_the_tables_they_were_set_for() -> None:
    x = embed(ENGLISH)
    w_q, w_k, w_v = hand_set_projections()
    assert w_q.shape == w_k.shape == w_v.shape == (8, len(FEATURES))
    tokens = words(ENGLISH)
    keys = x @ w_k  # (T, 4)
    torch.testing.assert_close(keys, x @ w_v)  # a word hands over what it offers
    wanted = {
        "two": ("plural", "number"),
        "dogs": ("noun", "plural"),
        "play": ("verb",),
        "grass": ("noun",),
    }
    torch.testing.assert_close(keys, feature_rows(tokens, wanted), atol=1e-5, rtol=0)
    queries = x @ w_q
    torch.testing.assert_close(queries[2], torch.tensor([3.0, 3.0, 0.0, 0.0]), atol=1e-5, rtol=0)
    assert queries[[0, 1, 3, 4, 5, 6]].abs().max() < 1e-5  # only play asks
    with pytest.raises(ValueError, match=r"outside FEATURES .*\['colour'\]"):
        feature_rows(tokens, {"grass": ("colour",)})


def test_next_word_pairs_shift_the_sentence_behind_bos() -> None:
    inputs, targets = next_word_pairs("Two dogs.")
    assert inputs == ["<bos>", "two", "dogs", "."] and targets == ["two", "dogs", ".", "<eos>"]
    inputs, targets = next_word_pairs()
    assert inputs[1:] == targets[:-1] == words(ENGLISH)


def test_one_query_is_play_s_row_of_the_librarys_attention_and_finds_dogs() -> None:
    x = embed(ENGLISH)
    w_q, w_k, w_v = hand_set_projections()
    output, weights = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    step = one_query("play")
    assert step["index"] == 2
    torch.testing.assert_close(step["scores"], (x @ w_k) @ (x[2] @ w_q) / math.sqrt(4))
    torch.testing.assert_close(step["weights"], weights[2])
    torch.testing.assert_close(step["output"], output[2])
    assert words(ENGLISH)[int(step["weights"].argmax())] == "dogs"
    assert step["output"][FEATURES.index("plural")] > 0.7  # play has gathered "plural"
    with pytest.raises(ValueError, match="'cat' is not a word"):
        one_query("cat")


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_the_steps_figure_labels_every_word_with_its_score_and_weight() -> None:
    step = one_query("play")
    fig = attention_steps_figure()
    shown = texts(fig)
    for word, score, weight in zip(
        step["words"], step["scores"].tolist(), step["weights"].tolist(), strict=True
    ):
        assert word in shown
        assert f"{round(score, 2) + 0.0:.2f}" in shown and f"{weight:.3f}" in shown
    assert "0.608" in shown  # play on dogs: the number chapter 3's caption quotes
    assert "-0.00" not in shown
    assert f"{float(step['output'][1]):.2f}" in shown  # the new vector's "plural"
    assert "sum 1.000" in shown and "query (play)" in shown and "new vector for play" in shown
    assert fig.get_size_inches()[0] <= 8.0
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 10.5
    plt.close(fig)


def test_the_projections_figure_writes_the_three_tables() -> None:
    fig = projections_figure()
    shown = texts(fig)
    assert shown.count("3") == 2  # play's query: noun and plural
    assert shown.count("1") == 2 * 6  # the keys and the values: six features offered
    assert all(shown.count(feature) == 3 for feature in FEATURES)
    assert set(words(ENGLISH)) <= set(shown)
    assert fig.get_size_inches()[0] <= 8.0
    assert min(t.get_fontsize() for t in fig.axes[0].texts if t.get_text()) >= 10.5  # not the arrow
    plt.close(fig)
