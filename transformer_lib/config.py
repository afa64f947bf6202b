"""The model's configuration: one frozen dataclass, validated when it is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .nn.layers import LayerSpec
from .nn.positional import POSITIONALS, Positional
from .validation import check_bool, check_choice, check_positive_int, check_token_id


@dataclass(frozen=True)
class TransformerConfig(LayerSpec):
    """Every hyper-parameter of :class:`~.Transformer`: the fields that every layer shares,
    inherited from :class:`~.LayerSpec` (widths, dropout, norm placement, activation, norm,
    key/value heads), and the model's own below.

    Defaults are the widths of the paper's base model (Vaswani et al., 2017, table 3, which lists
    65M parameters) and, for the variants, the paper's choices, so old checkpoints, whose stored
    config lacks the variant fields, load unchanged. With the paper's 37,000-token vocabulary shared
    by both embeddings and the output layer (``share_embeddings=True``) the model has 63,082,496
    parameters; the paper gives its vocabulary only as "about 37000" tokens. Each field is checked
    when built. The two vocabulary sizes may be given by position, every other field by name.

    Attributes:
        max_len: longest sequence the positional encoding accepts.
        tie_embeddings: share the target embedding with the output projection.
        pad_id: the padding token id, used to build masks when none are given.
        share_embeddings: also share the source embedding (needs a joint vocabulary).
        positional: ``"sinusoidal"`` (the paper's fixed table), ``"learned"`` (a trained table) or
            ``"rope"`` (queries and keys of every self-attention rotated; needs an even head width).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    max_len: int = 5000
    tie_embeddings: bool = True
    pad_id: int = 0
    share_embeddings: bool = False
    positional: Positional = "sinusoidal"

    def __post_init__(self) -> None:
        sizes = ("src_vocab_size", "tgt_vocab_size", "num_encoder_layers", "num_decoder_layers")
        for name in (*sizes, "max_len"):
            check_positive_int(name, getattr(self, name))
        for name in ("tie_embeddings", "share_embeddings"):
            check_bool(name, getattr(self, name))
        check_choice("positional", self.positional, list(POSITIONALS))
        check_token_id("pad_id", self.pad_id, min(self.src_vocab_size, self.tgt_vocab_size))
        super().__post_init__()  # the fields that every layer shares
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs src_vocab_size == tgt_vocab_size, got "
                f"{self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        if self.positional == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(
                f"d_model={self.d_model} must be even for the sinusoidal positional encoding"
            )
        head_width = self.d_model // self.num_heads
        if self.positional == "rope" and head_width % 2 != 0:
            raise ValueError(
                "positional='rope' rotates pairs of features, so the head width d_model / "
                f"num_heads = {self.d_model}/{self.num_heads} = {head_width} must be even"
            )

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads of every attention (``num_heads`` when ``num_kv_heads`` is
        ``None``).
        """
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TransformerConfig:
        """Build from a dict, refusing unknown keys; missing ones (an old checkpoint's) take their
        defaults.
        """
        if not isinstance(values, dict):
            raise TypeError(
                f"values must be a dict of TransformerConfig fields, got {type(values).__name__}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown TransformerConfig fields {unknown}; known fields are {sorted(known)}"
            )
        return cls(**values)
