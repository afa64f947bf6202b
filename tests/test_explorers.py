"""The chapters' Plotly explorers: each slider value shows its own data, buttons swap the data, bad
input fails.

The figures are read the way plotly.js applies them in the browser: slider step ``i`` sets every
trace's ``visible`` (``args[0]``) and the title (``args[1]``); a button restyles the traces it
names.
"""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path

import plotly.graph_objects as go
import pytest
import torch

from transformer_book import explorers
from transformer_book.explorers import (
    explore_accumulation,
    explore_alignment,
    explore_causality,
    explore_embedding_scale,
    explore_ffn_width,
    explore_layer_costs,
    explore_noam,
    explore_padding,
    explore_pe_columns,
    explore_sharding,
    explore_temperature,
    heatmap_explorer,
    line_explorer,
    slider_figure,
)
from transformer_book.interactive import fit_titles, plotly_html

pytestmark = pytest.mark.book


def shown(fig: go.Figure, step: int) -> list:
    """The traces visible after the slider moved to ``step``."""
    visible = fig.layout.sliders[0].steps[step].args[0]["visible"]
    assert len(visible) == len(fig.data)
    return [trace for trace, on in zip(fig.data, visible, strict=True) if on]


def title_at(fig: go.Figure, step: int) -> str:
    return fig.layout.sliders[0].steps[step].args[1]["title.text"]


def press(fig: go.Figure, button: int) -> go.Figure:
    """A copy of ``fig`` after a click on button ``button`` (a restyle of the traces it names)."""
    pressed = go.Figure(fig)
    menu = pressed.layout.updatemenus[0].buttons[button]
    assert menu.method == "restyle"
    changes, indices = menu.args
    for key, values in changes.items():
        assert len(values) == len(indices)
        for index, value in zip(indices, values, strict=True):
            pressed.data[index].update({key: value})
    return pressed


def initially_visible(fig: go.Figure) -> list:
    return [trace for trace in fig.data if trace.visible is not False]


def as_lists(t: torch.Tensor) -> list:
    return [[float(f"{v:.4g}") for v in row] for row in t.tolist()]


# --- the generic builders
# -----------------------------------------------------------------------------


def test_slider_figure_shows_one_group_per_value_plus_the_fixed_traces() -> None:
    groups = [[go.Scatter(y=[i, i]), go.Scatter(y=[10 * i])] for i in range(3)]
    fixed = [go.Scatter(y=[-1.0], name="target")]
    fig = slider_figure(
        groups, ["a", "b", "c"], titles=["A", "B", "C"], fixed=fixed, active=1, prefix="v = "
    )
    assert len(fig.data) == 7 and len(fig.layout.sliders[0].steps) == 3
    assert fig.layout.sliders[0].active == 1 and fig.layout.title.text == "B"
    assert [list(t.y) for t in initially_visible(fig)] == [[-1.0], [1, 1], [10]]
    for i in range(3):
        assert [list(t.y) for t in shown(fig, i)] == [[-1.0], [i, i], [10 * i]]
        assert fig.layout.sliders[0].steps[i].label == "abc"[i] and title_at(fig, i) == "ABC"[i]
    assert fig.layout.sliders[0].currentvalue.prefix == "v = "
    assert not fig.layout.updatemenus


def test_slider_figure_buttons_restyle_every_group() -> None:
    groups = [[go.Heatmap(z=[[0.0]])], [go.Heatmap(z=[[1.0]])]]
    options = {
        "first": [[{"z": [[0.0]]}], [{"z": [[1.0]]}]],
        "second": [[{"z": [[0.5]]}], [{"z": [[0.7]]}]],
    }
    fig = slider_figure(groups, ["0", "1"], options=options)
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["first", "second"]
    assert fig.layout.updatemenus[0].type == "buttons"
    second = press(fig, 1)
    assert [list(map(list, shown(second, i)[0].z)) for i in range(2)] == [[[0.5]], [[0.7]]]
    back = press(second, 0)
    assert [list(map(list, shown(back, i)[0].z)) for i in range(2)] == [[[0.0]], [[1.0]]]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"steps": []}, ValueError, "steps must be a non-empty list"),
        ({"labels": ["only one"]}, ValueError, "labels must have one entry per slider value"),
        ({"titles": ["x"]}, ValueError, "titles must have one entry per slider value"),
        ({"active": 2}, ValueError, "active must be the index of a slider value, 0 to 1, got 2"),
        (
            {"options": {"b": [[{"z": 1}]]}},
            ValueError,
            "options['b'] must have one entry per slider value",
        ),
        ({"options": {"b": [[{"z": 1}], [{"y": 1}]]}}, ValueError, "must set the same properties"),
    ],
)
def test_slider_figure_rejects_bad_arguments(kwargs: dict, error: type, message: str) -> None:
    arguments = {"steps": [[go.Scatter(y=[0])], [go.Scatter(y=[1])]], "labels": ["a", "b"]} | kwargs
    with pytest.raises(error, match=message.replace("(", r"\(").replace("[", r"\[")):
        slider_figure(arguments.pop("steps"), arguments.pop("labels"), **arguments)


