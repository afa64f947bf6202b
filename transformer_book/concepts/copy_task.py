"""Chapter 10's concept picture: the copy task (复制任务), trained with teacher forcing, tested
greedily.

The figure shows the first held-out sequence of :func:`~transformer_tasks.copy.held_out_sequences`
as :func:`~transformer_tasks.copy.copy_batch` turns it into the three rows of a training example:
the source, what the decoder reads (``<bos>`` then the symbols: the target shifted right) and what
it must predict (the symbols then ``<eos>``). The top panel is training: the decoder reads the
*true* tokens and predicts every next token at once (teacher forcing, 教师强制). The bottom panel is
test
time: the decoder reads its own previous predictions, one position at a time (greedy decoding,
贪心解码). Columns line up by position, so each predicted symbol sits under the source symbol it
copies.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_tasks.copy import BOS_ID, EOS_ID, PAD_ID, copy_batch, held_out_sequences

from ._style import FONT, HIGHLIGHT, INK, MUTED, SMALL, TITLE, arrow, box, canvas, dashed_frame

__all__ = ["FIGURES", "copy_task_figure", "token_label"]

CELL, BOX = 0.56, 0.5  # inches: the spacing of the columns and the side of a token's box
LEFT = 1.85  # x of the first column's centre (the row names sit to its left)
SPECIAL = {PAD_ID: "<pad>", BOS_ID: "<bos>", EOS_ID: "<eos>"}
BAND = "#fbe3d6"


def token_label(token_id: int) -> str:
    """How the figure shows a token: a special token's name, or the id of a symbol (as the chapter
    prints it).
    """
    return SPECIAL.get(token_id, str(token_id))


def _x(column: int) -> float:
    return LEFT + column * CELL


def _row(ax: Axes, y: float, name: str, ids: list[int], kind: str) -> None:
    """One row of token boxes, its name on the left; special tokens are drawn grey."""
    ax.text(LEFT - BOX / 2 - 0.1, y, name, ha="right", va="center", fontsize=FONT, color=INK)
    for column, token in enumerate(ids):
        special = token in SPECIAL
        box(
            ax,
            _x(column),
            y,
            BOX,
            BOX,
            token_label(token),
            kind="mask" if special else kind,
            size=SMALL if special else FONT,
        )


def _title(ax: Axes, y: float, title: str, note: str) -> None:
    ax.text(0.05, y, title, ha="left", va="center", fontsize=TITLE, color=INK, fontweight="bold")
    ax.text(7.75, y, note, ha="right", va="center", fontsize=SMALL, color=MUTED)


def copy_task_figure() -> Figure:
    """The copy task on the first held-out sequence: teacher forcing (top), greedy decoding
    (bottom).

    The top panel shades position 3: the decoder reads the symbol before it and must predict the
    source symbol straight above.

    Shape:
        the source ``(1, L)``; what the decoder reads and what it predicts ``(1, L + 1)`` each, with
        ``L = SEQ_LEN = 10`` symbols.
    """
    traced = 3
    example = copy_batch(held_out_sequences(1)[0:1])
    src, tgt_in, tgt_out = (
        example.src[0].tolist(),
        example.tgt_in[0].tolist(),
        example.tgt_out[0].tolist(),
    )
    width, height = 7.8, 5.45
    fig, ax = canvas(width, height)
    fig.subplots_adjust(left=0, right=1, bottom=0, top=1)  # one data unit is one inch on the page
    reads, predicts = "decoder reads", "decoder predicts"

    # Top panel: training with teacher forcing.
    _title(ax, 5.25, "Training: teacher forcing", "reads the true target, shifted right")
    y_src, y_in, y_out = 4.6, 3.7, 2.9
    corner = (_x(traced) - CELL / 2 + 0.01, y_out - BOX / 2 - 0.08)
    span = y_src - y_out + BOX + 0.16
    dashed_frame(ax, corner, CELL - 0.02, span, HIGHLIGHT, BAND, pad=0, rounding=0.08)
    _row(ax, y_src, "source", src, "embedding")
    _row(ax, y_in, reads, tgt_in, "token")
    _row(ax, y_out, predicts, tgt_out, "output")
    for column in range(len(tgt_in)):  # every position predicts the next token, all at once
        arrow(
            ax, (_x(column), y_in - BOX / 2), (_x(column), y_out + BOX / 2), colour=MUTED, width=0.8
        )
    ax.text(
        _x(traced),
        y_out - BOX / 2 - 0.14,
        f"position {traced}: predict the source symbol above",
        ha="left",
        va="top",
        fontsize=SMALL,
        color=HIGHLIGHT,
    )

    # Bottom panel: test time, greedy decoding.
    _title(ax, 1.95, "Test: greedy decoding", "reads its own last prediction, one step at a time")
    y_in, y_out = 1.3, 0.3
    _row(ax, y_in, reads, tgt_in, "token")
    _row(ax, y_out, predicts, tgt_out, "output")
    for column in range(len(tgt_in)):
        arrow(
            ax, (_x(column), y_in - BOX / 2), (_x(column), y_out + BOX / 2), colour=MUTED, width=0.8
        )
        if column + 1 < len(tgt_in):  # each prediction is read at the next step
            arrow(
                ax,
                (_x(column) + BOX / 2 - 0.06, y_out + BOX / 2 - 0.06),
                (_x(column + 1) - BOX / 2 + 0.06, y_in - BOX / 2 + 0.06),
                colour=HIGHLIGHT,
                width=1.0,
            )
    ax.set_xlim(0.0, width)
    ax.set_ylim(0.0, height)
    return fig


FIGURES = {"copy_task.svg": copy_task_figure}
