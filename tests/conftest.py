"""Shared pytest fixtures (kept small; other test files may add their own)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

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
    """One PyTorch thread for a test module (its module-scoped fixtures included), then the old number back.

    Tiny tensors: a second thread only fights over a shared CPU (up to 10x slower there). A module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


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
