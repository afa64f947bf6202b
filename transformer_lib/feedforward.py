"""Position-wise feed-forward network (前馈网络)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_positive_int, check_probability

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """``linear2(dropout(activation(linear1(x))))``, applied to every position independently.

    The paper uses ``d_ff = 4 * d_model`` and ReLU. Position-wise means the same two matrices are
    used at every position: it is a 1x1 convolution over the sequence.

    Args:
        d_model: input and output width.
        d_ff: hidden width.
        dropout: dropout after the activation.
        activation: ``"relu"`` (the paper) or ``"gelu"``.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        for linear in (self.linear1, self.linear2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the two-layer network at each position."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, T, d_ff) inside
