"""One optimizer step (:func:`~.optimizer_step`): the arithmetic of accumulation and of several
ranks.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LambdaLR

from ..data.batching import Batch
from .loss import BatchForward, sequence_loss

# The model's buffers (the positional table) never change: DDP need not send them before every
# forward.
# PyTorch 2.13 renamed the option; older versions only know broadcast_buffers.
_NO_BUFFER_SYNC = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    else {"broadcast_buffers": False}
)
_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Optimization:
    """The optimizer, its learning-rate schedule and the gradient scaler: a checkpoint saves them.

    The scaler is enabled for fp16 only; disabled, its every method passes through (``scale``
    returns the loss as it is, ``step`` calls ``optimizer.step()``).
    """

    optimizer: torch.optim.Optimizer
    scheduler: LambdaLR
    scaler: torch.amp.GradScaler


@dataclass(frozen=True)
class StepSetup:
    """What every optimizer step of a run uses."""

    model: nn.Module  # the module to call: the DistributedDataParallel wrapper under torchrun
    parts: Optimization
    device: torch.device  # where the batches go
    amp: str  # "none", "bf16" or "fp16": autocast around the forward pass
    forward: BatchForward  # (model, batch) -> logits
    label_smoothing: float
    clip_norm: float | None = None  # clip the global gradient norm to this (None: no clipping)


def wrap_for_ranks(model: nn.Module, device: torch.device) -> DistributedDataParallel:
    """One replica per process; ``backward()`` then all-reduces (averages) the gradients across the
    ranks.
    """
    # DDP reads "cuda" without an index as the current CUDA device.
    return DistributedDataParallel(
        model, device_ids=[device] if device.type == "cuda" else None, **_NO_BUFFER_SYNC
    )


def optimizer_step(setup: StepSetup, group: list[Batch], target_tokens: int) -> float:
    """One optimizer step over ``grad_accum`` batches; return the mean loss per target token.

    ``target_tokens`` counts the target tokens of the **whole step**: of the group, and of every
    rank's group. Each batch's summed loss is divided by it, so the accumulated gradient is the
    gradient of the mean loss over the step's tokens, the same as one big batch would give.
    ``DistributedDataParallel`` **averages** the ranks' gradients (their sum divided by the world
    size ``W``), so each loss is also multiplied by ``W`` (``N``: the target tokens of all ranks)::

        grad = 1/W * sum_r grad(W * loss_r / N) = grad(sum_r loss_r / N)
    """
    if target_tokens == 0:
        raise ValueError("a training step got batches without any non-padding target token")
    model, parts = setup.model, setup.parts
    ddp = model if isinstance(model, DistributedDataParallel) else None
    world = dist.get_world_size() if ddp is not None else 1
    dtype = _AUTOCAST_DTYPES.get(setup.amp)
    parts.optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=setup.device)
    for i, batch in enumerate(group):
        batch = batch.to(setup.device)
        # Under DDP, only the group's last backward all-reduces; the others just accumulate locally.
        sync = ddp.no_sync() if ddp is not None and i < len(group) - 1 else contextlib.nullcontext()
        with sync:
            with torch.autocast(setup.device.type, dtype=dtype, enabled=dtype is not None):
                logits = setup.forward(model, batch)  # (B, T, V)
            loss = sequence_loss(
                logits,
                batch.tgt_out,
                batch.pad_id,
                setup.label_smoothing,
                reduction="sum",
            )
            parts.scaler.scale(loss * world / target_tokens).backward()
        total += loss.detach()
    if ddp is not None:
        dist.all_reduce(total)  # the sum of every rank's summed loss
    if setup.clip_norm is not None:
        parts.scaler.unscale_(parts.optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(model.parameters(), setup.clip_norm)
    parts.scaler.step(parts.optimizer)
    parts.scaler.update()
    parts.scheduler.step()
    return float(total) / target_tokens
