"""Positional encoding (位置编码): the paper's sinusoidal table, a learned table, rotary embeddings.

The first two are *added* to the token embeddings; rotary embeddings (旋转位置编码) rotate queries
and keys inside every self-attention instead, so the model's input gets
:class:`~.NoPositionalEncoding`.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from ..validation import check_positive_int, check_probability


def _angles(max_len: int, width: int) -> Tensor:
    """``theta[p, i] = p / 10000^(2i / width)`` in float64, shape ``(max_len, width / 2)``: for both
    tables and RoPE.
    """
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    # (width / 2,)
    inv_freq = torch.exp(
        -math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float64) / width
    )
    return position * inv_freq  # (max_len, width / 2)


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """Build the table ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(p /
    10000^(2i/d))``.

    Each pair of columns ``(2i, 2i+1)`` is a sine/cosine of the position at one frequency; the
    wavelengths grow geometrically from ``2*pi`` to ``10000 * 2*pi``.

    Shape:
        output: ``(max_len, d_model)``, float32.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("d_model", d_model)
    if d_model % 2 != 0:
        raise ValueError(
            f"d_model={d_model} must be even: the table pairs a sine and a cosine per frequency"
        )
    angles = _angles(max_len, d_model)  # (max_len, d_model / 2)
    table = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1)  # (max_len, d_model / 2, 2)
    return table.flatten(-2).to(torch.float32)  # columns sin, cos, sin, cos, ...


class _InputPositions(nn.Module):
    """What the model's three input modules share: the width, ``max_len``, the dropout, and the one
    check of a forward pass, that the positions fit in ``max_len`` (a longer sequence gets this
    error rather than a mismatch of shapes deep inside).
    """

    what = "positional encoding"

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.max_len = check_positive_int("max_len", max_len)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def _check_length(self, x: Tensor, offset: int) -> None:
        if offset + x.size(1) > self.max_len:
            raise ValueError(
                f"sequence length {offset + x.size(1)} exceeds max_len={self.max_len} of the "
                f"{self.what}; build the model with a larger max_len"
            )


class PositionalEncoding(_InputPositions):
    """Add the sinusoidal table to a sequence of vectors, then apply dropout (the paper uses 0.1).

    The table is a non-persistent buffer: it follows ``.to(device)`` and is not saved in
    checkpoints (it is a function of ``max_len`` and ``d_model``, not a learned weight).

    Shape:
        x: ``(B, T, d_model)``, the positions ``offset .. offset + T - 1`` (``offset + T <=
        max_len``; incremental decoding passes the number of tokens already decoded); output: ``(B,
        T, d_model)``.
    """

    pe: Tensor

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__(d_model, dropout, max_len)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + PE[offset : offset + T])``."""
        self._check_length(x, offset)
        return self.dropout(x + self.pe[offset : offset + x.size(1)].to(x.dtype))  # (B, T, d_model)


class LearnedPositionalEmbedding(_InputPositions):
    """A trained table of position vectors (可学习位置编码), added like the sinusoidal one.

    Row ``p`` of an ``nn.Embedding(max_len, d_model)`` is the vector of position ``p`` (as in BERT
    and GPT-2); rows beyond the longest training sequence stay at their random start. The rows start
    as ``N(0, 1/2)``, the mean square of the sinusoidal table's entries, so swapping one table for
    the other keeps the balance between token and position. Shapes as :class:`~.PositionalEncoding`.
    """

    what = "learned positional embedding"

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__(d_model, dropout, max_len)
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.5**0.5)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + E[offset : offset + T])``."""
        self._check_length(x, offset)
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        # (B, T, d_model) + (T, d_model)
        return self.dropout(x + self.embedding(positions).to(x.dtype))


class NoPositionalEncoding(_InputPositions):
    """Dropout only, and the same length check: the model's input when queries and keys are rotated
    instead (:class:`~.RotaryEmbedding`).
    """

    what = "rotary positional encoding"

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x)``."""
        self._check_length(x, offset)
        return self.dropout(x)


def rotary_tables(
    max_len: int, d_k: int, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor]:
    """Cosines and sines of the rotary angles ``theta[p, i] = p / 10000^(2i/d_k)``, computed in
    float64.

    Shape:
        outputs: two ``(max_len, d_k / 2)``, in ``dtype``.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("d_k", d_k)
    if d_k % 2 != 0:
        raise ValueError(f"d_k={d_k} must be even: rotary embeddings rotate pairs of features")
    angles = _angles(max_len, d_k)  # (max_len, d_k / 2)
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` by the angle whose cosine and sine are given.

    ``(a, b) -> (a cos - b sin, a sin + b cos)``: a 2-D rotation per pair, so norms are kept.

    Shape:
        x: ``(..., T, d_k)``; cos, sin: ``(T, d_k / 2)``; output: ``(..., T, d_k)``.
    """
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d_k / 2) each
    # (..., T, d_k / 2, 2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., T, d_k / 2, 2) -> (..., T, d_k): pairs back in place


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE, 旋转位置编码; Su et al., 2021), applied to queries and keys.

    Feature pair ``i`` of the query (or key) of position ``p`` is rotated by the angle
    ``p * w_i`` with ``w_i = 10000^(-2i/d_k)``. Because rotations compose, the dot product of a
    rotated query at position ``m`` and a rotated key at position ``n`` is ``q^T R(m)^T R(n) k = q^T
    R(n - m) k``: scores depend on the positions only through ``n - m``. Nothing is learned; one
    module serves every self-attention of a model.

    Shape:
        x: ``(B, H, T, d_k)``, positions ``offset .. offset + T - 1``; output: same shape.
    """

    cos: Tensor
    sin: Tensor

    def __init__(self, d_k: int, max_len: int = 5000) -> None:
        super().__init__()
        self.d_k = d_k
        self.max_len = max_len
        cos, sin = rotary_tables(max_len, d_k)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate ``x`` (queries or keys of positions ``offset ..``)."""
        end = offset + x.size(-2)
        if end > self.max_len:  # the tables stop there: a slice past them would mismatch shapes
            raise ValueError(
                f"sequence length {end} exceeds max_len={self.max_len} of the rotary embedding; "
                "build the model with a larger max_len"
            )
        if x.dtype == torch.float64:  # recomputed: the float32 buffers would cap the precision
            cos, sin = rotary_tables(end, self.d_k, torch.float64)
            cos, sin = cos[offset:].to(x.device), sin[offset:].to(x.device)  # (T, d_k / 2)
        else:
            cos, sin = self.cos[offset:end].to(x.dtype), self.sin[offset:end].to(x.dtype)
        return rotate_pairs(x, cos, sin)  # (B, H, T, d_k)


Positional = Literal["sinusoidal", "learned", "rope"]
POSITIONALS: dict[str, type[_InputPositions]] = {
    "sinusoidal": PositionalEncoding,
    "learned": LearnedPositionalEmbedding,
    "rope": NoPositionalEncoding,
}
"""The positional variants, by the name ``TransformerConfig.positional`` gives them: each the
module that takes the model's input (under ``"rope"`` a :class:`~.RotaryEmbedding` then rotates
queries and keys in every self-attention)."""
