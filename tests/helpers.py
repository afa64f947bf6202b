"""Helpers the test modules import (``from helpers import ...``); fixtures live in
``conftest.py``."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

from transformer_lib import (
    Batch,
    Transformer,
    TransformerConfig,
    make_batch,
    sequence_loss,
    train_bpe_tokenizer,
)
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_tasks import load_split


def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give biases and norm weights random values (they start at 0 / 1, which would hide bugs)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.2
            if name.endswith("bias"):
                p.copy_(noise)
            elif "norm" in name:
                p.copy_(1.0 + noise)
    return module


SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank im Park.",
    "Kinder.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
]
ENGLISH = [
    "A man rides a bike.",
    "Two dogs play in the snow.",
    "A woman sits on a bench.",
    "Children.",
]


def _sentences() -> tuple[list[str], list[str]]:
    """(sentences to train the tokenizer on, German sentences to translate)."""
    folder = os.environ.get("MULTI30K_DIR")
    if not folder:
        return SENTENCES + ENGLISH, SENTENCES
    train, test = load_split("train", folder)[:500], load_split("test_2016_flickr", folder)[:6]
    return [s for pair in train for s in pair], [de for de, _ in test]


def copy_model(
    d_model: int, steps: int = 150, **settings: Any
) -> tuple[Transformer, BPETokenizer, list[str]]:
    """A 2 + 2-layer model (dropout on, left in training mode) taught to copy real German sentences
    a little, its BPE tokenizer, and the sentences. ``settings``: more fields of its
    :class:`~.TransformerConfig`."""
    corpus, sentences = _sentences()
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=1000, min_frequency=1)
    torch.manual_seed(0)
    vocab = tokenizer.vocab_size
    sizes = {
        "d_model": d_model,
        "num_heads": 4,
        "d_ff": 2 * d_model,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
    }
    config = TransformerConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, dropout=0.1, max_len=128, **sizes | settings
    )
    model, ids = Transformer(config), tokenizer.encode_batch(sentences)
    _learn_to_copy(
        model, make_batch(ids, ids, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id), steps
    )
    return model, tokenizer, sentences


def _learn_to_copy(model: Transformer, batch: Batch, steps: int = 150) -> None:
    """Train ``model`` a little to copy its sources, so that greedy decoding ends rows at different
    lengths."""
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, pad_id=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
