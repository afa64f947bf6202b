"""Multi-head attention (多头注意力) with an optional key/value cache for decoding.

Two variants are options of the same module: grouped-query attention (分组查询注意力, fewer key/value
heads than query heads, ``num_kv_heads``) and rotary position embeddings (旋转位置编码) applied to the
queries and keys of self-attention (``rotary``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..validation import check_divisible, check_mask, check_positive_int, check_probability
from .attention import scaled_dot_product_attention
from .masks import causal_mask
from .positional import RotaryEmbedding


@dataclass
class KVCache:
    """Keys and values already projected, kept between decoding steps.

    A *growing* cache (decoder self-attention) appends the new position's key and value at each
    step. A *static* cache (cross-attention) is filled once from the encoder output and reused.
    With grouped-query attention the cache holds only the ``H_kv`` key/value heads (that is the
    memory it saves); with rotary embeddings it holds the keys already rotated.

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

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search keeps the beams it extends). ``index``: ``(B_new,)``."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


def guarded_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor, dropout_p: float = 0.0, enable_gqa: bool = False
) -> Tensor:
    """``F.scaled_dot_product_attention`` that gives a fully masked query row zeros, never NaN.

    Such a row is let attend everywhere (any finite result), then zeroed. ``MultiHeadAttention``
    uses it on backends where it has not been checked that PyTorch's kernels already do this; the
    guard costs a reduction over the mask and a multiplication of the output.

    ``enable_gqa`` is passed on to PyTorch: keys and values may then have fewer heads ``H_kv``
    (dividing ``H``), each shared by ``H / H_kv`` consecutive query heads.

    Shape:
        query: ``(B, H, T_q, d_k)``; key, value: ``(B, H, T_k, d_k)`` (``(B, H_kv, T_k, d_k)`` with
        ``enable_gqa``); mask: bool broadcasting to ``(B, H, T_q, T_k)``; output: ``(B, H, T_q, d_k)``.
    """
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
    safe = mask | ~row_ok  # (..., T_q, T_k)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=safe, dropout_p=dropout_p, enable_gqa=enable_gqa
    )  # (B, H, T_q, d_k)
    return out * row_ok  # (B, H, T_q, d_k)


