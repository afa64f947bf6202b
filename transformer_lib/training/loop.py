"""The training loop (训练循环): teacher forcing, label smoothing, Adam with the Noam schedule.

:func:`~.train` is a short loop over named steps; each step is a method of ``_Run``::

    while not run.finished():                     # max_steps, max_epochs, time budget, or data exhausted
        for group in run.groups(train_data):      # grad_accum batches at a time (this rank's share)
            loss = run.optimizer_step(group)      # move, forward and loss, backward, optimizer and schedule
            run.log(loss)                         # history and progress bar
            if run.evaluate_if_due() or run.step_limit_reached():
                break                             # the last checkpoint follows finish()
            run.checkpoint_if_due()               # after the evaluation, so that the state holds it
        run.end_epoch()                           # an evaluation per epoch when eval_every is None
    run.finish()                                  # a last evaluation, the last checkpoint

One optimizer step (:func:`~.optimizer_step`)::

    for each of grad_accum batches:             # gradient accumulation
        logits = forward(model, batch)          # teacher forcing: the decoder reads the true prefix
        loss   = cross_entropy(logits, tgt_out, label_smoothing, ignore_index=pad) / tokens
        loss.backward()
    clip the gradient norm (optional); optimizer.step(); scheduler.step()   # once per OPTIMIZER step

with Adam ``(beta1, beta2, eps) = (0.9, 0.98, 1e-9)`` and the learning rate of
:func:`~.noam_schedule` (or of :func:`~.linear_decay_schedule`). The loop trains any ``nn.Module``: by
default it calls ``model(src, tgt_in, src_mask, tgt_mask)`` (the batch protocol of
:func:`~.batch_logits`); ``forward=`` adapts any other model, such as
PyTorch's ``nn.Transformer``. Checkpoints (``checkpoint_path``, ``resume_from``: a file, or a
checkpoint directory that keeps the newest step) need a :class:`~.Transformer`, whose checkpoint
stores its config (:mod:`~transformer_lib.training.state`).

Several processes (data parallelism, 数据并行). Launched by ``torchrun`` after
:func:`~.init_distributed`, :func:`~.train` notices the process
group and trains one model replica per process: it wraps the model in ``DistributedDataParallel``
(which all-reduces the gradients during ``backward``), gives each rank every ``W``-th batch
(:func:`~.shard_batches`), scales the loss so that the averaged
gradient is exactly the gradient of the mean loss over **all** ranks' target tokens, and lets only
rank 0 write checkpoints and show the progress bar. ``W`` processes with ``grad_accum=k`` take the
same optimizer steps as one process with ``grad_accum=W*k`` on the same batches.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from tqdm.auto import tqdm

from ..checkpoint import save_checkpoint
from ..data.batching import Batch
from ..model import Transformer
from ..runtime import resolve_amp, set_seed
from .config import TrainConfig, TrainResult
from .distributed import all_gather_object, barrier, broadcast_object, is_distributed, shard_batches
from .loss import BatchForward, batch_logits
from .schedule import linear_decay_schedule, noam_schedule
from .state import load_training_state, rng_state, save_training_state
from .step import autocast_context, optimizer_step, wrap_for_ranks

TrainData = Iterable[Batch] | Callable[[int], Iterable[Batch]]
"""Either a re-iterable of :class:`~.Batch` (the same batches every epoch) or ``epoch -> iterable``."""
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
    """Train ``model`` with teacher forcing; return a :class:`~.TrainResult`.

    Args:
        model: the module to train (moved to ``device``): a :class:`~.Transformer`,
            or any ``nn.Module`` that ``forward`` turns a batch into logits with.
        train_data: the batches of one epoch, either a re-iterable of :class:`~.Batch` (a list: the
            same batches every epoch) or a callable ``epoch -> iterable of Batch`` (epochs count from
            0; e.g. ``lambda epoch: token_batches(pairs, 4000, pad, bos, eos, seed=epoch)`` for a new
            order every epoch). For an exact resume the batches of an epoch must depend on the
            epoch only (the loop skips the batches already seen in the interrupted epoch).
        config: the :class:`~.TrainConfig`.
        device: where to train.
        evaluate: ``model -> {metric: value}``, called in eval mode under ``torch.no_grad()`` every
            ``config.eval_every`` steps (or every epoch) and once at the end.
        resume_from: a ``checkpoint_path`` written by an earlier call (a checkpoint directory: its
            newest whole checkpoint, see :mod:`~transformer_lib.training.state`): restores the weights,
            Adam's moments, the schedule, the gradient scaler, the random-number generators, the
            position in the data, the histories and the early-stopping counters, so that training
            continues as if it had never stopped (same losses, for the same data and seed).
        metadata: JSON-serialisable extra metadata stored in every checkpoint (e.g. a tokenizer).
        forward: ``(model, batch) -> logits (B, T, V)`` (default: ``model(src, tgt_in, src_mask,
            tgt_mask)``, see :func:`~.batch_logits`).

    The returned ``history`` covers the whole run, including steps before a resume.

    Several processes: when ``torchrun`` launched the program and
    :func:`~.init_distributed` joined the process group, every
    rank calls ``train`` with the same arguments (and the same batches: build them from the epoch,
    not from rank-dependent randomness). Each optimizer step then uses ``grad_accum`` batches
    per rank, every rank's ``W``-th share of the epoch (a last incomplete round is left out);
    losses in ``history`` are over all ranks; ``evaluate`` runs on every rank and rank 0's
    metrics decide early stopping; only rank 0 writes checkpoints (the others wait for it) and
    shows the progress bar. ``resume_from`` must be readable by every rank and come from a run
    with the same number of processes.
    """
    if not callable(train_data) and not isinstance(train_data, Iterable):
        raise TypeError(
            f"train_data must be an iterable of Batch or a callable epoch -> iterable, got {type(train_data).__name__}"
        )
    run = _Run(model, config, torch.device(device), evaluate, metadata, forward)
    run.start(resume_from)
    try:
        while not run.finished():
            for group in run.groups(train_data):
                loss = run.optimizer_step(group)
                run.log(loss)
                if run.evaluate_if_due() or run.step_limit_reached():
                    break
                # After the evaluation, so that the state holds it: a run resumed from here does not miss it.
                run.checkpoint_if_due()
            run.end_epoch()
        run.finish()
    finally:
        run.close()
    run.save(config.checkpoint_path)
    return run.result


def _check_arguments(
    model: nn.Module, config: TrainConfig, evaluate: Evaluate | None, device: torch.device, amp: str
) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if evaluate is not None and not callable(evaluate):
        raise TypeError(f"evaluate must be a callable model -> dict of metrics, got {type(evaluate).__name__}")
    if config.monitor is not None and evaluate is None:
        raise ValueError(f"monitor={config.monitor!r} needs evaluate= (a callable model -> dict of metrics)")
    saves = [config.checkpoint_path, config.best_checkpoint_path]
    if any(p is not None for p in saves) and not isinstance(model, Transformer):
        raise TypeError(
            f"checkpoint_path and best_checkpoint_path need a transformer_lib.Transformer (its checkpoint stores "
            f"its config), got {type(model).__name__}"
        )
    if amp == "fp16" and device.type != "cuda":
        raise ValueError(
            f"amp='fp16' needs a CUDA device (it uses a GradScaler); got device={str(device)!r}. "
            f"Use amp='bf16' or amp='none' on {device.type}"
        )
    if amp == "bf16" and device.type not in ("cuda", "cpu"):
        raise ValueError(f"amp='bf16' is supported on cuda and cpu, got device={str(device)!r}")


def _d_model(model: nn.Module) -> int:
    """The width the Noam formula is written with; it cancels out of the peak rate (1 when unknown)."""
    config = getattr(model, "config", None)
    return int(getattr(config, "d_model", None) or getattr(model, "d_model", None) or 1)


def _group_tokens(group: list[Batch]) -> tuple[int, int]:
    """(target tokens, source + target tokens) of a group of batches, padding excluded."""
    for batch in group:
        if not isinstance(batch, Batch):
            raise TypeError(f"train_data must yield Batch objects, got {type(batch).__name__}")
    target_tokens = sum(b.num_tokens for b in group)
    return target_tokens, target_tokens + sum(b.num_src_tokens for b in group)


class _Run:
    """One call of :func:`~.train`: the model, the optimizer and everything the loop counts."""

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        device: torch.device,
        evaluate: Evaluate | None,
        metadata: dict[str, Any] | None,
        forward: BatchForward,
    ) -> None:
        self.amp = resolve_amp(config.amp, device)  # "auto": what pays on this device
        _check_arguments(model, config, evaluate, device, self.amp)
        self.metadata = dict(metadata or {})
        try:
            json.dumps(self.metadata)
        except TypeError as error:
            raise TypeError(f"metadata must be JSON-serialisable: {error}") from None
        self.distributed = is_distributed()
        self.rank, self.world = (dist.get_rank(), dist.get_world_size()) if self.distributed else (0, 1)
        if self.distributed and dist.get_backend() == "nccl" and device.type != "cuda":
            raise ValueError(f"the process group uses NCCL, which needs CUDA tensors, but device={str(device)!r}")
        self.model, self.config, self.device, self.evaluate, self.forward = model, config, device, evaluate, forward
        model.to(device)
        self.result = TrainResult(world_size=self.world, amp=self.amp)  # the schedule reads its clock
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=config.adam_betas, eps=config.adam_eps)
        scaler = torch.amp.GradScaler("cuda") if self.amp == "fp16" else None
        self.parts: dict[str, Any] = {"optimizer": optimizer, "scheduler": self.scheduler(optimizer), "scaler": scaler}
        self.loop: dict[str, Any] = {
            "step": 0, "epoch": 0, "batch_in_epoch": 0, "bad_evals": 0, "last_eval_step": -1, "world_size": self.world
        }  # fmt: skip
        self.ddp: nn.Module | None = None
        self.stop = False
        self.bar: Any = None

    def scheduler(self, optimizer: torch.optim.Optimizer) -> LambdaLR:
        """The configured schedule; a linear one also decays with the share of ``time_budget_s`` spent."""
        config = self.config
        if config.schedule == "linear":
            budget = config.time_budget_s
            time_used = None if budget is None else (lambda: self.result.train_seconds / budget)
            return linear_decay_schedule(optimizer, config.lr, config.warmup_steps, config.max_steps, time_used)
        d_model = _d_model(self.model)
        return noam_schedule(optimizer, d_model, config.warmup_steps, config.noam_factor(d_model))

    # -- start and end ------------------------------------------------------------------------

    def start(self, resume_from: str | os.PathLike[str] | None) -> None:
        """Resume from a checkpoint, or seed the generators; wrap the model for several ranks; start the bar."""
        if resume_from is not None:
            if not isinstance(self.model, Transformer):
                raise TypeError("resume_from needs a transformer_lib.Transformer (its checkpoint stores its config)")
            loop = load_training_state(resume_from, self.model, self.parts, self.device, self.rank, self.world)
            self.loop = {**loop, "world_size": self.world}
            self.result = TrainResult(**self.loop.pop("result"))
            self.result.stop_reason, self.result.stopped_early = "", False  # this call's config decides when to stop
            self.result.amp = self.amp
        else:
            set_seed(self.config.seed + self.rank)  # rank 0 (and a single process): config.seed
        if self.distributed:
            self.ddp = wrap_for_ranks(self.model, self.device)
        disabled = not self.config.progress or os.environ.get("TQDM_DISABLE", "").lower() not in ("", "0", "false")
        self.bar = tqdm(
            total=self.config.max_steps,
            initial=self.loop["step"],
            unit="step",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=disabled or self.rank != 0,
        )
        self.autocast = autocast_context(self.amp, self.device)
        self.model.train()

    def finished(self) -> bool:
        """Whether the step, epoch or time limit is reached, or an earlier step decided to stop."""
        if self.stop:
            return True
        limits = (
            ("max_steps", self.config.max_steps, self.loop["step"]),
            ("max_epochs", self.config.max_epochs, self.loop["epoch"]),
            ("time_budget", self.config.time_budget_s, self.result.train_seconds),  # a run resumed at its end
        )
        for reason, limit, count in limits:
            if limit is not None and count >= limit:
                self.result.stop_reason = reason
                return True
        return False

    def finish(self) -> None:
        """A last evaluation, unless the last step was just evaluated or early stopping ended the run."""
        if self.evaluate is not None and self.loop["last_eval_step"] != self.loop["step"]:
            if not self.result.stopped_early:
                self.run_evaluation()
        self.result.epochs = self.loop["epoch"]

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    # -- the data ---------------------------------------------------------------------------------

    def groups(self, train_data: TrainData) -> Iterator[list[Batch]]:
        """The epoch's groups of ``grad_accum`` batches (this rank's share), skipping those already seen."""
        self.steps_this_epoch = 0
        source = train_data(self.loop["epoch"]) if callable(train_data) else train_data
        batches = shard_batches(source, self.rank, self.world) if self.distributed else iter(source)
        for _ in range(self.loop["batch_in_epoch"]):  # resume in the middle of an epoch
            next(batches, None)
        while True:
            self.step_start = time.perf_counter()  # fetching the data counts as training time
            group = [b for _, b in zip(range(self.config.grad_accum), batches, strict=False)]
            self.group_size = len(group)
            self.target_tokens, self.tokens = _group_tokens(group)
            if not self.all_ranks_have_data(group):
                return
            yield group

    def all_ranks_have_data(self, group: list[Batch]) -> bool:
        """Whether every rank has a group; sums the step's token counts over the ranks.

        When one rank has run out, the epoch ends on every rank: a rank that stepped alone would
        wait forever for the others' gradients.
        """
        if not self.distributed:
            return bool(group)
        counts = torch.tensor([int(bool(group)), self.target_tokens, self.tokens], dtype=torch.long, device=self.device)
        dist.all_reduce(counts)  # [ranks that still have data, target tokens, all tokens], summed over the ranks
        have, self.target_tokens, self.tokens = counts.tolist()
        return have == self.world

    # -- one step ---------------------------------------------------------------------------------

    def optimizer_step(self, group: list[Batch]) -> float:
        """Forward, loss and backward over the group, then one optimizer and schedule step; the mean loss."""
        self.lr_used = self.parts["optimizer"].param_groups[0]["lr"]  # the rate this step uses
        return optimizer_step(
            self.ddp or self.model, group, self.parts, self.config, self.device, self.autocast, self.target_tokens,
            self.forward, self.world if self.ddp is not None else 1,
        )  # fmt: skip

    def log(self, loss: float) -> None:
        """Count the step, append it to the history and show it on the progress bar."""
        elapsed = time.perf_counter() - self.step_start
        self.loop["step"] += 1
        self.loop["batch_in_epoch"] += self.group_size
        self.steps_this_epoch += 1
        self.result.steps = self.loop["step"]
        self.result.train_seconds += elapsed
        if self.distributed and self.config.time_budget_s is not None:
            self.result.train_seconds = self.slowest_clock()
        tokens_per_s = self.tokens / elapsed if elapsed > 0 else math.nan
        row = {"step": self.loop["step"], "epoch": self.loop["epoch"], "loss": loss, "lr": self.lr_used}
        self.result.history.append({**row, "tokens_per_s": tokens_per_s})
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{self.lr_used:.2e}", tok_s=f"{tokens_per_s:.0f}", refresh=False)

    def checkpoint_if_due(self) -> None:
        every = self.config.checkpoint_every
        if every is not None and self.loop["step"] % every == 0:
            self.save(self.config.checkpoint_path)

    def evaluate_if_due(self) -> bool:
        """Evaluate every ``eval_every`` steps; ``True`` when early stopping ends training."""
        every = self.config.eval_every
        if self.evaluate is None or every is None or self.loop["step"] % every != 0:
            return False
        self.stop = self.run_evaluation()
        return self.stop

    def slowest_clock(self) -> float:
        """The largest ``train_seconds`` of all ranks: every rank then sets its rate and stops alike."""
        clock = torch.tensor([self.result.train_seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(clock, op=dist.ReduceOp.MAX)
        return float(clock.item())

    def step_limit_reached(self) -> bool:
        """Whether ``max_steps`` or ``time_budget_s`` is used up (then the run stops)."""
        limit, budget = self.config.max_steps, self.config.time_budget_s
        if not self.stop and limit is not None and self.loop["step"] >= limit:
            self.stop, self.result.stop_reason = True, self.result.stop_reason or "max_steps"
        if not self.stop and budget is not None and self.result.train_seconds >= budget:
            self.stop, self.result.stop_reason = True, self.result.stop_reason or "time_budget"
        return self.stop

    def end_epoch(self) -> None:
        """After the epoch's last group: count the epoch (and evaluate when ``eval_every`` is None)."""
        if self.stop:
            return
        if self.steps_this_epoch == 0 and self.loop["batch_in_epoch"] == 0:
            self.result.stop_reason, self.stop = "data_exhausted", True
            return
        self.loop["epoch"] += 1
        self.loop["batch_in_epoch"] = 0
        self.result.epochs = self.loop["epoch"]
        if self.evaluate is not None and self.config.eval_every is None:
            self.stop = self.run_evaluation()

    # -- evaluation and checkpoints -----------------------------------------------------------------

    def run_evaluation(self) -> bool:
        """Evaluate, update best/patience; return ``True`` if training must stop."""
        assert self.evaluate is not None
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                metrics = self.evaluate(self.model)
        finally:
            self.model.train(was_training)
        if not isinstance(metrics, dict):
            raise TypeError(f"evaluate must return a dict of metrics, got {type(metrics).__name__}")
        if self.distributed:  # every rank evaluated; rank 0's numbers decide, so that every rank decides alike
            metrics = broadcast_object({k: float(v) for k, v in metrics.items()})
        row = {"step": self.loop["step"], "epoch": self.loop["epoch"], **{k: float(v) for k, v in metrics.items()}}
        self.result.eval_history.append(row)
        self.loop["last_eval_step"] = self.loop["step"]
        return self.config.monitor is not None and self.early_stop(metrics, row)

    def early_stop(self, metrics: dict[str, float], row: dict[str, float]) -> bool:
        """Track the best ``monitor`` value (saving the best model); ``True`` when ``target`` or ``patience`` stops."""
        config, result = self.config, self.result
        if config.monitor not in metrics:
            known = sorted(metrics)
            raise ValueError(f"monitor={config.monitor!r} is not among the metrics evaluate returned: {known}")
        value = float(metrics[config.monitor])
        better = result.best_metric is None or (
            value > result.best_metric if config.mode == "max" else value < result.best_metric
        )
        if better:
            result.best_metric, result.best_step = value, self.loop["step"]
            self.loop["bad_evals"] = 0
            if config.best_checkpoint_path is not None:
                if self.rank == 0:
                    metadata = {**self.metadata, "step": self.loop["step"], "metrics": row}
                    save_checkpoint(self.model, config.best_checkpoint_path, **metadata)
                barrier()
        else:
            self.loop["bad_evals"] += 1
        if config.target is not None and (value >= config.target if config.mode == "max" else value <= config.target):
            result.stop_reason, result.stopped_early = "target", True
        elif config.patience is not None and self.loop["bad_evals"] >= config.patience:
            result.stop_reason, result.stopped_early = "patience", True
        return result.stopped_early

    def save(self, path: str | None) -> None:
        """Write the resumable checkpoint (rank 0 only; every rank's random state goes into it)."""
        if path is None:
            return
        rank_rngs = all_gather_object(rng_state()) if self.distributed else [rng_state()]
        if self.rank == 0:
            loop = {**self.loop, "result": asdict(self.result)}
            save_training_state(Path(path), self.model, self.parts, loop, self.metadata, rank_rngs)
        barrier()
