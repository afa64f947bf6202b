"""Resident memory of bfloat16 training steps on the CPU, with oneDNN's kernel caches at their
default size and capped, like for like.

A bfloat16 product on the CPU runs a oneDNN kernel built for its shape, and two caches keep the
kernels of every shape met: ideep's (``LRU_CACHE_CAPACITY``) and oneDNN's primitive cache
(``ONEDNN_PRIMITIVE_CACHE_CAPACITY``), 1,024 entries each by default. The cpu profile's batches
have varying lengths, so the steps meet new shapes all the time. This script trains the cpu
profile's model on the cpu profile's first Multi30k batches (3,000 padded tokens, shuffled as the
run shuffles them) in fresh processes, each reading its resident memory every 10 steps:

- ``bf16 default``: bfloat16 autocast, both caches at 1,024 entries (the libraries' default);
- ``bf16 capped``: bfloat16 autocast, as ``train()`` now sets them (``CPU_KERNEL_CACHE_CAPACITY``);
- ``float32``: no autocast, the control (its products are oneMKL's, not oneDNN's).

The two bfloat16 ways alternate (default, capped, capped, default), so their times compare like for
like. Not run by the tests.

    MULTI30K_DIR=... .venv/bin/python benchmarks/bf16_kernel_caches.py --steps 60 --results FILE
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
import torch

from transformer_lib import TrainConfig, Transformer, token_batches, train
from transformer_lib.runtime import CPU_KERNEL_CACHE_CAPACITY
from transformer_tasks.multi30k import load_multi30k
from transformer_tasks.translation import encode_pairs, translation_profile
from transformer_tasks.translation.data import train_translation_tokenizer

CACHES = ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY")
WAYS = {
    "bf16 default": ("bf16", "1024"),
    "bf16 capped": ("bf16", None),  # train() sets them
    "float32": ("none", None),
}
ORDER = ("bf16 default", "bf16 capped", "bf16 capped", "bf16 default", "float32")


def resident_mb() -> int:
    """This process's resident memory (VmRSS), in MiB."""
    with open("/proc/self/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def write_batches(path: Path, steps: int) -> dict[str, Any]:
    """The cpu profile's first ``steps`` training batches, saved as id tensors; their shapes."""
    profile = translation_profile("cpu")
    data = load_multi30k(os.environ.get("MULTI30K_DIR"))
    tokenizer = train_translation_tokenizer(data["train"], vocab_size=profile.data.vocab_size)
    ids = encode_pairs(tokenizer, data["train"])
    ends = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    batches = token_batches(ids, profile.data.max_tokens, **ends, shuffle=True, seed=0)[:steps]
    torch.save({"batches": [(b.src, b.tgt_in, b.tgt_out) for b in batches], **ends}, path)
    shapes = {(tuple(b.src.shape), tuple(b.tgt_in.shape)) for b in batches}
    return {"batches": len(batches), "distinct_shapes": len(shapes)}


def child(batches_file: str, amp: str) -> None:
    """Train on the saved batches; print the resident memory every 10 steps and the time."""
    from transformer_lib import Batch

    torch.set_num_threads(1)
    saved = torch.load(batches_file, weights_only=True)
    pad = saved["pad_id"]
    batches = [Batch(src, tgt_in, tgt_out, pad) for src, tgt_in, tgt_out in saved["batches"]]
    torch.manual_seed(0)
    model = Transformer(translation_profile("cpu").model_config(8000))
    trace: list[int] = []

    def measure(model: torch.nn.Module) -> dict[str, float]:  # train() calls it every 10 steps
        trace.append(resident_mb())
        return {}

    config = TrainConfig(
        max_steps=len(batches), warmup_steps=5, lr=1e-3, amp=amp, eval_every=10, progress=False
    )
    started = time.perf_counter()
    result = train(model, batches, config, evaluate=measure)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "train_seconds": result.train_seconds, "rss": trace}))


def run_child(batches_file: Path, way: str) -> dict[str, Any]:
    amp, capacity = WAYS[way]
    env = {k: v for k, v in os.environ.items() if k not in CACHES}
    if capacity is not None:
        env.update(dict.fromkeys(CACHES, capacity))
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(batches_file), amp],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("BATCHES", "AMP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        batches_file = Path(folder) / "batches.pt"
        data = write_batches(batches_file, args.steps)
        runs = []
        for way in ORDER:
            _common.info(f"{way} ...")
            runs.append({"way": way, **run_child(batches_file, way)})
    summary = {}
    for way in WAYS:
        mine = [r for r in runs if r["way"] == way]
        growth = [(r["rss"][-1] - r["rss"][0]) / (10 * (len(r["rss"]) - 1)) for r in mine]
        summary[way] = {
            "rss_mb_every_10_steps": [r["rss"] for r in mine],
            "growth_mb_per_step": round(statistics.mean(growth), 1),
            "peak_rss_mb": max(max(r["rss"]) for r in mine),
            "train_seconds": [round(r["train_seconds"], 1) for r in mine],
        }
    default, capped = (summary[w]["train_seconds"] for w in ("bf16 default", "bf16 capped"))
    # each capped run over the default run beside it in ORDER (default, capped, capped, default)
    ratios = [capped[0] / default[0], capped[1] / default[1]]
    result = {
        "benchmark": "bf16_kernel_caches",
        "command": " ".join(["benchmarks/bf16_kernel_caches.py", *sys.argv[1:]]),
        "capped_at": CPU_KERNEL_CACHE_CAPACITY,
        "steps": args.steps,
        **data,
        "ways": summary,
        "capped_over_default_time": [round(r, 3) for r in ratios],
        **_common.machine_info(torch.device("cpu")),
        "threads": 1,
    }
    _common.finish(result, started)
    if args.results:
        args.results.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
