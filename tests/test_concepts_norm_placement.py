"""Chapter 6's opening picture shows the norms where the library's layers and stacks put them."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from transformer_book.concepts.norm_placement import norm_placement_figure  # noqa: E402
from transformer_lib import Encoder, LayerNorm, LayerSpec  # noqa: E402

pytestmark = pytest.mark.book


def test_each_panel_draws_as_many_layernorms_as_the_library_builds() -> None:
    fig = norm_placement_figure()
    texts = sorted(fig.axes[0].texts, key=lambda t: t.get_position()[0])
    middle = (texts[0].get_position()[0] + texts[-1].get_position()[0]) / 2
    panels = {"Post-LN": [], "Pre-LN": []}
    for text in texts:
        panels["Post-LN" if text.get_position()[0] < middle else "Pre-LN"].append(text.get_text())
    for name, norm_first in (("Post-LN", False), ("Pre-LN", True)):
        stack = Encoder(LayerSpec(d_model=8, num_heads=2, d_ff=16, norm_first=norm_first), 1)
        norms = sum(isinstance(m, LayerNorm) for m in stack.modules())
        shown = panels[name]
        assert sum("LayerNorm" in t for t in shown) == norms, (name, shown)
        assert ("final LayerNorm" in shown) == norm_first
        assert shown.count("+") == 2 and "self-attention" in shown and "feed-forward" in shown
        assert any(t.startswith(name) for t in shown)
    plt.close(fig)
