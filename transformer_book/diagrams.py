"""Diagrams drawn from the code: the whole model from a :class:`~.TransformerConfig`.

:func:`architecture_figure` draws the encoder-decoder model that a config builds: the order of the
sub-layers and norms (Post-LN or Pre-LN, with the final norm Pre-LN adds), the kind of positional
encoding, the norm, the activation, the heads (and key/value heads), the widths and the depth. The
landing page's figure is this function's output for the paper's base model (``make figures``
writes it; a test checks that the stored file is what the code draws). Chapter 5's pictures of the
head split are concept figures (:mod:`~transformer_book.concepts.multi_head`).

The same function draws the map that opens chapters 1-11: ``compact=True`` keeps the structure
(which boxes, in which order, how often repeated) and drops the sizes, so that the figure is about
half as large with labels of the same size, and ``highlight`` marks the chapter's parts (of
:data:`PARTS`) in their colours and greys the rest: "you are here".

The figure sits on an opaque white card, so that they read the same in the light and dark themes.
A leaf module (matplotlib only); nothing in the package imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from transformer_lib.config import TransformerConfig

# one colour per kind of thing, in every figure of the book
from .concepts._style import COLOURS, INK, MUTED

__all__ = ["PARTS", "architecture_figure", "save_svg"]

# Point sizes: the page shows the figure about 8 inches wide, where 10.5 pt reads at about 13 px.
LABEL, SMALL_LABEL, HEADING = 11.5, 10.5, 13.0
INCH_PER_UNIT = 0.48  # the drawing's scale: a unit is 0.48 inch in both layouts

# The parts a map can mark. "norm": every norm, with the add of Post-LN's "add & LayerNorm";
# "residual": the skip paths, with Pre-LN's add boxes; "stacks": the frames that repeat a layer
# N times; "memory": the encoder's output on its way to every cross-attention; "output": the
# linear layer and the softmax.
PARTS = (
    "embedding",
    "positional",
    "self-attention",
    "masked self-attention",
    "cross-attention",
    "norm",
    "residual",
    "feed-forward",
    "stacks",
    "memory",
    "output",
)
# A part not marked: grey box, grey line, and text still dark enough to read (5:1 on MUTED_FILL).
MUTED_FILL, MUTED_EDGE, MUTED_LINE = "#f2f2f2", "#c4c4c4", "#b0b0b0"
MARKED_LINE = 2.4  # the edge of a marked box, the line of a marked path or frame


@dataclass(frozen=True)
class _Geometry:
    """Sizes in the drawing's units: the full figure's, or the map's (``compact``)."""

    box_w: float
    box_h: float
    gap: float  # between two boxes of a stack
    join: float  # between the embeddings and the layer
    above: float  # above a layer's frame, where its repeat count sits
    pad: float  # from a box to its layer's frame
    enc_x: float
    dec_x: float
    right: float  # the drawing's right edge


FULL = _Geometry(
    box_w=5.6, box_h=0.95, gap=0.3, join=0.7, above=0.7, pad=0.55, enc_x=3.8, dec_x=12.0, right=15.6
)
COMPACT = _Geometry(
    box_w=4.3,
    box_h=0.56,
    gap=0.22,
    join=0.42,
    above=0.8,
    pad=0.45,
    enc_x=2.85,
    dec_x=9.25,
    right=12.1,
)


@dataclass(frozen=True)
class _Look:
    """How the drawing looks: its geometry, whether labels carry sizes, what a map marks."""

    geometry: _Geometry
    compact: bool
    # None: the plain figure; otherwise the parts in colour (the rest grey)
    marked: frozenset[str] | None

    def on(self, part: str) -> bool:
        """Whether ``part`` shows in its colours: marked, or nothing marked."""
        return self.marked is None or part in self.marked

    def marks(self, part: str) -> bool:
        """Whether a map marks ``part`` (thick edges or lines)."""
        return self.marked is not None and part in self.marked

    def text(self, part: str) -> str:
        return INK if self.on(part) else MUTED

    def line(self, *parts: str) -> tuple[str, float]:
        """Colour and width of an arrow between ``parts``: ink where they all show."""
        return (INK, 0.9) if all(self.on(p) for p in parts) else (MUTED_LINE, 0.9)

    def path(self, part: str) -> tuple[str, float]:
        """Colour and width of a path that is itself a part (residual, memory): thick if marked."""
        return (INK, MARKED_LINE) if self.marks(part) else self.line(part)


