"""Helpers the test modules import (``from helpers import ...``); fixtures live in
``conftest.py``."""

from __future__ import annotations

import torch
from torch import nn


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
