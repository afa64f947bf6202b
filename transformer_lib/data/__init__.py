"""Data (数据): batches for teacher forcing, the Multi30k data set, the BPE tokenizer, the copy task's sequences.

Layer: above the building blocks (a batch carries its masks, :mod:`~transformer_lib.nn.masks`);
below the model, training and the tasks. Nothing here builds or trains a model.
"""

from .batching import Batch, PadCollate, TokenBudgetSampler, batch_loader, make_batch, token_batches
from .multi30k import ChecksumError, DownloadError, Multi30kError, load_multi30k, load_split
from .tokenizer import BPETokenizer, train_bpe_tokenizer, train_translation_tokenizer

__all__ = ["Batch", "PadCollate", "TokenBudgetSampler", "batch_loader", "make_batch", "token_batches"]
__all__ += ["ChecksumError", "DownloadError", "Multi30kError", "load_multi30k", "load_split"]
__all__ += ["BPETokenizer", "train_bpe_tokenizer", "train_translation_tokenizer"]