class MultiHeadAttention(nn.Module):
    """Project queries, keys and values into ``num_heads`` subspaces, attend in each, recombine.

    ``head_i = Attention(Q W_q_i, K W_k_i, V W_v_i)``, ``output = concat(head_1..head_h) W_o``.
    The per-head projections are stored as one ``nn.Linear(d_model, d_model)`` each for Q, K and V
    (the head ``i`` weights are rows ``i*d_k:(i+1)*d_k``); in self-attention the three are applied
    in a single matrix product, as ``nn.MultiheadAttention`` does.

    Without ``need_weights`` the attention runs PyTorch's fused
    ``F.scaled_dot_product_attention``; with it, the reference :func:`~.attention.scaled_dot_product_attention`
    so that the weights can be returned. Both agree (tested), and both give a query row whose keys
    are all masked a zero output (see :func:`~.guarded_attention`).

    **Grouped-query attention** (分组查询注意力, GQA; Ainslie et al., 2023): with
    ``num_kv_heads = H_kv < H``, ``k_proj`` and ``v_proj`` produce only ``H_kv`` heads
    (``nn.Linear(d_model, H_kv * d_k)``) and query heads ``g*i .. g*i + g - 1`` (``g = H / H_kv``)
    all use key/value head ``i``. ``H_kv = 1`` is multi-query attention. It saves key/value
    parameters and, above all, a factor ``g`` of key/value cache during decoding; with
    ``H_kv = H`` it is exactly multi-head attention (tested).

    **Rotary embeddings** (``rotary``, a :class:`~.RotaryEmbedding`):
    queries and keys are rotated by their positions after the projection, before the scores; a
    growing cache's keys are stored rotated and new positions start at the cache's length, so
    cached decoding equals full decoding. Meant for self-attention (positions of queries and keys
    count from the same origin); it cannot be combined with a static cache.

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: number of (query) heads ``h``; each has width ``d_k = d_model / h``.
        dropout: dropout on the attention weights (training only).
        bias: whether the four projections have biases.
        num_kv_heads: key/value heads (``None``: ``num_heads``); must divide ``num_heads``.
        rotary: rotate queries and keys with this module (``None``: no rotation).

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
        check_positive_int("d_model", d_model)
        check_positive_int("num_heads", num_heads)
        self.d_k = check_divisible(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % self.num_kv_heads != 0:
            raise ValueError(f"num_kv_heads={self.num_kv_heads} must divide num_heads={num_heads}")
        self.groups = num_heads // self.num_kv_heads  # query heads per key/value head
        if rotary is not None and (not isinstance(rotary, RotaryEmbedding) or rotary.d_k != self.d_k):
            raise ValueError(f"rotary must be a RotaryEmbedding of head width d_k={self.d_k}, got {rotary!r}")
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

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        x = x.view(batch, length, width // self.d_k, self.d_k)  # (B, T, h * d_k) -> (B, T, h, d_k)
        return x.transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k); h = H for queries, H_kv for keys/values

    def _project(self, x: Tensor, projections: tuple[nn.Linear, ...]) -> tuple[Tensor, ...]:
        """Apply several projections to the same input in one matrix product."""
        weight = torch.cat([p.weight for p in projections])  # (sum of out_features, d_model)
        biases = [p.bias for p in projections]
        bias = None if biases[0] is None else torch.cat(biases)  # (sum of out_features,)
        fused = F.linear(x, weight, bias)  # (B, T, sum of out_features)
        sizes = [p.out_features for p in projections]
        return tuple(self._split_heads(part) for part in fused.split(sizes, dim=-1))

    def project_key_value(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Project keys and values once, e.g. the encoder output for a cross-attention cache.

        Shape:
            memory: ``(B, T_k, d_model)``; outputs: two ``(B, H_kv, T_k, d_k)``.
        """
        key, value = self._project(memory, (self.k_proj, self.v_proj))
        return key, value

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; see the class docstring for shapes.

        With a ``cache``, only the new query positions are passed; a growing cache appends their
        keys and values, a static cache is filled on first use and then reused (``key`` and
        ``value`` are ignored once it is full). With ``rotary``, the new positions are numbered
        from the growing cache's length (0 without a cache).

        ``is_causal=True`` (no ``mask``, as many keys as queries) means the causal mask: position
        ``t`` attends to ``0..t``. PyTorch's fused kernel then skips the masked half of the scores
        instead of reading a mask (``F.scaled_dot_product_attention(is_causal=True)``).
        """
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(f"query must have shape (B, T_q, d_model={self.d_model}), got {tuple(query.shape)}")
        if key.shape[:1] != query.shape[:1] or key.size(-1) != self.d_model or key.shape != value.shape:
            raise ValueError(
                f"key and value must both have shape (B={query.size(0)}, T_k, d_model={self.d_model}), "
                f"got {tuple(key.shape)} and {tuple(value.shape)}"
            )
        if self.rotary is not None and cache is not None and cache.static:
            raise ValueError("a static cache (cross-attention) cannot be used with rotary embeddings")
        if cache is not None and cache.static and cache.key is not None:
            q = self._split_heads(self.q_proj(query))  # (B, H, T_q, d_k)
            k, v = cache.key, cache.value
        elif query is key and key is value:  # self-attention: one product for Q, K and V
            q, k, v = self._project(query, (self.q_proj, self.k_proj, self.v_proj))
        else:
            q = self._split_heads(self.q_proj(query))  # (B, H, T_q, d_k)
            if key is value:
                k, v = self._project(key, (self.k_proj, self.v_proj))
            else:
                k, v = self._split_heads(self.k_proj(key)), self._split_heads(self.v_proj(value))
        if self.rotary is not None:  # rotate by position; a growing cache holds the earlier positions
            offset = cache.length if cache is not None else 0
            q = self.rotary(q, offset)  # (B, H, T_q, d_k)
            k = self.rotary(k, offset)  # (B, H_kv, T_k, d_k)
        if cache is not None and not (cache.static and cache.key is not None):
            if not cache.static and cache.key is not None and cache.value is not None:
                k = torch.cat([cache.key, k], dim=-2)  # (B, H_kv, T_cached + T_q, d_k)
                v = torch.cat([cache.value, v], dim=-2)  # (B, H_kv, T_cached + T_q, d_k)
            cache.key, cache.value = k, v
        assert v is not None
        batch, t_q = query.shape[:2]
        check_mask("mask", mask, (batch, self.num_heads, t_q, k.size(-2)))
        if is_causal:
            if mask is not None or k.size(-2) != t_q:
                raise ValueError(
                    "is_causal=True takes no mask and as many keys as queries (no cached earlier positions); "
                    f"got mask={'a tensor' if mask is not None else None}, {t_q} queries and {k.size(-2)} keys"
                )
            if need_weights:  # the reference path wants the mask itself
                mask, is_causal = causal_mask(t_q, q.device), False
        dropout_p = self.dropout if self.training else 0.0
        weights: Tensor | None = None
        gqa = self.groups > 1
        if need_weights:
            if gqa:  # the reference path wants one key/value head per query head
                k = k.repeat_interleave(self.groups, dim=1)  # (B, H_kv, T_k, d_k) -> (B, H, T_k, d_k)
                v = v.repeat_interleave(self.groups, dim=1)  # (B, H_kv, T_k, d_k) -> (B, H, T_k, d_k)
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)  # (B, H, T_q, d_k)
        elif mask is None or q.device.type == "cpu":  # (is_causal comes here: it has no mask)
            # On the CPU, PyTorch (>= 2.5) already gives a fully masked query row a zero output and
            # finite gradients (the tests check it), so the mask goes in as it is. With enable_gqa,
            # PyTorch shares each key/value head among its group of query heads without copying it.
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=gqa
            )  # (B, H, T_q, d_k)
        else:
            out = guarded_attention(q, k, v, mask, dropout_p, enable_gqa=gqa)  # (B, H, T_q, d_k)
        out = out.transpose(1, 2).reshape(batch, t_q, self.d_model)  # (B, H, T_q, d_k) -> (B, T_q, d_model)
        return self.out_proj(out), weights
