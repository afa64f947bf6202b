"""The complete state of a training run, saved so that :func:`~.train` resumes exactly.

A checkpoint is two files, each written atomically: the model (:func:`~.save_checkpoint`) and,
beside it (:func:`~.train_state_path`), Adam, the schedule, the scaler, every rank's random
generators and the loop's :class:`~.TrainState`. A **checkpoint directory** keeps the newest whole
``step-0000040.*`` pair.
"""

from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model
from torch import nn

from ..checkpoint import read_checkpoint_header, save_checkpoint
from ..files import atomic_write
from .config import TrainResult
from .step import Optimization

STATE_FORMAT = "transformer_lib.train_state.v3"


@dataclass
class TrainState:
    """Where a run of :func:`~.train` stands: what a checkpoint saves and ``resume_from``
    restores.
    """

    step: int = 0  # optimizer steps done, those before a resume included
    epoch: int = 0  # completed passes over the data
    # batches of this epoch already trained on (this rank's): a resumed run skips them
    batch_in_epoch: int = 0
    last_eval_step: int = -1  # -1: no evaluation yet
    world_size: int = 1  # processes training together: a resume needs as many
    # what the run returns: histories, best metric, ...
    result: TrainResult = field(default_factory=TrainResult)


def train_state_path(checkpoint_path: str | os.PathLike[str]) -> Path:
    """The training-state file beside a model file: ``run.safetensors`` (or ``run``) ->
    ``run.train_state.pt``.
    """
    path = Path(checkpoint_path)
    stem = path.stem if path.suffix == ".safetensors" else path.name
    return path.with_name(stem + ".train_state.pt")


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest whole checkpoint of a checkpoint directory (model and training state both
    written), or ``None``.
    """
    whole = [path for _, path in kept_checkpoints(directory) if train_state_path(path).is_file()]
    return whole[-1] if whole else None


def kept_checkpoints(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The model files ``step-N.safetensors`` of a checkpoint directory as ``(N, path)``, oldest
    first: the newest, the best and the last ``keep_last`` evaluations' (:class:`~.TrainConfig`).
    """
    files = Path(directory).glob("step-*.safetensors")
    return sorted((int(f.stem[5:]), f) for f in files if f.stem[5:].isdigit())


def rng_state() -> dict[str, Any]:
    """The random-number generators of this process (PyTorch, CUDA, NumPy, Python), as tensors and
    plain values.
    """
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
        "numpy": [
            kind,
            torch.from_numpy(keys.astype(np.int64)),
            int(pos),
            int(has_gauss),
            float(cached),
        ],
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`~.rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), *rest))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def save_training_state(
    path: str | os.PathLike[str],
    model: nn.Module,
    parts: Optimization,
    train_state: TrainState,
    metadata: dict[str, Any],
    rank_rngs: list[dict[str, Any]],
    keep_last: int = 1,
) -> None:
    """Write the training state, then the model (both record the step: a resume detects a crash
    between the two writes); ``rank_rngs``: every rank's :func:`~.rng_state`, in rank order. In a
    directory, the newest model and state stay, and the model files of the best step and (with
    ``keep_last`` above 1) of the last ``keep_last`` evaluations (``TrainConfig.keep_last``).
    """
    step = train_state.step
    target = Path(path)
    in_directory = target.is_dir()
    path = target / f"step-{step:07d}.safetensors" if in_directory else target
    state = {
        "format": STATE_FORMAT,
        "loop": asdict(train_state),
        "optimizer": parts.optimizer.state_dict(),
        # its lambdas are code: saved as None, rebuilt on resume
        "scheduler": parts.scheduler.state_dict(),
        "scaler": parts.scaler.state_dict(),  # {} when disabled
        "rng": rank_rngs,
    }
    atomic_write(train_state_path(path), lambda tmp: torch.save(state, tmp))
    training = {"step": step, "epoch": train_state.epoch, "world_size": train_state.world_size}
    save_checkpoint(model, path, **{**metadata, "training": training})
    if in_directory:  # older files, and any half-written pair of a killed run, go
        result = train_state.result
        evaluated = [int(row["step"]) for row in result.eval_history][-keep_last:]
        kept = {step, result.best_step, *(evaluated if keep_last > 1 else [])}
        models = {f"step-{n:07d}.safetensors" for n in kept if n is not None}
        for file in target.glob("step-*"):
            if file.name not in (*models, train_state_path(path).name):
                file.unlink(missing_ok=True)


def _read_state(path: Path, mmap: bool = False) -> dict[str, Any]:
    state_file = train_state_path(path)
    if not state_file.is_file():
        raise FileNotFoundError(
            f"resume_from={str(path)!r} has no training state beside it (a model-only checkpoint)"
        )
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as error:  # a truncated file, or one that is not a torch.save archive
        raise ValueError(f"training state {str(state_file)!r} could not be read: {error}") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(
            f"{str(state_file)!r} was not written by this version of train() (format "
            f"{STATE_FORMAT})"
        )
    return state


def _check_matches(path: Path, model: nn.Module, state: dict[str, Any], world_size: int) -> None:
    config, metadata = read_checkpoint_header(path)
    where = f"resume_from={str(path)!r}"
    if config != model.config:
        raise ValueError(f"{where} holds a model of config {config}, not {model.config}")
    saved_world = state["loop"].get("world_size", 1)
    if saved_world != world_size:  # each rank's share of the data depends on the number of ranks
        raise ValueError(
            f"{where} was written by {saved_world} process(es), this run has {world_size}"
        )
    step = state["loop"]["step"]
    model_step = metadata.get("training", {}).get("step")
    if model_step != step:
        raise ValueError(f"{where}: model of step {model_step}, training state of step {step}")


def _resolve(path: Path) -> Path:
    """``path``, or the newest whole checkpoint when ``path`` is a checkpoint directory."""
    newest = latest_checkpoint(path) if path.is_dir() else path
    if newest is None:
        raise FileNotFoundError(
            f"resume_from={str(path)!r} is a directory without a checkpoint (a step-N pair)"
        )
    return newest


def read_loop_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where a saved run (or a directory's newest) stopped: ``step``, ``epoch``, ..., ``result``;
    tensors not loaded.
    """
    return _read_state(_resolve(Path(path)), mmap=True)["loop"]


def load_training_state(
    path: str | os.PathLike[str],
    model: nn.Module,
    parts: Optimization,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> TrainState:
    """Restore what :func:`~.save_training_state` wrote into ``model`` and ``parts`` (and rank
    ``rank``'s random generators); return the loop's state.
    """
    path = _resolve(Path(path))
    state = _read_state(path)
    _check_matches(path, model, state, world_size)
    # it names any missing or unexpected weight
    load_model(model, str(path), strict=True, device=str(device))
    parts.optimizer.load_state_dict(state["optimizer"])
    parts.scheduler.load_state_dict(state["scheduler"])
    if state["scaler"]:  # an enabled (fp16) scaler's; older states wrote None for a disabled one
        parts.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][rank])  # _check_matches made sure there is one per rank
    loop = state["loop"]  # TrainState as dataclasses.asdict wrote it (read_loop_state returns it)
    # An older state may hold a field since dropped (bad_evals; stopped_early, now a property).
    known = {f.name for f in fields(TrainResult)}
    result = TrainResult(**{k: v for k, v in loop["result"].items() if k in known})
    kept = {f.name for f in fields(TrainState)} - {"result"}
    return TrainState(**{k: v for k, v in loop.items() if k in kept}, result=result)
