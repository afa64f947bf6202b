"""One optimizer step: forward and loss over ``grad_accum`` batches, backward, then the update.

Kept apart from the loop (:mod:`~transformer_lib.training.loop`) so that the arithmetic of gradient
accumulation and of several processes is in one short function.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..data.batching import Batch
from .config import TrainConfig
from .loss import BatchForward, sequence_loss

# The model's buffers (the positional table) never change: DDP need not send them before every forward.
# PyTorch 2.13 renamed the option; older versions only know broadcast_buffers.
_NO_BUFFER_SYNC = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    else {"broadcast_buffers": False}
)


def wrap_for_ranks(model: nn.Module, device: torch.device) -> DistributedDataParallel:
    """One replica per process; ``backward()`` then all-reduces (averages) the gradients across the ranks."""
    device_ids = None
    if device.type == "cuda":
        device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
    return DistributedDataParallel(model, device_ids=device_ids, **_NO_BUFFER_SYNC)


def autocast_context(amp: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to bfloat16 or float16 for ``amp="bf16"``/``"fp16"``, nothing for ``"none"``."""
    if amp == "none":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def optimizer_step(
    model: nn.Module,
    group: list[Batch],
    parts: dict[str, Any],
    config: TrainConfig,
    device: torch.device,
    autocast: contextlib.AbstractContextManager[Any],
    target_tokens: int,
    forward: BatchForward,
    world: int = 1,
) -> float:
    """One optimizer step over ``grad_accum`` batches; return the mean loss per target token.

    ``model`` is the module to call (the ``DistributedDataParallel`` wrapper under ``torchrun``,
    ``world`` processes); ``parts`` holds the ``optimizer``, the ``scheduler`` and the ``scaler``.
    ``target_tokens`` counts the target tokens of the **whole step**: of the group, and of every
    rank's group. Each batch's summed loss is divided by it, so the accumulated gradient is the
    gradient of the mean loss over the step's tokens, the same as one big batch would give.
    ``DistributedDataParallel`` **averages** the ranks' gradients (their sum divided by the world
    size ``W``), so each loss is also multiplied by ``W``::

        grad = 1/W * sum_r grad(W * loss_r / N) = grad(sum_r loss_r / N)      N = all ranks' tokens

    Under DDP the gradients are all-reduced only after the group's last batch (``no_sync`` for
    the others), and the returned loss is the mean over every rank's tokens.
    """
    if target_tokens == 0:
        raise ValueError("a training step got batches without any non-padding target token")
    ddp = model if isinstance(model, DistributedDataParallel) else None
    optimizer, scheduler, scaler = parts["optimizer"], parts["scheduler"], parts["scaler"]
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for i, batch in enumerate(group):
        batch = batch.to(device)
        # Under DDP, only the group's last backward all-reduces; the others just accumulate locally.
        sync = ddp.no_sync() if ddp is not None and i < len(group) - 1 else contextlib.nullcontext()
        with sync:
            with autocast:
                logits = forward(model, batch)  # (B, T, V)
            loss = sequence_loss(logits, batch.tgt_out, batch.pad_id, config.label_smoothing, reduction="sum")
            scaled = loss * world / target_tokens
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        total += loss.detach()
    if ddp is not None:
        dist.all_reduce(total)  # the sum of every rank's summed loss
    _update(model, optimizer, scaler, config.clip_norm)
    scheduler.step()
    return float(total) / target_tokens


def _update(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: Any, clip_norm: float | None) -> None:
    """Clip the gradient norm (optional) and step the optimizer, through the gradient scaler for fp16."""
    if scaler is not None:
        if clip_norm is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        scaler.step(optimizer)
        scaler.update()
        return
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
