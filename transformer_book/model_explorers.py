"""Explorers of the trained translation model and of what attention costs in memory (chapters 11,
12, 15; a leaf).

Built on the generic explorers of :mod:`.explorers`; like them, they draw numbers the chapters
compute and compute nothing a chapter teaches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from transformer_book.explorers import (
    Curves,
    Grid,
    Values,
    _check_length,
    _position,
    heatmap_explorer,
    line_explorer,
)

__all__ = ["explore_attention_memory", "explore_cross_attention", "explore_kv_cache_sizes"]


def explore_cross_attention(
    panels: Mapping[str, Grid], src_tokens: Sequence[str], out_tokens: Sequence[str], start: str
) -> go.Figure:
    """Chapter 11: a translation's cross-attention, one map per slider value (a layer, or a head).

    Args:
        panels: ``{label: weights}``, in slider order (``"layer 2, mean of heads"``, ``"layer 2,
            head 0"``).
        src_tokens, out_tokens: the source tokens (columns) and the output tokens (rows).
        start: the label shown first.

    Shape:
        each weights grid: ``(T, S)``, ``T = len(out_tokens)``, ``S = len(src_tokens)``.
    """
    labels = list(panels)
    columns = [f"{j}:{t}" for j, t in enumerate(src_tokens)]
    fig = heatmap_explorer(
        list(panels.values()),
        labels,
        x=columns,
        y=[f"{j}:{t}" for j, t in enumerate(out_tokens)],
        prefix="showing ",
        titles=[f"cross-attention: {label}" for label in labels],
        active=_position(labels, start, "start"),
    )
    # The source tokens stand upright, and the slider starts below them and the axis title (about 7
    # px a character), so that neither is drawn over the other, however long the tokens are.
    below = 7 * max(len(c) for c in columns)
    fig.layout.sliders[0].pad.t = 40 + below
    return fig.update_layout(
        height=500 + below,
        width=620,
        xaxis={"title": "source token", "tickangle": -90},
        yaxis_title="output token",
        margin={"t": 90},
    )


def explore_attention_memory(
    lengths: Values,
    curves: Mapping[str, Sequence[Curves]],
    heads: Sequence[int],
    start: int,
) -> go.Figure:
    """Chapter 12: GiB of one score matrix and of the key/value cache against the length, per number
    of heads.

    Args:
        lengths: the sequence lengths T (the x axis, drawn on a log scale).
        curves: ``{button label (a dtype, say): for each number of heads, {legend name: GiB at each
            T}}``.
        heads, start: the numbers of heads, in slider order; the one shown first.

    Shape:
        lengths and each curve: ``(N,)``.
    """
    for option, values in curves.items():
        _check_length(f"curves[{option!r}]", values, len(heads), "number of heads")
    xs = list(lengths)
    # 16 and 80 GiB (two GPUs' memory) as dotted horizontal lines, for scale
    fixed = {f"{gib:g} GiB": [gib] * len(xs) for gib in (16.0, 80.0)}
    fig = line_explorer(
        xs,
        dict(curves),
        [str(h) for h in heads],
        fixed=fixed,
        prefix="heads: ",
        active=_position(heads, start, "start"),
    )
    return fig.update_layout(
        height=440,
        width=680,
        xaxis={"type": "log", "title": "sequence length T"},
        yaxis={"type": "log", "title": "GiB"},
        margin={"t": 90},
    )


def explore_kv_cache_sizes(
    sizes: Sequence[Values], kv_heads: Sequence[int], lengths: Sequence[int], start: int, title: str
) -> go.Figure:
    """Chapter 15: the key/value cache for each number of key/value heads (bars), one set per length
    (slider).

    Args:
        sizes: for each length, the cache size (MiB) for each entry of ``kv_heads``.
        kv_heads: the numbers of key/value heads (the bars, in order).
        lengths, start: the lengths, in slider order; the one shown first.
        title: the figure's title; ``{length}`` in it is replaced by the length shown.

    Shape:
        each entry of ``sizes``: ``(len(kv_heads),)``.
    """
    _check_length("sizes", sizes, len(lengths), "length")
    curves = [{"KV cache (MiB)": size} for size in sizes]
    fig = line_explorer(
        list(range(len(kv_heads))),
        curves,
        [str(n) for n in lengths],
        bars=True,
        titles=[title.format(length=n) for n in lengths],
        prefix="tokens = ",
        active=_position(lengths, start, "start"),
    )
    ticks = {
        "tickmode": "array",
        "tickvals": list(range(len(kv_heads))),
        "ticktext": [str(h) for h in kv_heads],
    }
    return fig.update_layout(
        height=420,
        width=620,
        showlegend=False,
        yaxis_title="MiB",
        xaxis={"title": "num_kv_heads", **ticks},
        margin={"t": 90},
    )
