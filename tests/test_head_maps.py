"""head_maps_figure: one panel per head, within the page's width, every label readable."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from transformer_book.concepts._style import MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.head_maps import HeadMap, head_maps_figure  # noqa: E402

pytestmark = pytest.mark.book


def maps(heads: int, rows: int, cols: int) -> torch.Tensor:
    return torch.randn(heads, rows, cols, generator=torch.Generator().manual_seed(0)).softmax(-1)


def test_panels_fill_a_grid_and_every_label_is_readable():
    weights = maps(5, 12, 12)
    panels = [HeadMap(f"head {i}", weights[i]) for i in range(5)]
    fig = head_maps_figure(panels, columns=3, panel_width=2.6, every=3)
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(fig.axes) == 6 and len(drawn) == 5  # 2 rows of 3, the last one empty
    assert [ax.get_title() for ax in drawn] == [p.title for p in panels]
    assert [t.get_text() for t in drawn[0].get_xticklabels()] == ["0", "3", "6", "9"]
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    assert min(sizes) >= SMALL and fig.get_figwidth() <= MAX_WIDTH
    plt.close(fig)


def test_token_labels_and_each_rows_largest_weight():
    weights = maps(1, 3, 4)[0]
    rows, cols = ["<bos>", "Two", "dogs"], ["Zwei", "Hunde", ".", "<eos>"]
    fig = head_maps_figure([HeadMap("cross", weights, rows, cols)], numbers=True)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == cols
    assert [t.get_text() for t in ax.get_yticklabels()] == rows
    largest = sorted(f"{v:.2f}"[1:] for v in weights.max(dim=-1).values.tolist())
    assert sorted(t.get_text() for t in ax.texts) == largest
    plt.close(fig)


def test_bad_input_is_refused_with_a_clear_message():
    weights = maps(1, 3, 4)[0]
    with pytest.raises(ValueError, match=r"weights must be a \(T_q, T_k\) tensor"):
        HeadMap("x", weights[0])
    with pytest.raises(ValueError, match="cols has 2 labels but the map has 4 cols"):
        HeadMap("x", weights, cols=["a", "b"])
    with pytest.raises(ValueError, match="panels must be a non-empty sequence"):
        head_maps_figure([])
    with pytest.raises(ValueError, match="wider than"):
        head_maps_figure([HeadMap("x", weights)] * 4, columns=4, panel_width=3.0)
