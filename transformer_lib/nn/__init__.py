"""The building blocks (chapters 1 to 8): one concept per module, each a PyTorch ``nn.Module`` or function.

Layer: the lowest of the package, above only the argument checks (:mod:`~transformer_lib.validation`);
nothing here knows about the model, the data or training.

* :mod:`~.embedding`: token embedding; :mod:`~.positional`: sinusoidal, learned and rotary positions;
* :mod:`~.attention`: scaled dot-product attention written out; :mod:`~.masks`: padding and causal masks;
* :mod:`~.multihead`: multi-head (and grouped-query) attention with a key/value cache;
* :mod:`~.norms`: LayerNorm and RMSNorm; :mod:`~.feedforward`: the position-wise network;
* :mod:`~.layers`: encoder and decoder layers and stacks, Post-LN or Pre-LN.
"""

from .attention import scaled_dot_product_attention
from .embedding import TokenEmbedding
from .feedforward import FeedForward
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerSpec
from .masks import causal_mask, padding_mask, target_mask
from .multihead import KVCache, MultiHeadAttention
from .norms import LayerNorm, RMSNorm
from .positional import LearnedPositionalEmbedding, PositionalEncoding, RotaryEmbedding, sinusoidal_table

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "KVCache",
    "LayerNorm",
    "LayerSpec",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "RMSNorm",
    "RotaryEmbedding",
    "TokenEmbedding",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "sinusoidal_table",
    "target_mask",
]
