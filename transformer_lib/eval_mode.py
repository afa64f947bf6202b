"""One context manager for "evaluate this model now": eval mode, no autograd, the old mode
restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run the block with ``model`` in eval mode (no dropout) and without autograd.

    The previous mode comes back even if the block raises: a validation pass must leave the model
    training.
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)
