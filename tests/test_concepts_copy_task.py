"""Chapter 10's opening picture shows the rows that copy_batch builds for the first held-out
sequence."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from transformer_book.concepts.copy_task import copy_task_figure, token_label  # noqa: E402
from transformer_tasks.copy import BOS_ID, EOS_ID, copy_batch, held_out_sequences  # noqa: E402

pytestmark = pytest.mark.book


def _rows(fig) -> dict[float, list[str]]:
    """The token boxes' labels, row by row (keyed by height), left to right."""
    rows: dict[float, list[tuple[float, str]]] = {}
    names = {"source", "decoder reads", "decoder predicts"}
    for text in fig.axes[0].texts:
        x, y = text.get_position()
        label = text.get_text()
        if text.get_ha() == "center" and label and label not in names and "\n" not in label:
            rows.setdefault(round(y, 3), []).append((x, label))
    return {y: [label for _, label in sorted(row)] for y, row in rows.items()}


def test_the_rows_are_the_source_the_shifted_target_and_the_target() -> None:
    example = copy_batch(held_out_sequences(1))
    src, tgt_in, tgt_out = (
        [token_label(t) for t in rows[0].tolist()]
        for rows in (example.src, example.tgt_in, example.tgt_out)
    )
    fig = copy_task_figure()
    rows = sorted(_rows(fig).items(), reverse=True)  # top to bottom
    shown = [labels for _, labels in rows]
    # training: source, reads, predicts; test: reads, predicts
    assert shown == [src, tgt_in, tgt_out, tgt_in, tgt_out]
    assert tgt_in[0] == "<bos>" and tgt_out[-1] == "<eos>" and tgt_in[1:] == tgt_out[:-1] == src
    assert (
        token_label(BOS_ID) == "<bos>" and token_label(EOS_ID) == "<eos>" and token_label(7) == "7"
    )
    plt.close(fig)


def test_the_figure_fits_the_page_and_is_registered() -> None:
    fig = copy_task_figure()
    assert fig.get_size_inches()[0] <= 8.0
    # arrows are empty annotations
    sizes = [t.get_fontsize() for t in fig.axes[0].texts if t.get_text()]
    assert min(sizes) >= 10.5
    fig.canvas.draw()  # every label lies inside the figure: the saved SVG cuts off what does not
    renderer = fig.canvas.get_renderer()
    for text in fig.axes[0].texts:
        if text.get_text():
            extent = text.get_window_extent(renderer)
            assert extent.x0 >= 0 and extent.x1 <= fig.bbox.width, text.get_text()
            assert extent.y0 >= 0 and extent.y1 <= fig.bbox.height, text.get_text()
    plt.close(fig)
