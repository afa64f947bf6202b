"""Where and how a run happens: device choice, seeding and the training profile.

A building block with no model code: every layer above may use it.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

import numpy as np
import torch

DEVICES = ("auto", "cpu", "cuda", "mps")
PROFILES = ("smoke", "cpu", "gpu")


def pick_device(name: str = "auto") -> torch.device:
    """Return the device to run on: ``"auto"`` picks CUDA, then Apple's MPS, then the CPU.

    Asking for a device that is not available is a ``ValueError`` that says so.
    """
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


PROFILE_ENV_VAR = "TRANSFORMER_PROFILE"


def default_profile(device: torch.device | None = None) -> str:
    """The training profile for this run: ``"gpu"`` on a CUDA device, else ``"cpu"``.

    The ``TRANSFORMER_PROFILE`` environment variable, when set, overrides the choice: ``make test``
    sets it to ``"smoke"`` so that the chapters and the command line train for seconds, not minutes.
    A value that is not a profile name is a ``ValueError`` that names the variable.
    """
    forced = os.environ.get(PROFILE_ENV_VAR)
    if forced:
        if forced not in PROFILES:
            raise ValueError(f"{PROFILE_ENV_VAR}={forced!r} is not one of {list(PROFILES)}")
        return forced
    device = device if device is not None else pick_device()
    return "gpu" if device.type == "cuda" else "cpu"


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run the body with ``threads`` CPU threads (``None``: leave the setting); restore it afterwards.

    Yields the number of threads in use.
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)

