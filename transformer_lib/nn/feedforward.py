"""Position-wise feed-forward network (前馈网络), plain or gated (SwiGLU, 门控线性单元)."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from ..validation import check_positive_int, check_probability

Activation = Literal["gelu", "relu", "swiglu"]
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swiglu": F.silu}
"""Activation names and their element-wise function; for ``"swiglu"`` it is the gate's function (SiLU)."""


class FeedForward(nn.Module):
    """``linear2(dropout(activation(linear1(x))))``, applied to every position independently.

    The paper uses ``d_ff = 4 * d_model`` and ReLU. Position-wise means the same two matrices are
    used at every position: it is a 1x1 convolution over the sequence.

    With ``activation="swiglu"`` (a gated linear unit, 门控线性单元, with the SiLU/Swish gate;
    Shazeer, 2020) the hidden vector is the element-wise product of two projections, one passed
    through SiLU: ``linear2(dropout(silu(linear1(x)) * linear3(x)))``. That is three matrices of
    ``d_model x d_ff`` instead of two, so at the same ``d_ff`` SwiGLU has 1.5 times the
    feed-forward parameters. **The hidden width is ``d_ff`` as given**, whatever the activation:
    to compare at (almost) equal parameter count, pass ``d_ff`` about 2/3 of the ReLU one, as
    Shazeer (2020) and LLaMA do (``benchmarks/variants.py`` runs SwiGLU both ways).

    Args:
        d_model, d_ff: input and output width, hidden width.
        dropout: dropout after the activation (after the gating product for SwiGLU).
        activation: ``"relu"`` (the paper), ``"gelu"`` or ``"swiglu"``.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: Activation = "relu") -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.activation = ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.linear3 = nn.Linear(d_model, d_ff) if activation == "swiglu" else None  # the gated unit's second input
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        for linear in (self.linear1, self.linear2, self.linear3):
            if linear is not None:
                nn.init.xavier_uniform_(linear.weight)
                nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the two-layer (or gated) network at each position."""
        hidden = self.activation(self.linear1(x))  # (B, T, d_ff)
        if self.linear3 is not None:
            hidden = hidden * self.linear3(x)  # (B, T, d_ff): SiLU(x W1) gates x W3
        return self.linear2(self.dropout(hidden))  # (B, T, d_ff) -> (B, T, d_model)
