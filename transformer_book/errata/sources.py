"""Deliberately WRONG implementations (勘误): the fifteen errors of the book's five source
documents.

See :mod:`transformer_book.errata`. Every name that computes something wrong says so in its
docstring, which starts with ``WRONG``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.autograd import Variable

from transformer_lib.model import Transformer
from transformer_lib.nn.embedding import TokenEmbedding
from transformer_lib.nn.feedforward import FeedForward
from transformer_lib.nn.layers import EncoderLayer, LayerSpec
from transformer_lib.nn.multihead import MultiHeadAttention
from transformer_lib.nn.norms import LayerNorm
from transformer_lib.nn.positional import sinusoidal_table

from ..checks import count_flops


# ---------------------------------------------------------------------------------------------
# 1. A positional "encoding" that is the same at every position
# ---------------------------------------------------------------------------------------------
def constant_positional_table(max_len: int, d_model: int) -> Tensor:
    """WRONG: the exponent uses integer division ``dim // d_model``, which is 0 for every column.

    So the angle is ``(pos / 10000) ** 0 = 1`` at every position (``0 ** 0`` is 1 too), and every
    row is the same vector ``[-sin 1, cos 1, -sin 1, ...]`` (the sine columns also have the
    wrong sign). Correct: :func:`~.sinusoidal_table`.

    Shape:
        output: ``(max_len, d_model)``.
    """
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    column = torch.arange(d_model)[None, :]  # (1, d_model)
    # WRONG: exponent 0 everywhere
    angle = (position / 1e4) ** torch.div(column, d_model, rounding_mode="floor")
    return torch.where(column % 2 == 0, -torch.sin(angle), torch.cos(angle))  # (max_len, d_model)


# ---------------------------------------------------------------------------------------------
# 2. An encoder whose input is overwritten by the positional encoding
# ---------------------------------------------------------------------------------------------
class EncoderReplacingInput(nn.Module):
    """WRONG: ``x = positional_table[:T]`` *replaces* the embedded tokens instead of being added.

    Everything else (embedding, layers) is the library's. The output has the right shape for any
    input, and is the same for every input. Correct: ``x = embedding(src) + table[:T]``.

    Shape:
        src: ``(B, S)`` ids; output: ``(B, S, d_model)``.
    """

    def __init__(
        self, vocab_size: int, d_model: int = 16, num_heads: int = 2, d_ff: int = 32
    ) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.register_buffer("table", sinusoidal_table(64, d_model), persistent=False)
        self.layers = nn.ModuleList(
            EncoderLayer(LayerSpec(d_model=d_model, num_heads=num_heads, d_ff=d_ff, dropout=0.0))
            for _ in range(2)
        )

    def forward(self, src: Tensor) -> Tensor:
        """Encode ``src`` (wrongly)."""
        x = self.embed(src)  # (B, S, d_model), computed...
        x = self.table[: src.size(1)].expand_as(x)  # WRONG: ...and thrown away
        for layer in self.layers:
            x = layer(x)
        return x


# ---------------------------------------------------------------------------------------------
# 3, 4. Cross-attention with Q, K, V taken from the wrong places
# ---------------------------------------------------------------------------------------------
class BareAttention(nn.Module):
    """One attention head with its own Q/K/V projections, computed with ``torch.bmm`` (correct in
    itself).

    Shape:
        query: ``(B, T_q, d_model)``; key: ``(B, T_k, d_model)``; value: ``(B, T_v, d_model)``
        (``T_v`` must equal ``T_k``); output: ``(B, T_q, d_head)``.
    """

    def __init__(self, d_model: int, d_head: int | None = None) -> None:
        super().__init__()
        d_head = d_head or d_model
        self.q = nn.Linear(d_model, d_head)
        self.k = nn.Linear(d_model, d_head)
        self.v = nn.Linear(d_model, d_head)

    def forward(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """``softmax(q k^T / sqrt(d)) v``."""
        q, k, v = self.q(query), self.k(key), self.v(value)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))  # (B, T_q, T_k)
        return torch.bmm(scores.softmax(dim=-1), v)  # (B, T_q, d_head); needs T_k == T_v


def cross_attention_query_from_memory(
    attention: BareAttention, x: Tensor, memory: Tensor
) -> Tensor:
    """WRONG (source 001): ``x + attention(memory, memory, x)``: Q and K from the encoder, V from
    the decoder.

    Runs only when source and target have the same length. Correct: ``attention(x, memory,
    memory)``.
    """
    return x + attention(memory, memory, x)


def cross_attention_key_from_decoder(attention: BareAttention, x: Tensor, memory: Tensor) -> Tensor:
    """WRONG (source 000's description): Q and K from the decoder, V from the encoder.

    Runs only when source and target have the same length. Correct: ``attention(x, memory,
    memory)``.
    """
    return attention(x, x, memory)


# ---------------------------------------------------------------------------------------------
# 5. No masks at all
# ---------------------------------------------------------------------------------------------
def forward_without_masks(model: Transformer, src: Tensor, tgt: Tensor) -> Tensor:
    """WRONG: runs the library's model with every mask set to "may attend everywhere".

    That is what a model without masks computes: each target position sees the later target
    tokens (the ones it is trained to predict), and padding is attended like any token.
    Correct: ``model(src, tgt)``, which builds the causal and padding masks.

    Shape:
        src: ``(B, S)``; tgt: ``(B, T)``; output: ``(B, T, tgt_vocab_size)``.
    """
    batch, s_len = src.shape
    t_len = tgt.size(1)
    everything = torch.ones(batch, 1, 1, s_len, dtype=torch.bool)  # WRONG: padding visible
    no_causal = torch.ones(batch, 1, t_len, t_len, dtype=torch.bool)  # WRONG: the future visible
    return model(src, tgt, src_mask=everything, tgt_mask=no_causal)


# ---------------------------------------------------------------------------------------------
# 6. Probabilities of the model width instead of logits over the vocabulary
# ---------------------------------------------------------------------------------------------
class SoftmaxOverModelWidth(nn.Module):
    """WRONG: ``softmax(Linear(d_model, d_model)(x))``: no projection to the vocabulary, and a
    softmax.

    Correct: ``Linear(d_model, vocab_size)``, returning logits for ``F.cross_entropy``.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)`` probabilities.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """Project (to the wrong width) and normalise (too early)."""
        return torch.softmax(self.linear(x), dim=-1)


