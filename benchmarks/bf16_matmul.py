"""Time one linear layer's product in float32 and in bfloat16 on the CPU, like for like, and name
the library kernel that runs each.

Chapter 12 finds bfloat16 autocast slower than float32 for a whole training step on a CPU with
AVX-512 bfloat16 instructions but no AMX. This script looks at the part that decides it, the
matrix products, at the sizes of that step (``benchmarks/compile_amp.py``'s model: 512 tokens,
d_model 256, d_ff 1024, 4,000 output ids):

- ``float32``: ``F.linear`` of float32 inputs and weights;
- ``bfloat16``: the same product with inputs and weights already in bfloat16 (the kernel alone);
- ``autocast``: float32 inputs and weights under ``torch.autocast("cpu", dtype=torch.bfloat16)``,
  which converts both to bfloat16 on every call, as a training step does.

The three alternate call by call after a warm-up (who goes first rotating), and each ratio is the
median of adjacent timings' ratios (a way / float32) with its quartiles. A second process runs
one product of each dtype with ``MKL_VERBOSE=1`` and ``ONEDNN_VERBOSE=1`` and records the kernels
those libraries report (none: the library did not run it). Not run by the tests.

    .venv/bin/python benchmarks/bf16_matmul.py --threads 1 --results FILE
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import _common
import torch
import torch.nn.functional as F

# (tokens, in_features, out_features): attention's projections, the feed-forward layer's two
# products, and the output layer of compile_amp.py's model
SHAPES = ((512, 256, 256), (512, 256, 1024), (512, 1024, 256), (512, 256, 4000))
WAYS = ("float32", "bfloat16", "autocast")
CPU = torch.device("cpu")


def products(tokens: int, d_in: int, d_out: int) -> dict[str, Callable[[], object]]:
    """The three ways of one product ``(tokens, d_in) @ (d_in, d_out)``, on the same numbers."""
    x = torch.randn(tokens, d_in)
    w = torch.randn(d_out, d_in) / d_in**0.5
    x16, w16 = x.bfloat16(), w.bfloat16()

    def autocast() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.linear(x, w)

    return {
        "float32": lambda: F.linear(x, w),
        "bfloat16": lambda: F.linear(x16, w16),
        "autocast": autocast,
    }


def compare(ways: dict[str, Callable[[], object]], warmup: int, repeats: int) -> dict[str, Any]:
    """Median milliseconds of each way, and each way's median paired ratio to float32."""
    for _ in range(warmup):
        for fn in ways.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(1000.0 * _common.time_call(ways[name], CPU))
    result: dict[str, Any] = {
        "median_ms": {n: round(statistics.median(t), 4) for n, t in times.items()}
    }
    for name in ("bfloat16", "autocast"):
        ratios = [a / b for a, b in zip(times[name], times["float32"], strict=True)]
        q1, median, q3 = statistics.quantiles(ratios, n=4)
        result[f"time_ratio_{name}_over_float32"] = round(median, 2)
        result[f"time_ratio_{name}_iqr"] = [round(q1, 2), round(q3, 2)]
    return result


PROBE = """
import torch, torch.nn.functional as F
torch.set_num_threads(1)
x, w = torch.randn(512, 256), torch.randn(1024, 256)
F.linear(x, w)
print("--- bfloat16", flush=True)
F.linear(x.bfloat16(), w.bfloat16())
"""


def kernels() -> dict[str, list[str]]:
    """The kernels MKL and oneDNN report for one float32 and one bfloat16 product."""
    env = {**os.environ, "MKL_VERBOSE": "1", "ONEDNN_VERBOSE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    float32_part, _, bfloat16_part = out.partition("--- bfloat16")
    return {"float32": _reported(float32_part), "bfloat16": _reported(bfloat16_part)}


def _reported(text: str) -> list[str]:
    """One entry per kernel call: MKL's routine (``SGEMM``), or oneDNN's primitive and its
    implementation (``matmul brg_matmul:avx512_core_bf16``)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        words = line.split()
        if words[0] == "MKL_VERBOSE" and "(" in words[1]:  # a call, not the version line
            found.append("MKL " + words[1].split("(")[0])
        elif line.startswith("onednn_verbose") and ",exec," in line:
            fields = line.split(",")
            at = fields.index("exec")
            found.append(f"oneDNN {fields[at + 2]} {fields[at + 3]}")
    return found


def main() -> None:
    description = __doc__.split("\n\n")[0]
    args = _common.timing_parser(
        description, 10, 200, "timed calls per way, per shape"
    ).parse_args()
    started = time.perf_counter()
    device = _common.setup("cpu", args.threads, args.seed)
    machine = _common.machine_info(device)  # the load before timing, too
    shapes = {}
    for tokens, d_in, d_out in SHAPES:
        name = f"{tokens}x{d_in} @ {d_in}x{d_out}"
        shapes[name] = compare(products(tokens, d_in, d_out), args.warmup, args.repeats)
        _common.info(f"{name}: {shapes[name]}")
    result = {
        "benchmark": "bf16_matmul",
        "command": _common.command_line("bf16_matmul.py", args),
        "shapes": shapes,
        "kernels": kernels(),
        **machine,
    }
    _common.write_results(args.results, result)
    _common.finish(result, started)


if __name__ == "__main__":
    main()
