"""Attention masks (掩码). Convention: boolean, ``True`` means "may attend".

This is the convention of ``torch.nn.functional.scaled_dot_product_attention``.
``torch.nn.MultiheadAttention`` and ``nn.Transformer`` use the opposite one (``True`` means
"blocked"); invert with ``~mask`` when passing a mask to them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..validation import check_positive_int


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Lower-triangular mask: query ``i`` may attend to keys ``0..i`` (因果掩码 / 序列掩码).

    Shape:
        output: ``(size, size)`` bool; ``output[i, j]`` is ``True`` iff ``j <= i``.
    """
    # a symbolic length (torch.export, ONNX) has no value to check
    if not isinstance(size, torch.SymInt):
        check_positive_int("size", size)
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Mask that hides padding keys (填充掩码): ``True`` where ``tokens != pad_id``.

    Shape:
        tokens: ``(B, T)`` integer ids.
        output: ``(B, 1, 1, T)`` bool, broadcasting over heads and query positions.
    """
    return (tokens != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def target_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Decoder self-attention mask: causal and hiding padding keys.

    Shape:
        tokens: ``(B, T)``.
        output: ``(B, 1, T, T)`` bool.
    """
    return padding_mask(tokens, pad_id) & causal_mask(tokens.size(1), tokens.device)  # (B, 1, T, T)
