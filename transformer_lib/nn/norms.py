"""Layer normalisation (层归一化) and RMS normalisation (均方根归一化)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..validation import check_positive_int


class LayerNorm(nn.Module):
    """Normalise each vector over its features: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    The variance is the biased one (divide by ``d_model``, not ``d_model - 1``) and ``eps`` sits
    inside the square root, as in ``nn.LayerNorm``. Statistics are per token, so the result does not
    depend on the batch or on train/eval mode. The computation is PyTorch's fused ``F.layer_norm``;
    chapter 6 writes the formula and its gradient out and proves them equal to it.

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
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """Scale each vector by the inverse of its root mean square: ``x / sqrt(mean(x^2) + eps) *
    weight``.

    No centring and no bias (Zhang and Sennrich, 2019). The computation is PyTorch's ``F.rms_norm``.

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
        return F.rms_norm(x, (self.d_model,), self.weight, self.eps)


NormName = Literal["layernorm", "rmsnorm"]
NORMS: dict[str, type[LayerNorm] | type[RMSNorm]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
"""The normalisations a layer can use, by the name ``TransformerConfig.norm`` gives them; each with
its own default ``eps`` (1e-5 as ``nn.LayerNorm``, 1e-6 for RMSNorm)."""