@dataclass(frozen=True)
class _Box:
    """One box of a column: its label, colour key, part, and whether a residual path ends at it."""

    label: str
    kind: str
    part: str
    # index (within the layer) of the box whose input the path starts at
    residual_from: int | None = None


def _norm_name(config: TransformerConfig) -> str:
    return {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}[config.norm]


def _attention_label(config: TransformerConfig, what: str, compact: bool) -> str:
    if compact:
        return what
    kv = config.kv_heads
    heads = f"h = {config.num_heads}" + (
        f", {kv} key/value heads" if kv != config.num_heads else ""
    )
    rope = ", RoPE" if config.positional == "rope" and what != "cross-attention" else ""
    return f"{what}\n({heads}{rope})"


def _sublayers(config: TransformerConfig, decoder: bool, compact: bool) -> list[_Box]:
    """The sub-layers of one layer, bottom to top."""
    widths = f"{config.d_model} -> {config.d_ff} -> {config.d_model}"
    ff = "feed-forward" if compact else f"feed-forward\n({widths}, {config.activation})"
    first = "masked self-attention" if decoder else "self-attention"
    subs = [_Box(_attention_label(config, first, compact), "attention", first)]
    if decoder:
        cross = "cross-attention"
        subs.append(_Box(_attention_label(config, cross, compact), "attention", cross))
    return [*subs, _Box(ff, "feedforward", "feed-forward")]


def _layer_boxes(config: TransformerConfig, decoder: bool, compact: bool) -> list[_Box]:
    """One encoder or decoder layer as the code builds it (:mod:`~transformer_lib.nn.layers`)."""
    norm, boxes = _norm_name(config), []
    for sub in _sublayers(config, decoder, compact):
        start = len(boxes)
        if config.norm_first:  # Pre-LN: x + dropout(sublayer(norm(x)))
            boxes += [
                _Box(norm, "norm", "norm"),
                sub,
                _Box("add (residual)", "add", "residual", start),
            ]
        else:  # Post-LN: norm(x + dropout(sublayer(x)))
            boxes += [sub, _Box(f"add & {norm}", "norm", "norm", start)]
    return boxes


def _draw_box(ax: Axes, look: _Look, x: float, y: float, box: _Box) -> None:
    geo, on = look.geometry, look.on(box.part)
    patch = FancyBboxPatch(
        (x - geo.box_w / 2, y),
        geo.box_w,
        geo.box_h,
        boxstyle="round,pad=0.02,rounding_size=0.12",
        facecolor=COLOURS[box.kind] if on else MUTED_FILL,
        edgecolor=INK if on else MUTED_EDGE,
        linewidth=MARKED_LINE if look.marks(box.part) else 0.9,
    )
    ax.add_patch(patch)
    size = SMALL_LABEL if "\n" in box.label or len(box.label) > 24 else LABEL
    ax.text(
        x,
        y + geo.box_h / 2,
        box.label,
        ha="center",
        va="center",
        fontsize=size,
        color=look.text(box.part),
    )


def _arrow(
    ax: Axes, start: tuple[float, float], end: tuple[float, float], style: tuple[str, float]
) -> None:
    colour, width = style
    ax.annotate(
        "", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width}
    )


def _residual(ax: Axes, look: _Look, x: float, y_from: float, y_to: float, side: float) -> None:
    """A skip path from below a box at ``y_from`` up the side to the add box at ``y_to``."""
    geo = look.geometry
    colour, width = look.path("residual")
    edge = x + side * (geo.box_w / 2 + geo.pad - 0.2)
    ax.plot([x, edge, edge], [y_from, y_from, y_to + geo.box_h / 2], color=colour, lw=width - 0.1)
    _arrow(
        ax,
        (edge, y_to + geo.box_h / 2),
        (x + side * geo.box_w / 2, y_to + geo.box_h / 2),
        (colour, width),
    )


def _draw_stack(
    ax: Axes, look: _Look, x: float, y: float, boxes: list[_Box], side: float
) -> tuple[float, list[float]]:
    """Draw a layer's boxes upwards from ``y``; return the top and each box's bottom."""
    geo, bottoms = look.geometry, []
    for i, box in enumerate(boxes):
        bottoms.append(y)
        _draw_box(ax, look, x, y, box)
        if box.residual_from is not None:
            _residual(ax, look, x, bottoms[box.residual_from] - geo.gap / 2, y, side)
        if i + 1 < len(boxes):
            _arrow(
                ax,
                (x, y + geo.box_h),
                (x, y + geo.box_h + geo.gap),
                look.line(box.part, boxes[i + 1].part),
            )
        y += geo.box_h + geo.gap
    return y - geo.gap, bottoms


