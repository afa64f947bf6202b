"""The explorers of chapters 11, 12 and 15: each slider value shows its own data, buttons swap it,
bad input fails."""

from __future__ import annotations

import inspect

import pytest
import torch
from test_explorers import as_lists, press, shown, title_at

from transformer_book import model_explorers
from transformer_book.model_explorers import (
    explore_attention_memory,
    explore_cross_attention,
    explore_kv_cache_sizes,
)

pytestmark = pytest.mark.book


def test_cross_attention_shows_panel_i_at_step_i_with_the_tokens_as_labels() -> None:
    panels = {"layer 0, mean of heads": torch.rand(3, 4), "layer 1, head 0": torch.rand(3, 4)}
    fig = explore_cross_attention(panels, list("abcd"), ["x", "y", "z"], start="layer 1, head 0")
    assert fig.layout.sliders[0].active == 1
    for i, (label, weights) in enumerate(panels.items()):
        (heatmap,) = shown(fig, i)
        assert [list(r) for r in heatmap.z] == as_lists(weights)
        assert list(heatmap.x) == ["0:a", "1:b", "2:c", "3:d"] and list(heatmap.y) == [
            "0:x",
            "1:y",
            "2:z",
        ]
        assert title_at(fig, i) == f"cross-attention: {label}"
    with pytest.raises(ValueError, match="start='layer 5'"):
        explore_cross_attention(panels, list("abcd"), list("xyz"), start="layer 5")


def test_cross_attention_stands_the_source_tokens_upright_and_the_slider_below_them() -> None:
    """Long source tokens would otherwise push the axis title onto the slider
    (tests/test_browser.py).
    """
    panels = {"layer 0": torch.rand(2, 2)}
    short = explore_cross_attention(panels, ["a", "b"], ["x", "y"], start="layer 0")
    long = explore_cross_attention(panels, ["a", "▁Schutzhelmen"], ["x", "y"], start="layer 0")
    assert long.layout.xaxis.tickangle == -90
    extra = 7 * (len("1:▁Schutzhelmen") - len("0:a"))
    assert long.layout.sliders[0].pad.t - short.layout.sliders[0].pad.t == extra
    assert long.layout.height - short.layout.height == extra


def test_attention_memory_keeps_the_marks_and_swaps_the_curves_by_heads_and_by_button() -> None:
    lengths = [64, 128, 256]
    f32 = [{"scores": [h * 1.0, h * 4.0, h * 16.0], "cache": [1.0, 2.0, 4.0]} for h in (1, 8)]
    bf16 = [{"scores": [h * 0.5, h * 2.0, h * 8.0], "cache": [0.5, 1.0, 2.0]} for h in (1, 8)]
    fig = explore_attention_memory(lengths, {"float32": f32, "bfloat16": bf16}, [1, 8], start=8)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    # the fixed 16 and 80 GiB lines first, then the curves of 8 heads
    marks, _, scores, cache = shown(fig, 1)
    assert (
        list(marks.y) == [16.0] * 3
        and list(scores.y) == [8.0, 32.0, 128.0]
        and list(cache.y) == [1.0, 2.0, 4.0]
    )
    halved = press(fig, 1)
    assert list(shown(halved, 1)[2].y) == [4.0, 16.0, 64.0]
    assert list(shown(halved, 0)[2].y) == [0.5, 2.0, 8.0]
    with pytest.raises(ValueError, match="one entry per number of heads"):
        explore_attention_memory(lengths, {"float32": f32[:1]}, [1, 8], start=8)


def test_kv_cache_sizes_draw_one_bar_per_kv_head_count_and_name_the_length() -> None:
    sizes = [[8.0, 4.0, 1.0], [16.0, 8.0, 2.0]]
    fig = explore_kv_cache_sizes(
        sizes, [8, 4, 1], [128, 256], start=256, title="cache at {length} tokens"
    )
    assert fig.layout.sliders[0].active == 1 and title_at(fig, 0) == "cache at 128 tokens"
    for i, size in enumerate(sizes):
        (bars,) = shown(fig, i)
        assert list(bars.y) == size
    assert list(fig.layout.xaxis.ticktext) == ["8", "4", "1"]
    with pytest.raises(ValueError, match="one entry per length"):
        explore_kv_cache_sizes(sizes[:1], [8, 4, 1], [128, 256], start=128, title="")


def test_every_public_function_documents_the_shapes_it_takes() -> None:
    for name in model_explorers.__all__:
        doc = inspect.getdoc(getattr(model_explorers, name)) or ""
        assert "Shape:" in doc and "Args:" in doc, name
