"""What a timing ran on, in one line: the name the chapters and the benchmarks print under a number.

The application records a run's machine itself (:func:`transformer_tasks.records.describe_machine`,
from the same :func:`~transformer_tasks.records.cpu_name`); this one-line label is only the book's.
"""

from __future__ import annotations

import torch

from transformer_tasks.records import cpu_name

__all__ = ["machine_name"]


def machine_name(device: torch.device | None = None) -> str:
    """What a timing ran on, in one line: the GPU's name on CUDA, else the CPU's model name.

    Every chapter and benchmark prints this under a number it measured.
    """
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device is not None and device.type == "mps":
        return f"Apple MPS ({cpu_name()})"
    return cpu_name()
