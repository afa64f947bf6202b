"""Layer normalisation (层归一化) and RMS normalisation, written from their formulas."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._checks import check_positive_int


class LayerNorm(nn.Module):
    """Normalise each vector over its features: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    The variance is the biased one (divide by ``d_model``, not ``d_model - 1``) and ``eps`` sits
    inside the square root, exactly as ``nn.LayerNorm``. Statistics are per token, so the result
    does not depend on the batch, on padding elsewhere in the batch, or on train/eval mode.

    Shape:
        x: ``(..., d_model)``; output: same shape.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Normalise over the last dimension."""
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # (..., 1) each
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    """Scale each vector by the inverse of its root mean square: ``x / sqrt(mean(x^2) + eps) * weight``.

    No centring and no bias (Zhang and Sennrich, 2019); equals ``nn.RMSNorm`` with the same ``eps``.

    Shape:
        x: ``(..., d_model)``; output: same shape.
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Normalise over the last dimension."""
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(mean_square + self.eps) * self.weight
