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

from ..checkpoint import save_checkpoint
from ..data.batching import Batch
from ..eval_mode import eval_mode
from ..model import Transformer
from ..runtime import resolve_amp, set_seed
from .config import TrainConfig, TrainResult
from .distributed import all_gather_object, barrier, broadcast_object, is_distributed, shard_batches
from .loss import BatchForward, batch_logits
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
    decide early stopping, and ``resume_from`` needs a run of as many processes.
    """
    _check_arguments(model, train_data, config, evaluate, resume_from, metadata)
    run = _Run(model, config, torch.device(device), evaluate, metadata, forward, resume_from)
    # tqdm reads TQDM_DISABLE=1 as the default of its argument: pass disable only to switch the bar
    # off.
    off = {"disable": True} if not config.progress or run.rank != 0 else {}
    bar = tqdm(
        total=config.max_steps,
        initial=run.state.step,
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        **off,
    )
    with bar:
        while not run.finished():
            # this rank's share, past those a resumed run has seen
            batches = run.epoch_batches(train_data)
            # grad_accum batches; None: epoch over
            while (group := run.next_group(batches)) is not None:
                run.step(group, bar)  # optimizer_step, then the history and the progress bar
                if config.eval_every is not None and run.state.step % config.eval_every == 0:
                    run.evaluation()  # early stopping may end the run
                if run.finished():  # early stopping, max_steps, time_budget_s
                    break
                if (
                    config.checkpoint_every is not None
                    and run.state.step % config.checkpoint_every == 0
                ):
                    # after the evaluation: a run resumed here does not miss it
                    run.save(config.checkpoint_path)
            run.end_epoch()
        run.finish()
    run.save(config.checkpoint_path)
    return run.state.result


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
    saves = [config.checkpoint_path, config.best_checkpoint_path, resume_from]
    if any(p is not None for p in saves) and not isinstance(model, Transformer):
        raise TypeError(
            "checkpoint_path, best_checkpoint_path and resume_from need a transformer_lib "
            f"Transformer (its checkpoint stores its config), got {type(model).__name__}"
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


@dataclass
class _Group:
    """The batches of one optimizer step, with the step's token counts summed over the ranks."""

    batches: list[Batch]
    target_tokens: int
    tokens: int  # source + target, padding excluded
    started: float  # when fetching it began: fetching the data counts as training time


