"""Layer normalisation (层归一化) and RMS normalisation (均方根归一化), written from their formulas."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from ._checks import check_positive_int


class _LayerNormFunction(torch.autograd.Function):
    """LayerNorm with its gradient written out by hand: fewer, larger tensor operations than autograd's.

    Forward, per vector ``x`` of ``d`` features: ``x_hat = (x - mean) * rstd`` with
    ``rstd = 1 / sqrt(var + eps)``, then ``y = x_hat * weight + bias``.

    Backward, with ``g = dL/dy`` and ``g_hat = g * weight`` (the gradient reaching ``x_hat``)::

        dL/dx      = rstd * (g_hat - mean(g_hat) - x_hat * mean(g_hat * x_hat))
        dL/dweight = sum over tokens of g * x_hat
        dL/dbias   = sum over tokens of g

    The two means come from differentiating through ``mean`` and ``var``. Autograd, differentiating
    the forward formula operation by operation, gets the same numbers with more passes over the
    activations. The backward is not itself differentiable (``once_differentiable``): asking for a
    second derivative raises an error instead of returning a wrong one.

    Shape:
        x: ``(..., d)``; weight, bias: ``(d,)``; output: ``(..., d)``.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
        centred = x - x.mean(dim=-1, keepdim=True)  # (..., d)
        var = (centred * centred).mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by d
        rstd = torch.rsqrt(var + eps)  # (..., 1)
        x_hat = centred * rstd  # (..., d)
        ctx.save_for_backward(x_hat, rstd, weight)
        return torch.addcmul(bias, x_hat, weight)  # bias + x_hat * weight

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        x_hat, rstd, weight = ctx.saved_tensors
        g_hat = grad * weight  # (..., d)
        mean_g = g_hat.mean(dim=-1, keepdim=True)  # (..., 1)
        mean_gx = (g_hat * x_hat).mean(dim=-1, keepdim=True)  # (..., 1)
        grad_x = torch.addcmul(g_hat - mean_g, x_hat, mean_gx, value=-1.0) * rstd  # (..., d)
        tokens = tuple(range(grad.dim() - 1))  # every dimension but the features
        return grad_x, (grad * x_hat).sum(tokens), grad.sum(tokens), None


class LayerNorm(nn.Module):
    """Normalise each vector over its features: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    The variance is the biased one (divide by ``d_model``, not ``d_model - 1``) and ``eps`` sits
    inside the square root, exactly as ``nn.LayerNorm``. Statistics are per token, so the result
    does not depend on the batch, on padding elsewhere in the batch, or on train/eval mode.

    The gradient is written out by hand in ``_LayerNormFunction``, which needs fewer tensor
    operations than autograd's; the tests check it against ``nn.LayerNorm`` and with ``gradcheck``.

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
        if x.size(-1) != self.d_model:
            raise ValueError(f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        return _LayerNormFunction.apply(x, self.weight, self.bias, self.eps)


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
        if x.size(-1) != self.d_model:
            raise ValueError(f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(mean_square + self.eps) * self.weight


NORMS: dict[str, type[LayerNorm] | type[RMSNorm]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
"""The normalisations a layer can use, by the name ``TransformerConfig.norm`` gives them."""


def make_norm(kind: str, d_model: int) -> LayerNorm | RMSNorm:
    """A fresh ``LayerNorm`` (``kind="layernorm"``) or ``RMSNorm`` (``"rmsnorm"``) of width ``d_model``.

    Each keeps its own default ``eps`` (1e-5 for LayerNorm as ``nn.LayerNorm``, 1e-6 for RMSNorm).
    """
    if kind not in NORMS:
        raise ValueError(f"norm={kind!r} is not one of {list(NORMS)}")
    return NORMS[kind](d_model)
