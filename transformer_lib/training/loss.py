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
    smooth_pad: bool = True,
) -> Tensor:
    """Cross-entropy of ``logits`` against ``target``, ignoring padding positions, computed in
    float32.

    With label smoothing ``eps`` over ``K`` classes, each target position contributes
    ``(1 - eps) * (-log p_y) + eps / K * sum_k (-log p_k)`` (``F.cross_entropy``'s definition:
    the true class gets a share of ``eps`` too). With ``smooth_pad=False`` the padding class gets
    no share (a model never has to predict ``<pad>``, and the decoders never produce it): ``eps`` is
    spread evenly over the ``K - 1`` classes but ``<pad>``, the true one included, so the target
    gives the true class ``1 - eps + eps / (K - 1)`` and each of the others but ``<pad>``
    ``eps / (K - 1)`` (0.9167 and 0.0167 for ``eps = 0.1`` on 7 classes). That is not The Annotated
    Transformer's target, which gives the true class exactly ``1 - eps`` and each class that is
    neither the true one nor ``<pad>`` ``eps / (K - 2)`` (0.9 and 0.02 on 7 classes); only the zero
    for ``<pad>`` is the same. ``"mean"`` averages over the non-padding positions; ``"sum"`` adds
    them up.

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
    logits = logits.float().flatten(0, 1)  # (B, T, V) -> (B*T, V)
    target = target.flatten()  # (B, T) -> (B*T,)
    if smooth_pad or label_smoothing == 0.0:
        return F.cross_entropy(
            logits,
            target,
            ignore_index=pad_id,
            label_smoothing=label_smoothing,
            reduction=reduction,
        )
    log_probs = logits.log_softmax(dim=-1)  # (B*T, V)
    nll = F.nll_loss(log_probs, target, ignore_index=pad_id, reduction="none")  # (B*T,)
    others = log_probs.sum(dim=-1) - log_probs[:, pad_id]  # (B*T,): every class but <pad>
    per_token = (1.0 - label_smoothing) * nll - label_smoothing * others / (logits.size(-1) - 1)
    per_token = per_token.masked_fill(target == pad_id, 0.0)
    total = per_token.sum()
    return total if reduction == "sum" else total / (target != pad_id).sum()


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