def test_line_explorer_plots_each_values_curves_and_buttons_swap_them() -> None:
    x = [1.0, 2.0, 3.0]
    plain = [
        {"a": [0.125, 0.25, 0.5], "b": [1.0, 2.0, 3.0]},
        {"a": [0.5, 0.25, 0.125], "b": [3.0, 2.0, 1.0]},
    ]
    other = [
        {"a": [9.0, 9.0, 9.0], "b": [8.0, 8.0, 8.0]},
        {"a": [7.0, 7.0, 7.0], "b": [6.0, 6.0, 6.0]},
    ]
    fig = line_explorer(
        x,
        {"plain": plain, "other": other},
        ["p", "q"],
        fixed={"target": torch.tensor([0.0, 1, 0])},
        marks=[1.5, 2.5],
        mark_name="mark",
        mark_span=(0.0, 9.0),
        titles=["P", "Q"],
        active=1,
    )
    assert len(fig.data) == 1 + 2 * 3 and len(fig.layout.sliders[0].steps) == 2
    for i in range(2):
        target, a, b, mark = shown(fig, i)
        assert (target.name, list(target.y)) == ("target", [0.0, 1.0, 0.0])
        assert (a.name, list(a.x), list(a.y)) == ("a", x, plain[i]["a"])
        assert (b.name, list(b.y)) == ("b", plain[i]["b"])
        assert (mark.name, list(mark.x), list(mark.y)) == ("mark", [1.5 + i] * 2, [0.0, 9.0])
    # a colour per name
    assert a.marker.color != b.marker.color and shown(fig, 0)[1].marker.color == a.marker.color
    swapped = press(fig, 1)
    for i in range(2):
        _, a, b, mark = shown(swapped, i)
        assert (list(a.y), list(b.y), list(mark.y)) == (other[i]["a"], other[i]["b"], [0.0, 9.0])


def test_line_explorer_rounds_to_four_significant_digits_and_draws_bars() -> None:
    fig = line_explorer(
        torch.tensor([1.0, 20001.0]),
        [{"c": torch.tensor([math.pi, 123456.0])}],
        ["only"],
        bars=True,
    )
    (bar,) = shown(fig, 0)
    assert (
        isinstance(bar, go.Bar)
        and list(bar.x) == [1.0, 20001.0]
        and list(bar.y) == [3.142, 123500.0]
    )
    assert not fig.layout.updatemenus  # one set of curves: no buttons


def test_line_explorer_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="one mapping {legend name: y values} per slider value"):
        line_explorer([0, 1], [[0.0, 1.0]], ["a"])
    with pytest.raises(ValueError, match=r"x must have 1 dimension\(s\), got shape \(2, 1\)"):
        line_explorer([[0], [1]], [{"c": [0, 1]}], ["a"])
    with pytest.raises(ValueError, match="marks must have one entry per slider value"):
        line_explorer([0, 1], [{"c": [0, 1]}], ["a"], marks=[1, 2])
    with pytest.raises(TypeError, match="curve 'c' must be numbers"):
        line_explorer([0, 1], [{"c": ["zero", "one"]}], ["a"])
    with pytest.raises(TypeError, match="curves must be a list"):
        line_explorer([0, 1], "curves", ["a"])


