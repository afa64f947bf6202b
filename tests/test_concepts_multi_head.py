"""Chapter 5's concept pictures: the hand-set heads do what the chapter says; the pictures show
them.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from transformer_book.concepts import all_figures, head_split  # noqa: E402
from transformer_book.concepts import multi_head as concept  # noqa: E402
from transformer_book.concepts._style import MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.example import ENGLISH, embed, words  # noqa: E402
from transformer_lib import MultiHeadAttention  # noqa: E402

pytestmark = pytest.mark.book

WORDS = words(ENGLISH)
PLAY, DOGS, GRASS = WORDS.index("play"), WORDS.index("dogs"), WORDS.index("grass")


def test_the_heads_are_the_library_modules_heads_with_the_same_matrices():
    module = MultiHeadAttention(8, num_heads=2, bias=False)
    with torch.no_grad():
        projections = (module.q_proj, module.k_proj, module.v_proj, module.out_proj)
        for linear, matrix in zip(projections, concept.example_projections(), strict=True):
            linear.weight.copy_(matrix.T)  # x @ W is nn.Linear with weight W^T
        x = embed()[None]
        output, weights = module(x, x, x, need_weights=True)
    step = concept.example_heads()
    torch.testing.assert_close(step["weights"], weights[0])
    torch.testing.assert_close(step["output"], output[0])
    torch.testing.assert_close(step["weights"].sum(-1), torch.ones(2, 7))


def test_each_head_fetches_its_word_and_one_head_blends_the_two():
    step, single = concept.example_heads(), concept.one_head()
    assert step["weights"][0, PLAY].argmax() == DOGS and step["weights"][0, PLAY, DOGS] > 0.9
    assert step["weights"][1, PLAY].argmax() == GRASS and step["weights"][1, PLAY, GRASS] > 0.9
    shares = single["weights"][PLAY, [DOGS, GRASS]]
    torch.testing.assert_close(shares[0], shares[1])  # a noun each: the same score
    assert shares.sum() > 0.9
    others = [t for t in range(len(WORDS)) if t != PLAY]
    flat = torch.full((len(others), len(WORDS)), 1 / len(WORDS))
    # no other word asks, so every other row spreads its weight evenly
    torch.testing.assert_close(step["weights"][:, others], flat.expand(2, -1, -1))
    # the blend is half plural; the heads hand over dogs' plural and grass' none
    assert 0.4 < single["output"][PLAY, 1] < 0.6
    assert step["concat"][PLAY, 1] > 0.9 and step["concat"][PLAY, 5] < 0.1


def test_the_concatenation_times_w_o_is_each_head_through_its_own_rows():
    step, w_o = concept.example_heads(), concept.example_projections()[3]
    heads = step["heads"]  # (2, T, 4)
    torch.testing.assert_close(heads[0] @ w_o[:4] + heads[1] @ w_o[4:], step["output"])


def test_the_hand_set_w_o_names_what_plays_two_heads_fetched():
    step = concept.example_heads()
    fetched, output = step["heads"][:, PLAY], step["output"][PLAY]  # (2, 4), (8,)
    noun, plural = 0, 1  # FEATURES: noun, plural, verb, number
    named = torch.stack([fetched[0, plural], fetched[1, noun], fetched[0, noun] + fetched[1, noun]])
    torch.testing.assert_close(output[:3], named)  # plural, singular noun, nouns
    assert output[0] > 0.9 and output[1] > 0.9 and output[2] > 1.8  # two nouns, one per head
    assert (step["output"][:, 3:] == 0).all()  # W_O writes nothing into features 3-7
    assert concept.OUTPUT_FEATURES == ("plural", "singular noun", "nouns")
    shown = " ".join(t.get_text() for t in concept.merge_figure().findobj(Text))
    assert all(name in shown for name in concept.OUTPUT_FEATURES)
    plt.close("all")


def test_a_question_about_an_unknown_feature_is_refused():
    with pytest.raises(ValueError, match="FEATURES"):
        concept.asks({"colour": 1.0})


def test_the_labelled_split_gives_each_head_its_features_of_every_word():
    split = head_split.labelled_split()
    assert split["right"][1].tolist() == [[2, 3], [12, 13], [22, 23]]
    assert split["wrong"][0].tolist() == [[0, 1], [2, 3], [10, 11]]
    assert split["right"].shape == split["wrong"].shape == (2, 3, 2)


@pytest.mark.parametrize("name", sorted({**concept.FIGURES, **head_split.FIGURES}))
def test_every_picture_is_registered_fits_the_page_and_has_readable_labels(name):
    draw = {**concept.FIGURES, **head_split.FIGURES}[name]
    assert all_figures()[name] is draw
    fig = draw()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    assert min(sizes) >= SMALL and fig.get_figwidth() <= MAX_WIDTH
    plt.close(fig)


def test_the_opening_picture_prints_plays_weights_in_each_head():
    fig = concept.why_figure()
    shown = {t.get_text() for t in fig.findobj(Text)}
    step, single = concept.example_heads(), concept.one_head()
    weights = (
        step["weights"][0, PLAY, DOGS],
        step["weights"][1, PLAY, GRASS],
        single["weights"][PLAY, DOGS],
    )
    assert all(f"{weight:.2f}" in shown for weight in weights)
    plt.close(fig)
