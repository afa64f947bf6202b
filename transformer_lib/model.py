"""The encoder-decoder Transformer (Vaswani et al., 2017)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .config import TransformerConfig
from .nn.embedding import TokenEmbedding
from .nn.layers import Decoder, Encoder
from .nn.masks import causal_mask, padding_mask, target_mask
from .nn.multihead import KVCache
from .nn.positional import RotaryEmbedding, make_positional
from .validation import check_mask, check_token_ids


class Transformer(nn.Module):
    """Embeddings + positional encoding, an encoder stack, a decoder stack and an output projection.

    ``forward`` returns **logits** (unnormalised scores); apply ``cross_entropy`` to them, or
    ``softmax`` only when you need probabilities.

    Masks left as ``None`` are built from ``config.pad_id``: padding keys are hidden everywhere and
    the decoder's self-attention is causal, so ``model(src, tgt)`` is always correct.

    The variants of :class:`~.TransformerConfig` are wired here:
    ``positional`` picks the input module ``self.positional`` (one module for source and target:
    the sinusoidal table, one learned table, or dropout only with ``"rope"``, where a single
    :class:`~.RotaryEmbedding` is shared by every self-attention);
    ``norm``, ``activation`` and ``num_kv_heads`` go to every layer.

    Shape:
        src: ``(B, S)`` ids; tgt: ``(B, T)`` ids.
        src_mask: bool broadcasting to ``(B, H, S, S)`` / ``(B, H, T, S)``, usually ``(B, 1, 1, S)``.
        tgt_mask: bool broadcasting to ``(B, H, T, T)``, usually ``(B, 1, T, T)``.
        output: ``(B, T, tgt_vocab_size)`` logits.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        if c.share_embeddings:
            self.src_embed.embedding.weight = self.tgt_embed.embedding.weight
        self.positional = make_positional(c.positional, c.d_model, c.dropout, c.max_len)
        rotary = RotaryEmbedding(c.d_model // c.num_heads, c.max_len) if c.positional == "rope" else None
        spec = c.layer_spec()  # what every layer of both stacks shares
        self.encoder = Encoder.from_spec(c.num_encoder_layers, spec, rotary)
        self.decoder = Decoder.from_spec(c.num_decoder_layers, spec, rotary)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.embedding.weight
        else:
            nn.init.xavier_uniform_(self.generator.weight)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Encode source ids into memory ``(B, S, d_model)``."""
        check_token_ids("src", src, self.config.src_vocab_size)
        if src.dim() != 2:
            raise ValueError(f"src must be a (B, S) tensor of token ids, got shape {tuple(src.shape)}")
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        batch, length = src.shape
        check_mask("src_mask", src_mask, (batch, self.config.num_heads, length, length))
        return self.encoder(self.positional(self.src_embed(src)), src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> Tensor:
        """Decode target ids against ``memory``; return logits ``(B, T, tgt_vocab_size)``.

        ``src_mask`` hides padded memory positions; ``None`` lets every position of ``memory`` be
        attended (``decode`` cannot see the source ids; ``forward`` passes the right mask).
        With a ``cache`` (see :func:`~.greedy_decode`), ``tgt`` holds only
        the new positions and ``tgt_mask`` should be ``None``: each new position then attends to
        every cached position and to the new ones up to itself. Without a cache or a mask, a target
        with no padding takes the fused kernel's causal path (``is_causal``, no mask tensor).
        """
        check_token_ids("tgt", tgt, self.config.tgt_vocab_size)
        if tgt.dim() != 2:
            raise ValueError(f"tgt must be a (B, T) tensor of token ids, got shape {tuple(tgt.shape)}")
        offset, is_causal = 0, False
        if cache is not None:
            offset = cache[0][0].length if cache else 0
            if tgt_mask is None and tgt.size(1) > 1:  # several new positions: causal among themselves
                tgt_mask = causal_mask(offset + tgt.size(1), tgt.device)[offset:]  # (T, offset + T)
        elif tgt_mask is None and self._unpadded(tgt):
            is_causal = True  # the causal mask alone: the fused kernel needs no mask tensor
        elif tgt_mask is None:
            tgt_mask = target_mask(tgt, self.config.pad_id)  # (B, 1, T, T)
        batch, length = tgt.shape
        check_mask("tgt_mask", tgt_mask, (batch, self.config.num_heads, length, offset + length))
        check_mask("src_mask", src_mask, (batch, self.config.num_heads, length, memory.size(1)))
        x = self.positional(self.tgt_embed(tgt), offset)  # (B, T, d_model)
        return self.generator(self.decoder(x, memory, tgt_mask, src_mask, cache, is_causal))  # (B, T, vocab)

    def _unpadded(self, tokens: Tensor) -> bool:
        """Whether no position of ``tokens`` is padding (always ``False`` while ``torch.compile`` traces:
        the answer depends on the values, which would split the graph).
        """
        if torch.compiler.is_compiling() or tokens.is_meta:
            return False
        return not bool((tokens == self.config.pad_id).any())

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        """Teacher-forced pass: logits for every target position."""
        memory = self.encode(src, src_mask)  # validates src first
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        return self.decode(tgt, memory, src_mask, tgt_mask)

    def new_cache(self) -> list[tuple[KVCache, KVCache]]:
        """Empty key/value caches for incremental decoding, one (self, cross) pair per decoder layer."""
        return [(KVCache(), KVCache(static=True)) for _ in self.decoder.layers]

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
