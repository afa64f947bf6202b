"""Sinusoidal positional encoding (位置编码)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._checks import check_positive_int, check_probability


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """Build the table ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(p / 10000^(2i/d))``.

    Each pair of columns ``(2i, 2i+1)`` is a sine/cosine of the position at one frequency; the
    wavelengths grow geometrically from ``2*pi`` to ``10000 * 2*pi``. Values lie in ``[-1, 1]``.

    Args:
        max_len: number of positions (rows).
        d_model: width (columns); must be even so that sines and cosines pair up.

    Shape:
        output: ``(max_len, d_model)``, float32.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("d_model", d_model)
    if d_model % 2 != 0:
        raise ValueError(f"d_model={d_model} must be even: the table pairs a sine and a cosine per frequency")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model / 2,)
    inv_freq = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i/d)
    angles = position * inv_freq  # (max_len, d_model / 2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.to(torch.float32)


class PositionalEncoding(nn.Module):
    """Add the sinusoidal table to a sequence of vectors, then apply dropout.

    The table is a non-persistent buffer: it follows ``.to(device)`` and is not saved in
    checkpoints (it is a function of ``max_len`` and ``d_model``, not a learned weight).

    Args:
        d_model: width of the vectors.
        dropout: dropout probability applied to the sum (the paper uses 0.1).
        max_len: longest sequence accepted.

    Shape:
        x: ``(B, T, d_model)`` with ``T <= max_len``.
        output: ``(B, T, d_model)``.
    """

    pe: Tensor

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + PE[offset : offset + T])``.

        ``offset`` is the position of ``x[:, 0]``; incremental decoding passes the number of
        tokens already decoded.
        """
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        length = x.size(1)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length {offset + length} exceeds max_len={self.max_len} of the "
                f"positional encoding; build the model with a larger max_len"
            )
        return self.dropout(x + self.pe[offset : offset + length].to(x.dtype))  # (B, T, d_model)
