"""PyTorch's own Transformer as a reference: the same model built on ``nn.Transformer``, and the one
mapping of parameter names between the two.

The library's layers compute what PyTorch's compute, with other bookkeeping:
``nn.MultiheadAttention`` stacks the query, key and value projections into one ``in_proj_weight``
(``(3d, d)``, Q rows first) where :class:`~.MultiHeadAttention` keeps ``q_proj``, ``k_proj`` and
``v_proj``; PyTorch's layers call the feed-forward layers ``linear1`` and ``linear2`` (ours
``ff.linear1``, ``ff.linear2``) and the decoder's cross-attention ``multihead_attn`` (ours
``cross_attn``). :func:`~.torch_state_dict` renames and stacks, so
``theirs.load_state_dict(torch_state_dict(ours))`` copies the weights of an attention module, a
layer or a stack; for a whole :class:`~.Transformer` the other side is :class:`~.TorchTransformer`.
The tests, the train-step benchmark and chapter 8 all use this mapping.
"""

from __future__ import annotations

import math
import re

import torch
from torch import Tensor, nn

from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.nn.masks import causal_mask
from transformer_lib.nn.positional import sinusoidal_table

_QKV = re.compile(r"(.*)([qkv])_proj\.(weight|bias)")


def torch_state_dict(ours: nn.Module) -> dict[str, Tensor]:
    """``ours.state_dict()`` under PyTorch's names, with Q/K/V stacked into
    ``in_proj_weight``/``in_proj_bias``.

    ``ours`` is a :class:`~.MultiHeadAttention`, an encoder or decoder layer or stack, or a whole
    :class:`~.Transformer` (whose counterpart is :class:`~.TorchTransformer`). Grouped-query
    attention (fewer key/value heads) has no PyTorch counterpart.
    """
    out: dict[str, Tensor] = {}
    stacked: dict[tuple[str, str], dict[str, Tensor]] = {}
    for key, value in ours.state_dict().items():
        key = key.replace("embed.embedding.", "embed.").replace("ff.linear", "linear")
        key = key.replace("cross_attn.", "multihead_attn.")
        # TorchTransformer keeps the stacks inside its nn.Transformer
        if isinstance(ours, Transformer):
            key = re.sub(r"^(encoder|decoder)\.", r"transformer.\1.", key)
        match = _QKV.fullmatch(key)
        if match:
            stacked.setdefault((match[1], match[3]), {})[match[2]] = value
        else:
            out[key] = value
    for (prefix, kind), parts in stacked.items():
        # 3 x (d, d) -> (3d, d)
        out[f"{prefix}in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


class TorchTransformer(nn.Module):
    """``nn.Transformer`` with the embeddings, positional encoding and output projection of the
    library's model.

    Built from the same :class:`~.TransformerConfig` (the paper's variants
    only: sinusoidal positions, LayerNorm, ReLU or GELU, as many key/value heads as heads), it
    holds the same parameters under PyTorch's names: ``load_state_dict(torch_state_dict(model))``
    makes it compute what ``model`` computes. ``nn.Transformer`` applies its ``dropout`` to the
    attention weights too; ``attention_dropout`` sets that rate separately (the paper and the
    library's default: 0). Its ``forward(src, tgt)`` takes token ids and returns logits, and it
    builds its masks from ``config.pad_id`` (PyTorch's masks mean *blocked*, the library's *may
    attend*).

    Shape:
        src: ``(B, S)`` ids; tgt: ``(B, T)`` ids; output: ``(B, T, tgt_vocab_size)`` logits.
    """

    def __init__(self, config: TransformerConfig, attention_dropout: float = 0.0) -> None:
        super().__init__()
        c = self.config = config
        if (
            c.positional != "sinusoidal"
            or c.norm != "layernorm"
            or c.activation == "swiglu"
            or c.num_kv_heads
        ):
            raise ValueError(
                "TorchTransformer builds the paper's model only (sinusoidal, layernorm, "
                "relu/gelu, MHA)"
            )
        self.scale = math.sqrt(c.d_model)
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        if c.share_embeddings:
            self.src_embed.weight = self.tgt_embed.weight
        self.register_buffer("pe", sinusoidal_table(c.max_len, c.d_model), persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        self.transformer = _torch_stacks(c)
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = attention_dropout
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        """Embedding times ``sqrt(d_model)`` plus the positional table, then dropout: ``(B, T,
        d_model)``.
        """
        return self.dropout(embedding(tokens) * self.scale + self.pe[: tokens.size(1)])

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced pass: logits for every target position."""
        # (B, S), (B, T); True = padding
        src_pad, tgt_pad = src == self.config.pad_id, tgt == self.config.pad_id
        blocked = ~causal_mask(tgt.size(1), tgt.device)  # (T, T); True = may not attend
        out = self.transformer(
            self.embed(self.src_embed, src),
            self.embed(self.tgt_embed, tgt),
            tgt_mask=blocked,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return self.generator(out)  # (B, T, vocab)


def _torch_stacks(c: TransformerConfig) -> nn.Transformer:
    """PyTorch's encoder and decoder stacks of the config's shape (a final norm only with Pre-LN, as
    ours).
    """

    # nn.Transformer's own default adds one even in Post-LN
    def final_norm() -> nn.LayerNorm | None:
        return nn.LayerNorm(c.d_model) if c.norm_first else None

    layer_args = dict(
        d_model=c.d_model,
        nhead=c.num_heads,
        dim_feedforward=c.d_ff,
        dropout=c.dropout,
        activation=c.activation,
        batch_first=True,
        norm_first=c.norm_first,
    )
    encoder_layer = nn.TransformerEncoderLayer(**layer_args)
    encoder = nn.TransformerEncoder(
        encoder_layer, c.num_encoder_layers, final_norm(), enable_nested_tensor=False
    )
    decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(**layer_args), c.num_decoder_layers, final_norm()
    )
    return nn.Transformer(
        d_model=c.d_model,
        nhead=c.num_heads,
        dropout=c.dropout,
        batch_first=True,
        custom_encoder=encoder,
        custom_decoder=decoder,
    )
