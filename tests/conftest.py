"""pytest fixtures of the unit tests (the repository's ``conftest.py`` adds the data fixture
``multi30k_dir``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from transformer_lib import Transformer, TransformerConfig

TINY = dict(
    src_vocab_size=11,
    tgt_vocab_size=13,
    d_model=16,
    num_heads=2,
    num_encoder_layers=2,
    num_decoder_layers=2,
    d_ff=32,
    dropout=0.0,
    max_len=64,
)


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One PyTorch thread for a test module (its module-scoped fixtures included), then the old
    number back.

    Tiny tensors: a second thread only fights over a busy CPU (up to 10x slower there). A module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture
def tiny_config() -> Callable[..., TransformerConfig]:
    """Factory: a small config (dropout 0) with any field overridden by keyword."""

    def make(**overrides: Any) -> TransformerConfig:
        return TransformerConfig(**{**TINY, **overrides})

    return make


@pytest.fixture
def tiny_model(tiny_config: Callable[..., TransformerConfig]) -> Callable[..., Transformer]:
    """Factory: a seeded float64 model in eval mode built from ``tiny_config(**overrides)``."""

    def make(seed: int = 0, **overrides: Any) -> Transformer:
        torch.manual_seed(seed)
        return Transformer(tiny_config(**overrides)).double().eval()

    return make


@pytest.fixture(scope="session")
def copy_trained() -> tuple[Transformer, Any, list[str]]:
    """One tiny trained model for the whole session: 2 + 2 layers, ``d_model`` 64, one table for
    both embeddings and the output layer (as chapter 11's), taught to copy real German sentences
    for 200 steps and left in training mode; its BPE tokenizer and the sentences.

    The ONNX export's and the browser model's tests share it (each trained its own before). Tests
    must leave it as they found it (``eval_mode`` restores the mode; nothing changes its weights).
    """
    from helpers import copy_model

    old = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a second thread only fights over a busy CPU
    try:
        return copy_model(d_model=64, steps=200, share_embeddings=True)
    finally:
        torch.set_num_threads(old)
