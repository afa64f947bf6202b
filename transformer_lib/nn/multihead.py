"""Multi-head attention (多头注意力); grouped-query attention (分组查询注意力, ``num_kv_heads``) and
rotary position embeddings (旋转位置编码, ``rotary``) are its options, the key/value cache
(:mod:`~.cache`) its companion for decoding.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..validation import check_divisible, check_kv_heads, check_positive_int, check_probability
from .attention import guarded_attention, scaled_dot_product_attention
from .cache import KVCache
from .positional import RotaryEmbedding


class MultiHeadAttention(nn.Module):
    """Project queries, keys and values into ``num_heads`` subspaces, attend in each, recombine.

    ``head_i = Attention(Q W_q_i, K W_k_i, V W_v_i)``, ``output = concat(head_1..head_h) W_o``; head
    ``i``'s weights are rows ``i*d_k:(i+1)*d_k`` of one ``nn.Linear`` each for Q, K and V.

    The attention in each head is chapter 3's ``softmax(Q K^T / sqrt(d_k)) V``. With
    ``need_weights`` it is chapter 3's step-by-step :func:`~.scaled_dot_product_attention`, which
    returns the weights; without, PyTorch's fused kernel (:func:`~.guarded_attention`), which
    computes the same numbers (tested) without storing the weights. Both give a query row whose
    keys are all masked a zero output.

    **Grouped-query attention** (分组查询注意力; Ainslie et al., 2023): with ``num_kv_heads = H_kv <
    H``, query heads ``g*i .. g*i + g - 1`` (``g = H / H_kv``) share key/value head ``i``, which
    divides the key/value cache by ``g`` (``H_kv = 1``: multi-query attention).

    **Rotary embeddings** (``rotary``, a :class:`~.RotaryEmbedding`) rotate queries and keys after
    the projection. For self-attention only: queries and keys must count from the same origin.

    ``forward`` checks one thing, and only when ``key`` and ``value`` are two tensors: that they
    describe the same positions, which PyTorch's fused kernel would not notice. The model passes one
    tensor for both, and :class:`~.Transformer` checks its inputs and masks where they enter; any
    other shape that does not fit fails loudly in PyTorch's product.

    Args:
        dropout: dropout on the attention weights (training only).
        num_kv_heads: key/value heads (``None``: ``num_heads``); must divide ``num_heads``.

    Shape:
        query: ``(B, T_q, d_model)``; key, value: ``(B, T_k, d_model)``.
        mask: bool, ``True`` = may attend, broadcasting to ``(B, H, T_q, T_k)``: a padding mask
        as ``(B, 1, 1, T_k)``, not ``(B, T_k)``.
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
        batch, t_q, _ = query.shape
        if key is not value:  # the model passes one tensor; two could disagree (see below)
            self._check_key_value(query, key, value)
        if cache is not None and cache.filled:  # cross-attention while decoding: keys kept
            q, k, v = self.split_heads(self.q_proj(query)), cache.key, cache.value
        else:
            q, k, v = self.project(query, key, value)  # (B, H, T_q, d_k), (B, H_kv, T_k, d_k)
            q, k = self.rotate(q, k, cache)  # RoPE (chapter 15); nothing without it
            if cache is not None:  # decoding (chapter 12): the earlier positions' keys too
                k, v = cache.update(k, v)  # (B, H_kv, T_cached + T_q, d_k)
        assert k is not None and v is not None  # a filled cache holds both
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:  # chapter 3's attention, one key/value head per query head
            k, v = k.repeat_interleave(self.groups, 1), v.repeat_interleave(self.groups, 1)
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        else:
            out = guarded_attention(q, k, v, mask, dropout_p, enable_gqa=self.groups > 1)
            weights = None
        # merge the heads: (B, H, T_q, d_k) -> (B, T_q, H, d_k) -> (B, T_q, d_model)
        out = out.transpose(1, 2).reshape(batch, t_q, self.d_model)
        return self.out_proj(out), weights

    def _check_key_value(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """Key ``j`` and value ``j`` must describe the same position. PyTorch's fused CPU kernel
        does not check it: a value of 5 positions under keys of 6 returns a tensor, not an error.
        """
        if (
            key.shape[:1] != query.shape[:1]
            or key.size(-1) != self.d_model
            or key.shape != value.shape
        ):
            raise ValueError(
                f"key and value must both have shape (B={query.size(0)}, T_k, "
                f"d_model={self.d_model}), got {tuple(key.shape)} and {tuple(value.shape)}"
            )

    def split_heads(self, x: Tensor) -> Tensor:
        """Shape: ``(B, T, h * d_k)`` -> ``(B, h, T, d_k)``; ``h`` = H for queries, H_kv for keys
        and values.
        """
        batch, length, width = x.shape
        return x.view(batch, length, width // self.d_k, self.d_k).transpose(1, 2)

    def project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values, each by its own ``nn.Linear``, split into heads.

        Three products, not one with the three weights concatenated: fusing them measured no
        faster on a whole training step (``benchmarks/results/qkv_projection.json``).

        Shape:
            output: q ``(B, H, T_q, d_k)``; k, v ``(B, H_kv, T_k, d_k)``.
        """
        q = self.split_heads(self.q_proj(query))
        k = self.split_heads(self.k_proj(key))
        v = self.split_heads(self.v_proj(value))
        return q, k, v

    def rotate(self, q: Tensor, k: Tensor, cache: KVCache | None) -> tuple[Tensor, Tensor]:
        """Queries and keys rotated by their positions (RoPE), or as they are without ``rotary``.

        The new positions come after the cached ones. A static cache (cross-attention) is refused:
        decoder and encoder positions share no origin, so their rotations would mean nothing.
        """
        if self.rotary is None:
            return q, k
        if cache is not None and cache.static:
            raise ValueError(
                "a static cache (cross-attention) cannot be used with rotary embeddings"
            )
        offset = 0 if cache is None else cache.length
        return self.rotary(q, offset), self.rotary(k, offset)
