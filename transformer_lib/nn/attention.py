"""Scaled dot-product attention (缩放点积注意力): written out step by step, the reference the book
teaches, and PyTorch's fused kernel with the guard the model runs.

``MultiHeadAttention`` calls the reference when the weights are asked for and the fused kernel
otherwise (tested equal). The reference is a public function that the chapters call directly, so
it checks its arguments (host work on shapes only, no values read back).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..validation import check_mask, check_probability


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Compute ``softmax(Q K^T / sqrt(d_k)) V`` and return the output and the weights.

    Masked positions (``mask == False``) get weight exactly 0. A query row whose keys are all
    masked gets all-zero weights and a zero output (never NaN): the masked scores are filled with
    the most negative finite number of the dtype (not a ``-1e9`` literal, which overflows in
    float16), so the softmax stays finite, and the row is then zeroed.

    Shape:
        query: ``(..., T_q, d_k)``; key: ``(..., T_k, d_k)``; value: ``(..., T_k, d_v)``; leading
        dimensions (batch, heads) broadcast. mask: bool, ``True`` = may attend, to
        ``(..., T_q, T_k)``. output: ``(..., T_q, d_v)``; weights: ``(..., T_q, T_k)``.
    """
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "query and key must have the same last dimension d_k, got "
            f"{query.size(-1)} and {key.size(-1)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same length T_k, got {key.size(-2)} and {value.size(-2)}"
        )
    check_probability("dropout_p", dropout_p)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        check_mask("mask", mask, tuple(scores.shape))
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k)
    if mask is not None:
        weights = weights * mask  # zero the masked keys; fully masked rows become all zero
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def guarded_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    dropout_p: float = 0.0,
    enable_gqa: bool = False,
) -> Tensor:
    """``F.scaled_dot_product_attention`` that gives a fully masked query row zeros, never NaN.

    The same arithmetic as :func:`scaled_dot_product_attention` in one fused kernel that never
    stores the weights (chapter 12 measures what that saves). PyTorch's fused kernels are not all
    known to zero a fully masked row themselves (its CPU kernel does, some GPU kernels return NaN),
    so such a row is let attend everywhere (any finite result), then zeroed. With ``enable_gqa``
    PyTorch shares each key/value head among its group of query heads without copying it.

    Shape:
        query: ``(B, H, T_q, d_k)``; key, value: ``(B, H, T_k, d_k)`` (``(B, H_kv, T_k, d_k)`` with
        ``enable_gqa``); mask: bool broadcasting to ``(B, H, T_q, T_k)``, or ``None``; output:
        ``(B, H, T_q, d_k)``.
    """
    if mask is None:
        return F.scaled_dot_product_attention(
            query, key, value, dropout_p=dropout_p, enable_gqa=enable_gqa
        )
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
    safe = mask | ~row_ok  # (..., T_q, T_k)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=safe, dropout_p=dropout_p, enable_gqa=enable_gqa
    )  # (B, H, T_q, d_k)
    return out * row_ok  # (B, H, T_q, d_k)