# ---------------------------------------------------------------------------------------------
# 7. Heads that concatenate to fewer than d_model features
# ---------------------------------------------------------------------------------------------
class PerHeadModulesAttention(nn.Module):
    """WRONG: ``d_head = d_model // num_heads`` without checking that it divides.

    With ``d_model=512, num_heads=6`` each head projects all 512 input features to 85, the
    concatenation is 510 wide, and the output layer ``Linear(num_heads * d_head, d_model)`` is
    ``Linear(510, 512)``: attention runs 510 wide instead of ``d_model``, without a word. Correct:
    refuse (``MultiHeadAttention`` raises a ``ValueError``).

    Shape:
        query, key, value: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        # WRONG: rounds down; the heads concatenate to fewer than d_model
        d_head = d_model // num_heads
        self.heads = nn.ModuleList(BareAttention(d_model, d_head) for _ in range(num_heads))
        self.linear = nn.Linear(num_heads * d_head, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Run every head, concatenate, project."""
        return self.linear(torch.cat([head(query, key, value) for head in self.heads], dim=-1))


# ---------------------------------------------------------------------------------------------
# 8. The range of the sinusoids (a claim)
# ---------------------------------------------------------------------------------------------
CLAIMED_SINUSOID_RANGE = (0.0, 1.0)
"""WRONG, from source 001. The range the sine and cosine codes are said to cover; they cover
[-1, 1]."""


# ---------------------------------------------------------------------------------------------
# 9. A feed-forward sub-layer without residual connection and norm
# ---------------------------------------------------------------------------------------------
class EncoderLayerBareFeedForward(nn.Module):
    """WRONG: residual + LayerNorm around the attention only; the feed-forward output is returned
    bare.

    The layer says it is Post-LN (``norm_first = False``) like the paper, which wraps **both**
    sub-layers: ``x = LN(x + Attn(x))`` then ``x = LN(x + FFN(x))``. Here the second line is
    ``x = FFN(x)``. Correct: :class:`~.EncoderLayer`.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    norm_first = False

    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff)

    def forward(self, x: Tensor) -> Tensor:
        """Attention sub-layer done right, feed-forward sub-layer left bare."""
        x = self.norm1(x + self.self_attn(x, x, x)[0])
        return self.ff(x)  # WRONG: no residual connection, no norm


class TransformerWithUnsetWidth(nn.Module):
    """WRONG (the same source): uses ``self.d_model`` without ever setting it. Building it
    raises.
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(self.d_model)  # WRONG: AttributeError, d_model was never stored


