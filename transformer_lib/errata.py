"""Deliberately WRONG implementations (勘误): the errors of the book's sources, reproduced small.

**Nothing in this module is meant to be used.** Each function or class reproduces, in a few lines
written for this book, one error found in the five source documents the book was written from
(the introduction names them) or in the best-known walk-through of the paper, *The Annotated
Transformer* (Harvard NLP). The errata chapter (``chapters/14_errata.ipynb``) and ``tests/test_errata.py`` run
each one through a check of :mod:`transformer_lib.checks`: the wrong version fails the check,
the library passes it. Keeping the wrong versions here, in one place, means that the chapter and
the test exercise exactly the same code.

Every name that computes something wrong says so in its docstring, which starts with ``WRONG``.
A few helpers at the end (:func:`library_vocabulary`, :func:`library_training_setup`) are
correct: they let the same checks run on the library's real pipeline.

This module sits at the top of the package (it imports the model, training and task modules);
nothing in the library imports it.
"""

from __future__ import annotations

import gzip
import itertools
import math
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch import Tensor, nn
from torch.autograd import Variable

from .checks import count_flops
from .config import TransformerConfig
from .embedding import TokenEmbedding
from .feedforward import FeedForward
from .layers import EncoderLayer
from .model import Transformer
from .multihead import MultiHeadAttention
from .norms import LayerNorm
from .positional import sinusoidal_table
from .tokenizer import train_bpe_tokenizer
from .training import TrainConfig

