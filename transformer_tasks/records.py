"""What a results file records besides the results: the machine that measured them and the code's
commit.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import torch

from transformer_lib.runtime import cpu_info
from transformer_lib.training.precision import cached_answers, probe_machine


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what Python's ``platform`` module
    knows of it.
    """
    # platform.processor() is empty on many Linux machines; the architecture is better than nothing.
    return cpu_info().get("model name") or platform.processor() or platform.machine()


def describe_machine(device: torch.device | None = None) -> dict[str, object]:
    """Where a result was measured: CPU, logical CPUs, GPU, platform, Python and PyTorch
    versions, and what ``amp="auto"`` measured on this CPU (:func:`amp_probes`).
    """
    gpu = (
        torch.cuda.get_device_name(device) if device is not None and device.type == "cuda" else None
    )
    return {
        "cpu": cpu_name(),
        "logical_cpus": os.cpu_count(),
        "gpu": gpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "amp_probes": amp_probes(),
    }


def amp_probes() -> dict[str, dict[str, object]]:
    """What ``amp="auto"`` measured on this CPU (:func:`~.choose_cpu_amp`: a step's seconds in
    float32 and in bfloat16, and the choice), by model and batch, from this machine's cache.
    """
    machine = probe_machine() + " | "
    return {key: answer for key, answer in cached_answers().items() if key.startswith(machine)}


def peak_rss_mb() -> float | None:
    """The most resident memory this process has held so far, in MB (10**6 bytes): written at the
    end of a run, the run's peak (in a notebook, the kernel's, whatever else it ran). ``None``
    where the system does not report it (Windows).
    """
    try:
        import resource  # Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux counts kilobytes (1,024 bytes), macOS bytes.
    return round(peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6, 1)


def source_commit(folder: str | os.PathLike[str] = ".") -> str | None:
    """The git commit of the code that ran (``"<sha>+changes"`` with uncommitted changes; ``None``
    outside git).
    """

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=10
        )
        if done.returncode != 0:
            raise OSError(done.stderr)
        return done.stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+changes" if changed else "")
