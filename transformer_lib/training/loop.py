"""The training loop (训练循环): teacher forcing, label smoothing, Adam with a warm-up schedule.

:func:`~.train` is one loop over a :class:`~.TrainState`; each group of ``grad_accum`` batches
(under ``torchrun``, this rank's: :func:`~.shard_batches`) is one :func:`~.optimizer_step`.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from tqdm.auto import tqdm

from ..data.batching import Batch
from ..eval_mode import eval_mode
from ..model import Transformer
from ..runtime import cap_cpu_kernel_caches, resolve_amp, set_seed
from .config import TrainConfig, TrainResult
from .distributed import all_gather_object, barrier, broadcast_object, is_distributed, shard_batches
from .loss import BatchForward, batch_logits
from .precision import probe_cpu_amp
from .schedule import linear_decay_schedule, noam_schedule
from .state import TrainState, load_training_state, rng_state, save_training_state
from .step import Optimization, StepSetup, optimizer_step, wrap_for_ranks

TrainData = Iterable[Batch] | Callable[[int], Iterable[Batch]]
"""A re-iterable of :class:`~.Batch` (the same batches every epoch), or ``epoch -> iterable``."""
Evaluate = Callable[[nn.Module], dict[str, float]]


def train(
    model: nn.Module,
    train_data: TrainData,
    config: TrainConfig,
    device: torch.device | str = "cpu",
    evaluate: Evaluate | None = None,
    resume_from: str | os.PathLike[str] | None = None,
    metadata: dict[str, Any] | None = None,
    forward: BatchForward = batch_logits,
) -> TrainResult:
    """Train ``model`` with teacher forcing; return the run's :class:`~.TrainResult`.

    Args:
        train_data: one epoch's batches, or ``epoch -> batches`` (from 0; for an exact resume, a
            function of the epoch only), e.g.
            ``lambda epoch: batch_loader(pairs, 4000, pad, bos, eos, seed=epoch)``.
        evaluate: ``model -> {metric: value}``, run in eval mode every ``eval_every`` steps (or
            epoch) and at the end.
        resume_from: a ``checkpoint_path`` (or directory) an earlier call wrote: training continues
            as if it had never stopped (weights, Adam, schedule, random generators, data position).
        metadata: JSON-serialisable extra metadata stored in every checkpoint (e.g. a tokenizer).
        forward: ``(model, batch) -> logits (B, T, V)``, for a model other than
            :class:`~.Transformer`.

    Under ``torchrun`` every rank calls ``train`` with the same arguments and batches; a step takes
    ``grad_accum`` batches per rank, ``history``'s losses are over all ranks, rank 0's metrics
    decide ``target``, and ``resume_from`` needs a run of as many processes.
    """
    _check_arguments(model, train_data, config, evaluate, resume_from, metadata)
    device = torch.device(device)
    rank, world = (dist.get_rank(), dist.get_world_size()) if is_distributed() else (0, 1)
    amp, amp_probe = config.amp, None
    if device.type == "cpu" and amp in ("auto", "bf16"):
        cap_cpu_kernel_caches()  # before the first bfloat16 kernel; else memory grows with shapes
    if device.type == "cpu" and amp == "auto":  # measured on this machine, once
        if rank == 0:
            amp_probe, train_data = probe_cpu_amp(model, train_data, config, forward)
        amp_probe = broadcast_object(amp_probe) if world > 1 else amp_probe
        amp = amp_probe["amp"]
    amp = resolve_amp(amp, device)  # "auto" on a GPU: what its compute capability offers
    _check_device(amp, device, world > 1)
    model = model.to(device)
    result = TrainResult(world_size=world, amp=amp, amp_probe=amp_probe)
    state = TrainState(world_size=world, result=result)

    def budget_spent() -> float:  # the linear schedule also decays with the time spent
        return state.result.train_seconds / config.time_budget_s

    optimizer = torch.optim.Adam(
        model.parameters(), lr=config.lr, betas=config.adam_betas, eps=config.adam_eps
    )
    time_used = budget_spent if config.time_budget_s is not None else None
    parts = Optimization(
        optimizer=optimizer,
        scheduler=_schedule(config, optimizer, model, time_used),
        scaler=torch.amp.GradScaler("cuda", enabled=amp == "fp16"),
    )
    if resume_from is None:
        set_seed(config.seed + rank)  # rank 0 (and a single process): config.seed
    else:  # weights, Adam, schedule, random generators, where the data stood
        state = load_training_state(resume_from, model, parts, device, rank, world)
        state.result.stop_reason = ""  # this call's config decides when to stop
        state.result.amp, state.result.amp_probe = amp, amp_probe
    setup = StepSetup(
        # after loading: DistributedDataParallel copies rank 0's weights to the others
        model=wrap_for_ranks(model, device) if world > 1 else model,
        parts=parts,
        device=device,
        amp=amp,
        forward=forward,
        label_smoothing=config.label_smoothing,
        clip_norm=config.clip_norm,
    )
    model.train()
    result = state.result
    with _progress_bar(config, rank, state.step) as bar:
        while not _must_stop(config, state):
            batches = _epoch_batches(train_data, state, rank, world)
            while (group := _next_group(batches, config.grad_accum, device, world)) is not None:
                lr = optimizer.param_groups[0]["lr"]  # the rate this step uses
                loss = optimizer_step(setup, group.batches, group.target_tokens)
                # log the step: the time counts the fetching of its batches
                elapsed = time.perf_counter() - group.started
                state.step += 1
                state.batch_in_epoch += len(group.batches)
                result.steps = state.step
                result.tokens += group.tokens
                result.train_seconds = _slowest_clock(
                    result.train_seconds + elapsed, config, device
                )
                tokens_per_s = group.tokens / elapsed if elapsed > 0 else math.nan
                result.history.append(
                    dict(
                        step=state.step,
                        epoch=state.epoch,
                        loss=loss,
                        lr=lr,
                        tokens_per_s=tokens_per_s,
                    )
                )
                bar.update(1)
                bar.set_postfix(
                    loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:.0f}", refresh=False
                )
                if config.eval_every is not None and state.step % config.eval_every == 0:
                    _evaluate(model, evaluate, config, state)  # reaching target stops the run
                if _must_stop(config, state):  # target, max_steps, time_budget_s
                    break
                if _checkpoint_due(config, state):
                    # after the evaluation: a run resumed here does not miss it
                    _save(config, model, parts, state, metadata, rank, world)
            if result.stop_reason:
                break
            if state.batch_in_epoch == 0:  # not one batch this epoch, nor before a resume
                result.stop_reason = "data_exhausted"
                break
            state.epoch += 1
            state.batch_in_epoch = 0
            result.epochs = state.epoch
            if config.eval_every is None:
                _evaluate(model, evaluate, config, state)
                if _checkpoint_due(config, state):
                    _save(config, model, parts, state, metadata, rank, world)
        # a last evaluation, unless this step was just evaluated or reached the target
        if state.last_eval_step != state.step and not result.stopped_early:
            _evaluate(model, evaluate, config, state)
        result.epochs = state.epoch
    _save(config, model, parts, state, metadata, rank, world)
    return result


def _must_stop(config: TrainConfig, state: TrainState) -> bool:
    """Whether the run must stop: the target reached, an empty epoch, or a step, epoch or time
    limit (:func:`limit_reached`), whichever came first (``stop_reason`` records it).
    """
    result = state.result
    if not result.stop_reason:
        result.stop_reason = limit_reached(config, state)
    return bool(result.stop_reason)


def _checkpoint_due(config: TrainConfig, state: TrainState) -> bool:
    """Whether this step writes a checkpoint: every ``checkpoint_every`` steps, and after every
    evaluation when ``keep_last`` keeps more than one (averaging reads the evaluated weights).
    """
    every = config.checkpoint_every
    periodic = every is not None and state.step % every == 0
    return periodic or (config.keep_last > 1 and state.last_eval_step == state.step)


def limit_reached(config: TrainConfig, state: TrainState) -> str:
    """The step, epoch or time limit of ``config`` that ``state`` has reached (its
    ``stop_reason``), or ``""``.
    """
    limits = (
        ("max_steps", config.max_steps, state.step),
        ("max_epochs", config.max_epochs, state.epoch),
        ("time_budget", config.time_budget_s, state.result.train_seconds),
    )
    for reason, limit, count in limits:
        if limit is not None and count >= limit:
            return reason
    return ""


def _check_arguments(
    model: nn.Module,
    train_data: TrainData,
    config: TrainConfig,
    evaluate: Evaluate | None,
    resume_from: object,
    metadata: dict[str, Any] | None,
) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    if not callable(train_data) and not isinstance(train_data, Iterable):
        kind = type(train_data).__name__
        raise TypeError(f"train_data must be batches or a callable epoch -> batches, got {kind}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if evaluate is not None and not callable(evaluate):
        kind = type(evaluate).__name__
        raise TypeError(f"evaluate must be a callable model -> dict of metrics, got {kind}")
    if config.monitor is not None and evaluate is None:
        raise ValueError(
            f"monitor={config.monitor!r} needs evaluate= (a callable model -> dict of metrics)"
        )
    saves = [config.checkpoint_path, resume_from]
    if any(p is not None for p in saves) and not isinstance(model, Transformer):
        raise TypeError(
            "checkpoint_path and resume_from need a transformer_lib Transformer (its checkpoint "
            f"stores its config), got {type(model).__name__}"
        )
    try:
        json.dumps(metadata or {})
    except TypeError as error:
        raise TypeError(f"metadata must be JSON-serialisable: {error}") from None


def _check_device(amp: str, device: torch.device, distributed: bool) -> None:
    if amp == "fp16" and device.type != "cuda":
        raise ValueError(
            f"amp='fp16' needs a CUDA device (a GradScaler); use 'bf16' or 'none' on {device}"
        )
    if distributed and dist.get_backend() == "nccl" and device.type != "cuda":
        raise ValueError(
            f"the process group uses NCCL, which needs CUDA tensors, but device={str(device)!r}"
        )


def _schedule(
    config: TrainConfig,
    optimizer: torch.optim.Optimizer,
    model: nn.Module,
    time_used: Callable[[], float] | None,
) -> LambdaLR:
    """The learning-rate schedule of ``config``; ``time_used``: the share of ``time_budget_s``
    spent, which the linear schedule decays with too.
    """
    if config.schedule == "linear":
        return linear_decay_schedule(
            optimizer, config.lr, config.warmup_steps, config.max_steps, time_used
        )
    # The paper's formula scales by d_model ** -0.5 and noam_factor(d_model) by its inverse, so
    # the rate peaks at config.lr whatever the width; the library's model gives its own width
    # (the rates then round exactly as the paper's formula does), any other model 1.
    d_model = model.config.d_model if isinstance(model, Transformer) else 1
    return noam_schedule(optimizer, d_model, config.warmup_steps, config.noam_factor(d_model))


def _progress_bar(config: TrainConfig, rank: int, initial: int) -> tqdm:
    """A tqdm bar on stderr, on rank 0 only."""
    # tqdm reads TQDM_DISABLE=1 as the default of its argument: pass disable only to switch the bar
    # off.
    off = {"disable": True} if not config.progress or rank != 0 else {}
    return tqdm(
        total=config.max_steps,
        initial=initial,
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        **off,
    )


def _epoch_batches(
    train_data: TrainData, state: TrainState, rank: int, world: int
) -> Iterator[Batch]:
    """The batches of ``state.epoch`` (this rank's share), past those a resumed run has seen."""
    source = train_data(state.epoch) if callable(train_data) else train_data
    batches = shard_batches(source, rank, world) if world > 1 else iter(source)
    # skipped before the clock of the first step starts
    for _ in range(state.batch_in_epoch):
        next(batches, None)
    return batches


@dataclass
class _Group:
    """The batches of one optimizer step, with the step's token counts summed over the ranks."""

    batches: list[Batch]
    target_tokens: int
    tokens: int  # source + target, padding excluded
    started: float  # when fetching it began: fetching the data counts as training time


def _next_group(
    batches: Iterator[Batch], grad_accum: int, device: torch.device, world: int
) -> _Group | None:
    """The next ``grad_accum`` batches; ``None`` at the end of the epoch, on every rank as soon
    as one rank runs out (under ``torchrun``, a rank that stepped alone would wait forever for
    the others' gradients).
    """
    started = time.perf_counter()
    group = list(islice(batches, grad_accum))
    if not all(isinstance(batch, Batch) for batch in group):
        kinds = [type(b).__name__ for b in group]
        raise TypeError(f"train_data must yield Batch objects, got {kinds}")
    target = sum(b.num_tokens for b in group)  # counted on the host, before the batches move
    # [ranks that still have data, target tokens, all tokens], summed over the ranks
    counts = [int(bool(group)), target, target + sum(b.num_src_tokens for b in group)]
    if world > 1:
        summed = torch.tensor(counts, dtype=torch.long, device=device)
        dist.all_reduce(summed)
        counts = summed.tolist()
    if counts[0] < world:
        return None
    return _Group(batches=group, target_tokens=counts[1], tokens=counts[2], started=started)


def _slowest_clock(seconds: float, config: TrainConfig, device: torch.device) -> float:
    """Under ``torchrun`` with a time budget, the slowest rank's training time: every rank then
    sets its rate and stops alike. Otherwise ``seconds`` itself.
    """
    if not is_distributed() or config.time_budget_s is None:
        return seconds
    clock = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(clock, op=dist.ReduceOp.MAX)
    return float(clock.item())


def _evaluate(
    model: nn.Module, evaluate: Evaluate | None, config: TrainConfig, state: TrainState
) -> None:
    """Evaluate (when ``train`` got ``evaluate``), track the best ``monitor`` value, and stop the
    run once it reaches ``target``.
    """
    if evaluate is None:
        return
    with eval_mode(model):
        metrics = evaluate(model)
    if not isinstance(metrics, dict):
        raise TypeError(f"evaluate must return a dict of metrics, got {type(metrics).__name__}")
    metrics = {k: float(v) for k, v in metrics.items()}
    # every rank evaluated; rank 0's numbers decide, so that every rank decides alike
    if is_distributed():
        metrics = broadcast_object(metrics)
    result = state.result
    result.eval_history.append({"step": state.step, "epoch": state.epoch, **metrics})
    state.last_eval_step = state.step
    if config.monitor is None:
        return
    if config.monitor not in metrics:
        raise ValueError(
            f"monitor={config.monitor!r} is not among evaluate's metrics {sorted(metrics)}"
        )
    sign = 1 if config.mode == "max" else -1  # larger is better when sign * value is larger
    value = metrics[config.monitor]
    if result.best_metric is None or sign * value > sign * result.best_metric:
        result.best_metric, result.best_step = value, state.step
    if config.target is not None and sign * value >= sign * config.target:
        result.stop_reason = "target"


def _save(
    config: TrainConfig,
    model: nn.Module,
    parts: Optimization,
    state: TrainState,
    metadata: dict[str, Any] | None,
    rank: int,
    world: int,
) -> None:
    """Write the resumable checkpoint to ``config.checkpoint_path`` (rank 0 only; every rank's
    random state goes into it); nothing without a path.
    """
    if config.checkpoint_path is None:
        return
    rank_rngs = all_gather_object(rng_state()) if world > 1 else [rng_state()]
    if rank == 0:
        path, meta = Path(config.checkpoint_path), dict(metadata or {})
        save_training_state(path, model, parts, state, meta, rank_rngs, config.keep_last)
    barrier()
