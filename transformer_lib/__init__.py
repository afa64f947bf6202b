"""transformer_lib: the Transformer built one tested piece at a time.

Every name of the public contract (``shared/design/API.md``) is importable from here.
"""

from .attention import scaled_dot_product_attention
from .checkpoint import load_checkpoint, read_checkpoint_header, save_checkpoint
from .config import TransformerConfig
from .embedding import TokenEmbedding
from .feedforward import FeedForward
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from .masks import causal_mask, padding_mask, target_mask
from .model import Transformer
from .multihead import KVCache, MultiHeadAttention
from .norms import LayerNorm, RMSNorm
from .positional import PositionalEncoding, sinusoidal_table
from .schedule import noam_rate, noam_schedule

__version__ = "0.1.0"

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "KVCache",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "RMSNorm",
    "TokenEmbedding",
    "Transformer",
    "TransformerConfig",
    "causal_mask",
    "load_checkpoint",
    "noam_rate",
    "noam_schedule",
    "padding_mask",
    "read_checkpoint_header",
    "save_checkpoint",
    "scaled_dot_product_attention",
    "sinusoidal_table",
    "target_mask",
]
