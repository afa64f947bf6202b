"""transformer_book.plotting: the book's figure settings, and attention maps laid out for the
page.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from browser_layout import SMALLEST_LABEL_PX, svg_labels  # noqa: E402

from transformer_book.plotting import (
    BOOK_FIGURES,
    PAGE_WIDTH,
    plot_attention_heads,
    use_book_figures,
)  # noqa: E402

pytestmark = pytest.mark.book

COLUMN_PX = 688  # a cell output's width on a desktop's page (1280 px window), where figures show


def _svg(fig: plt.Figure, tmp_path: Path, name: str) -> Path:
    """The figure as the inline backend writes it (tight box, no date)."""
    path = tmp_path / name
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    return path


def test_book_figures_keep_text_as_text_at_11_pt_on_white_and_give_the_same_bytes(
    tmp_path: Path,
) -> None:
    with matplotlib.rc_context():
        use_book_figures()  # outside IPython: the settings only
        assert {key: plt.rcParams[key] for key in BOOK_FIGURES} == BOOK_FIGURES
        drawn = []
        for name in ("a.svg", "b.svg"):
            fig, ax = plt.subplots(figsize=(4, 3))
            ax.plot([0, 1], [1, 0], label="a curve")
            ax.set(xlabel="step", ylabel="loss", title="a title")
            ax.legend()
            drawn.append(_svg(fig, tmp_path, name))
            plt.close(fig)
    _, labels = svg_labels(drawn[0])
    assert {"step", "loss", "a title", "a curve"} <= {text for text, _ in labels}
    assert min(size for _, size in labels) == 11.0
    assert drawn[0].read_bytes() == drawn[1].read_bytes(), "the same figure must give the same file"
    assert b"fill: #ffffff" in drawn[0].read_bytes(), "an opaque white background"


@pytest.mark.parametrize("heads", [4, 8])
def test_attention_heads_with_token_labels_fit_the_page_with_readable_labels(
    tmp_path: Path, heads: int
) -> None:
    labels = ["<bos>", "9", "3", "10", "11", "4", "3", "6", "4", "5", "3"]
    weights = torch.softmax(torch.randn(heads, len(labels), len(labels)), dim=-1)
    with matplotlib.rc_context():
        use_book_figures()
        fig = plot_attention_heads(weights, labels, labels, title="cross-attention")
        assert fig.get_figwidth() <= PAGE_WIDTH
        svg = _svg(fig, tmp_path, "heads.svg")
        plt.close(fig)
    width, texts = svg_labels(svg)
    shown = min(COLUMN_PX, width * 4 / 3)  # the page shrinks a figure wider than its column
    smallest = min(size for _, size in texts) * shown / width
    assert smallest >= SMALLEST_LABEL_PX, (
        f"{heads} heads: the smallest label shows at {smallest:.1f} px"
    )


def test_attention_heads_without_labels_put_four_panels_in_a_row() -> None:
    fig = plot_attention_heads(torch.rand(4, 5, 5))
    rows = {round(ax.get_position().y0, 3) for ax in fig.axes if ax.images}
    assert len(rows) == 1 and fig.get_figwidth() <= PAGE_WIDTH
    plt.close(fig)