def _embedding_boxes(config: TransformerConfig, side: str, compact: bool) -> list[_Box]:
    vocab = config.src_vocab_size if side == "source" else config.tgt_vocab_size
    label = (
        f"{side} embedding"
        if compact
        else f"{side} embedding × √d_model\nvocabulary {vocab:,}, d_model {config.d_model}"
    )
    positional = {
        "sinusoidal": "+ sinusoidal positional encoding",
        "learned": "+ learned positional table",
        "rope": "(positions: RoPE, inside self-attention)",
    }[config.positional]
    if compact:
        positional = {
            "sinusoidal": "+ positional encoding",
            "learned": "+ learned positions",
            "rope": "(positions: RoPE)",
        }[config.positional]
    return [_Box(label, "embedding", "embedding"), _Box(positional, "embedding", "positional")]


def _frame(
    ax: Axes, look: _Look, x: float, bottom: float, top: float, layers: int, side: float
) -> None:
    """The rounded frame around one layer, with its repeat count."""
    geo = look.geometry
    edge = "#555555" if look.marked is None else INK if look.marks("stacks") else MUTED_EDGE
    frame = FancyBboxPatch(
        (x - geo.box_w / 2 - geo.pad, bottom - 0.2),
        geo.box_w + 2 * geo.pad,
        top - bottom + 0.4,
        boxstyle="round,pad=0.02,rounding_size=0.25",
        facecolor="none",
        edgecolor=edge,
        linewidth=MARKED_LINE if look.marks("stacks") else 1.1,
    )
    ax.add_patch(frame)
    # the repeat count sits on the frame's top-left corner, so the figure needs no side margins
    ax.text(
        x - geo.box_w / 2 - geo.pad,
        top + 0.25,
        f"{layers} x",
        ha="left",
        va="bottom",
        fontsize=HEADING,
        color=look.text("stacks"),
        fontweight="bold",
    )


@dataclass(frozen=True)
class _ColumnTop:
    """Where a drawn column ends and what follows it."""

    out: float  # the height of its output
    cross: float  # the height of its cross-attention box's middle (decoder)
    last: str  # the part of its top box
    follow: float  # the gap to the next box: room for the repeat count above a frame


def _column(
    ax: Axes, look: _Look, config: TransformerConfig, x: float, decoder: bool
) -> _ColumnTop:
    """Embedding, the repeated layer and (Pre-LN) the final norm of one stack."""
    geo, side = look.geometry, 1.0 if decoder else -1.0
    inputs = _embedding_boxes(config, "target" if decoder else "source", look.compact)
    top, _ = _draw_stack(ax, look, x, 0.0, inputs, side)
    layer = _layer_boxes(config, decoder, look.compact)
    _arrow(ax, (x, top), (x, top + geo.join), look.line(inputs[-1].part, layer[0].part))
    layer_bottom = top + geo.join
    layer_top, bottoms = _draw_stack(ax, look, x, layer_bottom, layer, side)
    layers = config.num_decoder_layers if decoder else config.num_encoder_layers
    _frame(ax, look, x, layer_bottom, layer_top, layers, side)
    out, last = layer_top, layer[-1].part
    if config.norm_first:
        _arrow(ax, (x, out), (x, out + geo.above), look.line(last, "norm"))
        _draw_box(ax, look, x, out + geo.above, _Box(f"final {_norm_name(config)}", "norm", "norm"))
        out, last = out + geo.above + geo.box_h, "norm"
    # the cross-attention box
    cross = bottoms[4 if config.norm_first else 2] + geo.box_h / 2 if decoder else 0.0
    return _ColumnTop(out, cross, last, geo.join if config.norm_first else geo.above)


def _marked_parts(highlight: Iterable[str] | None) -> frozenset[str] | None:
    if highlight is None:
        return None
    if isinstance(highlight, str):
        raise TypeError(f"highlight must be a collection of parts, not the string {highlight!r}")
    marked = frozenset(highlight)
    unknown = sorted(marked - set(PARTS))
    if unknown:
        raise ValueError(f"highlight: unknown parts {unknown}; the parts are {list(PARTS)}")
    # every part marked: nothing to set apart, so the plain colours and edges
    return None if marked == frozenset(PARTS) else marked