# The items of the errata chapter: (key, where the error comes from, what it gets wrong, the check that catches it).
ITEMS: tuple[tuple[str, str, str, str], ...] = (
    ("1", "seed 001", "positional encoding is the same vector at every position", "check_positions_distinct"),
    ("2", "seed 001", "positional encoding replaces the input instead of adding to it", "check_depends_on_input"),
    (
        "3",
        "seed 001",
        "cross-attention: Q and K from the encoder, V from the decoder",
        "check_cross_attention_lengths",
    ),
    (
        "4",
        "seed 000",
        "cross-attention: 'Q and K from the decoder, V from the encoder'",
        "check_cross_attention_lengths",
    ),
    ("5", "seed 001", "no masks: the decoder sees the future, padding is attended", "check_causal"),
    ("6", "seed 001", "decoder ends in softmax(Linear(d_model, d_model))", "check_outputs_are_logits"),
    ("7", "seed 001", "num_heads=6 with d_model=512: heads concatenate to 510", "check_heads_concatenate_to_d_model"),
    ("8", "seed 001", "sine and cosine 'cover [0, 1]'", "check_values_in_range"),
    ("9", "seed 004", "feed-forward sub-layer without residual connection and norm", "check_norm_placement"),
    ("10", "seed 004", "the paper 'clipped at 1.0, used 4096-token batches, attention dropout'", "check_settings"),
    ("11", "seed 000", "autograd.Variable and a global DEVICE for the positional table", "check_buffer_follows_module"),
    ("12", "seed 003", "one RNN step costs O(n) in the hidden size n", "check_cost_exponent"),
    ("AT-1", "Annotated Transformer", "Post-LN in the text, Pre-LN in the code", "check_norm_placement"),
    (
        "AT-2",
        "Annotated Transformer",
        "LayerNorm with unbiased std and eps outside the square root",
        "check_layer_norm_matches_torch",
    ),
    (
        "AT-3",
        "Annotated Transformer",
        "label smoothing on log(probabilities) gives inf",
        "check_finite_label_smoothing_loss",
    ),
    ("AT-4", "Annotated Transformer", "masks filled with -1e9 overflow in float16", "check_mask_fp16_safe"),
    ("AT-5", "Annotated Transformer", "vocabulary built from train + validation + test", "check_vocab_ignores_split"),
    (
        "AT-6",
        "Annotated Transformer",
        "scheduler stepped per micro-batch under gradient accumulation",
        "check_lr_per_optimizer_step",
    ),
    ("AT-7", "Annotated Transformer", "dataset download from a fixed URL, unverified", "check_fails_clearly"),
)


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
    angle = (position / 1e4) ** torch.div(column, d_model, rounding_mode="floor")  # WRONG: exponent 0 everywhere
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

    def __init__(self, vocab_size: int, d_model: int = 16, num_heads: int = 2, d_ff: int = 32) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.register_buffer("table", sinusoidal_table(64, d_model), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout=0.0) for _ in range(2))

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
    """One attention head with its own Q/K/V projections, computed with ``torch.bmm`` (correct in itself).

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


def cross_attention_query_from_memory(attention: BareAttention, x: Tensor, memory: Tensor) -> Tensor:
    """WRONG (source 001): ``x + attention(memory, memory, x)``: Q and K from the encoder, V from the decoder.

    Runs only when source and target have the same length. Correct: ``attention(x, memory, memory)``.
    """
    return x + attention(memory, memory, x)


def cross_attention_key_from_decoder(attention: BareAttention, x: Tensor, memory: Tensor) -> Tensor:
    """WRONG (source 000's description): Q and K from the decoder, V from the encoder.

    Runs only when source and target have the same length. Correct: ``attention(x, memory, memory)``.
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
    """WRONG: ``softmax(Linear(d_model, d_model)(x))``: no projection to the vocabulary, and a softmax.

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
# 7. Heads that silently lose features
# ---------------------------------------------------------------------------------------------
class PerHeadModulesAttention(nn.Module):
    """WRONG: ``d_head = d_model // num_heads`` without checking that it divides.

    With ``d_model=512, num_heads=6`` each head gets 85 features and the concatenation is 510 wide;
    the output layer ``Linear(num_heads * d_head, d_model)`` accepts it silently. Correct: refuse
    (``MultiHeadAttention`` raises a ``ValueError``).

    Shape:
        query, key, value: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        d_head = d_model // num_heads  # WRONG: floor division loses d_model % num_heads features
        self.heads = nn.ModuleList(BareAttention(d_model, d_head) for _ in range(num_heads))
        self.linear = nn.Linear(num_heads * d_head, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Run every head, concatenate, project."""
        return self.linear(torch.cat([head(query, key, value) for head in self.heads], dim=-1))


# ---------------------------------------------------------------------------------------------
# 8. The range of the sinusoids (a claim)
# ---------------------------------------------------------------------------------------------
CLAIMED_SINUSOID_RANGE = (0.0, 1.0)
"""WRONG, from source 001. The range the sine and cosine codes are said to cover; they cover [-1, 1]."""


# ---------------------------------------------------------------------------------------------
# 9. A feed-forward sub-layer without residual connection and norm
# ---------------------------------------------------------------------------------------------
class EncoderLayerBareFeedForward(nn.Module):
    """WRONG: residual + LayerNorm around the attention only; the feed-forward output is returned bare.

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
    """WRONG (the same source): uses ``self.d_model`` without ever setting it. Building it raises."""

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
"""WRONG. A global that decides where tensors are created, instead of the module deciding."""


class PositionalEncodingOnGlobalDevice(nn.Module):
    """WRONG: the table is created on the global ``DEVICE`` and kept as a plain attribute.

    ``model.to("cuda")`` then moves the weights but not the table, and the forward pass fails
    with a device mismatch. ``Variable(..., requires_grad=False)`` does nothing (it is a no-op
    since PyTorch 0.4). Correct: ``self.register_buffer("pe", table)``, as
    :class:`~.PositionalEncoding` does.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, max_len: int = 64) -> None:
        super().__init__()
        self.pe = sinusoidal_table(max_len, d_model).to(DEVICE)  # WRONG: not a buffer

    def forward(self, x: Tensor) -> Tensor:
        """Add the table (the Variable wrapper changes nothing)."""
        return x + Variable(self.pe[: x.size(1)], requires_grad=False)


# ---------------------------------------------------------------------------------------------
# 12. The cost of one RNN step (a claim)
# ---------------------------------------------------------------------------------------------
CLAIMED_RNN_STEP_EXPONENT = 1
"""WRONG, from source 003. One RNN step is said to cost O(n) in the hidden size n."""


def rnn_step(h: Tensor, x: Tensor, w_hh: Tensor, w_xh: Tensor, b: Tensor) -> Tensor:
    """One step of a plain (Elman) RNN, correct: ``h' = tanh(h W_hh^T + x W_xh^T + b)``.

    Shape:
        h: ``(B, n)``; x: ``(B, n_in)``; w_hh: ``(n, n)``; w_xh: ``(n, n_in)``; b: ``(n,)``; output: ``(B, n)``.
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
# Annotated Transformer 1. Post-LN in the text, Pre-LN in the code
# ---------------------------------------------------------------------------------------------
class EncoderLayerTextSaysPostLN(nn.Module):
    """WRONG: described as Post-LN, ``LN(x + Sublayer(x))`` (``norm_first = False``), computed as Pre-LN.

    The code computes ``x + Sublayer(LN(x))`` for both sub-layers. Pre-LN is a fine choice (it
    trains more easily); the error is that the text and the code disagree, so readers who follow
    the text build a different model. Correct: say which one you build, as
    ``transformer_lib.EncoderLayer(norm_first=...)`` does.

    Shape:
        x: ``(B, T, d_model)``; output: ``(B, T, d_model)``.
    """

    norm_first = False  # what the text claims

    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ff = FeedForward(d_model, d_ff)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:
        """What the code does: norm first."""
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h)[0]  # WRONG for the claim: this is Pre-LN
        return x + self.ff(self.norm2(x))


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 2. LayerNorm with the unbiased std and eps outside the square root
# ---------------------------------------------------------------------------------------------
class LayerNormUnbiasedStd(nn.Module):
    """WRONG: ``weight * (x - mean) / (std + eps) + bias`` with ``std = x.std(-1)`` (unbiased, ``d - 1``).

    A different function from ``nn.LayerNorm``, which divides by ``sqrt(var + eps)`` with the
    biased variance (divide by ``d``). Correct: :class:`~.LayerNorm`.

    Shape:
        x: ``(..., d_model)``; output: same shape.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Normalise (the other way)."""
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)  # WRONG: unbiased by default
        return self.weight * (x - mean) / (std + self.eps) + self.bias  # WRONG: eps outside the root


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 3. Label smoothing on log(probabilities)
# ---------------------------------------------------------------------------------------------
def smoothed_loss_from_probabilities(logits: Tensor, target: Tensor, smoothing: float = 0.1) -> Tensor:
    """WRONG: label-smoothed cross-entropy computed as ``-(q * log(softmax(logits))).sum()``.

    Mathematically the same as ``F.cross_entropy(logits, target, label_smoothing=smoothing)`` (the
    Annotated Transformer's ``KLDivLoss`` differs from it by a constant), but the softmax
    underflows to exactly 0 for a class far below the others, ``log(0) = -inf``, and the smoothed
    target gives that class mass: the loss is ``inf``. Correct: stay in log space
    (``log_softmax``, which ``F.cross_entropy`` uses).

    Shape:
        logits: ``(B, T, V)``; target: ``(B, T)``; output: scalar (mean over positions).
    """
    vocab = logits.size(-1)
    probabilities = logits.softmax(dim=-1)  # (B, T, V)
    q = (1 - smoothing) * nn.functional.one_hot(target, vocab).to(logits.dtype) + smoothing / vocab
    return -(q * probabilities.log()).sum(-1).mean()  # WRONG: log of a probability that may be 0


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 4. Masks filled with -1e9
# ---------------------------------------------------------------------------------------------
def attention_masked_with_minus_1e9(query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
    """WRONG: ``scores.masked_fill(mask == 0, -1e9)``. In float16 the largest number is 65504.

    Correct: a boolean mask given to ``F.scaled_dot_product_attention``, or the dtype's own most
    negative number (``torch.finfo(dtype).min``), as :func:`~.scaled_dot_product_attention` does.

    Shape:
        query, key, value: ``(B, H, T, d)``; mask: bool broadcasting to ``(B, H, T, T)``; output: ``(B, H, T, d)``.
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, T_q, T_k)
    scores = scores.masked_fill(mask == 0, -1e9)  # WRONG: -1e9 does not fit in float16
    return scores.softmax(dim=-1) @ value


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 5. A vocabulary built with the test set
# ---------------------------------------------------------------------------------------------
def toy_corpus() -> dict[str, list[tuple[str, str]]]:
    """A made-up German-English corpus (correct): 48 pairs from one pattern, split 40/8.

    The test split has two sentences whose words occur nowhere else.
    """
    people = [("ein Mann", "a man"), ("eine Frau", "a woman"), ("ein Kind", "a child"), ("ein Hund", "a dog")]
    actions = [("läuft", "runs"), ("schläft", "sleeps"), ("spielt", "plays"), ("springt", "jumps")]
    places = [("im Park", "in the park"), ("am Strand", "on the beach"), ("auf der Straße", "on the street")]
    pairs = [
        (f"{p} {a} {w}.", f"{p_en} {a_en} {w_en}.")
        for (p, p_en), (a, a_en), (w, w_en) in itertools.product(people, actions, places)
    ]
    test = [("Ein Zebra galoppiert.", "A zebra gallops."), ("Zwei Zebras grasen.", "Two zebras graze.")]
    return {"train": pairs[:40], "val": pairs[40:], "test_2016_flickr": test}


def vocabulary_from_all_splits(data: dict[str, list[tuple[str, str]]], vocab_size: int = 300) -> dict[str, int]:
    """WRONG: learns the vocabulary from every split of ``data`` (train, validation **and test**).

    Correct: the training split only (``train_translation_tokenizer(data["train"])``).
    """
    sentences = [sentence for pairs in data.values() for pair in pairs for sentence in pair]  # WRONG
    return train_bpe_tokenizer(sentences, vocab_size=vocab_size).tokenizer.get_vocab()


class _StopAfterTokenizer(Exception):
    def __init__(self, vocab: dict[str, int]) -> None:
        super().__init__("stopped after the tokenizer was built")
        self.vocab = vocab


def library_vocabulary(data: dict[str, list[tuple[str, str]]], vocab_size: int = 300) -> dict[str, int]:
    """The vocabulary that the library's translation pipeline builds from ``data`` (correct).

    Runs :func:`transformer_lib.translation.train_translation` itself, with ``data`` given in place
    of the Multi30k files, up to the moment it has built its tokenizer (with ``vocab_size``), and
    returns that tokenizer's vocabulary. Nothing is trained.
    """
    from . import translation

    real = translation.train_translation_tokenizer

    def build_and_stop(pairs: Sequence[tuple[str, str]], *_args: Any, **_kwargs: Any) -> None:
        raise _StopAfterTokenizer(real(pairs, vocab_size=vocab_size).tokenizer.get_vocab())

    with (
        mock.patch.object(translation, "load_multi30k", lambda *_a, **_k: data),
        mock.patch.object(translation, "train_translation_tokenizer", build_and_stop),
    ):
        try:
            translation.train_translation(profile="smoke", device="cpu", progress=False, threads=1)
        except _StopAfterTokenizer as stop:
            return stop.vocab
    raise RuntimeError("train_translation did not build a tokenizer")


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 6. The scheduler stepped per micro-batch
# ---------------------------------------------------------------------------------------------
def accumulate_stepping_scheduler_per_micro_batch(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    micro_batches: Iterable[Any],
    grad_accum: int,
    loss_of: Callable[[Any], Tensor],
) -> list[float]:
    """WRONG: gradient accumulation with ``scheduler.step()`` after **every micro-batch**.

    The optimizer steps once per ``grad_accum`` micro-batches, the schedule ``grad_accum`` times
    as often: its warm-up is over after ``warmup / grad_accum`` optimizer steps. Returns the
    learning rate each optimizer step used. Correct: step the scheduler next to the optimizer,
    as :func:`~.train` does.
    """
    used: list[float] = []
    optimizer.zero_grad()
    for i, batch in enumerate(micro_batches):
        (loss_of(batch) / grad_accum).backward()
        if (i + 1) % grad_accum == 0:
            used.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()  # WRONG: belongs inside the if, once per optimizer step
    return used


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 7. A download from a fixed URL, used without verification
# ---------------------------------------------------------------------------------------------
def load_split_unverified(split: str, folder: str | Path, base_url: str) -> list[tuple[str, str]]:
    """WRONG: downloads a missing file straight to its final name and reads whatever is there.

    A server that answers with an error page, a mirror with other contents, an interrupted
    download: each leaves a file that is read as data (or fails deep inside ``gzip``). No checksum,
    no temporary file, no hint what to do offline. Correct: :func:`~.load_split`.
    """
    folder = Path(folder)
    sides = []
    for language in ("de", "en"):
        path = folder / f"{split}.{language}.gz"
        if not path.exists():
            urllib.request.urlretrieve(base_url + path.name, path)  # noqa: S310  WRONG: unverified, not atomic
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            sides.append([line.rstrip("\n") for line in handle])
    return list(zip(*sides, strict=False))


# ---------------------------------------------------------------------------------------------
# Correct helpers for the checks
# ---------------------------------------------------------------------------------------------
def library_training_setup() -> dict[str, Any]:
    """The library's default training recipe, in the keys of :data:`PAPER_TRAINING` (correct)."""
    model = TransformerConfig(src_vocab_size=37_000, tgt_vocab_size=37_000)
    training = TrainConfig(max_steps=100_000)
    return {
        "clip_norm": training.clip_norm,
        "attention_dropout": model.attention_dropout,
        "residual_dropout": model.dropout,
        "label_smoothing": training.label_smoothing,
        "adam_betas": tuple(training.adam_betas),
        "adam_eps": training.adam_eps,
        "warmup_steps": training.warmup_steps,
    }
