"""Encoder and decoder layers and stacks (编码器 / 解码器), Post-LN or Pre-LN, built from one
:class:`~.LayerSpec`.

Both layers wrap each sub-layer in :func:`~.residual`. The ``rotary`` module (a
:class:`~.RotaryEmbedding`) is passed beside the spec because one module serves every layer; it
rotates queries and keys in the **self**-attentions only: decoder and encoder positions share no
useful origin, so cross-attention stays position-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

from ..validation import (
    check_bool,
    check_choice,
    check_divisible,
    check_kv_heads,
    check_positive_int,
    check_probability,
)
from .cache import KVCache
from .feedforward import ACTIVATIONS, Activation, FeedForward
from .multihead import MultiHeadAttention
from .norms import NORMS, NormName
from .positional import RotaryEmbedding


@dataclass(frozen=True, kw_only=True)
class LayerSpec:
    """What every layer of a stack shares, by name: ``LayerSpec(d_model=16, num_heads=2, d_ff=32)``.

    :class:`~.TransformerConfig` is a ``LayerSpec`` with the model's other fields, so these settings
    and their defaults are written here only, and a model hands its config to its layers as it is
    (as nanoGPT hands its config to ``Block(config)``). The fields are keyword-only so that a
    config can still begin with its two vocabulary sizes, ``TransformerConfig(1000, 1000)``.
    Defaults are the paper's base model (Vaswani et al., 2017, table 3).

    Attributes:
        d_ff: the feed-forward hidden width, for every activation (see :class:`~.FeedForward`).
        dropout: residual and embedding dropout (the paper: 0.1).
        norm_first: ``False`` Post-LN (the paper), ``True`` Pre-LN.
        attention_dropout: dropout on attention weights (not in the paper).
        num_kv_heads: key/value heads of every attention (grouped-query attention); ``None``:
            ``num_heads``.
    """

    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    norm_first: bool = False
    activation: Activation = "relu"
    attention_dropout: float = 0.0
    norm: NormName = "layernorm"
    num_kv_heads: int | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "d_ff"):
            check_positive_int(name, getattr(self, name))
        for name in ("dropout", "attention_dropout"):
            check_probability(name, getattr(self, name))
        check_bool("norm_first", self.norm_first)
        check_choice("activation", self.activation, list(ACTIVATIONS))
        check_choice("norm", self.norm, list(NORMS))
        check_divisible(self.d_model, self.num_heads)
        check_kv_heads(self.num_heads, self.num_kv_heads)

    def attention(self, rotary: RotaryEmbedding | None = None) -> MultiHeadAttention:
        """A fresh attention module of this spec (``rotary`` for self-attention only)."""
        return MultiHeadAttention(
            self.d_model,
            self.num_heads,
            self.attention_dropout,
            num_kv_heads=self.num_kv_heads,
            rotary=rotary,
        )


def residual(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.Module,
    dropout: nn.Module,
    norm_first: bool,
) -> Tensor:
    """One sub-layer with its residual connection (残差连接) and its norm.

    Post-LN (the paper) computes ``norm(x + dropout(sublayer(x)))``; Pre-LN ``x +
    dropout(sublayer(norm(x)))``, and its stack ends with a final norm, because nothing else
    normalises the last layer's output.

    Shape: ``x`` and the output ``(B, T, d_model)``; ``sublayer`` keeps the shape.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


