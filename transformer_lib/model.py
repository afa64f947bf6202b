"""The encoder-decoder Transformer (Vaswani et al., 2017)."""

from __future__ import annotations

from torch import Tensor, nn

from .config import TransformerConfig
from .nn.cache import KVCache
from .nn.embedding import TokenEmbedding
from .nn.layers import Decoder, Encoder
from .nn.masks import causal_mask, padding_mask, target_mask
from .nn.positional import POSITIONALS, RotaryEmbedding
from .validation import check_mask, check_token_batch


class Transformer(nn.Module):
    """Embeddings + positional encoding, an encoder stack, a decoder stack and an output projection.

    ``forward`` returns **logits** (unnormalised scores); apply ``cross_entropy`` to them, or
    ``softmax`` only when you need probabilities.

    Masks left as ``None`` are built from ``config.pad_id``: padding keys are hidden everywhere and
    the decoder's self-attention is causal, so ``model(src, tgt)`` is always correct. The inputs
    are checked here, where they enter, and nowhere below: the ids' type and shape, each mask's
    type and shape, and (by the positional module) the length. Never their values: on a GPU every
    value read back to the host waits for all queued work (the ids' range is checked where a user
    gives them, :func:`~.check_token_ids`).

    Shape:
        src: ``(B, S)`` ids; tgt: ``(B, T)`` ids; output: ``(B, T, tgt_vocab_size)`` logits.
        src_mask: bool broadcasting to ``(B, H, S, S)`` / ``(B, H, T, S)``, usually ``(B, 1, 1,
        S)``.
        tgt_mask: bool broadcasting to ``(B, H, T, T)``, usually ``(B, 1, T, T)``.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        if c.share_embeddings:
            self.src_embed.embedding.weight = self.tgt_embed.embedding.weight
        self.positional = POSITIONALS[c.positional](c.d_model, c.dropout, c.max_len)
        rotary = (
            RotaryEmbedding(c.d_model // c.num_heads, c.max_len) if c.positional == "rope" else None
        )
        # The config is the LayerSpec that every layer of both stacks shares.
        self.encoder = Encoder(c, c.num_encoder_layers, rotary)
        self.decoder = Decoder(c, c.num_decoder_layers, rotary)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.embedding.weight
        else:
            nn.init.xavier_uniform_(self.generator.weight)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Encode source ids into memory ``(B, S, d_model)``."""
        return self._encode(src, src_mask)[0]

    def _encode(self, src: Tensor, src_mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """The memory, and the source mask (built from ``src`` if ``None``) that cross-attention
        uses too.
        """
        check_token_batch("src", src)
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        batch, length = src.shape
        check_mask("src_mask", src_mask, (batch, self.config.num_heads, length, length), ndim=4)
        return self.encoder(self.positional(self.src_embed(src)), src_mask), src_mask

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> Tensor:
        """Decode target ids against ``memory``; return logits ``(B, T, tgt_vocab_size)``.

        ``src_mask`` hides padded memory positions (``None``: none is hidden; ``decode`` cannot see
        the source ids). With a ``cache`` (see :func:`~.greedy_decode`), ``tgt`` holds only the new
        positions and ``tgt_mask`` should be ``None``: each then attends to every cached position
        and to the new ones up to itself.
        """
        check_token_batch("tgt", tgt)
        batch, length = tgt.shape
        offset = cache[0][0].length if cache else 0  # positions already decoded (and cached)
        if tgt_mask is None and cache is None:
            tgt_mask = target_mask(tgt, self.config.pad_id)  # (B, 1, T, T): causal, padding hidden
        # new positions: causal among themselves, all cached ones seen
        elif tgt_mask is None and length > 1:
            tgt_mask = causal_mask(offset + length, tgt.device)[offset:]  # (T, offset + T)
        # (one new position after a cache needs no mask: every key it meets is an earlier position)
        else:  # given by the caller: it must broadcast to (B, H, T, offset + T)
            check_mask(
                "tgt_mask", tgt_mask, (batch, self.config.num_heads, length, offset + length)
            )
        src_shape = (batch, self.config.num_heads, length, memory.size(1))
        check_mask("src_mask", src_mask, src_shape, ndim=4)
        x = self.positional(self.tgt_embed(tgt), offset)  # (B, T, d_model)
        return self.generator(self.decoder(x, memory, tgt_mask, src_mask, cache))  # (B, T, vocab)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """Teacher-forced pass: logits for every target position."""
        memory, src_mask = self._encode(src, src_mask)  # the mask is built once, for both
        return self.decode(tgt, memory, src_mask, tgt_mask)

    def new_cache(self) -> list[tuple[KVCache, KVCache]]:
        """Empty key/value caches for incremental decoding, one (self, cross) pair per decoder
        layer.
        """
        return [(KVCache(), KVCache(static=True)) for _ in self.decoder.layers]

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
