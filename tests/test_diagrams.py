"""The figures drawn from the code: they show what the config builds, each chapter's map marks what
the chapter builds and opens the chapter, and the stored files are current."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import re
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from transformer_book.concepts._style import INK, MUTED  # noqa: E402
from transformer_book.diagrams import PARTS, architecture_figure, save_svg  # noqa: E402

pytestmark = pytest.mark.book

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


def _draw_figures_module():
    spec = importlib.util.spec_from_file_location(
        "draw_figures", ROOT / "scripts" / "draw_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The labels a map of the paper's model writes, and the two that orient it whatever it marks.
ORIENTATION = {"source tokens", "target tokens, shifted right"}
PAPER_MAP_LABELS = {
    "source embedding",
    "target embedding",
    "+ positional encoding",
    "self-attention",
    "masked self-attention",
    "cross-attention",
    "add & LayerNorm",
    "feed-forward",
    "6 x",
    "memory",
    "linear to logits",
    "softmax",
    "next-token probabilities",
}


def ink_and_grey(fig) -> tuple[set[str], set[str]]:
    """The texts a map draws in ink (its marked parts, and the orientation) and those in grey."""
    colours = {INK: set(), MUTED: set()}
    for text in fig.axes[0].texts:
        if text.get_text():  # not an arrow
            colours[to_hex(text.get_color())].add(text.get_text())
    return colours[INK], colours[MUTED]


def thick_boxes(fig) -> set[str]:
    """The labels of the boxes drawn with a thick edge (marked)."""
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_facecolor()[3] > 0]
    thick = set()
    for box in boxes:
        if box.get_linewidth() > 2:
            x, y = box.get_x() + box.get_width() / 2, box.get_y() + box.get_height() / 2
            # the label sits at the box's centre
            (label,) = [t.get_text() for t in ax.texts if np.allclose(t.get_position(), (x, y))]
            thick.add(label)
    return thick


@pytest.mark.parametrize(
    ("parts", "marked"),
    [
        ({"embedding"}, {"source embedding", "target embedding"}),
        ({"positional"}, {"+ positional encoding"}),
        ({"masked self-attention"}, {"masked self-attention"}),
        ({"norm"}, {"add & LayerNorm"}),
        ({"feed-forward"}, {"feed-forward"}),
        ({"output"}, {"linear to logits", "softmax", "next-token probabilities"}),
        ({"stacks", "memory"}, {"6 x", "memory"}),
    ],
)
def test_a_map_marks_the_parts_asked_for_and_greys_the_rest(parts, marked):
    config = _draw_figures_module().PAPER_BASE
    fig = architecture_figure(config, highlight=parts, compact=True)
    ink, grey = ink_and_grey(fig)
    assert ink == marked | ORIENTATION
    assert grey == PAPER_MAP_LABELS - marked
    assert thick_boxes(fig) == marked - {"next-token probabilities", "6 x", "memory"}
    plt.close("all")


def test_every_part_can_be_marked_and_marks_something_of_its_own():
    config = _draw_figures_module().PAPER_BASE
    lines = {}
    for part in PARTS:
        fig = architecture_figure(config, highlight={part}, compact=True)
        ink, _ = ink_and_grey(fig)
        widths = sorted({round(line.get_linewidth(), 1) for line in fig.axes[0].lines})
        lines[part] = widths
        # a part marks a label of its own, or (the residual paths) thick lines
        assert ink - ORIENTATION or widths[-1] > 2, f"marking {part!r} marks nothing"
        plt.close(fig)
    assert lines["residual"][-1] > 2 and lines["memory"][-1] > 2
    assert lines["embedding"][-1] < 1  # only the marked part's paths are thick


def test_a_map_keeps_the_structure_and_drops_the_sizes(tiny_config):
    pre_ln = tiny_config(norm_first=True, num_encoder_layers=3, num_decoder_layers=2)
    shown = texts(architecture_figure(pre_ln, highlight={"norm"}, compact=True))
    assert shown.count("LayerNorm") == 2 + 3 and shown.count("final LayerNorm") == 2
    assert shown.count("add (residual)") == 5 and "3 x" in shown and "2 x" in shown
    assert not any(re.search(r"\d{2}|h = ", t) for t in shown), "a map shows no sizes"
    assert shown[-1] == "", "a map has no title: its caption says what it marks"
    plt.close("all")


def test_marking_every_part_draws_the_plain_map_and_unknown_parts_are_refused(
    tiny_config, tmp_path
):
    everything = save_svg(
        architecture_figure(tiny_config(), highlight=PARTS, compact=True), tmp_path / "all.svg"
    )
    plain = save_svg(architecture_figure(tiny_config(), compact=True), tmp_path / "plain.svg")
    assert everything.read_bytes() == plain.read_bytes()
    with pytest.raises(ValueError, match="unknown parts \\['attention'\\]"):
        architecture_figure(tiny_config(), highlight={"attention"})
    with pytest.raises(TypeError, match="collection of parts"):
        architecture_figure(tiny_config(), highlight="feed-forward")
    plt.close("all")


ATTENTION = {"self-attention", "masked self-attention", "cross-attention"}
# What each chapter's map marks, by the labels it draws in ink: the piece the chapter builds.
CHAPTER_MARKS = {
    1: {"source embedding", "target embedding"},
    2: {"+ positional encoding"},
    3: ATTENTION,
    4: ATTENTION | {"memory"},
    5: ATTENTION,
    6: {"add & LayerNorm"},
    7: {"feed-forward"},
    8: {"6 x", "memory", "linear to logits", "softmax", "next-token probabilities"},
    9: {"linear to logits", "softmax", "next-token probabilities"},
}


@pytest.mark.parametrize("chapter", range(1, 12))
def test_each_chapters_map_marks_what_the_chapter_builds(chapter):
    module = _draw_figures_module()
    fig = module.chapter_map(chapter)
    ink, grey = ink_and_grey(fig)
    if chapter in CHAPTER_MARKS:
        assert ink == CHAPTER_MARKS[chapter] | ORIENTATION
        assert grey == PAPER_MAP_LABELS - CHAPTER_MARKS[chapter]
    else:  # chapters 10 and 11 train the whole model: every part in its colours
        assert not grey and "final LayerNorm" in ink, "the copy model and the translator: Pre-LN"
        layers = {10: "1 x", 11: "3 x"}[chapter]
        assert layers in ink
    assert f"map_{chapter:02d}.svg" in module.FIGURES
    plt.close("all")


CAPTION = "You are here: "


def _opening(chapter: int) -> str:
    """The markdown of chapter ``chapter`` before its first code cell."""
    (path,) = (ROOT / "chapters").glob(f"{chapter:02d}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    opening = []
    for cell in cells:
        if cell["cell_type"] == "code":
            break
        source = cell["source"]
        opening.append("".join(source) if isinstance(source, list) else source)
    return "\n".join(opening)


@pytest.mark.parametrize("chapter", range(1, 12))
def test_each_chapter_opens_with_its_map(chapter):
    """Chapters 1-11 show their map before any code: a figure with alt text and a one-line caption
    that says what the marked parts are."""
    opening = _opening(chapter)
    name = f"map_{chapter:02d}.svg"
    blocks = re.findall(
        r"```\{figure\} \.\./figures/" + re.escape(name) + r"\n(.*?)```", opening, re.S
    )
    assert len(blocks) == 1, f"chapter {chapter} shows figures/{name} {len(blocks)} times"
    options, _, caption = blocks[0].partition("\n\n")
    assert re.search(r"^:alt: \S.{40,}$", options, re.M), "the map needs alt text"
    caption = caption.strip()
    assert caption.startswith(CAPTION) and "\n" not in caption, (
        f"one line that starts {CAPTION!r}: {caption!r}"
    )


# Another processor, or PyTorch's other vectorised kernels (ATEN_CPU_CAPABILITY), rounds the values
# a figure plots differently in the last bits: a coordinate moves by about 1e-5 pt, a colour by one
# step in a channel, a pixel of an embedded image likewise. Larger differences are a stale figure.
COORDINATE_TOLERANCE = 1e-3  # points
CHANNEL_TOLERANCE = 2  # of 255, for colours and embedded images' pixels
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
COLOUR = re.compile(r"#[0-9a-f]{6}\b")
IMAGE = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=\s]+)")


def _pixels(encoded: str) -> np.ndarray:
    return (plt.imread(io.BytesIO(base64.b64decode(encoded)), format="png") * 255).round()


def svg_difference(stored: str, drawn: str) -> str | None:
    """Where two SVG texts differ beyond the rounding of another processor; None if nowhere."""
    stored_images, drawn_images = IMAGE.findall(stored), IMAGE.findall(drawn)
    if len(stored_images) != len(drawn_images):
        return "a different number of embedded images"
    for a, b in zip(stored_images, drawn_images, strict=True):
        a, b = _pixels(a), _pixels(b)
        if a.shape != b.shape or np.abs(a - b).max() > CHANNEL_TOLERANCE:
            return "an embedded image differs"
    stored, drawn = IMAGE.sub("IMAGE", stored), IMAGE.sub("IMAGE", drawn)
    stored_colours, drawn_colours = COLOUR.findall(stored), COLOUR.findall(drawn)
    if len(stored_colours) != len(drawn_colours):
        return "a different number of colours"
    for a, b in zip(stored_colours, drawn_colours, strict=True):
        channels = [abs(int(a[i : i + 2], 16) - int(b[i : i + 2], 16)) for i in (1, 3, 5)]
        if max(channels) > CHANNEL_TOLERANCE:
            return f"colour {a} against {b}"
    stored, drawn = COLOUR.sub("#COLOUR", stored), COLOUR.sub("#COLOUR", drawn)
    if NUMBER.split(stored) != NUMBER.split(drawn):
        return "the text between the numbers differs"
    for a, b in zip(NUMBER.findall(stored), NUMBER.findall(drawn), strict=True):
        if abs(float(a) - float(b)) > COORDINATE_TOLERANCE:
            return f"number {a} against {b}"
    return None


def test_the_figure_comparison_tolerates_rounding_and_nothing_more():
    base = '<path d="M 63.539013 10" style="fill: #f7f6f6"/>'
    assert svg_difference(base, base.replace("63.539013", "63.538996")) is None
    assert svg_difference(base, base.replace("#f7f6f6", "#f6f7f7")) is None
    assert svg_difference(base, base.replace("63.539013", "63.6")) is not None
    assert svg_difference(base, base.replace("#f7f6f6", "#f0f6f6")) is not None
    assert svg_difference(base, base.replace("path", "rect")) is not None


def test_the_landing_page_figure_is_what_the_code_draws(tmp_path):
    module = _draw_figures_module()
    module.main(tmp_path)
    for name in module.FIGURES:
        stored = ROOT / "figures" / name
        difference = svg_difference(
            stored.read_text(encoding="utf-8"), (tmp_path / name).read_text()
        )
        assert difference is None, f"{stored} is stale ({difference}): run `make figures`"
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
    module = _draw_figures_module()
    for name, draw in module.FIGURES.items():
        fig = draw()
        svg = save_svg(fig, tmp_path / name)
        px = smallest_label_px(fig, svg)
        assert px >= SMALLEST_LABEL_PX, (
            f"{name}: its smallest label shows at {px:.1f} px on the page"
        )
        plt.close(fig)