def architecture_figure(
    config: TransformerConfig,
    title: str | None = None,
    highlight: Iterable[str] | None = None,
    compact: bool = False,
) -> Figure:
    """The encoder-decoder model that ``config`` builds, in the layout of the paper's figure 1.

    Left the encoder, right the decoder, each from its embedding up through one layer drawn once and
    repeated ``N x``, with the residual paths; the encoder's output feeds every decoder layer's
    cross-attention; the decoder ends in the output projection and the softmax.

    ``highlight``: parts of :data:`PARTS` to mark (their colours, thick edges) while the others
    turn grey, as the chapters' maps do; ``None`` marks nothing and greys nothing. ``compact``:
    the same boxes in the same order, labelled without sizes (no title unless ``title`` is given),
    in about half the area.
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    look = _Look(COMPACT if compact else FULL, compact, _marked_parts(highlight))
    geo = look.geometry
    fig, ax = plt.subplots(figsize=(8.4, 8.4))
    fig.patch.set_facecolor("white")
    enc_x, dec_x = geo.enc_x, geo.dec_x
    enc = _column(ax, look, config, enc_x, decoder=False)
    dec = _column(ax, look, config, dec_x, decoder=True)
    # the encoder's output (memory) goes to every decoder layer's cross-attention
    memory = look.path("memory")
    mid = (enc_x + dec_x) / 2 - 0.2
    ax.plot(
        [enc_x, enc_x, mid, mid],
        [enc.out, enc.out + 0.45, enc.out + 0.45, dec.cross],
        color=memory[0],
        lw=memory[1],
    )
    _arrow(ax, (mid, dec.cross), (dec_x - geo.box_w / 2, dec.cross), memory)
    ax.text(
        mid - 0.1,
        enc.out + 0.55,
        "memory" if compact else "memory: keys and values\nof every cross-attention",
        ha="right",
        va="bottom",
        fontsize=LABEL if compact else SMALL_LABEL,
        color=look.text("memory"),
    )
    tied = "\n(tied to the target embedding)" if config.tie_embeddings else ""
    tied = (
        "\n(the matrix of both embeddings)"
        if config.tie_embeddings and config.share_embeddings
        else tied
    )
    linear = "linear to logits" if compact else f"linear to {config.tgt_vocab_size:,} logits{tied}"
    top, _ = _draw_stack(
        ax,
        look,
        dec_x,
        dec.out + dec.follow,
        [_Box(linear, "output", "output"), _Box("softmax", "output", "output")],
        1.0,
    )
    _arrow(
        ax,
        (dec_x, dec.out),
        (dec_x, dec.out + dec.follow),
        look.line(dec.last, "output"),
    )
    _arrow(ax, (dec_x, top), (dec_x, top + 0.5), look.line("output"))
    ax.text(
        dec_x,
        top + 0.6,
        "next-token probabilities",
        ha="center",
        va="bottom",
        fontsize=LABEL,
        color=look.text("output"),
    )
    for x, label in (
        (enc_x, "source tokens" if compact else "source tokens (B, S)"),
        (
            dec_x,
            "target tokens, shifted right" if compact else "target tokens, shifted right (B, T)",
        ),
    ):
        ax.text(x, -0.35, label, ha="center", va="top", fontsize=LABEL, color=INK)
    if not compact or title is not None:
        placement = "Pre-LN" if config.norm_first else "Post-LN (the paper)"
        ax.set_title(
            title or f"{placement}, dropout {config.dropout:g}", fontsize=HEADING, color=INK
        )
    ax.set_xlim(0.2, geo.right)
    ax.set_ylim(-1.1, top + 1.4)
    ax.set_aspect("equal")
    # as tall as the drawing, so that the equal aspect does not shrink it (and its labels stay
    # readable)
    fig.set_size_inches(INCH_PER_UNIT * (geo.right - 0.2), INCH_PER_UNIT * (top + 2.5) + 0.4)
    ax.axis("off")
    fig.tight_layout()
    return fig


def save_svg(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as an SVG whose bytes depend on the figure only (no date, fixed ids):
    reproducible.
    """
    path = Path(path)
    with plt.rc_context({"svg.hashsalt": "build-a-transformer", "svg.fonttype": "path"}):
        fig.savefig(
            path,
            format="svg",
            metadata={"Date": None},
            facecolor=fig.get_facecolor(),
            bbox_inches="tight",
            pad_inches=0.15,
        )
    return path
