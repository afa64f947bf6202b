"""The figures drawn from the code: they show what the config builds, and the stored one is
current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from transformer_book.diagrams import architecture_figure, save_svg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_post_ln_draws_add_and_norm_after_each_sublayer_and_no_final_norm(tiny_config):
    shown = texts(architecture_figure(tiny_config(num_encoder_layers=6, num_decoder_layers=4)))
    assert shown.count("add & LayerNorm") == 2 + 3  # encoder: 2 sub-layers, decoder: 3
    assert not any(t.startswith("final") for t in shown)
    assert "6 x" in shown and "4 x" in shown
    assert "masked self-attention\n(h = 2)" in shown and "cross-attention\n(h = 2)" in shown
    assert "+ sinusoidal positional encoding" in shown
    assert any("vocabulary 11" in t for t in shown) and any("vocabulary 13" in t for t in shown)
    assert any("16 -> 32 -> 16, relu" in t for t in shown)
    plt.close("all")


def test_pre_ln_draws_the_norm_first_and_a_final_norm_per_stack_and_the_variants(tiny_config):
    variant = tiny_config(
        norm_first=True,
        norm="rmsnorm",
        positional="rope",
        activation="swiglu",
        num_heads=4,
        num_kv_heads=2,
    )
    shown = texts(architecture_figure(variant))
    assert shown.count("RMSNorm") == 2 + 3 and shown.count("final RMSNorm") == 2
    assert shown.count("add (residual)") == 5 and "add & RMSNorm" not in shown
    assert "self-attention\n(h = 4, 2 key/value heads, RoPE)" in shown
    assert "cross-attention\n(h = 4, 2 key/value heads)" in shown  # RoPE is in self-attention only
    assert not any("sinusoidal" in t for t in shown) and any("swiglu" in t for t in shown)
    plt.close("all")


def test_a_config_that_is_not_a_transformer_config_is_refused():
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        architecture_figure({"d_model": 512})


def test_the_landing_page_figure_is_what_the_code_draws(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "draw_figures", ROOT / "scripts" / "draw_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in module.FIGURES:
        stored = ROOT / "figures" / name
        assert stored.read_bytes() == (tmp_path / name).read_bytes(), (
            f"{stored} is stale: run `make figures`"
        )
    assert "figures/architecture.svg" in (ROOT / "intro.md").read_text(encoding="utf-8")
    plt.close("all")


# The book's column is about 730 px wide at a 1280 px window (both sidebars shown); a figure wider
# than
# that is scaled down to it, a narrower one is shown at its own size (1 pt = 4/3 px).
COLUMN_PX = 730
SMALLEST_LABEL_PX = 12.5  # the body text is 16 px; labels should read at about that size


def smallest_label_px(fig, svg: Path) -> float:
    """The size at which the figure's smallest text shows on the page, from the SVG's width."""
    import re

    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    width_pt = float(
        re.search(r'width="([\d.]+)pt"', svg.read_text(encoding="utf-8")[:2000]).group(1)
    )
    return min(sizes) * min(4 / 3, COLUMN_PX / width_pt)


def test_every_figure_reads_at_about_the_size_of_the_body_text(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "draw_figures", ROOT / "scripts" / "draw_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, draw in module.FIGURES.items():
        fig = draw()
        svg = save_svg(fig, tmp_path / name)
        px = smallest_label_px(fig, svg)
        assert px >= SMALLEST_LABEL_PX, (
            f"{name}: its smallest label shows at {px:.1f} px on the page"
        )
        plt.close(fig)
