"""The data of the copy task (复制任务): random symbol sequences, their batches and the held-out set.

The source is a random sequence of 10 symbols drawn from 10 (with repetition); the target is the
same sequence. To copy every held-out sequence exactly a model must find, for output position
``t``, the source position ``t`` (cross-attention driven by the positional encoding) and stop after
the last one. It trains in seconds on a CPU: the book's first end-to-end check.

Token ids: 0 = pad, 1 = bos, 2 = eos, 3 .. 12 = the ten symbols. Decoder rows are ``bos s_1 .. s_10``
in and ``s_1 .. s_10 eos`` out. The held-out set is 1,000 sequences drawn with a fixed seed; training
batches come from other seeds (with ``10**10`` possible sequences a collision is unlikely).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from ..validation import check_positive_int
from .batching import Batch

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_SYMBOL = 3
NUM_SYMBOLS = 10
SEQ_LEN = 10
VOCAB_SIZE = FIRST_SYMBOL + NUM_SYMBOLS
HELD_OUT_SEED = 20170612
"""The seed of the held-out set, the same set for every run (the date the Transformer paper appeared)."""


def random_sequences(n: int, generator: torch.Generator, seq_len: int = SEQ_LEN) -> Tensor:
    """``n`` random sequences of symbol ids in ``[FIRST_SYMBOL, VOCAB_SIZE)``.

    Shape:
        output: ``(n, seq_len)`` long.
    """
    check_positive_int("n", n)
    check_positive_int("seq_len", seq_len)
    return torch.randint(FIRST_SYMBOL, VOCAB_SIZE, (n, seq_len), generator=generator)


def copy_batch(sequences: Tensor) -> Batch:
    """The training batch that teaches the model to copy ``sequences``: ``bos s`` in, ``s eos`` out.

    Shape:
        sequences: ``(B, L)`` symbol ids; output: ``src (B, L)``, ``tgt_in``/``tgt_out`` ``(B, L + 1)``.
    """
    if not isinstance(sequences, Tensor) or sequences.dim() != 2 or sequences.dtype != torch.long:
        raise ValueError(f"sequences must be a (B, L) long tensor, got {getattr(sequences, 'shape', sequences)}")
    tgt_in = F.pad(sequences, (1, 0), value=BOS_ID)  # (B, L + 1): bos in front
    tgt_out = F.pad(sequences, (0, 1), value=EOS_ID)  # (B, L + 1): eos at the end
    return Batch(src=sequences, tgt_in=tgt_in, tgt_out=tgt_out, pad_id=PAD_ID)


def copy_batches(batch_size: int, seed: int, num_batches: int) -> Iterator[Batch]:
    """``num_batches`` random copy batches, the same ones for the same ``seed``."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("num_batches", num_batches)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(num_batches):
        yield copy_batch(random_sequences(batch_size, generator))


def held_out_sequences(n: int = 1000, seed: int = HELD_OUT_SEED) -> Tensor:
    """The fixed held-out set: ``n`` sequences drawn with ``seed``.

    Shape:
        output: ``(n, SEQ_LEN)``.
    """
    return random_sequences(n, torch.Generator().manual_seed(seed))


def copy_targets(sequences: Tensor) -> Tensor:
    """The perfect decoder output for ``sequences``: ``bos s_1 .. s_L eos``.

    Shape:
        sequences: ``(B, L)``; output: ``(B, L + 2)``.
    """
    return F.pad(F.pad(sequences, (1, 0), value=BOS_ID), (0, 1), value=EOS_ID)  # (B, L + 2)