# ---------------------------------------------------------------------------------------------
# 10. The paper's training recipe (claims)
# ---------------------------------------------------------------------------------------------
PAPER_TRAINING = {
    "clip_norm": None,  # section 5 never mentions gradient clipping
    "attention_dropout": 0.0,  # dropout is applied to sub-layer outputs and embedding sums only
    "residual_dropout": 0.1,
    "label_smoothing": 0.1,
    "adam_betas": (0.9, 0.98),
    "adam_eps": 1e-9,
    "warmup_steps": 4000,
    "batch_tokens_per_side": 25_000,  # "approximately 25000 source tokens and 25000 target tokens"
}
"""What Vaswani et al. (2017), section 5, state about training the base model."""

SOURCE_004_TRAINING_CLAIMS = {
    "clip_norm": 1.0,
    "attention_dropout": 0.1,
    "batch_tokens_per_side": 4096,
}
"""WRONG, from source 004. What it says the paper used."""


# ---------------------------------------------------------------------------------------------
# 11. A positional table on a global device, wrapped in Variable
# ---------------------------------------------------------------------------------------------
DEVICE = torch.device("cpu")
"""The global ``DEVICE`` of source 000's snippet, which uses it but never defines it.

Defined here, as the CPU, so that the wrong version can be built at all; without it, building
:class:`PositionalEncodingOnGlobalDevice` raises ``NameError``, as the snippet does.
"""


class PositionalEncodingOnGlobalDevice(nn.Module):
    """WRONG (source 000): the table is built on a global ``DEVICE`` and added through ``Variable``.

    As in the source, the table is registered with ``register_buffer``, so ``.to(...)`` moves it
    and checkpoints store it: that part is right. The faults are two. The table is created on
    ``DEVICE``, a global the module does not own, instead of on the device the module is being
    built on: with ``DEVICE = "cuda"`` the module cannot be built on a machine without a GPU, and a
    model built on the CPU holds its table on the GPU until ``.to()`` is called. And
    ``Variable(..., requires_grad=False)`` does nothing: it is a no-op since PyTorch 0.4, and a
    buffer does not require gradients anyway. Correct: :class:`~.PositionalEncoding`, which builds
    its table on the default device and adds it directly.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 64) -> None:
        super().__init__()
        with torch.device(DEVICE):  # WRONG: a global decides where the table is made
            table = sinusoidal_table(max_len, d_model)
        self.register_buffer("pe", table)  # as in the source: a (persistent) buffer

    def forward(self, x: Tensor) -> Tensor:
        """Add the table (the ``Variable`` wrapper changes nothing)."""
        return x + Variable(self.pe[: x.size(1)], requires_grad=False)  # WRONG: a dead API


# ---------------------------------------------------------------------------------------------
# 12. The cost of one RNN step (a claim)
# ---------------------------------------------------------------------------------------------
CLAIMED_RNN_STEP_EXPONENT = 1
"""WRONG, from source 003. One RNN step is said to cost O(n) in the hidden size n."""


def rnn_step(h: Tensor, x: Tensor, w_hh: Tensor, w_xh: Tensor, b: Tensor) -> Tensor:
    """One step of a plain (Elman) RNN, correct: ``h' = tanh(h W_hh^T + x W_xh^T + b)``.

    Shape:
        h: ``(B, n)``; x: ``(B, n_in)``; w_hh: ``(n, n)``; w_xh: ``(n, n_in)``; b: ``(n,)``; output:
        ``(B, n)``.
    """
    return torch.tanh(h @ w_hh.T + x @ w_xh.T + b)


def rnn_flops(hidden: int, steps: int = 1, input_size: int | None = None) -> int:
    """Counted floating-point operations of ``steps`` RNN steps with ``hidden`` units (batch 1).

    The input width defaults to ``hidden`` (a layer of a stacked RNN reads the layer below).
    """
    n_in = input_size or hidden
    h, x = torch.zeros(1, hidden), torch.zeros(steps, 1, n_in)
    w_hh, w_xh, b = torch.zeros(hidden, hidden), torch.zeros(hidden, n_in), torch.zeros(hidden)

    def run() -> Tensor:
        state = h
        for t in range(steps):
            state = rnn_step(state, x[t], w_hh, w_xh, b)
        return state

    return count_flops(run)


# ---------------------------------------------------------------------------------------------
# 13. Attention scaled by a d_k the function never defines
# ---------------------------------------------------------------------------------------------
def attention_with_undefined_d_k(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """WRONG (source 004): the scores are divided by ``math.sqrt(d_k)``, and ``d_k`` is never
    defined.

    As written, a call raises ``NameError``. With a global ``d_k`` defined elsewhere (an earlier
    notebook cell, say), it runs, and divides by that number whatever the width of the keys it is
    given. Correct: ``d_k = k.size(-1)``, as :func:`~.scaled_dot_product_attention` does.

    Shape:
        q: ``(..., T_q, d_k)``; k: ``(..., T_k, d_k)``; v: ``(..., T_k, d_v)``;
        output: ``(..., T_q, d_v)``.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # noqa: F821 - WRONG: d_k is a global, if any
    return torch.softmax(scores, dim=-1) @ v


