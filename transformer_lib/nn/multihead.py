"""Multi-head attention (多头注意力) with a key/value cache for decoding; grouped-query attention
(分组查询注意力, ``num_kv_heads``) and rotary position embeddings (旋转位置编码, ``rotary``) are its
options.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..validation import (
    check_divisible,
    check_kv_heads,
    check_mask,
    check_positive_int,
    check_probability,
)
from .attention import scaled_dot_product_attention
from .positional import RotaryEmbedding


@dataclass
class KVCache:
    """Keys and values already projected, kept between decoding steps.

    A *growing* cache (decoder self-attention) appends the new positions at each step; a *static*
    one (cross-attention) is filled once from the encoder output. Keys are stored rotated with RoPE.

    Shape:
        key, value: ``(B, H_kv, T_cached, d_k)``, ``H_kv`` = the attention's ``num_kv_heads``.
    """

    key: Tensor | None = None
    value: Tensor | None = None
    static: bool = False

    @property
    def length(self) -> int:
        """Number of cached positions."""
        return 0 if self.key is None else self.key.size(-2)

    @property
    def filled(self) -> bool:
        """Whether this is a static cache that already holds its keys and values."""
        return self.static and self.key is not None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append (growing) or store (static) the new positions' keys and values; return all of
        them.

        Shape: key, value ``(B, H_kv, T_new, d_k)``; outputs ``(B, H_kv, T_cached + T_new, d_k)``.
        """
        if self.key is not None and self.value is not None and not self.static:
            key = torch.cat([self.key, key], dim=-2)  # (B, H_kv, T_cached + T_new, d_k)
            value = torch.cat([self.value, value], dim=-2)
        self.key, self.value = key, value
        return key, value

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search keeps the beams it extends). ``index``: ``(B_new,)``."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


def guarded_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    dropout_p: float = 0.0,
    enable_gqa: bool = False,
) -> Tensor:
    """``F.scaled_dot_product_attention`` that gives a fully masked query row zeros, never NaN.

    PyTorch's fused kernels are not all known to do this themselves (its CPU kernel does, some GPU
    kernels return NaN), so such a row is let attend everywhere (any finite result), then zeroed.
    With ``enable_gqa`` PyTorch shares each key/value head among its group of query heads without
    copying it.

    Shape:
        query: ``(B, H, T_q, d_k)``; key, value: ``(B, H, T_k, d_k)`` (``(B, H_kv, T_k, d_k)`` with
        ``enable_gqa``); mask: bool broadcasting to ``(B, H, T_q, T_k)``, or ``None``; output:
        ``(B, H, T_q, d_k)``.
    """
    if mask is None:
        return F.scaled_dot_product_attention(
            query, key, value, dropout_p=dropout_p, enable_gqa=enable_gqa
        )
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
    safe = mask | ~row_ok  # (..., T_q, T_k)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=safe, dropout_p=dropout_p, enable_gqa=enable_gqa
    )  # (B, H, T_q, d_k)
    return out * row_ok  # (B, H, T_q, d_k)


