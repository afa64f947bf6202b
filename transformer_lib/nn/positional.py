"""Positional encoding (位置编码): the paper's sinusoidal table, a learned table, rotary embeddings.

The first two are *added* to the token embeddings before the first layer (:class:`~.PositionalEncoding`,
:class:`~.LearnedPositionalEmbedding`). Rotary embeddings (:class:`~.RotaryEmbedding`, 旋转位置编码) add
nothing: every self-attention rotates its queries and keys by their positions instead, so the model
gets :class:`~.NoPositionalEncoding` (dropout only) at its input. :func:`~.make_positional` picks by name.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..validation import check_positive_int, check_probability


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


class LearnedPositionalEmbedding(nn.Module):
    """A trained table of position vectors (可学习位置编码), added like the sinusoidal one.

    Row ``p`` of an ``nn.Embedding(max_len, d_model)`` is the vector of position ``p`` (as in BERT and
    GPT-2). It costs ``max_len * d_model`` parameters and knows nothing about positions it never
    saw in training (rows beyond the longest training sequence stay at their random start). The
    rows start as ``N(0, 1/2)``, the mean square of the sinusoidal table's entries, so swapping one
    table for the other keeps the balance between token and position at initialisation.

    Args:
        d_model: width of the vectors.
        dropout: dropout probability applied to the sum.
        max_len: number of positions (rows).

    Shape:
        x: ``(B, T, d_model)`` with ``offset + T <= max_len``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.max_len = check_positive_int("max_len", max_len)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.5**0.5)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + E[offset : offset + T])``; ``offset`` is the position of ``x[:, 0]``."""
        _check_positions(x, self.d_model, offset, self.max_len, "learned positional embedding")
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return self.dropout(x + self.embedding(positions).to(x.dtype))  # (B, T, d_model) + (T, d_model)


class NoPositionalEncoding(nn.Module):
    """Dropout only, with the same length check: the model's input when positions enter inside attention.

    With rotary embeddings (:class:`~.RotaryEmbedding`) nothing is added to the token embeddings; the
    embedding dropout of the paper stays.

    Shape:
        x: ``(B, T, d_model)`` with ``offset + T <= max_len``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.max_len = check_positive_int("max_len", max_len)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x)`` after checking that the positions fit in ``max_len``."""
        _check_positions(x, self.d_model, offset, self.max_len, "rotary positional encoding")
        return self.dropout(x)


def _check_positions(x: Tensor, d_model: int, offset: int, max_len: int, what: str) -> None:
    if x.dim() != 3 or x.size(-1) != d_model:
        raise ValueError(f"x must have shape (B, T, d_model={d_model}), got {tuple(x.shape)}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    if offset + x.size(1) > max_len:
        raise ValueError(
            f"sequence length {offset + x.size(1)} exceeds max_len={max_len} of the {what}; "
            f"build the model with a larger max_len"
        )


def rotary_tables(max_len: int, d_k: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Cosines and sines of the rotary angles ``theta[p, i] = p / 10000^(2i/d_k)``.

    The frequencies are those of :func:`~.sinusoidal_table` for a width of ``d_k``: feature pair
    ``(2i, 2i+1)`` of a query or key at position ``p`` is rotated by the angle ``theta[p, i]``.
    Computed in float64, returned in ``dtype``.

    Shape:
        outputs: two ``(max_len, d_k / 2)``.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("d_k", d_k)
    if d_k % 2 != 0:
        raise ValueError(f"d_k={d_k} must be even: rotary embeddings rotate pairs of features")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k / 2,)
    angles = position * inv_freq  # (max_len, d_k / 2)
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` by the angle whose cosine and sine are given.

    ``(a, b) -> (a cos - b sin, a sin + b cos)``: a 2-D rotation per pair, so norms are kept.

    Shape:
        x: ``(..., T, d_k)``; cos, sin: ``(T, d_k / 2)``; output: ``(..., T, d_k)``.
    """
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d_k / 2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d_k / 2, 2)
    return rotated.flatten(-2)  # (..., T, d_k / 2, 2) -> (..., T, d_k): pairs back in place


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE, 旋转位置编码; Su et al., 2021), applied to queries and keys.

    Feature pair ``i`` of the query (or key) of position ``p`` is rotated by the angle
    ``p * w_i`` with ``w_i = 10000^(-2i/d_k)``. Because rotations compose, the dot product of a
    rotated query at position ``m`` and a rotated key at position ``n`` is
    ``q^T R(m)^T R(n) k = q^T R(n - m) k``: attention scores depend on the positions only through
    the offset ``n - m``. Nothing is added to the embeddings and nothing is learned.

    The cosine and sine tables are non-persistent float32 buffers (a function of ``max_len`` and
    ``d_k``, like :class:`~.PositionalEncoding`'s table). A float64 input gets tables recomputed in
    float64, so that the rotation is orthogonal to float64 precision (the tests rely on it).
    One module can be shared by every self-attention of a model.

    Args:
        d_k: width of one head (even).
        max_len: number of positions.

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
        """Rotate ``x`` (queries or keys of positions ``offset ..``); see the class docstring."""
        if x.size(-1) != self.d_k:
            raise ValueError(f"x must have last dimension d_k={self.d_k}, got shape {tuple(x.shape)}")
        length = x.size(-2)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length {offset + length} exceeds max_len={self.max_len} of the rotary "
                f"embedding; build the model with a larger max_len"
            )
        if x.dtype == torch.float64:
            cos, sin = rotary_tables(offset + length, self.d_k, torch.float64)
            cos, sin = cos[offset:].to(x.device), sin[offset:].to(x.device)  # (T, d_k / 2)
        else:
            cos = self.cos[offset : offset + length].to(x.dtype)  # (T, d_k / 2)
            sin = self.sin[offset : offset + length].to(x.dtype)  # (T, d_k / 2)
        return rotate_pairs(x, cos, sin)  # (B, H, T, d_k)


def make_positional(
    kind: str, d_model: int, dropout: float = 0.0, max_len: int = 5000
) -> PositionalEncoding | LearnedPositionalEmbedding | NoPositionalEncoding:
    """The model's input positional module for ``TransformerConfig.positional == kind``.

    ``"sinusoidal"`` -> :class:`~.PositionalEncoding`, ``"learned"`` -> :class:`~.LearnedPositionalEmbedding`,
    ``"rope"`` -> :class:`~.NoPositionalEncoding` (the rotation happens in self-attention).
    """
    if kind == "sinusoidal":
        return PositionalEncoding(d_model, dropout, max_len)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, dropout, max_len)
    if kind == "rope":
        return NoPositionalEncoding(d_model, dropout, max_len)
    raise ValueError(f"positional={kind!r} is not one of ['sinusoidal', 'learned', 'rope']")
