"""``amp="auto"`` on a CPU: the model's own training step timed in float32 and in bfloat16 on this
machine, once (:func:`cached_cpu_amp`), since whether bfloat16 pays depends on the processor and
not only on its instruction sets: an Intel Xeon with AVX-512 bfloat16 but no AMX trained 1.4 times
slower in bfloat16, an AMD EPYC with the same flags faster (chapter 12).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from ..data.batching import Batch
from ..files import atomic_write
from ..runtime import cpu_info
from ..validation import check_positive_int
from .config import TrainConfig
from .loss import BatchForward
from .step import Optimization, StepSetup, optimizer_step

# bfloat16 keeps two or three significant digits, so it must pay clearly to be chosen: a step 10 %
# faster, beyond the few per cent by which two timings of the same step differ on a busy machine.
BF16_MIN_SPEEDUP = 1.1
# A processor without bfloat16 instructions emulates them: its bfloat16 step took 21 times as long
# as float32's (40 s against 1.9 s, the cpu profile on an AMD EPYC with AVX2 only). One timing each
# way that differs by this factor decides at once, so such a machine pays for one step, not three.
CLEAR_RATIO = 2.0


def choose_cpu_amp(step_seconds: Callable[[str], float], repeats: int = 3) -> dict[str, Any]:
    """Float32 or bfloat16 on this CPU, from timings of the model's own training step.

    ``step_seconds(amp)`` runs one step with ``amp`` (``"none"`` or ``"bf16"``) and returns its
    seconds. Each precision first runs one untimed step (the first bfloat16 step builds oneDNN's
    kernels), then up to ``repeats`` timed ones, the two interleaved so that a change of the
    machine's load falls on both; the timing stops early once the medians differ by
    ``CLEAR_RATIO``. Returns ``{"amp", "none", "bf16"}``: ``"bf16"`` where its median step is
    ``BF16_MIN_SPEEDUP`` times faster than float32's, else ``"none"``, and the two medians in
    seconds.
    """
    check_positive_int("repeats", repeats)
    times: dict[str, list[float]] = {"none": [], "bf16": []}
    for amp in times:
        step_seconds(amp)
    for _ in range(repeats):
        for amp, seconds in times.items():
            seconds.append(step_seconds(amp))
        median = {amp: statistics.median(seconds) for amp, seconds in times.items()}
        speedup = median["none"] / median["bf16"]
        if speedup >= CLEAR_RATIO or speedup <= 1 / CLEAR_RATIO:
            break
    pays = speedup >= BF16_MIN_SPEEDUP
    return {"amp": "bf16" if pays else "none", **median}


def amp_cache_path() -> Path:
    """The file that keeps :func:`cached_cpu_amp`'s answers: ``$TRANSFORMER_LIB_CACHE/amp.json``,
    else ``amp.json`` in the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, then
    ``transformer_lib``).
    """
    folder = os.environ.get("TRANSFORMER_LIB_CACHE")
    if not folder:
        cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        folder = Path(cache) / "transformer_lib"
    return Path(folder) / "amp.json"


def cached_answers() -> dict[str, Any]:
    """Every answer the cache file holds, by key (empty where the file is missing or unreadable)."""
    try:
        known = json.loads(amp_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def cached_cpu_amp(key: str, probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The answer stored for ``key`` (this machine, PyTorch, threads, model and batch), else
    ``probe()``'s (:func:`choose_cpu_amp`), stored for the next run. Returns the answer with
    ``"cached"``: whether it came from the file. A missing or unreadable file means a new probe.
    """
    known = cached_answers()
    if isinstance(known.get(key), dict) and known[key].get("amp") in ("none", "bf16"):
        return {**known[key], "cached": True}
    answer = probe()
    known[key] = answer
    text = json.dumps(known, indent=1, sort_keys=True) + "\n"
    try:
        atomic_write(amp_cache_path(), lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError:  # a read-only home: the run goes on, and the next one probes again
        pass
    return {**answer, "cached": False}


def probe_cpu_amp(
    model: nn.Module,
    train_data: Any,
    config: TrainConfig,
    forward: BatchForward,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, Any], Any]:
    """``(answer, train_data)``: :func:`~.choose_cpu_amp` for ``model`` on its first batch, from
    the cache where this machine already answered (``answer["cached"]``), and ``train_data`` to
    train on (the same, or, for a one-pass iterator, one that still yields the batch taken).

    The steps run on a copy of ``model`` with its own Adam, so the run's weights, optimizer and
    random generators (set after the probe) are those of a run without it.
    """
    batch, train_data = _first_batch(train_data)
    if batch is None:  # nothing to time: an empty run needs no precision
        return {"amp": "none", "cached": False}, train_data
    params = sum(p.numel() for p in model.parameters())
    key = " | ".join(
        [
            probe_machine(),
            f"torch {torch.__version__}",
            f"{torch.get_num_threads()} threads",
            f"{params} parameters",
            f"batch {tuple(batch.src.shape)} -> {tuple(batch.tgt_in.shape)}",
        ]
    )
    step_seconds = _step_timer(model, batch, config, forward, clock)
    return cached_cpu_amp(key, lambda: choose_cpu_amp(step_seconds)), train_data


def probe_machine() -> str:
    """The machine part of a probe's cache key: the CPU's model name (its architecture where the
    system does not name it).
    """
    return cpu_info().get("model name") or platform.machine()


def _first_batch(train_data: Any) -> tuple[Batch | None, Any]:
    """The first batch of epoch 0, and ``train_data`` to train on afterwards."""
    if callable(train_data):  # epoch -> batches: calling it again gives epoch 0 afresh
        return next(iter(train_data(0)), None), train_data
    batches = iter(train_data)
    if batches is not train_data:  # a collection: iterating it again starts afresh
        return next(batches, None), train_data
    first = next(batches, None)
    return first, (train_data if first is None else itertools.chain([first], batches))


def _step_timer(
    model: nn.Module,
    batch: Batch,
    config: TrainConfig,
    forward: BatchForward,
    clock: Callable[[], float],
) -> Callable[[str], float]:
    """``amp -> seconds`` of one optimizer step on ``batch``, on a copy of ``model``."""
    trial = copy.deepcopy(model).to("cpu").train()
    optimizer = torch.optim.Adam(trial.parameters(), lr=config.lr, betas=config.adam_betas)
    parts = Optimization(
        optimizer=optimizer,
        scheduler=LambdaLR(optimizer, lambda step: 1.0),
        scaler=torch.amp.GradScaler("cuda", enabled=False),
    )
    setups = {
        amp: StepSetup(
            model=trial,
            parts=parts,
            device=torch.device("cpu"),
            amp=amp,
            forward=forward,
            label_smoothing=config.label_smoothing,
            clip_norm=config.clip_norm,
        )
        for amp in ("none", "bf16")
    }

    def seconds(amp: str) -> float:
        start = clock()
        optimizer_step(setups[amp], [batch], batch.num_tokens)
        return clock() - start

    return seconds
