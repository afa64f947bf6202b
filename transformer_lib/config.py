"""The model's configuration: one frozen dataclass, validated when it is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ._checks import check_divisible, check_positive_int, check_probability
from .feedforward import ACTIVATIONS


@dataclass(frozen=True)
class TransformerConfig:
    """Every hyper-parameter of :class:`~transformer_lib.model.Transformer`.

    Defaults are the paper's base model (Vaswani et al., 2017, table 3), which has about 65M
    parameters with a 37,000-token shared vocabulary.

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, num_heads, d_ff: widths; ``d_model`` must be even and divisible by ``num_heads``.
        num_encoder_layers, num_decoder_layers: depth of each stack.
        dropout: residual and embedding dropout (the paper: 0.1).
        max_len: longest sequence the positional encoding accepts.
        norm_first: ``False`` Post-LN (the paper), ``True`` Pre-LN.
        tie_embeddings: share the target embedding with the output projection.
        pad_id: the padding token id, used to build masks when none are given.
        share_embeddings: also share the source embedding (needs a joint vocabulary).
        activation: feed-forward activation, ``"relu"`` or ``"gelu"``.
        attention_dropout: dropout on attention weights (not in the paper; default 0).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 5000
    norm_first: bool = False
    tie_embeddings: bool = True
    pad_id: int = 0
    share_embeddings: bool = False
    activation: str = "relu"
    attention_dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "d_model",
            "num_heads",
            "num_encoder_layers",
            "num_decoder_layers",
            "d_ff",
            "max_len",
        ):
            check_positive_int(name, getattr(self, name))
        check_divisible(self.d_model, self.num_heads)
        if self.d_model % 2 != 0:
            raise ValueError(f"d_model={self.d_model} must be even for the sinusoidal positional encoding")
        check_probability("dropout", self.dropout)
        check_probability("attention_dropout", self.attention_dropout)
        for name in ("src_vocab_size", "tgt_vocab_size"):
            if not 0 <= self.pad_id < getattr(self, name):
                raise ValueError(f"pad_id={self.pad_id} must be a valid id of {name}={getattr(self, name)}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs src_vocab_size == tgt_vocab_size, got "
                f"{self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r} is not one of {sorted(ACTIVATIONS)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TransformerConfig:
        """Build from a dict, refusing unknown keys with a clear error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields {unknown}; known fields are {sorted(known)}")
        return cls(**values)
