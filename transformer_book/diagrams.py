"""Diagrams drawn from the code: the whole model from a :class:`~.TransformerConfig`.

:func:`architecture_figure` draws the encoder-decoder model that a config builds: the order of the
sub-layers and norms (Post-LN or Pre-LN, with the final norm Pre-LN adds), the kind of positional
encoding, the norm, the activation, the heads (and key/value heads), the widths and the depth. The
landing page's figure is this function's output for the paper's base model (``make figures``
writes it; a test checks that the stored file is what the code draws). Chapter 5's pictures of the
head split are concept figures (:mod:`~transformer_book.concepts.multi_head`).

The figure sits on an opaque white card, so that they read the same in the light and dark themes.
A leaf module (matplotlib only); nothing in the package imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from transformer_lib.config import TransformerConfig

# one colour per kind of thing, in every figure of the book
from .concepts._style import COLOURS, INK

__all__ = ["architecture_figure", "save_svg"]

BOX_W, BOX_H, GAP = 5.6, 0.95, 0.3
# Point sizes: the page shows the figure about 8 inches wide, where 10.5 pt reads at about 13 px.
LABEL, SMALL_LABEL, HEADING = 11.5, 10.5, 13.0
INCH_PER_UNIT = 0.48  # the architecture's scale: a box is BOX_W units wide, room for its labels


@dataclass(frozen=True)
class _Box:
    """One box of a column: its label, its colour key, and whether a residual path ends at it."""

    label: str
    kind: str
    # index (within the layer) of the box whose input the path starts at
    residual_from: int | None = None


def _norm_name(config: TransformerConfig) -> str:
    return {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}[config.norm]


def _attention_label(config: TransformerConfig, what: str) -> str:
    kv = config.kv_heads
    heads = f"h = {config.num_heads}" + (
        f", {kv} key/value heads" if kv != config.num_heads else ""
    )
    rope = ", RoPE" if config.positional == "rope" and what != "cross-attention" else ""
    return f"{what}\n({heads}{rope})"


def _sublayers(config: TransformerConfig, decoder: bool) -> list[tuple[str, str]]:
    """The sub-layers of one layer, bottom to top: (label, colour key)."""
    widths = f"{config.d_model} -> {config.d_ff} -> {config.d_model}"
    ff = f"feed-forward\n({widths}, {config.activation})"
    subs = [
        (
            _attention_label(config, "masked self-attention" if decoder else "self-attention"),
            "attention",
        )
    ]
    if decoder:
        subs.append((_attention_label(config, "cross-attention"), "attention"))
    return [*subs, (ff, "feedforward")]


def _layer_boxes(config: TransformerConfig, decoder: bool) -> list[_Box]:
    """One encoder or decoder layer as the code builds it (:mod:`~transformer_lib.nn.layers`)."""
    norm, boxes = _norm_name(config), []
    for label, kind in _sublayers(config, decoder):
        start = len(boxes)
        if config.norm_first:  # Pre-LN: x + dropout(sublayer(norm(x)))
            boxes += [_Box(norm, "norm"), _Box(label, kind), _Box("add (residual)", "add", start)]
        else:  # Post-LN: norm(x + dropout(sublayer(x)))
            boxes += [_Box(label, kind), _Box(f"add & {norm}", "norm", start)]
    return boxes


def _draw_box(ax: Axes, x: float, y: float, box: _Box) -> None:
    patch = FancyBboxPatch(
        (x - BOX_W / 2, y),
        BOX_W,
        BOX_H,
        boxstyle="round,pad=0.02,rounding_size=0.12",
        facecolor=COLOURS[box.kind],
        edgecolor=INK,
        linewidth=0.9,
    )
    ax.add_patch(patch)
    size = SMALL_LABEL if "\n" in box.label or len(box.label) > 24 else LABEL
    ax.text(x, y + BOX_H / 2, box.label, ha="center", va="center", fontsize=size, color=INK)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": INK, "lw": 0.9})


def _residual(ax: Axes, x: float, y_from: float, y_to: float, side: float) -> None:
    """A skip path from below a box at ``y_from`` up the side to the add box at ``y_to``."""
    edge = x + side * (BOX_W / 2 + 0.35)
    ax.plot([x, edge, edge], [y_from, y_from, y_to + BOX_H / 2], color=INK, lw=0.8)
    _arrow(ax, (edge, y_to + BOX_H / 2), (x + side * BOX_W / 2, y_to + BOX_H / 2))


def _draw_stack(
    ax: Axes, x: float, y: float, boxes: list[_Box], side: float
) -> tuple[float, list[float]]:
    """Draw a layer's boxes upwards from ``y``; return the top and each box's bottom."""
    bottoms = []
    for i, box in enumerate(boxes):
        bottoms.append(y)
        _draw_box(ax, x, y, box)
        if box.residual_from is not None:
            _residual(ax, x, bottoms[box.residual_from] - GAP / 2, y, side)
        if i + 1 < len(boxes):
            _arrow(ax, (x, y + BOX_H), (x, y + BOX_H + GAP))
        y += BOX_H + GAP
    return y - GAP, bottoms


def _embedding_boxes(config: TransformerConfig, side: str) -> list[_Box]:
    vocab = config.src_vocab_size if side == "source" else config.tgt_vocab_size
    label = f"{side} embedding × √d_model\nvocabulary {vocab:,}, d_model {config.d_model}"
    positional = {
        "sinusoidal": "+ sinusoidal positional encoding",
        "learned": "+ learned positional table",
        "rope": "(positions: RoPE, inside self-attention)",
    }[config.positional]
    return [_Box(label, "embedding"), _Box(positional, "embedding")]


def _frame(ax: Axes, x: float, bottom: float, top: float, layers: int, side: float) -> None:
    """The rounded frame around one layer, with its repeat count."""
    pad = 0.55
    frame = FancyBboxPatch(
        (x - BOX_W / 2 - pad, bottom - 0.2),
        BOX_W + 2 * pad,
        top - bottom + 0.4,
        boxstyle="round,pad=0.02,rounding_size=0.25",
        facecolor="none",
        edgecolor="#555555",
        linewidth=1.1,
    )
    ax.add_patch(frame)
    # the repeat count sits on the frame's top-left corner, so the figure needs no side margins
    ax.text(
        x - BOX_W / 2 - pad,
        top + 0.25,
        f"{layers} x",
        ha="left",
        va="bottom",
        fontsize=HEADING,
        color=INK,
        fontweight="bold",
    )


def _column(ax: Axes, config: TransformerConfig, x: float, decoder: bool) -> dict[str, float]:
    """Embedding, the repeated layer and (Pre-LN) the final norm of one stack; returns key
    heights.
    """
    side = 1.0 if decoder else -1.0
    top, _ = _draw_stack(
        ax, x, 0.0, _embedding_boxes(config, "target" if decoder else "source"), side
    )
    _arrow(ax, (x, top), (x, top + 0.7))
    layer_bottom = top + 0.7
    layer_top, bottoms = _draw_stack(ax, x, layer_bottom, _layer_boxes(config, decoder), side)
    layers = config.num_decoder_layers if decoder else config.num_encoder_layers
    _frame(ax, x, layer_bottom, layer_top, layers, side)
    out = layer_top
    if config.norm_first:
        _arrow(ax, (x, out), (x, out + 0.7))
        _draw_box(ax, x, out + 0.7, _Box(f"final {_norm_name(config)}", "norm"))
        out += 0.7 + BOX_H
    # the cross-attention box
    cross = bottoms[4 if config.norm_first else 2] + BOX_H / 2 if decoder else 0.0
    return {"out": out, "cross": cross}


def architecture_figure(config: TransformerConfig, title: str | None = None) -> Figure:
    """The encoder-decoder model that ``config`` builds, in the layout of the paper's figure 1.

    Left the encoder, right the decoder, each from its embedding up through one layer drawn once and
    repeated ``N x``, with the residual paths; the encoder's output feeds every decoder layer's
    cross-attention; the decoder ends in the output projection and the softmax.
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    fig, ax = plt.subplots(figsize=(8.4, 8.4))
    fig.patch.set_facecolor("white")
    enc_x, dec_x = 3.8, 12.0
    enc = _column(ax, config, enc_x, decoder=False)
    dec = _column(ax, config, dec_x, decoder=True)
    # the encoder's output (memory) goes to every decoder layer's cross-attention
    mid = (enc_x + dec_x) / 2 - 0.2
    ax.plot(
        [enc_x, enc_x, mid, mid],
        [enc["out"], enc["out"] + 0.45, enc["out"] + 0.45, dec["cross"]],
        color=INK,
        lw=0.9,
    )
    _arrow(ax, (mid, dec["cross"]), (dec_x - BOX_W / 2, dec["cross"]))
    ax.text(
        mid - 0.1,
        enc["out"] + 0.55,
        "memory: keys and values\nof every cross-attention",
        ha="right",
        va="bottom",
        fontsize=SMALL_LABEL,
        color=INK,
    )
    tied = "\n(tied to the target embedding)" if config.tie_embeddings else ""
    tied = (
        "\n(the matrix of both embeddings)"
        if config.tie_embeddings and config.share_embeddings
        else tied
    )
    top, _ = _draw_stack(
        ax,
        dec_x,
        dec["out"] + 0.7,
        [
            _Box(f"linear to {config.tgt_vocab_size:,} logits{tied}", "output"),
            _Box("softmax", "output"),
        ],
        1.0,
    )
    _arrow(ax, (dec_x, dec["out"]), (dec_x, dec["out"] + 0.7))
    _arrow(ax, (dec_x, top), (dec_x, top + 0.5))
    ax.text(
        dec_x,
        top + 0.6,
        "next-token probabilities",
        ha="center",
        va="bottom",
        fontsize=LABEL,
        color=INK,
    )
    for x, label in (
        (enc_x, "source tokens (B, S)"),
        (dec_x, "target tokens, shifted right (B, T)"),
    ):
        ax.text(x, -0.35, label, ha="center", va="top", fontsize=LABEL, color=INK)
    placement = "Pre-LN" if config.norm_first else "Post-LN (the paper)"
    ax.set_title(title or f"{placement}, dropout {config.dropout:g}", fontsize=HEADING, color=INK)
    ax.set_xlim(0.2, 15.6)
    ax.set_ylim(-1.1, top + 1.4)
    ax.set_aspect("equal")
    # as tall as the drawing, so that the equal aspect does not shrink it (and its labels stay
    # readable)
    fig.set_size_inches(INCH_PER_UNIT * 15.4, INCH_PER_UNIT * (top + 2.5) + 0.4)
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