def _check_spec(spec: object) -> LayerSpec:
    if not isinstance(spec, LayerSpec):
        raise TypeError(
            "spec must be a LayerSpec, e.g. LayerSpec(d_model=16, num_heads=2, d_ff=32), got "
            f"{spec!r}"
        )
    return spec


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped by :func:`~.residual`.

    Shape:
        x: ``(B, T, d_model)``; mask: bool broadcasting to ``(B, H, T, T)``; output: ``(B, T,
        d_model)``.
    """

    def __init__(self, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        self.norm_first = _check_spec(spec).norm_first
        self.self_attn = spec.attention(rotary)
        self.ff = FeedForward(spec.d_model, spec.d_ff, spec.dropout, spec.activation)
        self.norm1 = NORMS[spec.norm](spec.d_model)
        self.norm2 = NORMS[spec.norm](spec.d_model)
        self.dropout1 = nn.Dropout(spec.dropout)
        self.dropout2 = nn.Dropout(spec.dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run the two sub-layers."""
        x = residual(
            x,
            lambda h: self.self_attn(h, h, h, mask)[0],
            self.norm1,
            self.dropout1,
            self.norm_first,
        )
        return residual(x, self.ff, self.norm2, self.dropout2, self.norm_first)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (交叉注意力) to the encoder output, then feed-forward.

    Cross-attention takes its **query from the decoder** (``x``) and its **key and value from the
    encoder output** (``memory``), so source and target may have different lengths.

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``;
        tgt_mask: bool broadcasting to ``(B, H, T, T)``; memory_mask: to ``(B, H, T, S)``;
        output: ``(B, T, d_model)``.
    """

    def __init__(self, spec: LayerSpec, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        self.norm_first = _check_spec(spec).norm_first
        self.self_attn = spec.attention(rotary)
        self.cross_attn = spec.attention()
        self.ff = FeedForward(spec.d_model, spec.d_ff, spec.dropout, spec.activation)
        self.norm1 = NORMS[spec.norm](spec.d_model)
        self.norm2 = NORMS[spec.norm](spec.d_model)
        self.norm3 = NORMS[spec.norm](spec.d_model)
        self.dropout1 = nn.Dropout(spec.dropout)
        self.dropout2 = nn.Dropout(spec.dropout)
        self.dropout3 = nn.Dropout(spec.dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
    ) -> Tensor:
        """Run the three sub-layers; ``cache`` = (self-attention cache, cross-attention cache)."""
        self_cache, cross_cache = cache if cache is not None else (None, None)

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, h, h, tgt_mask, cache=self_cache)[0]

        def cross_attention(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache)[0]

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual(x, cross_attention, self.norm2, self.dropout2, self.norm_first)
        return residual(x, self.ff, self.norm3, self.dropout3, self.norm_first)


class Encoder(nn.Module):
    """A stack of ``num_layers`` :class:`~.EncoderLayer`, with a final norm in Pre-LN mode.

    Each layer is built anew from the spec, so each starts from its own random weights (a copy of
    one layer, as ``nn.TransformerEncoder`` makes, would start them all equal).

    Shape:
        x: ``(B, S, d_model)``; mask: broadcasting to ``(B, H, S, S)``; output: ``(B, S, d_model)``.
    """

    def __init__(
        self, spec: LayerSpec, num_layers: int, rotary: RotaryEmbedding | None = None
    ) -> None:
        super().__init__()
        check_positive_int("num_layers", num_layers)
        self.layers = nn.ModuleList(EncoderLayer(spec, rotary) for _ in range(num_layers))
        self.norm = NORMS[spec.norm](spec.d_model) if spec.norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run every layer in turn."""
        for layer in self.layers:
            x = layer(x, mask)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """A stack of ``num_layers`` :class:`~.DecoderLayer`, with a final norm in Pre-LN mode (see
    :class:`~.Encoder`).

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(
        self, spec: LayerSpec, num_layers: int, rotary: RotaryEmbedding | None = None
    ) -> None:
        super().__init__()
        check_positive_int("num_layers", num_layers)
        self.layers = nn.ModuleList(DecoderLayer(spec, rotary) for _ in range(num_layers))
        self.norm = NORMS[spec.norm](spec.d_model) if spec.norm_first else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> Tensor:
        """Run every layer in turn; ``cache`` holds one (self, cross) pair per layer."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, None if cache is None else cache[i])
        return x if self.norm is None else self.norm(x)