def test_heatmap_explorer_shows_grid_i_at_step_i_and_buttons_swap_every_grid() -> None:
    grids = torch.rand(3, 2, 4)
    other = [g.flip(0) for g in grids]
    fig = heatmap_explorer(
        {"plain": list(grids), "flipped": other},
        ["x", "y", "z"],
        x=list("abcd"),
        y=["r", "s"],
        titles=["X", "Y", "Z"],
    )
    assert len(fig.data) == 3 and fig.layout.yaxis.autorange == "reversed"
    for i in range(3):
        (heatmap,) = shown(fig, i)
        assert [list(r) for r in heatmap.z] == as_lists(grids[i])
        assert list(heatmap.x) == list("abcd") and (heatmap.zmin, heatmap.zmax) == (0, 1)
    flipped = press(fig, 1)
    assert all([list(r) for r in shown(flipped, i)[0].z] == as_lists(other[i]) for i in range(3))


def test_heatmap_explorer_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"grids must have 2 dimension\(s\), got shape \(3,\)"):
        heatmap_explorer([[0.1, 0.2, 0.3]], ["a"])
    with pytest.raises(ValueError, match="grids\\['b'\\] must have one entry per slider value"):
        heatmap_explorer({"a": [[[0.0]], [[1.0]]], "b": [[[0.0]]]}, ["0", "1"])
    with pytest.raises(ValueError, match="grids must not be an empty mapping"):
        heatmap_explorer({}, [])


# --- one explorer per idea
# --------------------------------------------------------------------------------


def test_layer_costs_marks_six_d_for_each_width() -> None:
    ts = torch.tensor([8.0, 64.0, 512.0])
    widths = [64, 128]
    costs = [{"RNN": 2 * ts * w**2, "encoder": 12 * ts * w**2 + 2 * ts**2 * w} for w in widths]
    fig = explore_layer_costs(ts, costs, widths, start=128)
    assert (
        fig.layout.sliders[0].active == 1
        and fig.layout.xaxis.type == "log" == fig.layout.yaxis.type
    )
    for i, w in enumerate(widths):
        rnn, encoder, mark = shown(fig, i)
        assert list(rnn.y) == [float(f"{v:.4g}") for v in (2 * ts * w**2).tolist()]
        assert list(mark.x) == [6 * w] * 2 and f"past T = {6 * w}" in title_at(fig, i)
    with pytest.raises(
        ValueError, match=r"start=100 is not one of the slider's values \[64, 128\]"
    ):
        explore_layer_costs(ts, costs, widths, start=100)


def test_embedding_scale_marks_sqrt_d() -> None:
    curves = [
        {"token": [0.0, 0.5], "position": [1.0, 0.5]},
        {"token": [0.25, 1.0], "position": [0.75, 0.0]},
    ]
    fig = explore_embedding_scale([1.0, 8.0], curves, [16, 64], start=64)
    assert (
        fig.layout.sliders[0].active == 1
        and fig.layout.title.text == "reading token and position back, d = 64"
    )
    token, position, mark = shown(fig, 0)
    assert (list(token.y), list(position.y), list(mark.x)) == ([0.0, 0.5], [1.0, 0.5], [4.0, 4.0])


def test_pe_columns_shows_column_i_at_step_i() -> None:
    table = torch.arange(12.0).view(4, 3) / 16  # (P=4, d=3)
    fig = explore_pe_columns(table, ["c0", "c1", "c2"])
    assert len(fig.layout.sliders[0].steps) == 3
    for column in range(3):
        (curve,) = shown(fig, column)
        assert (
            list(curve.x) == [0.0, 1.0, 2.0, 3.0] and list(curve.y) == (table[:, column]).tolist()
        )
        assert title_at(fig, column) == f"c{column}"
    with pytest.raises(ValueError, match="table must have 2 dimension"):
        explore_pe_columns(torch.zeros(4))