# ---------------------------------------------------------------------------------------------
# 14. Q, K and V as "features after a convolution" (a claim)
# ---------------------------------------------------------------------------------------------
class ConvolutionProjection(nn.Module):
    """WRONG (source 001's sentence, read literally): a query, key or value made by a convolution.

    A convolution of kernel size 3 slides over the positions, so each output mixes a position with
    its two neighbours. The paper's projections are linear maps of each position on its own
    (``nn.Linear``, which source 001's own code uses); only a convolution of kernel size 1 is one.

    Shape:
        x: ``(B, T, d_in)``; output: ``(B, T, d_out)``.
    """

    def __init__(self, d_in: int, d_out: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d_in, d_out, kernel_size, padding=kernel_size // 2)

    def forward(self, x: Tensor) -> Tensor:
        """Convolve along the positions: ``(B, T, d)`` -> ``(B, d, T)`` and back."""
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


# ---------------------------------------------------------------------------------------------
# 15. A causal mask that also hides position t itself
# ---------------------------------------------------------------------------------------------
def self_attention_hiding_position_t(x: Tensor) -> Tensor:
    """WRONG (source 002, read literally): at step t the mask hides "q_t, k_t and after".

    Self-attention with queries, keys and values all ``x``, and the mask filled with -1e10 as the
    source says. Hiding key ``t`` from query ``t`` leaves the first query no key at all: its scores
    are all -1e10, so its weights come out uniform over every position, the future included (with
    -inf they would be NaN). Correct: hide only the keys after ``t``, :func:`~.causal_mask`.

    Shape:
        x: ``(B, T, d)``; output: ``(B, T, d)``.
    """
    length = x.size(-2)
    ones = torch.ones(length, length, dtype=torch.bool, device=x.device)
    hidden = ones.triu()  # WRONG: the diagonal too, so query t cannot see key t
    scores = x @ x.transpose(-2, -1) / math.sqrt(x.size(-1))  # (B, T, T)
    return torch.softmax(scores.masked_fill(hidden, -1e10), dim=-1) @ x


# ---------------------------------------------------------------------------------------------
# The code repository of source 001's English original (chapter 14, Going deeper)
# ---------------------------------------------------------------------------------------------
def single_frequency_positional_table(max_len: int, d_model: int) -> Tensor:
    """WRONG (Odom's repository): the angle ``pos / 10000 ** (dim // d_model)`` is just ``pos``.

    The floor is 0 in every column, as in source 001 (:func:`constant_positional_table`), but here
    it is the exponent of 10000 alone, so the angle is the position itself in every column: the
    even columns are all ``sin(pos)``, the odd ones all ``cos(pos)``. The rows differ, but the table
    has one frequency instead of ``d_model / 2``. Correct: :func:`~.sinusoidal_table`.

    Shape:
        output: ``(max_len, d_model)``.
    """
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    column = torch.arange(d_model)[None, :]  # (1, d_model)
    angle = position / 1e4 ** torch.div(column, d_model, rounding_mode="floor")  # WRONG: = position
    return torch.where(column % 2 == 0, torch.sin(angle), torch.cos(angle))  # (max_len, d_model)
