"""Where and how a run happens: device choice, seeding and the training profile.

A building block with no model code: every layer above may use it.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterable, Iterator

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


AMP_CHOICES = ("auto", "none", "bf16", "fp16")
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo flags of native bfloat16 arithmetic


def amp_for_device(
    device_type: str, cuda_capability: tuple[int, int] | None = None, cpu_flags: Iterable[str] = ()
) -> str:
    """The mixed precision that pays on a device, from what the device can do (given, not probed).

    * ``"cuda"``: ``"bf16"`` from compute capability 8.0 (Ampere: A100, RTX 30xx, and later), whose
      tensor cores multiply bfloat16; ``"fp16"`` before it (V100 7.0, T4 7.5: float16 tensor cores,
      no fast bfloat16), which trains with a gradient scaler;
    * ``"cpu"``: ``"bf16"`` when the CPU has native bfloat16 instructions (the ``avx512_bf16`` or
      ``amx_bf16`` flag), else ``"none"``: emulated bfloat16 is slower than float32;
    * anything else (Apple's ``"mps"``): ``"none"``.
    """
    if device_type == "cuda":
        if cuda_capability is None:
            raise ValueError("device_type='cuda' needs cuda_capability=(major, minor)")
        return "bf16" if tuple(cuda_capability) >= (8, 0) else "fp16"
    if device_type == "cpu":
        return "bf16" if BF16_CPU_FLAGS & set(cpu_flags) else "none"
    return "none"


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo``; empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            line = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(line.partition(":")[2].split())


def resolve_amp(amp: str, device: torch.device) -> str:
    """``amp`` itself, or for ``"auto"`` :func:`amp_for_device` of ``device`` as this machine reports it."""
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp={amp!r} is not one of {list(AMP_CHOICES)}")
    if amp != "auto":
        return amp
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return amp_for_device(device.type, capability, cpu_flags() if device.type == "cpu" else ())


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what Python's ``platform`` module knows of it."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    # platform.processor() is empty on many Linux machines; the architecture is better than nothing.
    return platform.processor() or platform.machine()


def machine_name(device: torch.device | None = None) -> str:
    """What a timing ran on, in one line: the GPU's name on CUDA, else the CPU's model name.

    Every chapter and benchmark prints this under a number it measured.
    """
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device is not None and device.type == "mps":
        return f"Apple MPS ({cpu_name()})"
    return cpu_name()


def describe_machine(device: torch.device | None = None) -> dict[str, object]:
    """Where a result was measured: CPU, logical CPUs, GPU, platform, Python and PyTorch versions."""
    import platform

    gpu = torch.cuda.get_device_name(device) if device is not None and device.type == "cuda" else None
    return {
        "cpu": cpu_name(),
        "logical_cpus": os.cpu_count(),
        "gpu": gpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def source_commit(folder: str | os.PathLike[str] = ".") -> str | None:
    """The git commit of the code that ran (``"<sha>+changes"`` with uncommitted changes; ``None`` outside git)."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise OSError(done.stderr)
        return done.stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+changes" if changed else "")
