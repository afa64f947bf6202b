"""The chapters' interactive explorers: Plotly figures with a slider, and buttons that swap the data
(a leaf).

An explorer shows one group of traces (curves, bars or a heatmap) per value of a slider, and
optionally buttons (or a drop-down) that replace the data of every group at once.
:func:`slider_figure` builds that from any traces, :func:`line_explorer` and
:func:`heatmap_explorer` from numbers, and one small ``explore_*`` function per idea adds a
chapter's titles and axes. The chapters compute the data with the library; nothing here computes
what a chapter teaches. :func:`~.interactive.show_plotly` embeds a figure as HTML whose controls run
in the browser, also on the static site. Values are rounded to 4 significant digits (x values to 6)
to keep the pages small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import torch
from plotly.basedatatypes import BaseTraceType
from torch import Tensor

__all__ = [
    "explore_accumulation",
    "explore_alignment",
    "explore_causality",
    "explore_embedding_scale",
    "explore_ffn_width",
    "explore_layer_costs",
    "explore_noam",
    "explore_padding",
    "explore_pe_columns",
    "explore_sharding",
    "explore_temperature",
    "heatmap_explorer",
    "line_explorer",
    "slider_figure",
]

Values = Tensor | Sequence[float]  # one curve: (N,)
Grid = Tensor | Sequence[Sequence[float]]  # one heatmap: (rows, columns)
Curves = Mapping[str, Values]  # the curves shown at one slider value, by legend name
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _rounded(values: Any, digits: int) -> Any:
    return (
        [_rounded(v, digits) for v in values]
        if isinstance(values, list)
        else float(f"{values:.{digits}g}")
    )


def _numbers(values: Any, name: str, dims: int, digits: int = 4) -> list[Any]:
    """``values`` (a tensor, array or nested lists) as nested lists of floats, checked to have
    ``dims`` dims.
    """
    if isinstance(values, Tensor):
        values = values.detach().cpu()
    try:
        tensor = torch.as_tensor(values, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(
            f"{name} must be numbers (a tensor or nested lists), got {type(values).__name__}"
        ) from error
    if tensor.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimension(s), got shape {tuple(tensor.shape)}")
    return _rounded(tensor.tolist(), digits)


def _check_length(name: str, items: Sequence[Any], expected: int, what: str) -> None:
    if len(items) != expected:
        raise ValueError(f"{name} must have one entry per {what} ({expected}), got {len(items)}")


def _position(values: Sequence[Any], start: Any, name: str) -> int:
    if start not in values:
        raise ValueError(f"{name}={start!r} is not one of the slider's values {list(values)}")
    return list(values).index(start)


def _options(data: Any, name: str) -> dict[str, Sequence[Any]]:
    """A list of per-value data, or a mapping {button label: such a list}, as a mapping ({"": list}
    for a list).
    """
    if isinstance(data, Mapping):
        if not data:
            raise ValueError(f"{name} must not be an empty mapping")
        return dict(data)
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence | Tensor):
        raise TypeError(
            f"{name} must be a list (one entry per slider value) or a mapping, not "
            f"{type(data).__name__}"
        )
    return {"": data}


def slider_figure(
    steps: Sequence[Sequence[BaseTraceType]],
    labels: Sequence[str],
    *,
    titles: Sequence[str] | None = None,
    fixed: Sequence[BaseTraceType] = (),
    options: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]] | None = None,
    active: int = 0,
    prefix: str = "",
) -> go.Figure:
    """A figure that shows one group of traces per slider value (the generic explorer).

    Args:
        steps: for each slider value, the traces shown at that value (and hidden at the others).
        labels: the slider's label of each value.
        titles: the figure's title at each value (``None``: the slider leaves the title alone).
        fixed: traces shown at every value, drawn first (a target curve, say).
        options: ``{button label: data}``, one button each; the data gives, for each slider value
            and each of its traces, the properties the button sets (``{"z": grid}``, ``{"y":
            curve}``). The first button stands for the data the traces are built with.
        active: the index of the value shown first.
        prefix: the text before the slider's current label (``"tau = "``).
    """
    if not steps or any(isinstance(group, BaseTraceType) or not group for group in steps):
        raise ValueError(
            "steps must be a non-empty list of non-empty lists of traces (one list per slider "
            "value)"
        )
    _check_length("labels", labels, len(steps), "slider value")
    if titles is not None:
        _check_length("titles", titles, len(steps), "slider value")
    if not 0 <= active < len(steps):
        raise ValueError(
            f"active must be the index of a slider value, 0 to {len(steps) - 1}, got {active}"
        )
    fig = go.Figure(list(fixed))
    # the slider value of each non-fixed trace
    owners = [i for i, group in enumerate(steps) for _ in group]
    for i, group in enumerate(steps):
        fig.add_traces([trace.update(visible=i == active) for trace in group])
    slider_steps = [
        {
            "method": "update",
            "label": str(label),
            "args": [
                {"visible": [True] * len(fixed) + [owner == i for owner in owners]},
                {"title.text": titles[i]} if titles is not None else {},
            ],
        }
        for i, label in enumerate(labels)
    ]
    slider = {
        "active": active,
        "currentvalue": {"prefix": prefix},
        "steps": slider_steps,
        "pad": {"t": 40},
    }
    fig.update_layout(sliders=[slider], title_text=titles[active] if titles is not None else None)
    if options:
        indices = list(range(len(fixed), len(fixed) + len(owners)))
        buttons = [
            {"method": "restyle", "label": label, "args": [_restyle(data, steps, label), indices]}
            for label, data in options.items()
        ]
        fig.update_layout(
            updatemenus=[
                {
                    "type": "buttons",
                    "direction": "right",
                    "buttons": buttons,
                    "active": 0,
                    "showactive": True,
                    "x": 0,
                    "xanchor": "left",
                    "y": 1.02,
                    "yanchor": "bottom",
                }
            ]
        )
    return fig


def _restyle(
    data: Sequence[Sequence[Mapping[str, Any]]], steps: Sequence[Sequence[Any]], label: str
) -> dict:
    """Plotly's restyle argument for one button: ``{property: [value of trace 0, of trace 1,
    ...]}``.
    """
    _check_length(f"options[{label!r}]", data, len(steps), "slider value")
    patches = []
    for group, patch_group in zip(steps, data, strict=True):
        _check_length(
            f"options[{label!r}] (a slider value's entry)", patch_group, len(group), "trace"
        )
        patches += list(patch_group)
    keys = set(patches[0])
    if any(set(patch) != keys for patch in patches):
        raise ValueError(
            f"options[{label!r}] must set the same properties (such as {sorted(keys)}) on every "
            "trace"
        )
    return {key: [patch[key] for patch in patches] for key in sorted(keys)}


def line_explorer(
    x: Values,
    curves: Sequence[Curves] | Mapping[str, Sequence[Curves]],
    labels: Sequence[str],
    *,
    fixed: Curves | None = None,
    marks: Sequence[float] | None = None,
    mark_name: str = "",
    mark_span: tuple[float, float] = (0.0, 1.0),
    bars: bool = False,
    **slider: Any,
) -> go.Figure:
    """One set of curves (or bars) per slider value; buttons swap between sets of such sets.

    Curves of up to 100 points are drawn with markers (one per x value), longer ones as lines.

    Args:
        x: the x values, shared by every curve.
        curves: for each slider value, ``{legend name: y values}``; or ``{button label: such a
            list}``, one button per entry (the first one shown first).
        labels: the slider's label of each value.
        fixed: curves shown at every value (drawn dotted, in black).
        marks: for each slider value, the x of a dashed vertical line (named ``mark_name``) from
            ``mark_span[0]`` to ``mark_span[1]`` on the y axis.
        bars: draw bars instead of lines.
        **slider: passed on to :func:`slider_figure` (``titles``, ``active``, ``prefix``).

    Shape:
        x: ``(N,)``; each y value: ``(N,)``.
    """
    xs = _numbers(x, "x", 1, digits=6)
    sets = _options(curves, "curves")
    first = next(iter(sets.values()))
    if marks is not None:
        _check_length("marks", marks, len(first), "slider value")
    names = list(dict.fromkeys(name for step in first for name in step))
    colour = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    patches: dict[str, list[list[dict[str, Any]]]] = {}
    for option, values in sets.items():
        _check_length(
            f"curves[{option!r}]" if option else "curves", values, len(first), "slider value"
        )
        if any(not isinstance(step, Mapping) for step in values):
            raise TypeError("curves must hold one mapping {legend name: y values} per slider value")
        patches[option] = [
            [{"y": _numbers(y, f"curve {name!r}", 1)} for name, y in step.items()]
            for step in values
        ]
    style = (
        {}
        if bars
        else {"mode": "lines+markers", "marker_size": 5}
        if len(xs) <= 100
        else {"mode": "lines"}
    )
    trace, steps = go.Bar if bars else go.Scatter, []
    for i, step in enumerate(first):
        group = [
            trace(x=xs, y=patch["y"], name=name, marker_color=colour[name], **style)
            for (name, _), patch in zip(step.items(), patches[next(iter(sets))][i], strict=True)
        ]
        if marks is not None:
            group.append(
                go.Scatter(
                    x=[marks[i]] * 2,
                    y=list(mark_span),
                    mode="lines",
                    name=mark_name,
                    line={"dash": "dash", "color": "gray"},
                )
            )
        steps.append(group)
    if marks is not None:  # the marks stay where they are when a button swaps the curves
        patches = {
            o: [g + [{"y": list(mark_span)}] for g in groups] for o, groups in patches.items()
        }
    lines = [
        go.Scatter(
            x=xs,
            y=_numbers(y, f"fixed curve {name!r}", 1),
            name=name,
            line={"color": "black", "dash": "dot"},
        )
        for name, y in (fixed or {}).items()
    ]
    options = patches if len(sets) > 1 else None
    return slider_figure(steps, labels, fixed=lines, options=options, **slider)


def heatmap_explorer(
    grids: Sequence[Grid] | Mapping[str, Sequence[Grid]],
    labels: Sequence[str],
    *,
    x: Sequence[str] | None = None,
    y: Sequence[str] | None = None,
    **slider: Any,
) -> go.Figure:
    """One heatmap per slider value, colours from 0 to 1, row 0 at the top; buttons swap the
    heatmaps' data.

    Args:
        grids: for each slider value, a grid of values in [0, 1] (attention weights, say); or
            ``{button label: such a list}``, one button per entry (the first one shown first).
        labels: the slider's label of each value.
        x, y: the labels of the columns and of the rows (``None``: their positions).
        **slider: passed on to :func:`slider_figure` (``titles``, ``active``, ``prefix``).

    Shape:
        each grid: ``(rows, columns)``, the same for all.
    """
    sets = _options(grids, "grids")
    patches = {
        option: [
            [{"z": _numbers(g, f"grids[{option!r}]" if option else "grids", 2)}] for g in values
        ]
        for option, values in sets.items()
    }
    first = next(iter(patches.values()))
    for option, values in patches.items():
        _check_length(f"grids[{option!r}]", values, len(first), "slider value")
    steps = [
        [
            go.Heatmap(
                z=group[0]["z"], x=x, y=y, zmin=0, zmax=1, colorscale="Viridis", xgap=1, ygap=1
            )
        ]
        for group in first
    ]
    fig = slider_figure(steps, labels, options=patches if len(patches) > 1 else None, **slider)
    return fig.update_layout(yaxis_autorange="reversed")


def explore_layer_costs(
    lengths: Values, costs: Sequence[Curves], widths: Sequence[int], start: int
) -> go.Figure:
    """Chapter 0: multiply-adds per layer against the length T, one set of curves per width d.

    A dashed line marks T = 6d, where the encoder layer's attention term overtakes its d² terms.

    Args:
        lengths, costs: the lengths T; for each width, ``{layer: multiply-adds at each length}``.
        widths, start: the widths d, in slider order, and the one shown first.

    Shape:
        lengths: ``(N,)``; each cost curve: ``(N,)``.
    """
    titles = [
        f"multiply-adds per layer, d = {d} (attention term dominates past T = {6 * d})"
        for d in widths
    ]
    fig = line_explorer(
        lengths,
        costs,
        [str(d) for d in widths],
        marks=[6 * d for d in widths],
        mark_name="T = 6d",
        mark_span=(1e5, 1e13),
        titles=titles,
        active=_position(widths, start, "start"),
        prefix="d = ",
    )
    return fig.update_layout(
        xaxis={"type": "log", "title": "sequence length T"},
        height=420,
        yaxis={"type": "log", "title": "multiply-adds", "range": [5, 13]},
        margin={"t": 90},
    )


def explore_embedding_scale(
    scales: Values, readback: Sequence[Curves], widths: Sequence[int], start: int
) -> go.Figure:
    """Chapter 1: how often token and position are read back, against the scale s, one set per width
    d.

    A dashed line marks s = sqrt(d).

    Args:
        scales, readback: the scales s; for each width, ``{what is read back: fraction recovered at
            each s}``.
        widths, start: the widths d, in slider order, and the one shown first.

    Shape:
        scales: ``(N,)``; each curve of ``readback`` (fractions recovered): ``(N,)``.
    """
    fig = line_explorer(
        scales,
        readback,
        [str(d) for d in widths],
        marks=[d**0.5 for d in widths],
        mark_name="s = sqrt(d)",
        titles=[f"reading token and position back, d = {d}" for d in widths],
        active=_position(widths, start, "start"),
        prefix="d = ",
    )
    return fig.update_layout(
        xaxis={"type": "log", "title": "scale s of the token vectors"},
        height=420,
        yaxis={"title": "fraction recovered", "range": [-0.03, 1.03]},
        margin={"t": 90},
    )


def explore_pe_columns(table: Tensor, titles: Sequence[str] | None = None) -> go.Figure:
    """Chapter 2: one column of the positional-encoding table at a time, against the position.

    Args:
        table, titles: the table (a row per position), and the figure's title for each column.

    Shape:
        table: ``(P, d)``.
    """
    columns = _numbers(table, "table", 2)
    curves = [{f"column {c}": [row[c] for row in columns]} for c in range(len(columns[0]))]
    fig = line_explorer(
        range(len(columns)),
        curves,
        [str(c) for c in range(len(curves))],
        titles=titles,
        prefix="column ",
    )
    return fig.update_layout(
        xaxis_title="position p",
        yaxis={"title": "PE(p, column)", "range": [-1.1, 1.1]},
        height=420,
        showlegend=False,
    )


def explore_temperature(
    weights: Mapping[str, Sequence[Grid]],
    taus: Sequence[float],
    labels: Sequence[str],
    start: float = 1.0,
) -> go.Figure:
    """Chapter 3: attention weights for each temperature tau; one button per mask.

    Args:
        weights: ``{mask name: one map per tau}``.
        taus: the temperatures, in slider order.
        labels: the tokens (unique labels), for both axes.
        start: the temperature shown first.

    Shape:
        each map: ``(T, T)``.
    """
    fig = heatmap_explorer(
        weights,
        [f"{tau:g}" for tau in taus],
        x=labels,
        y=labels,
        prefix="tau = ",
        titles=[f"attention weights, tau = {tau:g}" for tau in taus],
        active=_position(taus, start, "start"),
    )
    return fig.update_layout(
        xaxis_title="key", yaxis_title="query", height=500, width=560, margin={"t": 110}
    )


def explore_padding(curves: Sequence[Curves], paddings: Sequence[int]) -> go.Figure:
    """Chapter 6: one token's normalized features, for each number of padding positions added to the
    batch.

    Args:
        curves, paddings: for each number of padding positions, ``{normalization: features}``; the
            numbers.

    Shape:
        each curve: ``(d,)``.
    """
    _check_length("curves", curves, len(paddings), "padding")
    width = len(next(iter(curves[0].values()))) if curves and curves[0] else 0
    fig = line_explorer(
        range(width), curves, [str(p) for p in paddings], prefix="extra padding positions: "
    )
    return fig.update_layout(
        title="Token 0 of sentence 0, normalized",
        xaxis_title="feature",
        width=620,
        height=420,
        yaxis={"range": [-3, 3], "title": "normalized value"},
    )


def explore_ffn_width(
    x: Values, target: Curves, fits: Sequence[Curves], widths: Sequence[int], start: int
) -> go.Figure:
    """Chapter 7: the fitted curves of a 1-d FFN for each hidden width d_ff, over the target.

    Args:
        x, target: the inputs, and ``{name: target values}`` (shown at every width).
        fits, widths, start: for each width, ``{activation: fitted values}``; the widths; the one
            shown first.

    Shape:
        x: ``(N,)``; the target and each fitted curve: ``(N,)``.
    """
    titles = [f"1-d FFN with d_ff = {n} hidden units" for n in widths]
    fig = line_explorer(
        x,
        fits,
        [str(n) for n in widths],
        fixed=target,
        titles=titles,
        prefix="d_ff = ",
        active=_position(widths, start, "start"),
    )
    return fig.update_layout(height=380, width=680, xaxis_title="x", yaxis_title="FFN(x)")


def explore_causality(changes: Grid, start: int = 0) -> go.Figure:
    """Chapter 8: the largest change of the logits at each target position, when target token t
    changes.

    Bars at or after the changed position are red (they may move), those before it blue (they must
    not).

    Args:
        changes: row t: the change at every position when token t is changed.
        start: the changed position shown first.

    Shape:
        changes: ``(T, T)``.
    """
    rows = _numbers(changes, "changes", 2)
    steps = [
        [
            go.Bar(
                x=list(range(len(row))),
                y=row,
                name=f"changed position {t}",
                marker_color=["#d62728" if i >= t else "#1f77b4" for i in range(len(row))],
            )
        ]
        for t, row in enumerate(rows)
    ]
    fig = slider_figure(
        steps,
        [str(t) for t in range(len(rows))],
        active=_position(range(len(rows)), start, "start"),
        titles=[f"target token {t} changed: which logits move?" for t in range(len(rows))],
        prefix="changed position = ",
    )
    return fig.update_layout(
        height=380, width=620, xaxis_title="target position", yaxis_title="max |change of logits|"
    )


def explore_noam(
    steps: Values, rates: Sequence[Values], warmups: Sequence[int], start: int, d_model: int = 512
) -> go.Figure:
    """Chapter 9: the learning rate of the Noam schedule against the step, one curve per warmup.

    Args:
        steps, rates: the optimizer steps, and for each warmup the rate at each step.
        warmups, start, d_model: the warmups, in slider order; the one shown first; the width (for
            the title).

    Shape:
        steps: ``(N,)``; each rate curve: ``(N,)``.
    """
    _check_length("rates", rates, len(warmups), "warmup")
    curves = [{f"warmup {w}": r} for w, r in zip(warmups, rates, strict=True)]
    top = max(max(_numbers(r, "rates", 1)) for r in rates)
    fig = line_explorer(
        steps,
        curves,
        [str(w) for w in warmups],
        active=_position(warmups, start, "start"),
        titles=[f"Noam schedule, d_model {d_model}, warmup {w}" for w in warmups],
        prefix="warmup = ",
    )
    # the rate's axis starts a little below 0, so that its label 0 does not sit on the step axis's 0
    return fig.update_layout(
        height=380,
        width=680,
        xaxis_title="optimizer step",
        yaxis_title="learning rate",
        yaxis_range=[-0.04 * top, 1.05 * top],
    )


def explore_alignment(
    snapshots: Sequence[Tensor], steps: Sequence[int], keys: Sequence[str], queries: Sequence[str]
) -> go.Figure:
    """Chapter 10: cross-attention at each evaluation (slider); buttons: the mean of the heads, or
    one head.

    Args:
        snapshots: the cross-attention weights of one example at each evaluation.
        steps: the training step of each snapshot.
        keys, queries: the labels of the source positions (columns) and decoder positions (rows).

    Shape:
        each snapshot: ``(H, T, S)``.
    """
    _check_length("steps", steps, len(snapshots), "snapshot")
    if any(not isinstance(s, Tensor) or s.dim() != 3 for s in snapshots):
        raise ValueError("snapshots must be tensors of shape (H, T, S)")
    grids = {"mean of heads": [s.float().mean(0) for s in snapshots]}
    grids |= {f"head {h}": [s[h] for s in snapshots] for h in range(snapshots[0].size(0))}
    fig = heatmap_explorer(
        grids,
        [str(s) for s in steps],
        x=[f"{j}:{k}" for j, k in enumerate(keys)],
        y=[f"{j}:{q}" for j, q in enumerate(queries)],
        active=len(steps) - 1,
        prefix="step = ",
        titles=[f"cross-attention after {s} steps" for s in steps],
    )
    return fig.update_layout(
        height=480,
        width=560,
        xaxis_title="source position:symbol",
        yaxis_title="decoder position:input token",
        margin={"t": 110},
    )


def explore_sharding(
    owners: Mapping[str, Sequence[Sequence[tuple[int, int] | None]]], sizes: Sequence[int]
) -> go.Figure:
    """Chapter 13: which rank trains on each batch of an epoch, and at which step, one row per tail
    rule.

    Args:
        owners: ``{tail rule: for each number of processes, for each batch, (rank, step) or None}``
            (``None``: the batch is left out).
        sizes: the numbers of processes, in slider order.
    """
    for rule, tables in owners.items():
        _check_length(f"owners[{rule!r}]", tables, len(sizes), "number of processes")
    steps, titles, top = [], [], max(max(sizes) - 1, 1)
    for i, size in enumerate(sizes):
        rows = {rule: list(tables[i]) for rule, tables in owners.items()}
        z = [[None if o is None else o[0] for o in row] for row in rows.values()]
        text = [
            ["left out" if o is None else f"rank {o[0]}<br>step {o[1]}" for o in row]
            for row in rows.values()
        ]
        steps.append(
            [
                go.Heatmap(
                    z=z,
                    text=text,
                    texttemplate="%{text}",
                    x=[f"b{j}" for j in range(len(z[0]))],
                    y=[f"tail={rule!r}" for rule in rows],
                    zmin=0,
                    zmax=top,
                    colorscale="Turbo",
                    showscale=False,
                    xgap=3,
                    ygap=3,
                    hoverinfo="text",
                )
            ]
        )
        titles.append(
            f"{size} process(es). "
            + "; ".join(
                f"{rule}: {max((o[1] for o in row if o), default=0)} steps, {row.count(None)} "
                "left out"
                for rule, row in rows.items()
            )
        )
    fig = slider_figure(
        steps, [str(s) for s in sizes], titles=titles, prefix="W = ", active=min(1, len(sizes) - 1)
    )
    return fig.update_layout(
        height=300, width=680, margin={"t": 50, "b": 40}, yaxis_autorange="reversed"
    )


def explore_accumulation(
    steps: Values, right: Values, wrong: Sequence[Values], accums: Sequence[int], start: int
) -> go.Figure:
    """Chapter 14: the rate per optimizer step, right and WRONG, for each number of micro-batches
    per step.

    The title names the optimizer step with the highest rate of the WRONG loop.

    Args:
        steps, right: the optimizer steps, and the right rate at each.
        wrong, accums, start: for each number of micro-batches, the WRONG rates; the numbers; the
            one shown first.

    Shape:
        steps, right and each curve of ``wrong``: ``(N,)``.
    """
    _check_length("wrong", wrong, len(accums), "number of micro-batches")
    xs = _numbers(steps, "steps", 1, digits=6)
    peaks = [xs[max(range(len(xs)), key=_numbers(w, "wrong", 1).__getitem__)] for w in wrong]
    curves = [
        {f"per micro-batch (WRONG), {k} per step": w} for k, w in zip(accums, wrong, strict=True)
    ]
    titles = [
        f"{k} micro-batch(es) per step: the per-micro-batch rate peaks at optimizer step {p:g}"
        for k, p in zip(accums, peaks, strict=True)
    ]
    fig = line_explorer(
        steps,
        curves,
        [str(k) for k in accums],
        fixed={"per optimizer step (right)": right},
        titles=titles,
        active=_position(accums, start, "start"),
        prefix="micro-batches per step = ",
    )
    return fig.update_layout(
        height=380, width=680, xaxis_title="optimizer step", yaxis_title="learning rate"
    )
