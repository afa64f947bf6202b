"""Where and how a run happens: the device, the seeds, the threads, the precision, the CPU."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Literal, get_args

import numpy as np
import torch

DEVICES = ("auto", "cpu", "cuda", "mps")


def pick_device(name: str = "auto") -> torch.device:
    """Return the device to run on: ``"auto"`` picks CUDA, then Apple's MPS, then the CPU."""
    if name not in DEVICES:
        raise ValueError(f"device={name!r} is not one of {list(DEVICES)}")
    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        raise ValueError(f"device={name!r} was asked for but is not available on this machine")
    return torch.device(name)


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's random number generators (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the body with ``threads`` CPU threads (``None``: leave the setting), yielded; restore it
    afterwards.
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


# oneDNN, which runs PyTorch's bfloat16 products on a CPU, keeps the kernels it built for every
# shape it met in two caches of 1,024 entries (ideep's LRU_CACHE_CAPACITY and oneDNN's primitive
# cache). Batches of varying lengths meet hundreds of shapes, so a bfloat16 training step of the cpu
# profile kept about 15 MB more each step (float32, or bfloat16 on one shape, stayed flat); 32
# entries each held it flat at the same speed (benchmarks/results/bf16_kernel_caches.json).
CPU_KERNEL_CACHE_CAPACITY = 32


def cap_cpu_kernel_caches(capacity: int = CPU_KERNEL_CACHE_CAPACITY) -> None:
    """Cap oneDNN's caches of CPU kernels at ``capacity`` shapes each, unless the environment
    already sets them. The libraries read these variables when they build their first kernel, so
    a call after that changes nothing (:func:`~.train` calls it before its first bfloat16 step).
    """
    for name in ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY"):
        os.environ.setdefault(name, str(capacity))


AmpMode = Literal["auto", "none", "bf16", "fp16"]
AMP_CHOICES: tuple[str, ...] = get_args(AmpMode)
"""The mixed precisions a run can ask for (``TrainConfig.amp``); ``"auto"`` resolves to another."""


def amp_for_device(device_type: str, cuda_capability: tuple[int, int] | None = None) -> str:
    """The mixed precision that pays on a GPU, from what it can do.

    On CUDA ``"bf16"`` from compute capability 8.0 (Ampere), whose tensor cores multiply bfloat16,
    ``"fp16"`` before it (V100, T4), which trains with a gradient scaler; ``"none"`` elsewhere. A
    CPU's answer is measured instead (:func:`~.choose_cpu_amp`), because the same CPU flags went
    both ways on two machines.
    """
    if device_type == "cuda":
        if cuda_capability is None:
            raise ValueError("device_type='cuda' needs cuda_capability=(major, minor)")
        return "bf16" if tuple(cuda_capability) >= (8, 0) else "fp16"
    return "none"


def resolve_amp(amp: str, device: torch.device) -> str:
    """``amp`` itself, or for ``"auto"`` on a GPU :func:`amp_for_device` of ``device``. On a CPU
    ``"auto"`` is measured by the training loop (:func:`~.choose_cpu_amp`), not resolved here.
    """
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp={amp!r} is not one of {list(AMP_CHOICES)}")
    if amp != "auto":
        return amp
    if device.type == "cpu":
        raise ValueError("amp='auto' on a CPU is measured: call choose_cpu_amp with a step to time")
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return amp_for_device(device.type, capability)


def cpu_info(path: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's entries of ``/proc/cpuinfo`` (all report the same model and flags),
    else ``{}``.
    """
    entries: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as info:
            for line in info:
                if not line.strip():  # a blank line ends the first processor's block
                    break
                key, _, value = line.partition(":")
                entries[key.strip()] = value.strip()
    except OSError:  # not Linux (macOS, Windows), or a sandbox that hides /proc
        return {}
    return entries


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo``; empty where there is
    none).
    """
    return frozenset(cpu_info().get("flags", "").split())
