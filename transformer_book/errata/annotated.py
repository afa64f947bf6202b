"""Deliberately WRONG implementations (勘误): seven traps of *The Annotated Transformer*, and two
correct helpers that let the same checks run on the library's real pipeline.

See :mod:`transformer_book.errata`. Every name that computes something wrong says so in its
docstring, which starts with ``WRONG``.
"""

from __future__ import annotations

import gzip
import itertools
import math
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from transformer_lib.config import TransformerConfig
from transformer_lib.data.tokenizer import train_bpe_tokenizer
from transformer_lib.nn.feedforward import FeedForward
from transformer_lib.nn.multihead import MultiHeadAttention
from transformer_lib.nn.norms import LayerNorm
from transformer_lib.training import TrainConfig
from transformer_tasks.translation import prepare_translation_data, translation_profile


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 1. Post-LN in the text, Pre-LN in the code
# ---------------------------------------------------------------------------------------------
class EncoderLayerTextSaysPostLN(nn.Module):
    """WRONG: described as Post-LN, ``LN(x + Sublayer(x))`` (``norm_first = False``), computed as
    Pre-LN.

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
    """WRONG: ``weight * (x - mean) / (std + eps) + bias`` with ``std = x.std(-1)`` (unbiased, ``d -
    1``).

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
        # WRONG: eps outside the root
        return self.weight * (x - mean) / (std + self.eps) + self.bias


# ---------------------------------------------------------------------------------------------
# Annotated Transformer 3. Label smoothing on log(probabilities)
# ---------------------------------------------------------------------------------------------
def smoothed_loss_from_probabilities(
    logits: Tensor, target: Tensor, smoothing: float = 0.1
) -> Tensor:
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
def attention_masked_with_minus_1e9(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor
) -> Tensor:
    """WRONG: ``scores.masked_fill(mask == 0, -1e9)``. In float16 the largest number is 65504.

    Correct: a boolean mask given to ``F.scaled_dot_product_attention``, or the dtype's own most
    negative number (``torch.finfo(dtype).min``), as :func:`~.scaled_dot_product_attention` does.

    Shape:
        query, key, value: ``(B, H, T, d)``; mask: bool broadcasting to ``(B, H, T, T)``; output:
        ``(B, H, T, d)``.
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
    people = [
        ("ein Mann", "a man"),
        ("eine Frau", "a woman"),
        ("ein Kind", "a child"),
        ("ein Hund", "a dog"),
    ]
    actions = [("läuft", "runs"), ("schläft", "sleeps"), ("spielt", "plays"), ("springt", "jumps")]
    places = [
        ("im Park", "in the park"),
        ("am Strand", "on the beach"),
        ("auf der Straße", "on the street"),
    ]
    pairs = [
        (f"{p} {a} {w}.", f"{p_en} {a_en} {w_en}.")
        for (p, p_en), (a, a_en), (w, w_en) in itertools.product(people, actions, places)
    ]
    test = [
        ("Ein Zebra galoppiert.", "A zebra gallops."),
        ("Zwei Zebras grasen.", "Two zebras graze."),
    ]
    return {"train": pairs[:40], "val": pairs[40:], "test_2016_flickr": test}


def vocabulary_from_all_splits(
    data: dict[str, list[tuple[str, str]]], vocab_size: int = 300
) -> dict[str, int]:
    """WRONG: learns the vocabulary from every split of ``data`` (train, validation **and test**).

    Correct: the training split only (``train_translation_tokenizer(data["train"])``).
    """
    # WRONG
    sentences = [sentence for pairs in data.values() for pair in pairs for sentence in pair]
    return train_bpe_tokenizer(sentences, vocab_size=vocab_size).tokenizer.get_vocab()


def library_vocabulary(
    data: dict[str, list[tuple[str, str]]], vocab_size: int = 300
) -> dict[str, int]:
    """The vocabulary that the library's translation pipeline builds from ``data`` (correct).

    Runs the pipeline's first step, :func:`~.prepare_translation_data`, on ``data`` (in place of the
    Multi30k files) with a vocabulary of ``vocab_size``, and returns its tokenizer's vocabulary.
    Nothing is trained.
    """
    config = replace(translation_profile("smoke").data, vocab_size=vocab_size)
    return prepare_translation_data(data, config).tokenizer.tokenizer.get_vocab()


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

    The loop of *The Annotated Transformer*'s ``run_epoch`` (2022 edition): the optimizer steps on
    micro-batches ``0, grad_accum, 2 * grad_accum, ...`` (``i % grad_accum == 0``), the scheduler
    after every micro-batch. The optimizer steps first, on micro-batch 0, so PyTorch sees no
    scheduler step before an optimizer step and gives no warning. But the schedule runs
    ``grad_accum`` times as fast as the optimizer: optimizer step ``s`` (from 1) uses the rate of
    schedule step ``(s - 1) * grad_accum + 1``, and the warm-up is over after ``warmup /
    grad_accum`` optimizer steps. (The same condition makes the first optimizer step use
    a single micro-batch, the later ones ``grad_accum`` each.) Returns the learning rate each
    optimizer step used. Correct: step the scheduler next to the optimizer, as :func:`~.train` does.
    """
    used: list[float] = []
    optimizer.zero_grad()
    for i, batch in enumerate(micro_batches):
        (loss_of(batch) / grad_accum).backward()
        if i % grad_accum == 0:
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
    """The library's default training recipe, in the keys of :data:`~.PAPER_TRAINING` (correct)."""
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
