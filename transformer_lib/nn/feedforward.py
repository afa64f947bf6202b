"""Position-wise feed-forward network (前馈网络), plain or gated (SwiGLU, 门控线性单元)."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from ..validation import check_choice, check_positive_int, check_probability

Activation = Literal["relu", "gelu", "swiglu"]
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swiglu": F.silu}
"""The activations a layer can use, by the name ``TransformerConfig.activation`` gives them; each
an element-wise function (for ``"swiglu"``, the gate's: SiLU)."""


class FeedForward(nn.Module):
    """``linear2(dropout(activation(linear1(x))))``, the same two matrices at every position.

    The paper uses ``d_ff = 4 * d_model`` and ReLU. With ``activation="swiglu"`` (a gated linear
    unit with the SiLU gate; Shazeer, 2020) the hidden vector is ``silu(linear1(x)) * linear3(x)``:
    three ``d_model x d_ff`` matrices instead of two, so 1.5 times the parameters at the same
    ``d_ff``. **The hidden width is ``d_ff`` as given**, whatever the activation: at (almost) equal
    parameter count SwiGLU takes about 2/3 of the ReLU ``d_ff``, as in LLaMA
    (``benchmarks/variants.py`` runs both).

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: Activation = "relu"
    ) -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        check_choice("activation", activation, list(ACTIVATIONS))
        self.activation = ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        # the gated unit's second input
        self.linear3 = nn.Linear(d_model, d_ff) if activation == "swiglu" else None
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