def test_temperature_slider_picks_tau_and_buttons_pick_the_mask() -> None:
    taus = [0.5, 1.0, 2.0]
    unmasked = [torch.full((2, 2), 0.5) * t for t in taus]
    causal = [torch.tensor([[1.0, 0.0], [0.25 * t, 0.75]]) for t in taus]
    fig = explore_temperature({"no mask": unmasked, "causal mask": causal}, taus, ["a", "b"])
    assert fig.layout.sliders[0].active == 1 and [s.label for s in fig.layout.sliders[0].steps] == [
        "0.5",
        "1",
        "2",
    ]
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["no mask", "causal mask"]
    masked = press(fig, 1)
    for i in range(3):
        assert [list(r) for r in shown(fig, i)[0].z] == unmasked[i].tolist()
        assert [list(r) for r in shown(masked, i)[0].z] == causal[i].tolist()
    with pytest.raises(ValueError, match="start=3.0 is not one of the slider's values"):
        explore_temperature({"no mask": unmasked}, taus, ["a", "b"], start=3.0)


def test_padding_shows_the_curves_of_each_padding() -> None:
    curves = [{"BatchNorm": [0.5 * p, 1.0], "LayerNorm": [1.0, -1.0]} for p in (0, 2, 4)]
    fig = explore_padding(curves, [0, 2, 4])
    assert fig.layout.sliders[0].steps[2].label == "4"
    batch, layer = shown(fig, 2)
    assert (list(batch.x), list(batch.y), list(layer.y)) == ([0.0, 1.0], [2.0, 1.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="curves must have one entry per padding"):
        explore_padding(curves, [0, 2])


def test_ffn_width_keeps_the_target_and_swaps_the_fits() -> None:
    fits = [{"ReLU FFN": [0.0, float(n)], "GELU FFN": [1.0, float(n)]} for n in (2, 8)]
    fig = explore_ffn_width([0.0, 1.0], {"target": [0.5, 0.5]}, fits, [2, 8], start=8)
    assert fig.layout.title.text == "1-d FFN with d_ff = 8 hidden units"
    target, relu, gelu = shown(fig, 0)
    assert (target.name, list(target.y), list(relu.y), list(gelu.y)) == (
        "target",
        [0.5, 0.5],
        [0.0, 2.0],
        [1.0, 2.0],
    )
    assert target.visible is not False  # shown at every width


def test_causality_colours_the_positions_that_may_move() -> None:
    changes = torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [0.0, 0.0, 1.0]])
    fig = explore_causality(changes, start=1)
    assert (
        fig.layout.sliders[0].active == 1
        and fig.layout.title.text == "target token 1 changed: which logits move?"
    )
    for t in range(3):
        (bars,) = shown(fig, t)
        assert list(bars.y) == changes[t].tolist()
        assert [c == "#d62728" for c in bars.marker.color] == [i >= t for i in range(3)]
    with pytest.raises(ValueError, match="start=5 is not one of the slider's values"):
        explore_causality(changes, start=5)


def test_noam_shows_one_curve_per_warmup_on_a_shared_scale() -> None:
    rates = [[0.001, 0.002, 0.001], [0.0005, 0.001, 0.004]]
    fig = explore_noam([1, 2, 3], rates, [10, 20], start=10)
    assert [list(shown(fig, i)[0].y) for i in range(2)] == rates
    assert list(fig.layout.yaxis.range) == pytest.approx(
        [-0.04 * 0.004, 1.05 * 0.004]
    )  # 0 clear of the x axis
    assert title_at(fig, 1) == "Noam schedule, d_model 512, warmup 20"
    with pytest.raises(ValueError, match="rates must have one entry per warmup"):
        explore_noam([1, 2, 3], rates, [10], start=10)


def test_alignment_buttons_show_the_mean_or_one_head() -> None:
    snapshots = [torch.rand(2, 3, 4) for _ in range(3)]  # (H, T, S) at three evaluations
    fig = explore_alignment(snapshots, [25, 50, 75], list("abcd"), list("xyz"))
    assert (
        fig.layout.sliders[0].active == 2 and title_at(fig, 0) == "cross-attention after 25 steps"
    )
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == [
        "mean of heads",
        "head 0",
        "head 1",
    ]
    head_1 = press(fig, 2)
    for i, s in enumerate(snapshots):
        assert [list(r) for r in shown(fig, i)[0].z] == as_lists(s.mean(0))
        assert [list(r) for r in shown(head_1, i)[0].z] == as_lists(s[1])
    assert list(shown(fig, 0)[0].x) == ["0:a", "1:b", "2:c", "3:d"]
    with pytest.raises(ValueError, match="steps must have one entry per snapshot"):
        explore_alignment(snapshots, [25], list("abcd"), list("xyz"))


