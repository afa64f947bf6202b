"""The model's configuration: one frozen dataclass, validated when it is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from .nn.feedforward import Activation
from .nn.layers import LayerSpec
from .nn.norms import NormName
from .nn.positional import Positional
from .validation import check_divisible, check_positive_int, check_probability

POSITIONALS: tuple[str, ...] = get_args(Positional)
"""The positional variants: the paper's fixed table, a learned table, rotary embeddings."""


def _check_field(name: str, value: object, kind: object) -> None:
    """Check one field by its annotated type: one of a ``Literal``'s choices, a bool, a probability,
    a positive int.
    """
    if get_origin(kind) is Literal:
        if not isinstance(value, str) or value not in get_args(kind):
            raise ValueError(f"{name}={value!r} is not one of {list(get_args(kind))}")
    elif kind is bool:
        if not isinstance(value, bool):
            raise TypeError(
                f"{name} must be a bool (True or False), got {type(value).__name__} ({value!r})"
            )
    elif kind is float:  # the float fields are the dropout probabilities
        check_probability(name, value)
    # an id, so 0 is allowed; its upper bound is checked against the vocabularies
    elif name == "pad_id":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"pad_id must be an int token id, got {type(value).__name__} ({value!r})"
            )
    # the sizes, and num_kv_heads (int | None) when it is set
    elif kind is int or value is not None:
        check_positive_int(name, value)


@dataclass(frozen=True)
class TransformerConfig:
    """Every hyper-parameter of :class:`~.Transformer`.

    Defaults are the paper's base model (Vaswani et al., 2017, table 3: about 65M parameters with a
    37,000-token shared vocabulary) and, for the variants, the paper's choices, so old checkpoints,
    whose stored config lacks the variant fields, load unchanged. Each field is checked when built.

    Attributes:
        d_ff: the feed-forward hidden width, for every activation (see :class:`~.FeedForward`).
        dropout: residual and embedding dropout (the paper: 0.1).
        max_len: longest sequence the positional encoding accepts.
        norm_first: ``False`` Post-LN (the paper), ``True`` Pre-LN.
        tie_embeddings: share the target embedding with the output projection.
        pad_id: the padding token id, used to build masks when none are given.
        share_embeddings: also share the source embedding (needs a joint vocabulary).
        attention_dropout: dropout on attention weights (not in the paper).
        positional: ``"sinusoidal"`` (the paper's fixed table), ``"learned"`` (a trained table) or
            ``"rope"`` (queries and keys of every self-attention rotated; needs an even head width).
        num_kv_heads: key/value heads of every attention (grouped-query attention); ``None``:
            ``num_heads``.
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
    activation: Activation = "relu"
    attention_dropout: float = 0.0
    positional: Positional = "sinusoidal"
    norm: NormName = "layernorm"
    num_kv_heads: int | None = None

    def __post_init__(self) -> None:
        hints = get_type_hints(TransformerConfig)
        for f in fields(self):  # each field by its type, then the fields together
            _check_field(f.name, getattr(self, f.name), hints[f.name])
        check_divisible(self.d_model, self.num_heads)
        if self.positional == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(
                f"d_model={self.d_model} must be even for the sinusoidal positional encoding"
            )
        if self.positional == "rope" and (self.d_model // self.num_heads) % 2 != 0:
            raise ValueError(
                "positional='rope' rotates pairs of features, so the head width d_model / "
                "num_heads = "
                f"{self.d_model}/{self.num_heads} = {self.d_model // self.num_heads} must be even"
            )
        for name in ("src_vocab_size", "tgt_vocab_size"):
            if not 0 <= self.pad_id < getattr(self, name):
                raise ValueError(
                    f"pad_id={self.pad_id} must be a valid id of {name}={getattr(self, name)}"
                )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs src_vocab_size == tgt_vocab_size, got "
                f"{self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        if self.num_kv_heads is not None and self.num_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads} (each "
                "key/value head serves the same number of query heads); try one of "
                f"{[h for h in range(1, self.num_heads + 1) if self.num_heads % h == 0]}"
            )

    def layer_spec(self) -> LayerSpec:
        """What every encoder and decoder layer of this model shares (:class:`~.LayerSpec`)."""
        return LayerSpec(**{f.name: getattr(self, f.name) for f in fields(LayerSpec)})

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