class MultiHeadAttention(nn.Module):
    """Project queries, keys and values into ``num_heads`` subspaces, attend in each, recombine.

    ``head_i = Attention(Q W_q_i, K W_k_i, V W_v_i)``, ``output = concat(head_1..head_h) W_o``; head
    ``i``'s weights are rows ``i*d_k:(i+1)*d_k`` of one ``nn.Linear`` each for Q, K and V. Without
    ``need_weights`` the attention is PyTorch's fused ``F.scaled_dot_product_attention``; with it,
    the reference :func:`~.attention.scaled_dot_product_attention`, which returns the weights. Both
    agree (tested) and give a query row whose keys are all masked a zero output.

    **Grouped-query attention** (分组查询注意力; Ainslie et al., 2023): with ``num_kv_heads = H_kv <
    H``, query heads ``g*i .. g*i + g - 1`` (``g = H / H_kv``) share key/value head ``i``, which
    divides the key/value cache by ``g`` (``H_kv = 1``: multi-query attention).

    **Rotary embeddings** (``rotary``, a :class:`~.RotaryEmbedding`) rotate queries and keys after
    the projection. For self-attention only: queries and keys must count from the same origin.

    Args:
        dropout: dropout on the attention weights (training only).
        num_kv_heads: key/value heads (``None``: ``num_heads``); must divide ``num_heads``.

    Shape:
        query: ``(B, T_q, d_model)``; key, value: ``(B, T_k, d_model)``.
        mask: bool, ``True`` = may attend, broadcasting to ``(B, H, T_q, T_k)``.
        output: ``(B, T_q, d_model)``; weights (if asked): ``(B, H, T_q, T_k)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.d_k = check_divisible(d_model, num_heads)
        self.num_kv_heads = check_kv_heads(num_heads, num_kv_heads)
        self.groups = num_heads // self.num_kv_heads  # query heads per key/value head
        if rotary is not None and (
            not isinstance(rotary, RotaryEmbedding) or rotary.d_k != self.d_k
        ):
            raise ValueError(
                f"rotary must be a RotaryEmbedding of head width d_k={self.d_k}, got {rotary!r}"
            )
        self.rotary = rotary
        self.dropout = check_probability("dropout", dropout)
        kv_width = self.num_kv_heads * self.d_k
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        With a ``cache``, only the new query positions are passed; a static cache is filled on first
        use, then ``key`` and ``value`` are ignored.
        """
        self._check_inputs(query, key, value, cache)
        # cross-attention after the first step: the encoder's keys
        if cache is not None and cache.filled:
            q, k, v = self._split_heads(self.q_proj(query)), cache.key, cache.value
        else:
            q, k, v = self._project(query, key, value)
            if self.rotary is not None:  # the new positions come after the cached ones
                offset = 0 if cache is None else cache.length
                # (B, H, T_q, d_k), (B, H_kv, T_k, d_k)
                q, k = self.rotary(q, offset), self.rotary(k, offset)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H_kv, T_cached + T_q, d_k)
        assert k is not None and v is not None  # a filled cache holds both
        batch, t_q = query.shape[:2]
        check_mask("mask", mask, (batch, self.num_heads, t_q, k.size(-2)))
        out, weights = self._attend(q, k, v, mask, need_weights)  # (B, H, T_q, d_k)
        # (B, H, T_q, d_k) -> (B, T_q, d_model)
        out = out.transpose(1, 2).reshape(batch, t_q, self.d_model)
        return self.out_proj(out), weights

    def _check_inputs(
        self, query: Tensor, key: Tensor, value: Tensor, cache: KVCache | None
    ) -> None:
        """Shapes only: reading a value would make the host wait for the GPU."""
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(
                f"query must have shape (B, T_q, d_model={self.d_model}), got {tuple(query.shape)}"
            )
        if (
            key.shape[:1] != query.shape[:1]
            or key.size(-1) != self.d_model
            or key.shape != value.shape
        ):
            raise ValueError(
                f"key and value must both have shape (B={query.size(0)}, T_k, "
                f"d_model={self.d_model}), got {tuple(key.shape)} and {tuple(value.shape)}"
            )
        if self.rotary is not None and cache is not None and cache.static:
            raise ValueError(
                "a static cache (cross-attention) cannot be used with rotary embeddings"
            )

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        x = x.view(batch, length, width // self.d_k, self.d_k)  # (B, T, h * d_k) -> (B, T, h, d_k)
        # (B, T, h, d_k) -> (B, h, T, d_k); h = H for queries, H_kv for keys/values
        return x.transpose(1, 2)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Queries, keys and values, each by its own ``nn.Linear``, split into heads.

        Shape:
            output: q ``(B, H, T_q, d_k)``; k, v ``(B, H_kv, T_k, d_k)``.
        """
        # Three calls, not one product with the three weights concatenated: fusing them measured
        # no faster on a whole training step (benchmarks/results/qkv_projection.json).
        q = self._split_heads(self.q_proj(query))
        k = self._split_heads(self.k_proj(key))
        v = self._split_heads(self.v_proj(value))
        return q, k, v

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Attention of every head; the weights too if asked for. Output: ``(B, H, T_q, d_k)``."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            # The step-by-step reference wants one key/value head per query head: (B, H, T_k, d_k).
            k = k.repeat_interleave(self.groups, dim=1)
            v = v.repeat_interleave(self.groups, dim=1)
            return scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return guarded_attention(q, k, v, mask, dropout_p, enable_gqa=self.groups > 1), None
