"""Helpers shared by the benchmarks (attention_scaling, kv_cache_scaling, compile_amp,
qkv_projection, bf16_matmul).

Each script imports this file as ``_common`` (Python puts the script's own folder first on
``sys.path``), prints progress to stderr and its result as one JSON object on the last line of
stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from transformer_book.machine import machine_name
from transformer_lib.config import TransformerConfig
from transformer_lib.files import atomic_write
from transformer_lib.runtime import cpu_flags as runtime_cpu_flags
from transformer_lib.runtime import pick_device
from transformer_tasks.records import cpu_name, peak_rss_mb
from transformer_tasks.translation import translation_profile


def info(message: str) -> None:
    """Progress and notes go to stderr, so that stdout ends with the JSON result alone."""
    print(message, file=sys.stderr, flush=True)


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (``None`` where the OS has none, e.g. Windows)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def cpu_flags(
    wanted: Sequence[str] = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"),
) -> list[str]:
    """Which of the ``wanted`` instruction-set flags the CPU reports (Linux only; [] elsewhere)."""
    flags = runtime_cpu_flags()
    return [flag for flag in wanted if flag in flags]


def decoding_model_config() -> TransformerConfig:
    """The decoding benchmarks' model: the model of the ``cpu`` translation profile (d_model 256,
    3+3 layers, 4 heads, d_ff 1024, Pre-LN) for one shared vocabulary of 8,000 ids; the caller
    initialises it randomly."""
    return translation_profile("cpu").model_config(8000)


def setup(device_name: str, threads: int, seed: int) -> torch.device:
    """Pick the device, set the number of CPU threads (0: PyTorch's default) and seed."""
    device = pick_device(device_name)
    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    return device


def machine_info(device: torch.device) -> dict[str, Any]:
    """Hardware and software facts that go into every result, and the load when this was called."""
    facts: dict[str, Any] = {
        "device": device.type,
        "device_name": machine_name(device),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpu_flags": cpu_flags(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_start": load_average(),
    }
    if device.type == "cuda":
        facts["cuda"] = torch.version.cuda
    return facts


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer measures it (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``fn`` takes (GPU work included)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def fit_loglog(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Least-squares line through ``(log x, log y)``: ``y ~ exp(intercept) * x ** slope``."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(points) < 2:
        return {"slope": float("nan"), "intercept": float("nan")}
    mean_x = sum(p[0] for p in points) / len(points)
    mean_y = sum(p[1] for p in points) / len(points)
    sxx = sum((p[0] - mean_x) ** 2 for p in points)
    sxy = sum((p[0] - mean_x) * (p[1] - mean_y) for p in points)
    slope = sxy / sxx
    return {"slope": slope, "intercept": mean_y - slope * mean_x}


def finish(result: dict[str, Any], started: float) -> None:
    """Add the wall time, the load at the end and the process's peak resident memory, then print
    the result as the last line of stdout."""
    result["load_average_end"] = load_average()
    result["peak_rss_mb"] = peak_rss_mb()
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(result))


def timing_parser(
    description: str, warmup: int, repeats: int, what: str
) -> argparse.ArgumentParser:
    """The options of a benchmark that alternates ways of doing one thing on the CPU: ``--threads``,
    ``--seed``, ``--warmup`` and ``--repeats`` (``what`` says what one repeat times), and
    ``--results``, a file to write the JSON result to. The caller adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--repeats", type=int, default=repeats, help=what)
    parser.add_argument("--results", type=Path, help="also write the JSON result here")
    return parser


def command_line(script: str, args: argparse.Namespace) -> str:
    """The command that gives this result again: ``script`` with every option set (``--results``
    left out, as it only says where to write)."""
    options = (
        f"--{k.replace('_', '-')} {v}"  # argparse stores --profile-steps as profile_steps
        for k, v in vars(args).items()
        if k != "results" and v is not None
    )
    return " ".join([f"benchmarks/{script}", *options])


def write_results(path: Path | None, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON to ``path`` atomically (nothing when ``path`` is None),
    with the process's peak resident memory so far.
    """
    if path is None:
        return
    result["peak_rss_mb"] = peak_rss_mb()
    text = json.dumps(result, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
