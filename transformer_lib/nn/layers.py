"""Encoder and decoder layers and stacks (编码器 / 解码器), Post-LN or Pre-LN.

Post-LN (the paper, ``norm_first=False``): ``x = norm(x + dropout(sublayer(x)))``.
Pre-LN (``norm_first=True``): ``x = x + dropout(sublayer(norm(x)))``, and the stack ends with a
final norm, because nothing else normalises the last layer's output.

The variants are keyword arguments of every class here (defaults: the paper's model):
``norm="rmsnorm"`` puts :class:`~.RMSNorm` wherever ``LayerNorm`` was,
``num_kv_heads`` makes every attention grouped-query, and ``rotary`` (a
:class:`~.RotaryEmbedding`) rotates queries and keys in the
**self**-attentions only (cross-attention compares decoder and encoder positions, which do not
count from a common origin in any useful way, so it stays position-free).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from torch import Tensor, nn

from ..validation import check_positive_int, check_probability
from .feedforward import FeedForward
from .multihead import KVCache, MultiHeadAttention
from .norms import make_norm
from .positional import RotaryEmbedding


@dataclass(frozen=True)
class LayerSpec:
    """What every layer of a stack shares: the widths, the dropout, where the norms go, the variants.

    The fields are the arguments of :class:`~.EncoderLayer` and :class:`~.DecoderLayer` (see there);
    :meth:`~.TransformerConfig.layer_spec` gives a model's.
    """

    d_model: int
    num_heads: int
    d_ff: int
    dropout: float = 0.1
    norm_first: bool = False
    activation: str = "relu"
    attention_dropout: float = 0.0
    norm: str = "layernorm"
    num_kv_heads: int | None = None


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection (残差连接) and a norm.

    Args:
        d_model, num_heads, d_ff: widths (see :class:`~.MultiHeadAttention`, :class:`~.FeedForward`).
        dropout: residual dropout on each sub-layer's output, and inside the feed-forward.
        norm_first: ``False`` for Post-LN (the paper), ``True`` for Pre-LN.
        activation: feed-forward activation (``"relu"``, ``"gelu"`` or ``"swiglu"``).
        attention_dropout: dropout on the attention weights (the paper does not use it).
        norm: ``"layernorm"`` (the paper) or ``"rmsnorm"``.
        num_kv_heads: key/value heads of the attention (``None``: ``num_heads``).
        rotary: rotary embedding for the self-attention's queries and keys (``None``: none).

    Shape:
        x: ``(B, T, d_model)``; mask: bool broadcasting to ``(B, H, T, T)``; output: ``(B, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        attention_dropout: float = 0.0,
        *,
        norm: str = "layernorm",
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, attention_dropout, num_kv_heads=num_kv_heads, rotary=rotary
        )
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = make_norm(norm, d_model)
        self.norm2 = make_norm(norm, d_model)
        self.dropout1 = nn.Dropout(check_probability("dropout", dropout))
        self.dropout2 = nn.Dropout(dropout)

    @classmethod
    def from_spec(cls, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> EncoderLayer:
        """The layer that ``spec`` describes."""
        return cls(**asdict(spec), rotary=rotary)

    def _self_attention(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run the two sub-layers; see the class docstring for shapes."""
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), mask)
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self._self_attention(x, mask))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (交叉注意力) to the encoder output, then feed-forward.

    Cross-attention takes its **query from the decoder** (``x``) and its **key and value from the
    encoder output** (``memory``), so source and target may have different lengths.

    Arguments as :class:`~.EncoderLayer`; ``rotary`` applies to the self-attention only.

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``;
        tgt_mask: bool broadcasting to ``(B, H, T, T)``; memory_mask: to ``(B, H, T, S)``;
        output: ``(B, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        attention_dropout: float = 0.0,
        *,
        norm: str = "layernorm",
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, attention_dropout, num_kv_heads=num_kv_heads, rotary=rotary
        )
        self.cross_attn = MultiHeadAttention(d_model, num_heads, attention_dropout, num_kv_heads=num_kv_heads)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = make_norm(norm, d_model)
        self.norm2 = make_norm(norm, d_model)
        self.norm3 = make_norm(norm, d_model)
        self.dropout1 = nn.Dropout(check_probability("dropout", dropout))
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    @classmethod
    def from_spec(cls, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> DecoderLayer:
        """The layer that ``spec`` describes."""
        return cls(**asdict(spec), rotary=rotary)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """Run the three sub-layers; ``cache`` = (self-attention cache, cross-attention cache).

        ``is_causal=True`` (with ``tgt_mask=None``) makes the self-attention causal without a mask tensor.
        """
        self_cache, cross_cache = cache if cache is not None else (None, None)

        def self_block(h: Tensor) -> Tensor:
            return self.dropout1(self.self_attn(h, h, h, tgt_mask, cache=self_cache, is_causal=is_causal)[0])

        def cross_block(h: Tensor) -> Tensor:
            return self.dropout2(self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache)[0])

        if self.norm_first:
            x = x + self_block(self.norm1(x))
            x = x + cross_block(self.norm2(x))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self_block(x))
        x = self.norm2(x + cross_block(x))
        return self.norm3(x + self.dropout3(self.ff(x)))


class Encoder(nn.Module):
    """A stack of :class:`~.EncoderLayer`, with a final norm in Pre-LN mode (arguments as the layer's).

    Shape:
        x: ``(B, S, d_model)``; mask: broadcasting to ``(B, H, S, S)``; output: ``(B, S, d_model)``.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        attention_dropout: float = 0.0,
        *,
        norm: str = "layernorm",
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        check_positive_int("num_layers", num_layers)
        widths = (d_model, num_heads, d_ff)
        spec = LayerSpec(*widths, dropout, norm_first, activation, attention_dropout, norm, num_kv_heads)
        self.layers = nn.ModuleList(EncoderLayer.from_spec(spec, rotary) for _ in range(num_layers))
        self.norm = make_norm(norm, d_model) if norm_first else None

    @classmethod
    def from_spec(cls, num_layers: int, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> Encoder:
        """A stack of ``num_layers`` layers that ``spec`` describes."""
        return cls(num_layers, **asdict(spec), rotary=rotary)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run every layer in turn."""
        for layer in self.layers:
            x = layer(x, mask)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """A stack of :class:`~.DecoderLayer`, with a final norm in Pre-LN mode (arguments as the layer's).

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        attention_dropout: float = 0.0,
        *,
        norm: str = "layernorm",
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        check_positive_int("num_layers", num_layers)
        widths = (d_model, num_heads, d_ff)
        spec = LayerSpec(*widths, dropout, norm_first, activation, attention_dropout, norm, num_kv_heads)
        self.layers = nn.ModuleList(DecoderLayer.from_spec(spec, rotary) for _ in range(num_layers))
        self.norm = make_norm(norm, d_model) if norm_first else None

    @classmethod
    def from_spec(cls, num_layers: int, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> Decoder:
        """A stack of ``num_layers`` layers that ``spec`` describes."""
        return cls(num_layers, **asdict(spec), rotary=rotary)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """Run every layer in turn; ``cache`` holds one (self, cross) pair per layer."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, None if cache is None else cache[i], is_causal)
        return x if self.norm is None else self.norm(x)
