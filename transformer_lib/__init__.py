"""transformer_lib: the Transformer built one tested piece at a time.

The library holds what the chapters teach: the building blocks, the model, its training and its
decoders. The tasks, the data set and the command line are the application, ``transformer_tasks``.
Every name of the public interface is importable from here; the book's API reference page
(``api.md``, generated from the docstrings) documents each one in the module where it lives.
"""

from .checkpoint import load_checkpoint, read_checkpoint_header, save_checkpoint
from .config import TransformerConfig
from .data.batching import Batch, make_batch, token_batches
from .data.tokenizer import BPETokenizer, train_bpe_tokenizer
from .decoding import (
    beam_search,
    greedy_decode,
    length_penalty_factor,
    sequence_log_prob,
)
from .model import Transformer
from .nn.attention import scaled_dot_product_attention
from .nn.cache import KVCache
from .nn.embedding import TokenEmbedding
from .nn.feedforward import FeedForward
from .nn.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerSpec
from .nn.masks import causal_mask, padding_mask, target_mask
from .nn.multihead import MultiHeadAttention
from .nn.norms import LayerNorm, RMSNorm
from .nn.positional import PositionalEncoding, sinusoidal_table
from .training import (
    TrainConfig,
    TrainResult,
    evaluate_loss,
    sequence_loss,
    train,
    train_state_path,
)
from .training.schedule import noam_rate, noam_schedule

__version__ = "0.1.0"

# The public names, by layer, in the order of api.md.
__all__ = [
    # the building blocks (nn/)
    "TokenEmbedding",
    "PositionalEncoding",
    "sinusoidal_table",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "target_mask",
    "KVCache",
    "MultiHeadAttention",
    "LayerNorm",
    "RMSNorm",
    "FeedForward",
    "LayerSpec",
    "Encoder",
    "EncoderLayer",
    "Decoder",
    "DecoderLayer",
    # the model
    "TransformerConfig",
    "Transformer",
    "load_checkpoint",
    "read_checkpoint_header",
    "save_checkpoint",
    # data
    "Batch",
    "make_batch",
    "token_batches",
    "BPETokenizer",
    "train_bpe_tokenizer",
    # training
    "TrainConfig",
    "TrainResult",
    "train",
    "sequence_loss",
    "evaluate_loss",
    "train_state_path",
    "noam_rate",
    "noam_schedule",
    # decoding
    "greedy_decode",
    "beam_search",
    "sequence_log_prob",
    "length_penalty_factor",
]
