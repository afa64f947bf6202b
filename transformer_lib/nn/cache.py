"""The key/value cache (键值缓存) of incremental decoding (chapter 12).

While a decoder writes word ``t`` it needs the keys and values of words ``0 .. t - 1`` again. The
cache keeps them, already projected, so each step projects only its new position; cross-attention
reads the encoder's keys and values, which a step never changes, so they are projected once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


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
