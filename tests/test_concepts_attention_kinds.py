"""Chapter 4's opening picture: the three attentions of the running example and their masks."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.concepts._style import COLOURS, MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.concepts.attention_kinds import (  # noqa: E402
    attention_kinds_figure,
    attention_kinds_masks,
    cross_attention_shapes_figure,
    masks_figure,
)
from transformer_lib import causal_mask  # noqa: E402

pytestmark = pytest.mark.book


def test_the_masks_are_the_librarys_for_the_running_example() -> None:
    masks = attention_kinds_masks(pads=2)
    german = ["zwei", "hunde", "spielen", "im", "gras", ".", "<pad>", "<pad>"]
    english = ["two", "dogs", "play", "in", "the", "grass", "."]
    encoder, rows, cols = masks["self-attention"]
    assert rows == cols == german and encoder.shape == (8, 8)
    assert encoder[:, :6].all() and not encoder[:, 6:].any()  # every query, the pads hidden as keys
    decoder, rows, cols = masks["masked self-attention"]
    assert rows == cols == english and torch.equal(decoder, causal_mask(7))
    cross, rows, cols = masks["cross-attention"]
    assert (rows, cols) == (english, german) and cross.shape == (7, 8)  # T x S
    assert cross[:, :6].all() and not cross[:, 6:].any()
    assert attention_kinds_masks(pads=0)["cross-attention"][0].shape == (7, 6)
    with pytest.raises(ValueError, match="pads must be an int from 0 to 4"):
        attention_kinds_masks(pads=-1)


def test_the_figure_draws_each_mask_cell_by_cell_with_its_words_and_shapes() -> None:
    fig = attention_kinds_figure()
    ax = fig.axes[0]
    cells = [
        p
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_edgecolor()[:3] == (1.0, 1.0, 1.0)
    ]
    masks = attention_kinds_masks()
    assert len(cells) == sum(m.numel() for m, _, _ in masks.values())  # 64 + 49 + 56
    grey = sum(to_hex(p.get_facecolor()) == COLOURS["mask"] for p in cells)
    assert grey == sum(int((~m).sum()) for m, _, _ in masks.values())  # 16 + 21 + 14
    texts = [t.get_text() for t in ax.texts]
    for kind in masks:
        assert kind in texts
    assert {"S × S = 8 × 8", "T × T = 7 × 7", "T × S = 7 × 8"} <= set(texts)
    # rows + columns
    assert "Q: English;  K, V: German" in texts and texts.count("<pad>") == 2 * 2 + 2
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    assert min(t.get_fontsize() for t in ax.texts) >= SMALL
    assert all_figures()["attention_kinds.svg"] is attention_kinds_figure
    plt.close("all")


def test_masks_figure_draws_each_mask_and_fits_the_page() -> None:
    words = ["a", "b", "c", "<pad>"]
    keep = torch.tensor([True, True, True, False])
    masks = {"padding": (keep.expand(4, 4), words, words), "causal": (causal_mask(4), words, words)}
    fig = masks_figure(masks)
    ax = fig.axes[0]
    cells = [
        p
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_edgecolor()[:3] == (1.0, 1.0, 1.0)
    ]
    assert len(cells) == 2 * 16
    grey = sum(to_hex(p.get_facecolor()) == COLOURS["mask"] for p in cells)
    assert grey == 4 + 6  # the pad column; the upper triangle
    assert {"padding", "causal", "may attend"} <= {t.get_text() for t in ax.texts}
    assert (
        fig.get_size_inches()[0] <= MAX_WIDTH and min(t.get_fontsize() for t in ax.texts) >= SMALL
    )
    nine = [str(i) for i in range(9)]
    wide = masks_figure(
        {str(k): (causal_mask(9), nine, nine) for k in range(3)}
    )  # shrinks its cells
    assert wide.get_size_inches()[0] <= MAX_WIDTH
    with pytest.raises(ValueError, match="has shape \\(4, 4\\), its words \\(3, 4\\)"):
        masks_figure({"bad": (causal_mask(4), words[:3], words)})
    plt.close("all")


def test_the_shapes_figure_gives_cross_attention_the_target_rows_and_the_source_content() -> None:
    fig = cross_attention_shapes_figure()
    shown = [t.get_text() for t in fig.axes[0].texts]
    assert "Q: T × d_k\n= 7 × 8" in shown and "Kᵀ: d_k × S\n= 8 × 6" in shown
    assert "weights: T × S\n= 7 × 6" in shown and "V: S × d_k\n= 6 × 8" in shown
    assert "output: T × d_k = 7 × 8\nEnglish rows, German content" in shown
    assert (
        shown.count("spielen") == 3 and shown.count("play") == 3
    )  # K, weights, V; Q, weights, output
    assert (
        fig.get_size_inches()[0] <= MAX_WIDTH
        and min(t.get_fontsize() for t in fig.axes[0].texts) >= SMALL
    )
    assert all_figures()["cross_attention_shapes.svg"] is cross_attention_shapes_figure
    plt.close("all")
