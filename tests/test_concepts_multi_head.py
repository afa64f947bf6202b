"""Chapter 5's concept picture: the running example split across two heads shows the weights it
computes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.concepts import multi_head as concept  # noqa: E402
from transformer_book.concepts._style import MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.example import ENGLISH, embed, words  # noqa: E402
from transformer_lib import MultiHeadAttention  # noqa: E402


def test_the_head_weights_are_the_library_modules_weights_with_the_same_matrices():
    w_q, w_k, w_v, w_o = concept.example_projections()
    module = MultiHeadAttention(8, num_heads=2, bias=False)
    with torch.no_grad():
        projections = (module.q_proj, module.k_proj, module.v_proj, module.out_proj)
        for linear, matrix in zip(projections, (w_q, w_k, w_v, w_o), strict=True):
            linear.weight.copy_(matrix.T)  # x @ W is nn.Linear with weight W^T
        x = embed()[None]
        _, weights = module(x, x, x, need_weights=True)
    shown = concept.example_head_weights()
    assert shown.shape == (2, 7, 7)
    torch.testing.assert_close(shown, weights[0])
    torch.testing.assert_close(shown.sum(-1), torch.ones(2, 7))
    assert not torch.allclose(shown[0], shown[1], atol=0.05), (
        "the two heads should weigh the sentence differently"
    )
    with pytest.raises(ValueError, match="divisible"):
        concept.example_head_weights(num_heads=3)


def test_the_figure_prints_each_words_largest_weight_and_labels_the_words():
    fig = concept.heads_figure()
    weights = concept.example_head_weights()
    maps = fig.axes[1:]  # the background first, then one axes per head
    assert len(maps) == 2
    for head, ax in enumerate(maps):
        printed = sorted(t.get_text() for t in ax.texts)
        best = weights[head].max(dim=-1).values
        assert printed == sorted(f"{v:.2f}".removeprefix("0") for v in best.tolist())
        assert [t.get_text() for t in ax.get_xticklabels()] == words(ENGLISH)
    # "." reads "dogs" with 0.641 in the first head
    assert ".64" in [t.get_text() for t in maps[0].texts]
    ticks = [t for ax in maps for t in ax.get_xticklabels() + ax.get_yticklabels()]
    texts = [t for t in [t for ax in fig.axes for t in ax.texts] + ticks if t.get_text()]
    assert min(t.get_fontsize() for t in texts) >= SMALL
    assert fig.get_figwidth() <= MAX_WIDTH
    plt.close(fig)


def test_the_figure_is_registered():
    assert all_figures()["multi_head_heads.svg"] is concept.heads_figure
