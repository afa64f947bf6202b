"""The loss of teacher-forced training, and the validation loss: cross-entropy over non-padding
tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import Batch
from ..eval_mode import eval_mode

BatchForward = Callable[[nn.Module, Batch], Tensor]
"""``(model, batch) -> logits (B, T, V)``: how a model reads a batch (:func:`~.batch_logits`)."""


def batch_logits(model: nn.Module, batch: Batch) -> Tensor:
    """The default :data:`~.BatchForward`: ``model(src, tgt_in, src_mask, tgt_mask)``.

    Shape:
        output: ``(B, T, V)`` logits, one row per position of ``batch.tgt_in``.
    """
    return model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)


def sequence_loss(
    logits: Tensor,
    target: Tensor,
    pad_id: int,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy of ``logits`` against ``target``, ignoring padding positions, computed in
    float32.

    With label smoothing ``eps`` over ``K`` classes, each target position contributes
    ``(1 - eps) * (-log p_y) + eps / K * sum_k (-log p_k)`` (``F.cross_entropy``'s definition:
    the true class and ``<pad>`` get a share of ``eps`` too; The Annotated Transformer gives
    ``<pad>`` none and spreads ``eps`` over the ``K - 2`` others). ``"mean"`` averages over the
    non-padding positions; ``"sum"`` adds them up.

    Shape:
        logits: ``(B, T, V)``; target: ``(B, T)``; output: scalar.
    """
    if logits.dim() != 3 or target.shape != logits.shape[:2]:
        raise ValueError(
            "logits must be (B, T, V) and target (B, T) with the same B, T; got "
            f"{tuple(logits.shape)} and {tuple(target.shape)}"
        )
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    return F.cross_entropy(
        logits.float().flatten(0, 1),  # (B, T, V) -> (B*T, V)
        target.flatten(),  # (B, T) -> (B*T,)
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )


def evaluate_loss(
    model: nn.Module,
    batches: Iterable[Batch],
    device: torch.device | str | None = None,
    forward: BatchForward = batch_logits,
) -> dict[str, float]:
    """Mean negative log-likelihood per target token, unsmoothed: ``{"loss", "perplexity",
    "tokens"}``.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    total, tokens = 0.0, 0
    with eval_mode(model):
        for batch in batches:
            batch = batch.to(device)
            logits = forward(model, batch)  # (B, T, V)
            total += float(sequence_loss(logits, batch.tgt_out, batch.pad_id, reduction="sum"))
            tokens += batch.num_tokens
    if tokens == 0:
        raise ValueError("evaluate_loss got no target tokens (empty data or only padding)")
    nll = total / tokens
    return {"loss": nll, "perplexity": math.exp(min(nll, 700.0)), "tokens": float(tokens)}