def test_sharding_draws_one_row_per_tail_rule() -> None:
    owners = {
        "drop": [[(0, 1), (0, 2), (0, 3)], [(0, 1), (1, 1), None]],
        "pad": [[(0, 1), (0, 2), (0, 3)], [(0, 1), (1, 1), (0, 2)]],
    }
    fig = explore_sharding(owners, [1, 2])
    (table,) = shown(fig, 1)
    assert list(table.y) == ["tail='drop'", "tail='pad'"]
    assert [list(r) for r in table.z] == [[0, 1, None], [0, 1, 0]]
    assert list(table.text[0]) == ["rank 0<br>step 1", "rank 1<br>step 1", "left out"]
    assert title_at(fig, 1) == "2 process(es). drop: 1 steps, 1 left out; pad: 2 steps, 0 left out"
    with pytest.raises(
        ValueError, match=r"owners\['pad'\] must have one entry per number of processes"
    ):
        explore_sharding({"pad": owners["pad"][:1]}, [1, 2])


def test_accumulation_titles_name_the_peak_of_the_wrong_curve() -> None:
    right = [0.1, 0.2, 0.3, 0.2]
    wrong = [[0.1, 0.2, 0.3, 0.2], [0.2, 0.3, 0.25, 0.2]]
    fig = explore_accumulation([1, 2, 3, 4], right, wrong, [1, 2], start=2)
    assert fig.layout.sliders[0].active == 1
    assert title_at(fig, 0).endswith("peaks at optimizer step 3") and title_at(fig, 1).endswith(
        "at optimizer step 2"
    )
    fixed, curve = shown(fig, 1)
    assert (list(fixed.y), list(curve.y)) == (right, wrong[1])
    with pytest.raises(ValueError, match="wrong must have one entry per number of micro-batches"):
        explore_accumulation([1, 2, 3, 4], right, wrong[:1], [1, 2], start=2)


# --- the module's own rules
# -------------------------------------------------------------------------------


def test_a_figure_becomes_html_with_its_slider() -> None:
    html = plotly_html(explore_causality(torch.eye(2)), div_id="explorer-test")
    assert 'id="explorer-test"' in html and '"sliders"' in html


def test_a_title_too_long_for_its_figure_breaks_into_lines_that_fit() -> None:
    """Plotly cuts a long title at the figure's edge: the figure's own title and the slider's are
    wrapped.
    """
    long = (
        "KV cache of a paper-size decoder, batch 8, {n} tokens "
        "(MiB; 8 heads = multi-head attention)"
    )
    fig = line_explorer(
        [0, 1], [{"y": [1, 2]}] * 2, ["a", "b"], titles=[long.format(n=n) for n in (128, 4096)]
    )
    fig.update_layout(width=620)
    fitted = fit_titles(fig)
    titles = [fitted.layout.title.text] + [title_at(fitted, i) for i in range(2)]
    for title in titles:
        lines = title.split("<br>")
        assert len(lines) == 2 and max(len(line) for line in lines) <= 0.9 * 620 / (0.52 * 17), (
            title
        )
    assert title_at(fitted, 1).replace("<br>", " ") == long.format(n=4096)
    assert title_at(fig, 0) == long.format(n=128), "the figure itself is left as it was"
    short = fit_titles(explore_causality(torch.eye(2)))
    assert "<br>" not in title_at(short, 0)


def test_every_public_function_documents_itself_and_the_shapes_it_takes() -> None:
    for name in explorers.__all__:
        function = getattr(explorers, name)
        doc = inspect.getdoc(function) or ""
        assert doc, f"{name} has no docstring"
        takes_tensors = any(
            word in str(inspect.signature(function)) for word in ("Tensor", "Values", "Grid")
        )
        assert not takes_tensors or "Shape:" in doc, (
            f"{name} takes tensors but its docstring has no Shape: section"
        )


def test_the_module_prints_nothing() -> None:
    tree = ast.parse(Path(explorers.__file__).read_text(encoding="utf-8"))
    calls = [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    assert "print" not in calls
