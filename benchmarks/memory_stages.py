"""Where a training process of the cpu profile keeps its resident memory, stage by stage, and what
glibc's allocator holds on to.

Each run is a fresh process (so that its peak is its own) that builds what ``train-translation``
builds, in this order, and reads its resident memory (``/proc/self/statm``) and its peak so far
(``getrusage``) after each stage: PyTorch imported; Multi30k loaded, the tokenizer trained and one
epoch's batches built; the model and Adam; then ``--steps`` training steps on real batches.
At the end it asks glibc to return the memory it keeps free for later (``malloc_trim(0)``): the
difference is memory that the process no longer uses but still holds.

The same run twice, interleaved: as ``train()`` runs it, and with ``malloc_trim(0)`` after every
step, which returns that memory each time; the result gives both runs' peaks and step times side by
side. A third measurement, in the first process, is the profiler's memory view of one step: what
the forward pass keeps for the backward pass, and what the loss and the backward add.

Linux with glibc only. Not run by the tests.

    MULTI30K_DIR=... .venv/bin/python benchmarks/memory_stages.py --threads 1 --results FILE
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common
import torch
from step_flops import REGIONS, epoch_batches, train_step
from torch.profiler import ProfilerActivity, profile

from transformer_lib import Transformer
from transformer_tasks.records import peak_rss_mb
from transformer_tasks.translation import translation_profile


def resident() -> tuple[float, float | None]:
    """The process's resident memory now and at its peak so far, in MB (10**6 bytes)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        now = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    return round(now, 1), peak_rss_mb()


def child(steps: int, threads: int, seed: int, trim: bool, profile_step: bool) -> dict[str, Any]:
    """One process's stages (see the module's docstring)."""
    stages: list[dict[str, Any]] = []

    def mark(name: str) -> None:
        now, peak = resident()
        stages.append({"stage": name, "resident_mb": now, "peak_mb": peak})

    mark("PyTorch and the packages imported")
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    batches, vocab, _ = epoch_batches()
    mark(f"Multi30k, the tokenizer and {len(batches)} batches")
    model = Transformer(translation_profile("cpu").model_config(vocab)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    mark("model and Adam")
    libc = ctypes.CDLL("libc.so.6")

    def step(batch: Any) -> None:
        train_step(model, optimizer, batch)
        if trim:
            libc.malloc_trim(0)

    seconds = []
    for i, batch in enumerate(batches[:steps]):
        start = time.perf_counter()
        step(batch)
        seconds.append(time.perf_counter() - start)
        if i + 1 in (1, 10, steps):
            mark(f"after step {i + 1}")
    libc.malloc_trim(0)
    mark("after malloc_trim(0)")
    result: dict[str, Any] = {
        "stages": stages,
        "step_seconds_median": round(statistics.median(seconds[2:]), 4),
    }
    if profile_step:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step(batches[steps])
        kept = {e.key: e.cpu_memory_usage / 1e6 for e in prof.key_averages() if e.key in REGIONS}
        result["step_memory_mb"] = {r: round(kept.get(r, 0.0), 1) for r in REGIONS}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each kind, interleaved")
    parser.add_argument("--steps", type=int, default=40, help="training steps of each run")
    parser.add_argument("--results", type=Path, help="also write the JSON result here")
    parser.add_argument("--child", choices=["plain", "trim"], help="run one process's stages")
    args = parser.parse_args()
    if args.steps < 3:
        parser.error(f"--steps must be at least 3 (the first two are not timed), got {args.steps}")
    if args.child:
        trim, profile_step = args.child == "trim", args.child == "plain"
        print(json.dumps(child(args.steps, args.threads, args.seed, trim, profile_step)))
        return
    started = time.perf_counter()
    device = _common.setup("cpu", args.threads, args.seed)
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "trim": []}
    for _ in range(args.repeats):
        for kind in runs:
            command = [sys.executable, __file__, "--child", kind, "--steps", str(args.steps)]
            command += ["--threads", str(args.threads), "--seed", str(args.seed)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
            _common.info(f"{kind}: peak {runs[kind][-1]['stages'][-1]['peak_mb']} MB")
    result = {
        "benchmark": "memory_stages",
        "command": _common.command_line("memory_stages.py", args),
        "model": "cpu profile",
        "amp": "none",
        "steps": args.steps,
        "plain": runs["plain"],
        "trim_every_step": runs["trim"],
        "peak_mb": {
            kind: [run["stages"][-1]["peak_mb"] for run in kind_runs]
            for kind, kind_runs in (("plain", runs["plain"]), ("trim_every_step", runs["trim"]))
        },
        "step_seconds_median": {
            kind: [run["step_seconds_median"] for run in kind_runs]
            for kind, kind_runs in (("plain", runs["plain"]), ("trim_every_step", runs["trim"]))
        },
        **_common.machine_info(device),
    }
    _common.write_results(args.results, result)
    _common.finish(result, started)


if __name__ == "__main__":
    main()
