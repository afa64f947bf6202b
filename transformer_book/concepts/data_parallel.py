"""Chapter 13's concept picture: data parallelism (数据并行), one optimizer step on two processes.

The top row is one epoch's batches, coloured by the rank that trains on them: the split is
:func:`~transformer_lib.training.distributed.shard_batches`, computed, not typed (rank ``r`` keeps
batches ``r, r + W, r + 2W, ...``, and step ``s`` uses the ``s``-th batch of every rank). Below it,
the first step: each rank holds a full copy of the model (a replica, 副本), runs forward and
backward on its own batch, the all-reduce (全归约) hands every rank the mean of the gradients, and
every rank takes the same Adam step, so the replicas stay identical.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from transformer_lib.training.distributed import shard_batches

from ._style import FONT, HIGHLIGHT, INK, MUTED, SMALL, arrow, box, canvas, dashed_frame

__all__ = ["FIGURES", "RANK_KINDS", "batch_owners", "data_parallel_figure"]

# the colour of rank 0's and rank 1's things (``_style.COLOURS``)
RANK_KINDS = ("feedforward", "attention")


def batch_owners(num_batches: int = 6, world_size: int = 2) -> list[tuple[int, int] | None]:
    """For each batch of an epoch: ``(rank, step)`` that trains on it (steps count from 1), or
    ``None`` if left out.
    """
    owners: list[tuple[int, int] | None] = [None] * num_batches
    for r in range(world_size):
        for step, batch in enumerate(
            shard_batches(range(num_batches), rank=r, world_size=world_size), start=1
        ):
            owners[batch] = (r, step)
    return owners


def data_parallel_figure() -> Figure:
    """One epoch of 6 batches split between 2 ranks, and the first optimizer step in full.

    Shape:
        no tensors: 6 boxes in the top row, two columns (ranks 0 and 1) below it.
    """
    num_batches, world_size = 6, 2
    owners = batch_owners(num_batches, world_size)
    width, height = 7.8, 5.6
    fig, ax = canvas(width, height)
    fig.subplots_adjust(left=0, right=1, bottom=0, top=1)  # one data unit is one inch on the page
    columns = (2.15, 5.65)  # x of rank 0's and rank 1's column
    wide = 3.1

    # The epoch's batches, coloured by rank, labelled with the step that uses them.
    cell, side, y_batches = 0.78, 0.62, 5.05
    left = width / 2 - cell * (num_batches - 1) / 2
    ax.text(
        left - side / 2 - 0.12,
        y_batches,
        "an epoch's\nbatches",
        ha="right",
        va="center",
        fontsize=SMALL,
        color=MUTED,
    )
    first_step: dict[int, float] = {}
    for i, owner in enumerate(owners):
        x = left + i * cell
        kind = "mask" if owner is None else RANK_KINDS[owner[0]]
        box(ax, x, y_batches, side, side, f"b{i}", kind=kind)
        if owner is not None:
            ax.text(
                x,
                y_batches - side / 2 - 0.05,
                f"step {owner[1]}",
                ha="center",
                va="top",
                fontsize=SMALL,
                color=HIGHLIGHT if owner[1] == 1 else MUTED,
            )
            if owner[1] == 1:
                first_step[owner[0]] = x
    corner = (min(first_step.values()) - side / 2 - 0.06, y_batches - side / 2 - 0.3)
    span = max(first_step.values()) - min(first_step.values()) + side + 0.12
    dashed_frame(ax, corner, span, side + 0.38, HIGHLIGHT, pad=0, rounding=0.08)

    # The first step, one column per rank.
    y_replica, y_grad, y_reduce, y_step = 3.7, 2.65, 1.65, 0.8
    for r, x in enumerate(columns):
        batch = owners.index((r, 1))
        kind = RANK_KINDS[r]
        arrow(
            ax,
            (first_step[r], y_batches - side / 2 - 0.32),
            (x, y_replica + 0.32),
            colour=HIGHLIGHT,
        )
        box(ax, x, y_replica, wide, 0.6, f"rank {r}: a full copy of the model", kind=kind)
        arrow(ax, (x, y_replica - 0.3), (x, y_grad + 0.35))
        box(
            ax,
            x,
            y_grad,
            wide,
            0.7,
            f"forward and backward on b{batch}\ngive the gradient $g_{r}$",
            kind="add",
        )
        arrow(ax, (x, y_grad - 0.35), (x, y_reduce + 0.3))
        arrow(ax, (x, y_reduce - 0.3), (x, y_step + 0.3))
        box(ax, x, y_step, wide, 0.6, "the same Adam step", kind=kind)
    mean = " + ".join(f"g_{r}" for r in range(world_size))
    box(
        ax,
        width / 2,
        y_reduce,
        columns[1] - columns[0] + wide,
        0.6,
        f"all-reduce: every rank receives $({mean}) / {world_size}$",
        kind="norm",
        size=FONT,
    )
    ax.text(
        width / 2,
        0.1,
        "the replicas stay identical: same weights, same gradient, same step",
        ha="center",
        va="bottom",
        fontsize=SMALL,
        color=INK,
    )
    ax.set_xlim(0.0, width)
    ax.set_ylim(0.0, height)
    return fig


FIGURES = {"data_parallel.svg": data_parallel_figure}
