"""The pictures chapters 3, 4, 5 and 11 draw in their cells: they show the numbers they are
given, readably.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.attention_figures import Panel, bar_panels, maps_figure  # noqa: E402
from transformer_book.concepts._style import SMALL  # noqa: E402
from transformer_book.plotting import PAGE_WIDTH  # noqa: E402

pytestmark = pytest.mark.book

WORDS = ["two", "dogs", "play"]


def all_texts(fig) -> list:
    return [
        t
        for ax in fig.axes
        for t in ax.texts + ax.get_yticklabels() + ax.get_xticklabels()
        if t.get_text()
    ]


def readable(fig) -> bool:
    return (
        fig.get_size_inches()[0] <= PAGE_WIDTH
        and min(t.get_fontsize() for t in all_texts(fig)) >= SMALL
    )


def test_bar_panels_write_every_value_and_share_a_scale_where_asked() -> None:
    small, large = torch.tensor([0.0, 1e-5, -2e-9]), torch.tensor([0.0, 0.009, -0.008])
    weights = torch.tensor([0.2, 0.5, 0.3])
    panels = [("weight", weights, "{:.3f}"), ("small", small, "{:.4f}"), ("large", large, "{:.4f}")]
    fig = bar_panels(WORDS, panels, highlight="dogs", share=[(1, 2)])
    shown = [t.get_text() for t in all_texts(fig)]
    assert {"0.200", "0.500", "0.300", "0.0090", "-0.0080"} <= set(shown)
    assert (
        "-0.0000" not in shown and shown.count("0.0000") == 4
    )  # a value that rounds to 0 has no sign
    weight, small_ax, large_ax = fig.axes
    assert small_ax.get_xlim() == large_ax.get_xlim() != weight.get_xlim()
    assert [t.get_text() for t in weight.get_yticklabels()] == WORDS
    assert readable(fig)
    plt.close(fig)
    with pytest.raises(ValueError, match="one value per label"):
        bar_panels(WORDS, [("bad", torch.ones(2), "{}")])
    with pytest.raises(ValueError, match="highlight='cat'"):
        bar_panels(WORDS, panels, highlight="cat")
    with pytest.raises(ValueError, match="share must name each of the 3 panels at most once"):
        bar_panels(WORDS, panels, share=[(0, 3)])


def test_maps_figure_writes_the_weights_greys_the_masked_pairs_and_names_the_next_words() -> None:
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.1, 0.6, 0.3]])
    causal = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    panel = Panel("causal", weights, WORDS, WORDS, causal)
    fig = maps_figure([panel], highlight="play", predicts=["a", "b", "c"])
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.texts]
    assert shown[:6] == ["1.00", "0.25", "0.75", "0.10", "0.60", "0.30"]  # the allowed cells only
    assert shown[6:] == ["\u2192 a", "\u2192 b", "\u2192 c"]
    drawn = ax.images[0].get_array()
    assert drawn.mask.sum() == 3 and bool(drawn.mask[0, 2])  # masked pairs: the grey "bad" colour
    frame = [p for p in ax.patches if p.get_linewidth() > 2]
    assert len(frame) == 1 and frame[0].get_y() == pytest.approx(1.5)  # play's row
    assert readable(fig)
    plt.close(fig)


def test_maps_figure_fits_wide_maps_on_the_page_without_numbers() -> None:
    torch.manual_seed(0)
    rows = list("abcdefgh")
    panels = [
        Panel(str(k), torch.rand(8, n).softmax(-1), rows, rows[:n]) for k, n in enumerate((6, 8, 6))
    ]
    fig = maps_figure(panels)
    assert all(not ax.texts for ax in fig.axes)  # 20 columns leave no room for the numbers
    assert readable(fig)
    scores = maps_figure([Panel("scores", torch.tensor([[16.948, -1.5]]), ["play"], ["play", "x"])])
    assert [t.get_text() for t in scores.axes[0].texts] == [
        "16.9",
        "-1.5",
    ]  # scores keep their own range
    plt.close("all")
    with pytest.raises(
        ValueError, match="weights have shape \\(2, 2\\), but 1 labels for its rows"
    ):
        maps_figure([Panel("bad", torch.eye(2), ["a"], ["a", "b"])])
    with pytest.raises(ValueError, match="do not fit"):
        maps_figure([Panel("wide", torch.rand(2, 40), ["a", "b"], [str(i) for i in range(40)])])
    with pytest.raises(ValueError, match="predicts has 1 words"):
        maps_figure([Panel("p", torch.eye(2), ["a", "b"], ["a", "b"])], predicts=["x"])


def head_panels(heads: int, rows: int, cols: int) -> list[Panel]:
    weights = torch.randn(heads, rows, cols, generator=torch.Generator().manual_seed(0))
    return [Panel(f"head {h + 1}", w) for h, w in enumerate(weights.softmax(-1))]


def test_maps_figure_lays_heads_in_a_grid_numbered_by_position_where_there_are_no_words() -> None:
    panels = head_panels(5, 12, 12)
    fig = maps_figure(panels, columns=3, every=3)
    drawn = fig.axes
    assert len(drawn) == 5  # 2 rows of 3, the last place empty
    assert [ax.get_title() for ax in drawn] == [p.title for p in panels]
    for ax, panel in zip(drawn, panels, strict=True):  # the weights it was given, unchanged
        torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array().data), panel.weights)
    assert [t.get_text() for t in drawn[0].get_xticklabels()] == ["0", "3", "6", "9"]
    assert drawn[0].get_xlabel() == "key position" and drawn[0].get_ylabel() == "query position"
    rows = sorted({round(ax.get_position().y0, 3) for ax in drawn})
    assert len(rows) == 2 and not any(ax.texts for ax in drawn)  # no room for every weight
    assert readable(fig)
    plt.close(fig)


def test_maps_figure_writes_each_rows_largest_weight_where_every_weight_does_not_fit() -> None:
    rows, cols = ["<bos>", "Two", "dogs"], ["Zwei", "Hunde", "spielen", "im", "Gras", ".", "<eos>"]
    weights = torch.randn(3, 7, generator=torch.Generator().manual_seed(1)).softmax(-1)
    panels = [Panel(f"head {h}", weights, rows, cols) for h in (1, 2, 3)]
    fig = maps_figure(panels, columns=3, largest=True)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == cols
    assert [t.get_text() for t in ax.get_yticklabels()] == rows
    largest = [f"{v:.2f}".removeprefix("0") for v in weights.max(dim=-1).values.tolist()]
    assert [t.get_text() for t in ax.texts] == largest
    assert [(t.get_position()) for t in ax.texts] == [
        (j, i) for i, j in enumerate(weights.argmax(-1).tolist())
    ]
    assert readable(fig)
    plt.close(fig)


def test_maps_figure_refuses_what_it_cannot_draw() -> None:
    with pytest.raises(ValueError, match=r"weights must be a \(T_q, T_k\) grid, got shape \(4,\)"):
        maps_figure([Panel("x", torch.ones(4))])
    with pytest.raises(ValueError, match="but 2 labels for its cols"):
        maps_figure([Panel("x", torch.ones(3, 4), cols=["a", "b"])])
    with pytest.raises(ValueError, match="columns must be a positive int or None, got 0"):
        maps_figure(head_panels(2, 3, 3), columns=0)
    labelled = [Panel("x", torch.ones(12, 12), list("abcdefghijkl"), list("abcdefghijkl"))] * 4
    with pytest.raises(ValueError, match="48 columns in 4 panels a row do not fit"):
        maps_figure(labelled, columns=4)