class _Run:
    """One call of :func:`~.train`: the model, its optimizer, and where the run stands
    (``state``; ``state.result.stop_reason`` is set once the run must stop).
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        device: torch.device,
        evaluate: Evaluate | None,
        metadata: dict[str, Any] | None,
        forward: BatchForward,
        resume_from: str | os.PathLike[str] | None,
    ) -> None:
        self.config = config
        self.device = device
        self.evaluate = evaluate
        self.metadata = dict(metadata or {})
        self.distributed = is_distributed()
        self.rank = dist.get_rank() if self.distributed else 0
        self.world = dist.get_world_size() if self.distributed else 1
        amp = resolve_amp(config.amp, device)  # "auto": what pays on this device
        _check_device(amp, device, self.distributed)
        self.model = model.to(device)
        # A fresh run's state (the linear schedule reads its clock from the start).
        self.state = TrainState(
            world_size=self.world, result=TrainResult(world_size=self.world, amp=amp)
        )
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.lr, betas=config.adam_betas, eps=config.adam_eps
        )
        self.parts = Optimization(
            optimizer=optimizer,
            scheduler=self._scheduler(optimizer),
            scaler=torch.amp.GradScaler("cuda", enabled=amp == "fp16"),
        )
        if resume_from is None:
            set_seed(config.seed + self.rank)  # rank 0 (and a single process): config.seed
        else:
            self.state = self._resume(resume_from, amp)
        self.setup = StepSetup(
            # after loading: DistributedDataParallel copies rank 0's weights to the others
            model=wrap_for_ranks(model, device) if self.distributed else model,
            parts=self.parts,
            device=device,
            amp=amp,
            forward=forward,
            label_smoothing=config.label_smoothing,
            smooth_pad=config.label_smoothing_pad,
            clip_norm=config.clip_norm,
        )
        model.train()

    def _resume(self, resume_from: str | os.PathLike[str], amp: str) -> TrainState:
        """Load the run ``resume_from`` holds (weights, Adam, schedule, random generators) and
        return its state.
        """
        state = load_training_state(
            resume_from, self.model, self.parts, self.device, self.rank, self.world
        )
        state.result.stop_reason = ""  # this call's config decides when to stop
        state.result.amp = amp
        return state

    def _scheduler(self, optimizer: torch.optim.Optimizer) -> LambdaLR:
        config = self.config
        if config.schedule == "linear":  # it also decays with the share of time_budget_s spent

            def budget_spent() -> float:
                return self.state.result.train_seconds / config.time_budget_s

            time_used = budget_spent if config.time_budget_s is not None else None
            return linear_decay_schedule(
                optimizer, config.lr, config.warmup_steps, config.max_steps, time_used
            )
        # The paper's formula scales by d_model ** -0.5 and noam_factor(d_model) by its inverse, so
        # the rate peaks at config.lr whatever the width; the library's model gives its own width
        # (the rates then round exactly as the paper's formula does), any other model 1.
        d_model = self.model.config.d_model if isinstance(self.model, Transformer) else 1
        return noam_schedule(optimizer, d_model, config.warmup_steps, config.noam_factor(d_model))

    def finished(self) -> bool:
        """Whether the run must stop: early stopping, an empty epoch, or a step, epoch or time
        limit (:func:`limit_reached`), whichever came first (``stop_reason`` records it).
        """
        result = self.state.result
        if not result.stop_reason:
            result.stop_reason = limit_reached(self.config, self.state)
        return bool(result.stop_reason)

    def epoch_batches(self, train_data: TrainData) -> Iterator[Batch]:
        source = train_data(self.state.epoch) if callable(train_data) else train_data
        batches = shard_batches(source, self.rank, self.world) if self.distributed else iter(source)
        # skipped before the clock of the first step starts
        for _ in range(self.state.batch_in_epoch):
            next(batches, None)
        return batches

    def next_group(self, batches: Iterator[Batch]) -> _Group | None:
        """The next ``grad_accum`` batches; ``None`` at the end of the epoch, on every rank as soon
        as one rank runs out (under ``torchrun``, a rank that stepped alone would wait forever for
        the others' gradients).
        """
        started = time.perf_counter()
        group = list(islice(batches, self.config.grad_accum))
        if not all(isinstance(batch, Batch) for batch in group):
            kinds = [type(b).__name__ for b in group]
            raise TypeError(f"train_data must yield Batch objects, got {kinds}")
        target = sum(b.num_tokens for b in group)  # counted on the host, before the batches move
        # [ranks that still have data, target tokens, all tokens], summed over the ranks
        counts = [int(bool(group)), target, target + sum(b.num_src_tokens for b in group)]
        if self.distributed:
            summed = torch.tensor(counts, dtype=torch.long, device=self.device)
            dist.all_reduce(summed)
            counts = summed.tolist()
        if counts[0] < self.world:
            return None
        return _Group(batches=group, target_tokens=counts[1], tokens=counts[2], started=started)

    def step(self, group: _Group, bar: tqdm) -> None:
        """One optimizer step over the group; count it, add it to the history and to the progress
        bar.
        """
        state = self.state
        result = state.result
        lr = self.parts.optimizer.param_groups[0]["lr"]  # the rate this step uses
        loss = optimizer_step(self.setup, group.batches, group.target_tokens)
        elapsed = time.perf_counter() - group.started
        state.step += 1
        state.batch_in_epoch += len(group.batches)
        result.steps = state.step
        result.tokens += group.tokens
        result.train_seconds += elapsed
        if self.distributed and self.config.time_budget_s is not None:
            # The slowest rank's clock: every rank then sets its rate and stops alike.
            clock = torch.tensor([result.train_seconds], dtype=torch.float64, device=self.device)
            dist.all_reduce(clock, op=dist.ReduceOp.MAX)
            result.train_seconds = float(clock.item())
        tokens_per_s = group.tokens / elapsed if elapsed > 0 else math.nan
        result.history.append(
            dict(step=state.step, epoch=state.epoch, loss=loss, lr=lr, tokens_per_s=tokens_per_s)
        )
        bar.update(1)
        bar.set_postfix(
            loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:.0f}", refresh=False
        )

    def end_epoch(self) -> None:
        """Count the epoch (and evaluate when ``eval_every`` is None)."""
        state = self.state
        if state.result.stop_reason:
            return
        if state.batch_in_epoch == 0:  # not one batch this epoch, nor before a resume
            state.result.stop_reason = "data_exhausted"
            return
        state.epoch += 1
        state.batch_in_epoch = 0
        state.result.epochs = state.epoch
        if self.config.eval_every is None:
            self.evaluation()

    def finish(self) -> None:
        """A last evaluation, unless the last step was just evaluated or early stopping ended the
        run.
        """
        state = self.state
        if state.last_eval_step != state.step and not state.result.stopped_early:
            self.evaluation()
        state.result.epochs = state.epoch

    def evaluation(self) -> None:
        """Evaluate (when ``train`` got ``evaluate``) and track the best ``monitor`` value; early
        stopping sets ``stop_reason``.
        """
        if self.evaluate is None:
            return
        with eval_mode(self.model):
            metrics = self.evaluate(self.model)
        if not isinstance(metrics, dict):
            raise TypeError(f"evaluate must return a dict of metrics, got {type(metrics).__name__}")
        metrics = {k: float(v) for k, v in metrics.items()}
        # every rank evaluated; rank 0's numbers decide, so that every rank decides alike
        if self.distributed:
            metrics = broadcast_object(metrics)
        row = {"step": self.state.step, "epoch": self.state.epoch, **metrics}
        self.state.result.eval_history.append(row)
        self.state.last_eval_step = self.state.step
        if self.config.monitor is not None:
            self._track_best(metrics, row)

    def _track_best(self, metrics: dict[str, float], row: dict[str, float]) -> None:
        """Track the best ``monitor`` value (saving the best model); stop at ``target`` or when
        ``patience`` runs out.
        """
        config = self.config
        state = self.state
        result = state.result
        if config.monitor not in metrics:
            raise ValueError(
                f"monitor={config.monitor!r} is not among evaluate's metrics {sorted(metrics)}"
            )
        sign = 1 if config.mode == "max" else -1  # larger is better when sign * value is larger
        value = metrics[config.monitor]
        better = result.best_metric is None or sign * value > sign * result.best_metric
        state.bad_evals = 0 if better else state.bad_evals + 1
        if better:
            result.best_metric = value
            result.best_step = state.step
            if config.best_checkpoint_path is not None:
                if self.rank == 0:
                    metadata = {**self.metadata, "step": state.step, "metrics": row}
                    save_checkpoint(self.model, config.best_checkpoint_path, **metadata)
                barrier()
        if config.target is not None and sign * value >= sign * config.target:
            result.stop_reason = "target"
        elif config.patience is not None and state.bad_evals >= config.patience:
            result.stop_reason = "patience"

    def save(self, path: str | None) -> None:
        """Write the resumable checkpoint (rank 0 only; every rank's random state goes into it)."""
        if path is None:
            return
        rank_rngs = all_gather_object(rng_state()) if self.distributed else [rng_state()]
        if self.rank == 0:
            save_training_state(
                Path(path), self.model, self.parts, self.state, self.metadata, rank_rngs
            )
        barrier()
