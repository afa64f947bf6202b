"""Data (数据): batches for teacher forcing and the BPE tokenizer.

Layer: above the building blocks (a batch carries its masks, :mod:`~transformer_lib.nn.masks`);
below the model and training. Nothing here builds or trains a model.
"""

from .batching import (
    Batch,
    PadCollate,
    TokenBudgetSampler,
    batch_loader,
    epoch_seed,
    make_batch,
    token_batches,
)
from .tokenizer import BPETokenizer, train_bpe_tokenizer

__all__ = [
    "Batch",
    "PadCollate",
    "TokenBudgetSampler",
    "batch_loader",
    "epoch_seed",
    "make_batch",
    "token_batches",
    "BPETokenizer",
    "train_bpe_tokenizer",
]
