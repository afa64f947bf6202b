"""Time and peak memory of one attention layer against sequence length: reference path vs fused
kernel.

The two paths compute the same function on the same inputs ``q, k, v`` of shape ``(B, H, T, d_k)``
(default: batch 1, 8 heads of width 64, as in the paper's d_model = 512; no mask, float32):

* ``reference``: ``transformer_lib.nn.attention.scaled_dot_product_attention``, the step-by-step
  ``softmax(Q K^T / sqrt(d_k)) V`` of chapter 3; it builds the whole ``(B, H, T, T)`` score matrix.
* ``fused``: PyTorch's ``F.scaled_dot_product_attention`` (on the CPU a flash-attention kernel that
  works through the keys in blocks and never holds the whole matrix).

With ``--projections`` both run inside ``transformer_lib.MultiHeadAttention`` (d_model = heads x
d_k) instead, whose ``need_weights=True`` takes the reference path and ``need_weights=False`` the
fused one; the four linear projections then add work that grows only linearly with T.

For each length the script checks that both paths give the same output, measures each path's peak
memory once (``transformer_book.memory.peak_memory``: the CPU allocator's own reports, collected by
``torch.profiler``; ``torch.cuda.max_memory_allocated`` on CUDA) and then times the forward pass
(``--backward``: forward + backward) several times, the two paths taking turns. Long lengths get
fewer repeats (each point stops after ``--point-seconds``). Slopes of the log-log lines are fitted
over the longer half of the lengths, where the T^2 terms dominate the fixed costs.

Usage::

    .venv/bin/python benchmarks/attention_scaling.py [--device auto] [--threads 1] [--backward]
    [--quick]

Default lengths: 64 ... 4096 on the CPU, 256 ... 16384 on CUDA; ``--quick``: 64 ... 512 (for the
tests). The last line of stdout is a JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _common import finish, fit_loglog, info, machine_info, setup, time_call
from torch import Tensor

from transformer_book.memory import peak_memory
from transformer_lib import MultiHeadAttention, scaled_dot_product_attention

PATHS = ("reference", "fused")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def make_paths(
    args: argparse.Namespace, device: torch.device, dtype: torch.dtype
) -> dict[str, Callable]:
    """The two ways to compute one attention layer, as functions of ``(q, k, v)``."""
    if not args.projections:
        return {
            "reference": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],  # (B, H, T, d_k)
            "fused": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),  # (B, H, T, d_k)
        }
    layer = MultiHeadAttention(args.heads * args.d_k, args.heads).to(device, dtype)
    return {
        "reference": lambda x, _k, _v: layer(x, x, x, need_weights=True)[0],  # (B, T, d_model)
        "fused": lambda x, _k, _v: layer(x, x, x, need_weights=False)[0],  # (B, T, d_model)
    }


def make_inputs(
    args: argparse.Namespace, length: int, device: torch.device, dtype: torch.dtype
) -> list[Tensor]:
    if args.projections:
        x = torch.randn(args.batch, length, args.heads * args.d_k, device=device, dtype=dtype)
        return [x.requires_grad_(args.backward), x, x]
    shape = (args.batch, args.heads, length, args.d_k)
    return [
        torch.randn(shape, device=device, dtype=dtype).requires_grad_(args.backward)
        for _ in range(3)
    ]


def make_call(path: Callable, inputs: list[Tensor], backward: bool) -> Callable[[], Tensor]:
    """One measured call: the forward pass (no autograd), or forward + backward."""
    if not backward:

        def forward() -> Tensor:
            with torch.no_grad():
                return path(*inputs)

        return forward

    def forward_backward() -> Tensor:
        for x in inputs:
            x.grad = None
        out = path(*inputs)
        out.backward(torch.ones_like(out))
        return out.detach()

    return forward_backward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", default="auto", help="auto|cpu|cuda|mps (memory is measured on cpu and cuda)"
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (0: PyTorch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lengths", default="", help="comma-separated sequence lengths (default: by device)"
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument(
        "--backward", action="store_true", help="time forward + backward instead of forward"
    )
    parser.add_argument(
        "--projections", action="store_true", help="time the whole MultiHeadAttention layer"
    )
    parser.add_argument(
        "--repeats", type=int, default=7, help="most timed calls per length and path"
    )
    parser.add_argument(
        "--point-seconds", type=float, default=3.0, help="stop repeating a point after this"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small budget for the tests: lengths 64..512, 3 repeats",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    device = setup(args.device, args.threads, args.seed)
    dtype = DTYPES[args.dtype]
    if args.lengths:
        lengths = [int(x) for x in args.lengths.split(",")]
    elif args.quick:
        lengths = [64, 128, 256, 512]
    else:
        lengths = [2**e for e in (range(8, 15) if device.type == "cuda" else range(6, 13))]
    if args.quick:
        args.repeats, args.point_seconds = min(args.repeats, 3), min(args.point_seconds, 0.2)
    result = {"benchmark": "attention_scaling", **machine_info(device)}
    info(
        f"attention on {device.type} ({result['device_name']}), {result['threads']} thread(s), "
        f"lengths {lengths}"
    )
    paths = make_paths(args, device, dtype)

    measured: dict[str, dict[str, list]] = {
        p: {"median_ms": [], "min_ms": [], "calls": [], "peak_bytes": []} for p in PATHS
    }
    differences: list[float | None] = []
    failed: dict[str, int] = {}  # path -> first length that ran out of memory
    for length in lengths:
        torch.manual_seed(args.seed)
        inputs = make_inputs(args, length, device, dtype)
        live = [p for p in PATHS if p not in failed]
        calls = {p: make_call(paths[p], inputs, args.backward) for p in live}
        outputs: dict[str, Tensor] = {}
        for p in PATHS:  # memory first (one call each); running out of memory drops a path for good
            if p in failed:
                measured[p]["peak_bytes"].append(None)
                continue
            try:
                if device.type in ("cpu", "cuda"):
                    outputs[p], peak = peak_memory(calls[p], device)
                else:  # no allocator statistics to read on this device
                    outputs[p], peak = calls[p](), None
                measured[p]["peak_bytes"].append(peak)
            except (torch.OutOfMemoryError, RuntimeError) as error:
                if "memory" not in str(error).lower():
                    raise
                info(f"  {p} ran out of memory at length {length}; longer lengths skip it")
                failed[p] = length
                measured[p]["peak_bytes"].append(None)
        live = [p for p in live if p not in failed]
        if len(outputs) == 2:
            differences.append(
                (outputs["reference"].float() - outputs["fused"].float()).abs().max().item()
            )
        else:
            differences.append(None)
        outputs.clear()
        times: dict[str, list[float]] = {p: [] for p in live}
        for p in live:
            calls[p]()  # warm-up
        spent = 0.0
        while live and min(len(t) for t in times.values()) < args.repeats:
            for p in live if len(times[live[0]]) % 2 == 0 else live[::-1]:  # take turns
                times[p].append(time_call(calls[p], device))
            spent += sum(t[-1] for t in times.values())
            if spent > args.point_seconds and min(len(t) for t in times.values()) >= 1:
                break
        for p in PATHS:
            t = times.get(p)
            measured[p]["median_ms"].append(round(statistics.median(t) * 1e3, 4) if t else None)
            measured[p]["min_ms"].append(round(min(t) * 1e3, 4) if t else None)
            measured[p]["calls"].append(len(t) if t else 0)
        summary = ", ".join(
            f"{p} {measured[p]['median_ms'][-1]} ms / {measured[p]['peak_bytes'][-1]} B"
            for p in PATHS
        )
        info(f"  T={length:>6}: {summary}; max |difference| {differences[-1]}")
        del inputs, calls

    fit_lengths = lengths[len(lengths) // 2 :] if len(lengths) >= 4 else lengths
    slopes: dict[str, dict[str, float | None]] = {}
    for p in PATHS:
        slopes[p] = {}
        for key, name in (("median_ms", "time"), ("peak_bytes", "memory")):
            pairs = [
                (n, v)
                for n, v in zip(lengths, measured[p][key], strict=True)
                if n in fit_lengths and v
            ]
            fit = (
                fit_loglog([n for n, _ in pairs], [v for _, v in pairs])
                if len(pairs) >= 2
                else None
            )
            slopes[p][name] = None if fit is None else round(fit["slope"], 3)
            slopes[p][name + "_intercept"] = None if fit is None else round(fit["intercept"], 4)
    element = torch.empty((), dtype=dtype).element_size()
    ok = [d for d in differences if d is not None]
    result.update(
        {
            "what": "MultiHeadAttention layer"
            if args.projections
            else "attention on (B, H, T, d_k) inputs",
            "pass": "forward+backward" if args.backward else "forward",
            "quick": args.quick,
            "seed": args.seed,
            "batch": args.batch,
            "heads": args.heads,
            "d_k": args.d_k,
            "dtype": args.dtype,
            "lengths": lengths,
            "score_matrix_bytes": [args.batch * args.heads * n * n * element for n in lengths],
            "paths": measured,
            "out_of_memory_from": failed,
            "max_abs_difference": differences,
            "outputs_close": all(d < (1e-4 if dtype == torch.float32 else 5e-2) for d in ok)
            if ok
            else None,
            "fit_lengths": fit_lengths,
            "slopes": slopes,
            "memory_method": (
                "torch.cuda.max_memory_allocated"
                if device.type == "cuda"
                else "torch.profiler profile_memory: running total of the CPU allocator's reports"
            ),
            "repeats": args.repeats,
            "point_seconds": args.point_seconds,
        }
    )
    for p in PATHS:
        info(
            f"{p}: time slope {slopes[p]['time']}, memory slope {slopes[p]['memory']} (fit over "
            f"{fit_lengths})"
        )
    if not math.isfinite(sum(ok)):
        info("warning: a difference is not finite")
    finish(result, started)


if __name__ == "__main__":
    main()
