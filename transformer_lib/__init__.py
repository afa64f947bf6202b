"""transformer_lib: the Transformer built one tested piece at a time.

Every name of the public interface is importable from here; the book's API reference page
(``api.md``, generated from the docstrings) documents each one in the module where it lives.
"""

from .checkpoint import load_checkpoint, read_checkpoint_header, save_checkpoint
from .config import TransformerConfig
from .data.batching import Batch, make_batch, token_batches
from .data.multi30k import ChecksumError, DownloadError, Multi30kError, load_multi30k, load_split
from .data.tokenizer import BPETokenizer, train_bpe_tokenizer, train_translation_tokenizer
from .decoding import beam_search, greedy_decode, length_penalty_factor, sequence_log_prob
from .model import Transformer
from .nn.attention import scaled_dot_product_attention
from .nn.embedding import TokenEmbedding
from .nn.feedforward import FeedForward
from .nn.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerSpec
from .nn.masks import causal_mask, padding_mask, target_mask
from .nn.multihead import KVCache, MultiHeadAttention
from .nn.norms import LayerNorm, RMSNorm
from .nn.positional import PositionalEncoding, sinusoidal_table
from .tasks.bleu import BleuScore, corpus_bleu
from .tasks.copy import CopyTaskSettings, copy_exact_match, run_copy_task
from .tasks.translation import (
    TRANSLATION_PROFILES,
    TranslationEvaluation,
    TranslationProfile,
    TranslationRun,
    evaluate_translation,
    run_translation,
    save_translation,
    train_translation,
    translate,
    translation_profile,
    translation_summary,
)
from .training import TrainConfig, TrainResult, evaluate_loss, sequence_loss, train, train_state_path
from .training.schedule import noam_rate, noam_schedule

__version__ = "0.1.0"

__all__ = [
    "BleuScore",
    "corpus_bleu",
    "ChecksumError",
    "DownloadError",
    "Multi30kError",
    "load_multi30k",
    "load_split",
    "BPETokenizer",
    "train_bpe_tokenizer",
    "train_translation_tokenizer",
    "TRANSLATION_PROFILES",
    "TranslationProfile",
    "TranslationRun",
    "TranslationEvaluation",
    "train_translation",
    "evaluate_translation",
    "translation_summary",
    "save_translation",
    "run_translation",
    "translate",
    "translation_profile",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "KVCache",
    "LayerNorm",
    "LayerSpec",
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
    "Batch",
    "make_batch",
    "token_batches",
    "TrainConfig",
    "TrainResult",
    "train",
    "sequence_loss",
    "evaluate_loss",
    "train_state_path",
    "greedy_decode",
    "beam_search",
    "sequence_log_prob",
    "length_penalty_factor",
    "CopyTaskSettings",
    "run_copy_task",
    "copy_exact_match",
]
