"""The training loop (训练循环): teacher forcing, label smoothing, Adam with the Noam schedule.

One optimizer step of :func:`train`::

    for each of grad_accum batches:             # gradient accumulation
        logits = model(src, tgt_in)             # teacher forcing: the decoder reads the true prefix
        loss   = cross_entropy(logits, tgt_out, label_smoothing, ignore_index=pad) / tokens
        loss.backward()
    clip the gradient norm (optional); optimizer.step(); scheduler.step()   # once per OPTIMIZER step

with Adam ``(beta1, beta2, eps) = (0.9, 0.98, 1e-9)`` and the learning rate of
:func:`~transformer_lib.schedule.noam_schedule`. Around the step the loop evaluates every
``eval_every`` steps, stops early when a validation metric stops improving (or reaches a
target), and writes checkpoints from which :func:`train` resumes exactly where it stopped.

Checkpoints never use pickle. ``checkpoint_path`` (say ``run.safetensors``) holds the model, as
:func:`~transformer_lib.checkpoint.save_checkpoint` writes it; beside it,
``run.train_state.safetensors`` holds the optimizer moments as tensors and the scheduler,
gradient scaler, random-number generators and loop position as JSON metadata. Both files are
written atomically (temporary file + ``os.replace``).

Several processes (data parallelism, 数据并行). Launched by ``torchrun`` after
:func:`~transformer_lib.distributed.init_distributed`, :func:`train` notices the process group and
trains one model replica per process: it wraps the model in ``DistributedDataParallel`` (which
all-reduces the gradients during ``backward``), gives each rank every ``W``-th batch
(:func:`~transformer_lib.distributed.shard_batches`), scales the loss so that the averaged gradient
is exactly the gradient of the mean loss over **all** ranks' target tokens, and lets only rank 0
write checkpoints and show the progress bar. ``W`` processes with ``grad_accum=k`` take the same
optimizer steps as one process with ``grad_accum=W*k`` on the same batches.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, load_model, save_file
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from ._checks import check_positive_int, check_probability
from .batching import Batch
from .checkpoint import read_checkpoint_header, save_checkpoint
from .distributed import all_gather_object, barrier, broadcast_object, is_distributed, shard_batches
from .model import Transformer
from .runtime import set_seed
from .schedule import noam_schedule

AMP_MODES = ("none", "bf16", "fp16")
STATE_FORMAT = "transformer_lib.train_state.v1"

TrainData = Iterable[Batch] | Callable[[int], Iterable[Batch]]
"""Either a re-iterable of :class:`~.Batch` (the same batches every epoch) or ``epoch -> iterable``."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`train` needs besides the model and the data.

    Learning rate: ``lr`` is the **peak** rate, reached after ``warmup_steps`` optimizer steps,
    with the paper's shape (linear rise, then decay as ``step**-0.5``). It is the Noam schedule
    with ``factor = lr * sqrt(d_model * warmup_steps)``; the paper's setting (``factor=1``,
    ``d_model=512``, ``warmup_steps=4000``) is ``lr = 512**-0.5 * 4000**-0.5 = 7.0e-4``.

    Attributes:
        max_steps: stop after this many optimizer steps (``None``: no limit).
        max_epochs: stop after this many passes over the data (``None``: no limit).
            At least one of the two must be set.
        lr: peak learning rate (see above).
        warmup_steps: optimizer steps of linear warm-up.
        label_smoothing: ``epsilon_ls`` of ``F.cross_entropy`` (the paper: 0.1).
        grad_accum: batches whose gradients are summed before each optimizer step (per process:
            under ``torchrun`` one step sees ``world_size * grad_accum`` batches in all).
        clip_norm: clip the global gradient norm to this value (``None``: off, as in the paper).
        amp: ``"none"`` (float32), ``"bf16"`` (autocast to bfloat16 on CUDA or CPU) or ``"fp16"``
            (autocast to float16 with a ``GradScaler``; CUDA only).
        adam_betas, adam_eps: Adam's hyper-parameters (the paper: ``(0.9, 0.98)``, ``1e-9``).
        eval_every: evaluate every this many optimizer steps; ``None``: at the end of every epoch.
            Training always ends with an evaluation when ``evaluate`` is given.
        monitor: name of the metric (a key of ``evaluate``'s dict) for ``patience``, ``target``
            and ``best_checkpoint_path``.
        mode: ``"max"`` if a larger ``monitor`` is better (BLEU, accuracy), ``"min"`` for a loss.
        patience: stop after this many evaluations in a row without improvement (``None``: never).
        target: stop as soon as ``monitor`` reaches this value (``>=`` for max, ``<=`` for min).
        checkpoint_path: where to write the resumable checkpoint (``None``: never).
        checkpoint_every: write it every this many optimizer steps (and always at the end).
        best_checkpoint_path: where to write the model whenever ``monitor`` improves.
        seed: seeds Python, NumPy and PyTorch at the start of training (dropout, and any
            randomness in the data); the model's initial weights are the caller's business.
            Under ``torchrun`` rank ``r`` uses ``seed + r``, so that the ranks draw different
            dropout masks.
        progress: show a tqdm bar on stderr (also off when the ``TQDM_DISABLE`` variable is set;
            under ``torchrun`` only rank 0 shows one).
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    lr: float = 7e-4
    warmup_steps: int = 4000
    label_smoothing: float = 0.1
    grad_accum: int = 1
    clip_norm: float | None = None
    amp: str = "none"
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    eval_every: int | None = None
    monitor: str | None = None
    mode: str = "max"
    patience: int | None = None
    target: float | None = None
    checkpoint_path: str | None = None
    checkpoint_every: int | None = None
    best_checkpoint_path: str | None = None
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_epochs is None:
            raise ValueError("TrainConfig needs max_steps or max_epochs (or both); got neither")
        for name in ("max_steps", "max_epochs", "eval_every", "patience", "checkpoint_every"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_positive_int("warmup_steps", self.warmup_steps)
        check_positive_int("grad_accum", self.grad_accum)
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not self.lr > 0:
            raise ValueError(f"lr must be a positive float (the peak learning rate), got lr={self.lr!r}")
        check_probability("label_smoothing", self.label_smoothing)
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be positive or None, got clip_norm={self.clip_norm!r}")
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp={self.amp!r} is not one of {list(AMP_MODES)}")
        if self.mode not in ("max", "min"):
            raise ValueError(f"mode={self.mode!r} must be 'max' (larger is better) or 'min' (smaller is better)")
        if self.monitor is None and (self.patience is not None or self.target is not None):
            raise ValueError("patience and target need monitor= (the name of the metric to watch)")
        if self.best_checkpoint_path is not None and self.monitor is None:
            raise ValueError("best_checkpoint_path needs monitor= (the metric that decides what is best)")
        if len(self.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in self.adam_betas):
            raise ValueError(f"adam_betas must be two floats in [0, 1), got {self.adam_betas!r}")
        if not self.adam_eps > 0:
            raise ValueError(f"adam_eps must be positive, got {self.adam_eps!r}")

    def noam_factor(self, d_model: int) -> float:
        """The Noam ``factor`` that makes the schedule peak at ``lr``: ``lr * sqrt(d_model * warmup_steps)``."""
        return self.lr * math.sqrt(d_model * self.warmup_steps)


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        history: one dict per optimizer step: ``step``, ``epoch``, ``loss`` (mean per target
            token, label smoothing included), ``lr`` (the rate used by that step), ``tokens_per_s``
            (source + target non-padding tokens per second of that step).
        eval_history: one dict per evaluation: ``step``, ``epoch``, then the metrics.
        steps: optimizer steps done in total (including those before a resume).
        epochs: completed passes over the data.
        train_seconds: time spent in training steps (data, forward, backward, update); evaluation
            and checkpoint writing are excluded.
        stopped_early: ``True`` when ``patience`` or ``target`` ended training.
        stop_reason: ``"max_steps"``, ``"max_epochs"``, ``"patience"``, ``"target"`` or
            ``"data_exhausted"`` (an epoch yielded no batch).
        best_metric, best_step: best value of ``monitor`` seen and its step (``None`` without one).
        world_size: processes that trained together (1 without ``torchrun``); losses and
            ``tokens_per_s`` in ``history`` are over all of them.
    """

    history: list[dict[str, float]] = field(default_factory=list)
    eval_history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    epochs: int = 0
    train_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""
    best_metric: float | None = None
    best_step: int | None = None
    world_size: int = 1

    @property
    def final_loss(self) -> float:
        """Training loss of the last optimizer step (``nan`` before any step)."""
        return self.history[-1]["loss"] if self.history else math.nan

    @property
    def last_eval(self) -> dict[str, float]:
        """Metrics of the last evaluation (empty dict if none)."""
        return self.eval_history[-1] if self.eval_history else {}


def sequence_loss(
    logits: Tensor, target: Tensor, pad_id: int, label_smoothing: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """Cross-entropy of ``logits`` against ``target``, ignoring padding positions.

    With label smoothing ``eps`` over ``K`` classes, each target position contributes
    ``(1 - eps) * (-log p_y) + eps / K * sum_k (-log p_k)`` (``F.cross_entropy``'s definition:
    the ``eps`` mass is spread over all ``K`` classes, the true one included). ``"mean"`` averages
    over non-padding positions; ``"sum"`` adds them up. The loss is computed in float32 whatever
    the dtype of ``logits``.

    Shape:
        logits: ``(B, T, V)``; target: ``(B, T)``; output: scalar.
    """
    if logits.dim() != 3 or target.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be (B, T, V) and target (B, T) with the same B, T; got {tuple(logits.shape)} "
            f"and {tuple(target.shape)}"
        )
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction={reduction!r} must be 'mean' or 'sum'")
    return F.cross_entropy(
        logits.float().flatten(0, 1),  # (B, T, V) -> (B*T, V)
        target.flatten(),  # (B, T) -> (B*T,)
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )


@torch.no_grad()
def evaluate_loss(
    model: Transformer, batches: Iterable[Batch], device: torch.device | str | None = None
) -> dict[str, float]:
    """Mean negative log-likelihood per target token (no label smoothing) and its perplexity.

    Runs in eval mode (no dropout) and restores the model's mode afterwards.
    Returns ``{"loss": nll, "perplexity": exp(nll), "tokens": n}``.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for batch in batches:
            batch = batch.to(device)
            logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            total += float(sequence_loss(logits, batch.tgt_out, batch.pad_id, reduction="sum"))
            tokens += batch.num_tokens
    finally:
        model.train(was_training)
    if tokens == 0:
        raise ValueError("evaluate_loss got no target tokens (empty data or only padding)")
    nll = total / tokens
    return {"loss": nll, "perplexity": math.exp(min(nll, 700.0)), "tokens": float(tokens)}


def train_state_path(checkpoint_path: str | os.PathLike[str]) -> Path:
    """Path of the training-state file written beside ``checkpoint_path``.

    ``run.safetensors`` -> ``run.train_state.safetensors``; ``run`` -> ``run.train_state.safetensors``.
    """
    path = Path(checkpoint_path)
    stem = path.stem if path.suffix == ".safetensors" else path.name
    return path.with_name(stem + ".train_state.safetensors")


# ----------------------------------------------------------------------------------------------
# Saving and restoring the complete training state (never pickle).


def _rng_state() -> tuple[dict[str, Tensor], dict[str, Any]]:
    tensors = {"rng/torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = state
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    tensors["rng/numpy"] = torch.from_numpy(np.asarray(keys, dtype=np.int64))
    meta = {"numpy": [kind, int(pos), int(has_gauss), float(cached)], "python": random.getstate()}
    return tensors, meta


def _set_rng_state(tensors: dict[str, Tensor], meta: dict[str, Any]) -> None:
    torch.set_rng_state(tensors["rng/torch"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("rng/cuda/"))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    kind, pos, has_gauss, cached = meta["numpy"]
    np.random.set_state((kind, tensors["rng/numpy"].numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = meta["python"]
    random.setstate((version, tuple(internal), gauss))


def _atomic_save_file(tensors: dict[str, Tensor], path: Path, metadata: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save_training_checkpoint(
    path: Path,
    model: Transformer,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler | None,
    loop: dict[str, Any],
    metadata: dict[str, Any],
    rank_rngs: list[tuple[dict[str, Tensor], dict[str, Any]]] | None = None,
) -> None:
    """Write the training state first, then the model, each atomically; both record the step.

    ``rank_rngs`` (several processes): every rank's random-number generator states, in rank
    order; rank 0's are stored as in a single process, rank ``r``'s under ``rng/rank{r}/``.
    """
    tensors: dict[str, Tensor] = {}
    opt = optimizer.state_dict()
    opt_scalars: dict[str, dict[str, Any]] = {}
    for pid, state in opt["state"].items():
        for key, value in state.items():
            if isinstance(value, Tensor):
                tensors[f"optimizer/{pid}/{key}"] = value.detach().cpu().contiguous()
            else:
                opt_scalars.setdefault(str(pid), {})[key] = value
    rng_tensors, rng_meta = _rng_state() if rank_rngs is None else rank_rngs[0]
    tensors.update(rng_tensors)
    for r, (other_tensors, _) in enumerate(rank_rngs or [], start=0):
        if r > 0:
            tensors.update({f"rng/rank{r}/{k.removeprefix('rng/')}": v for k, v in other_tensors.items()})
    sched = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    state = {
        "loop": loop,
        "optimizer_param_groups": opt["param_groups"],
        "optimizer_scalars": opt_scalars,
        "optimizer_state_ids": sorted(opt["state"]),
        "scheduler": sched,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": rng_meta,
    }
    if rank_rngs is not None and len(rank_rngs) > 1:
        state["rng_ranks"] = {str(r): meta for r, (_, meta) in enumerate(rank_rngs) if r > 0}
    _atomic_save_file(tensors, train_state_path(path), {"format": STATE_FORMAT, "state": json.dumps(state)})
    save_checkpoint(model, path, **{**metadata, "training": {"step": loop["step"], "epoch": loop["epoch"]}})


def _load_training_checkpoint(
    path: Path,
    model: Transformer,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler | None,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, Any]:
    """Restore everything written by :func:`_save_training_checkpoint`; return the loop state.

    Rank ``rank`` of ``world_size`` processes restores its own random-number generators.
    """
    config, metadata = read_checkpoint_header(path)
    if config != model.config:
        raise ValueError(
            f"resume_from={str(path)!r} holds a model with config {config} but the model passed to train() "
            f"has {model.config}"
        )
    state_file = train_state_path(path)
    if not state_file.is_file():
        raise FileNotFoundError(
            f"resume_from={str(path)!r} has no training state {str(state_file)!r} beside it; it is a model-only "
            f"checkpoint (use load_checkpoint to use the model, or train from scratch)"
        )
    try:
        with safe_open(str(state_file), framework="pt") as handle:
            header = handle.metadata() or {}
        tensors = load_file(str(state_file))
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"training state {str(state_file)!r} is not a valid safetensors file: {error}") from None
    if header.get("format") != STATE_FORMAT:
        raise ValueError(f"{str(state_file)!r} was not written by train() (format {header.get('format')!r})")
    state = json.loads(header["state"])
    step = state["loop"]["step"]
    saved_world = state["loop"].get("world_size", 1)
    if saved_world != world_size:
        raise ValueError(
            f"resume_from={str(path)!r} was written by a run of {saved_world} process(es) but this run has "
            f"{world_size}: resume with the same number of processes (each one's share of the data depends on it), "
            f"or start a new run from the weights (load_checkpoint)"
        )
    if metadata.get("training", {}).get("step") != step:
        raise ValueError(
            f"resume_from={str(path)!r} holds the model of step {metadata.get('training', {}).get('step')} but "
            f"{str(state_file)!r} the training state of step {step} (interrupted while saving?)"
        )
    missing, unexpected = load_model(model, str(path), strict=False, device=str(device))
    if missing or unexpected:
        raise ValueError(f"resume_from={str(path)!r}: missing weights {missing}, unexpected {unexpected}")
    opt_state: dict[int, dict[str, Any]] = {}
    for pid in state["optimizer_state_ids"]:
        opt_state[pid] = dict(state["optimizer_scalars"].get(str(pid), {}))
    for name, value in tensors.items():
        if name.startswith("optimizer/"):
            _, pid, key = name.split("/", 2)
            opt_state.setdefault(int(pid), {})[key] = value
    optimizer.load_state_dict({"state": opt_state, "param_groups": state["optimizer_param_groups"]})
    scheduler.load_state_dict({**state["scheduler"], "lr_lambdas": [None] * len(optimizer.param_groups)})
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    if rank == 0:
        _set_rng_state(tensors, state["rng"])
    else:
        prefix = f"rng/rank{rank}/"
        own = {"rng/" + k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
        meta = state.get("rng_ranks", {}).get(str(rank))
        if "rng/torch" not in own or meta is None:
            raise ValueError(f"training state {str(state_file)!r} holds no random-number state for rank {rank}")
        _set_rng_state(own, meta)
    return state["loop"]


# ----------------------------------------------------------------------------------------------
# The loop.


def _epoch_batches(train_data: TrainData, epoch: int, shard: tuple[int, int] | None = None) -> Iterator[Batch]:
    """The batches of ``epoch``; with ``shard=(rank, world_size)`` only this rank's share of them."""
    source = train_data(epoch) if callable(train_data) else train_data
    if shard is not None:
        return shard_batches(source, rank=shard[0], world_size=shard[1])
    return iter(source)


# The model's buffers (the positional table) never change: DDP need not send them before every forward.
# PyTorch 2.13 renamed the option; older versions only know broadcast_buffers.
_NO_BUFFER_SYNC = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    else {"broadcast_buffers": False}
)


def _group_tokens(group: list[Batch]) -> tuple[int, int]:
    """(target tokens, source + target tokens) of a group of batches, padding excluded."""
    for batch in group:
        if not isinstance(batch, Batch):
            raise TypeError(f"train_data must yield Batch objects, got {type(batch).__name__}")
    target_tokens = sum(b.num_tokens for b in group)
    return target_tokens, target_tokens + sum(b.num_src_tokens for b in group)


def _autocast(amp: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    if amp == "none":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def _progress_disabled(config: TrainConfig) -> bool:
    env = os.environ.get("TQDM_DISABLE", "")
    return not config.progress or env.lower() not in ("", "0", "false")


def train(
    model: Transformer,
    train_data: TrainData,
    config: TrainConfig,
    device: torch.device | str = "cpu",
    evaluate: Callable[[Transformer], dict[str, float]] | None = None,
    resume_from: str | os.PathLike[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> TrainResult:
    """Train ``model`` with teacher forcing; return a :class:`TrainResult`.

    Args:
        model: the :class:`~transformer_lib.model.Transformer` to train (moved to ``device``).
        train_data: the batches of one epoch, either a re-iterable of :class:`~.Batch` (a list: the
            same batches every epoch) or a callable ``epoch -> iterable of Batch`` (epochs count from
            0; e.g. ``lambda epoch: token_batches(pairs, 4000, pad, bos, eos, seed=epoch)`` for a new
            order every epoch). For an exact resume the batches of an epoch must depend on the
            epoch only (the loop skips the batches already seen in the interrupted epoch).
        config: the :class:`TrainConfig`.
        device: where to train.
        evaluate: ``model -> {metric: value}``, called in eval mode under ``torch.no_grad()`` every
            ``config.eval_every`` steps (or every epoch) and once at the end.
        resume_from: a ``checkpoint_path`` written by an earlier call: restores the weights,
            Adam's moments, the schedule, the gradient scaler, the random-number generators, the
            position in the data, the histories and the early-stopping counters, so that training
            continues as if it had never stopped (same losses, for the same data and seed).
        metadata: JSON-serialisable extra metadata stored in every checkpoint (e.g. a tokenizer).

    The returned ``history`` covers the whole run, including steps before a resume.

    Several processes: when ``torchrun`` launched the program and
    :func:`~transformer_lib.distributed.init_distributed` joined the process group, every rank
    calls ``train`` with the same arguments (and the same batches: build them from the epoch,
    not from rank-dependent randomness). Each optimizer step then uses ``grad_accum`` batches
    per rank, every rank's ``W``-th share of the epoch (a last incomplete round is left out);
    losses in ``history`` are over all ranks; ``evaluate`` runs on every rank and rank 0's
    metrics decide early stopping; only rank 0 writes checkpoints (the others wait for it) and
    shows the progress bar. ``resume_from`` must be readable by every rank and come from a run
    with the same number of processes.
    """
    if not isinstance(model, Transformer):
        raise TypeError(
            f"model must be a transformer_lib.Transformer, got {type(model).__name__} (pass the bare model: "
            f"under torchrun, train() wraps it in DistributedDataParallel itself)"
        )
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not callable(train_data) and not isinstance(train_data, Iterable):
        raise TypeError(
            f"train_data must be an iterable of Batch or a callable epoch -> iterable, got {type(train_data).__name__}"
        )
    if evaluate is not None and not callable(evaluate):
        raise TypeError(f"evaluate must be a callable model -> dict of metrics, got {type(evaluate).__name__}")
    if config.monitor is not None and evaluate is None:
        raise ValueError(f"monitor={config.monitor!r} needs evaluate= (a callable model -> dict of metrics)")
    device = torch.device(device)
    if config.amp == "fp16" and device.type != "cuda":
        raise ValueError(
            f"amp='fp16' needs a CUDA device (it uses a GradScaler); got device={str(device)!r}. "
            f"Use amp='bf16' or amp='none' on {device.type}"
        )
    if config.amp == "bf16" and device.type not in ("cuda", "cpu"):
        raise ValueError(f"amp='bf16' is supported on cuda and cpu, got device={str(device)!r}")
    metadata = dict(metadata or {})
    try:
        json.dumps(metadata)
    except TypeError as error:
        raise TypeError(f"metadata must be JSON-serialisable: {error}") from None

    distributed = is_distributed()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    main = rank == 0
    if distributed and dist.get_backend() == "nccl" and device.type != "cuda":
        raise ValueError(f"the process group uses NCCL, which needs CUDA tensors, but device={str(device)!r}")

    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=config.adam_betas, eps=config.adam_eps)
    scheduler = noam_schedule(
        optimizer, model.config.d_model, config.warmup_steps, config.noam_factor(model.config.d_model)
    )
    scaler = torch.amp.GradScaler("cuda") if config.amp == "fp16" else None
    result = TrainResult(world_size=world)
    loop: dict[str, Any] = {
        "step": 0,
        "epoch": 0,
        "batch_in_epoch": 0,
        "bad_evals": 0,
        "last_eval_step": -1,
        "world_size": world,
    }
    if resume_from is not None:
        loop = _load_training_checkpoint(Path(resume_from), model, optimizer, scheduler, scaler, device, rank, world)
        loop["world_size"] = world
        result = TrainResult(**loop.pop("result"))
        result.stop_reason, result.stopped_early = "", False  # this call's config decides when to stop
    else:
        set_seed(config.seed + rank)  # rank 0 (and a single process): config.seed
    ddp: DistributedDataParallel | None = None
    if distributed:
        # One replica per process; backward() all-reduces (averages) the gradients across the ranks.
        device_ids = None
        if device.type == "cuda":
            device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
        ddp = DistributedDataParallel(model, device_ids=device_ids, **_NO_BUFFER_SYNC)

    def snapshot() -> dict[str, Any]:
        return {**loop, "result": asdict(result)}

    def save(path: str | None) -> None:
        if path is None:
            return
        # Every rank's random-number state goes into rank 0's file; only rank 0 writes, the others wait.
        rank_rngs = all_gather_object(_rng_state()) if distributed else None
        if main:
            _save_training_checkpoint(Path(path), model, optimizer, scheduler, scaler, snapshot(), metadata, rank_rngs)
        barrier()

    def run_evaluation() -> bool:
        """Evaluate, update best/patience; return True if training must stop."""
        assert evaluate is not None
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                metrics = evaluate(model)
        finally:
            model.train(was_training)
        if not isinstance(metrics, dict):
            raise TypeError(f"evaluate must return a dict of metrics, got {type(metrics).__name__}")
        if distributed:  # every rank evaluated; rank 0's numbers decide, so that every rank decides alike
            metrics = broadcast_object({k: float(v) for k, v in metrics.items()})
        row = {"step": loop["step"], "epoch": loop["epoch"], **{k: float(v) for k, v in metrics.items()}}
        result.eval_history.append(row)
        loop["last_eval_step"] = loop["step"]
        if config.monitor is None:
            return False
        if config.monitor not in metrics:
            raise ValueError(
                f"monitor={config.monitor!r} is not among the metrics evaluate returned: {sorted(metrics)}"
            )
        value = float(metrics[config.monitor])
        better = result.best_metric is None or (
            value > result.best_metric if config.mode == "max" else value < result.best_metric
        )
        if better:
            result.best_metric, result.best_step = value, loop["step"]
            loop["bad_evals"] = 0
            if config.best_checkpoint_path is not None:
                if main:
                    save_checkpoint(
                        model, config.best_checkpoint_path, **{**metadata, "step": loop["step"], "metrics": row}
                    )
                barrier()
        else:
            loop["bad_evals"] += 1
        if config.target is not None and (value >= config.target if config.mode == "max" else value <= config.target):
            result.stop_reason, result.stopped_early = "target", True
            return True
        if config.patience is not None and loop["bad_evals"] >= config.patience:
            result.stop_reason, result.stopped_early = "patience", True
            return True
        return False

    bar = tqdm(
        total=config.max_steps,
        initial=loop["step"],
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=_progress_disabled(config) or not main,
    )
    model.train()
    autocast = _autocast(config.amp, device)
    stop = False
    try:
        while not stop:
            if config.max_steps is not None and loop["step"] >= config.max_steps:
                result.stop_reason = "max_steps"
                break
            if config.max_epochs is not None and loop["epoch"] >= config.max_epochs:
                result.stop_reason = "max_epochs"
                break
            batches = _epoch_batches(train_data, loop["epoch"], (rank, world) if distributed else None)
            for _ in range(loop["batch_in_epoch"]):  # resume in the middle of an epoch
                next(batches, None)
            steps_this_epoch = 0
            while True:
                start = time.perf_counter()
                group = [b for _, b in zip(range(config.grad_accum), batches, strict=False)]
                if not distributed and not group:
                    break
                target_tokens, tokens = _group_tokens(group)
                if distributed:
                    # [ranks that still have data, target tokens, all tokens], summed over the ranks. When one
                    # rank has run out, the epoch ends on every rank: a rank that stepped alone would wait
                    # forever for the others' gradients.
                    counts = torch.tensor([int(bool(group)), target_tokens, tokens], dtype=torch.long, device=device)
                    dist.all_reduce(counts)
                    have, target_tokens, tokens = counts.tolist()
                    if have < world:
                        break
                lr_used = optimizer.param_groups[0]["lr"]  # the rate this step uses
                loss = _optimizer_step(
                    model, group, optimizer, scheduler, scaler, config, device, autocast, target_tokens, ddp
                )
                elapsed = time.perf_counter() - start
                loop["step"] += 1
                loop["batch_in_epoch"] += len(group)
                steps_this_epoch += 1
                result.steps = loop["step"]
                result.train_seconds += elapsed
                result.history.append(
                    {
                        "step": loop["step"],
                        "epoch": loop["epoch"],
                        "loss": loss,
                        "lr": lr_used,
                        "tokens_per_s": tokens / elapsed if elapsed > 0 else math.nan,
                    }
                )
                bar.update(1)
                bar.set_postfix(
                    loss=f"{loss:.3f}", lr=f"{lr_used:.2e}", tok_s=f"{tokens / max(elapsed, 1e-9):.0f}", refresh=False
                )
                if config.checkpoint_every is not None and loop["step"] % config.checkpoint_every == 0:
                    save(config.checkpoint_path)
                if evaluate is not None and config.eval_every is not None and loop["step"] % config.eval_every == 0:
                    if run_evaluation():
                        stop = True
                        break
                if config.max_steps is not None and loop["step"] >= config.max_steps:
                    result.stop_reason = "max_steps"
                    stop = True
                    break
            if stop:
                break
            if steps_this_epoch == 0 and loop["batch_in_epoch"] == 0:
                result.stop_reason = "data_exhausted"
                break
            loop["epoch"] += 1
            loop["batch_in_epoch"] = 0
            result.epochs = loop["epoch"]
            if evaluate is not None and config.eval_every is None and run_evaluation():
                break
        if evaluate is not None and loop["last_eval_step"] != loop["step"] and not result.stopped_early:
            run_evaluation()
    finally:
        bar.close()
    result.epochs = loop["epoch"]
    save(config.checkpoint_path)
    return result


def _optimizer_step(
    model: Transformer,
    group: list[Batch],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler | None,
    config: TrainConfig,
    device: torch.device,
    autocast: contextlib.AbstractContextManager[Any],
    target_tokens: int,
    ddp: DistributedDataParallel | None = None,
) -> float:
    """One optimizer step over ``grad_accum`` batches; return the mean loss per target token.

    ``target_tokens`` counts the target tokens of the **whole step**: of the group, and under
    ``ddp`` of every rank's group. Each batch's summed loss is divided by it, so the accumulated
    gradient is the gradient of the mean loss over the step's tokens, the same as one big batch
    would give. ``DistributedDataParallel`` **averages** the ranks' gradients (their sum divided
    by the world size ``W``), so under ``ddp`` each loss is also multiplied by ``W``::

        grad = 1/W * sum_r grad(W * loss_r / N) = grad(sum_r loss_r / N)      N = all ranks' tokens

    Under ``ddp`` the gradients are all-reduced only after the group's last batch (``no_sync``
    for the others), and the returned loss is the mean over every rank's tokens.
    """
    if target_tokens == 0:
        raise ValueError("a training step got batches without any non-padding target token")
    world = dist.get_world_size() if ddp is not None else 1
    forward = ddp if ddp is not None else model
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for i, batch in enumerate(group):
        batch = batch.to(device)
        # Under DDP, only the group's last backward all-reduces; the others just accumulate locally.
        sync = ddp.no_sync() if ddp is not None and i < len(group) - 1 else contextlib.nullcontext()
        with sync:
            with autocast:
                logits = forward(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            loss = sequence_loss(logits, batch.tgt_out, batch.pad_id, config.label_smoothing, reduction="sum")
            scaled = loss / target_tokens if ddp is None else loss * world / target_tokens
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        total += loss.detach()
    if ddp is not None:
        dist.all_reduce(total)  # the sum of every rank's summed loss
    if scaler is not None:
        if config.clip_norm is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        scaler.step(optimizer)
        scaler.update()
    else:
        if config.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        optimizer.step()
    scheduler.step()
    return float(total) / target_tokens
