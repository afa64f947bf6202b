"""Token embedding (词嵌入): a lookup table scaled by ``sqrt(d_model)``."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..validation import check_positive_int


class TokenEmbedding(nn.Module):
    """Map token ids to vectors and scale them by ``sqrt(d_model)`` (Vaswani et al., section 3.4).

    The lookup is mathematically ``one_hot(tokens) @ weight``; ``nn.Embedding`` does it without
    building the one-hot matrix. The scale keeps the embedding (whose entries are initialised with
    standard deviation ``d_model ** -0.5`` here) on the same scale as the positional encoding,
    whose entries lie in ``[-1, 1]``.

    Args:
        padding_idx: id whose row starts at zero and gets no gradient from the lookup (optional).
            The row is not frozen: when the table is also the output layer's weight (the
            :class:`~.Transformer`'s ``tie_embeddings``), every logit of that id sends it a
            gradient, so it moves away from zero in training.

    Shape:
        tokens: ``(B, T)`` integer ids in ``[0, vocab_size)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None) -> None:
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("d_model", d_model)
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx={padding_idx} must be in [0, vocab_size={vocab_size})")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, tokens: Tensor) -> Tensor:
        """Return ``embedding(tokens) * sqrt(d_model)``.

        Nothing is checked here (the model checks its ids where they enter): floats are
        ``nn.Embedding``'s ``RuntimeError``, an id out of range its ``IndexError``.
        """
        return self.embedding(tokens) * self.scale  # (B, T) -> (B, T, d_model)
