"""The complete state of a training run, saved so that :func:`~.train` resumes exactly.

A run's checkpoint is two files, each written atomically (:func:`~.atomic_write`):

* ``run.safetensors``: the model, as :func:`~.save_checkpoint` writes it
  (no pickle; it records the step it belongs to);
* ``run.train_state.pt`` beside it (:func:`~.train_state_path`): Adam's moments, the schedule, the
  gradient scaler, every rank's random-number generators and the loop's position and histories,
  written with ``torch.save`` and read back with ``torch.load(weights_only=True)``, which accepts
  tensors and plain containers only, never arbitrary objects.

``path`` may also be a **checkpoint directory** (one that exists): each save then writes the pair
``step-0000040.safetensors`` and ``step-0000040.train_state.pt`` for its step and, once both are
written, removes the older pairs; resuming from the directory takes the newest whole pair
(:func:`~.latest_checkpoint`). A run killed while writing a pair thus resumes from the pair before it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model
from torch import nn

from ..checkpoint import read_checkpoint_header, save_checkpoint
from ..files import atomic_write

STATE_FORMAT = "transformer_lib.train_state.v2"


def train_state_path(checkpoint_path: str | os.PathLike[str]) -> Path:
    """Path of the training-state file written beside ``checkpoint_path``.

    ``run.safetensors`` -> ``run.train_state.pt``; ``run`` -> ``run.train_state.pt``.
    """
    path = Path(checkpoint_path)
    stem = path.stem if path.suffix == ".safetensors" else path.name
    return path.with_name(stem + ".train_state.pt")


def step_checkpoint_path(directory: str | os.PathLike[str], step: int) -> Path:
    """Where a checkpoint directory keeps the model of ``step``: ``DIR/step-0000040.safetensors``."""
    return Path(directory) / f"step-{step:07d}.safetensors"


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest whole checkpoint of a checkpoint directory (model and training state both written), or ``None``."""
    found = []
    for model_file in Path(directory).glob("step-*.safetensors"):
        digits = model_file.stem.removeprefix("step-")
        if digits.isdigit() and train_state_path(model_file).is_file():
            found.append((int(digits), model_file))
    return max(found)[1] if found else None


def _remove_all_but(directory: Path, kept: Path) -> None:
    """Remove the directory's other step files: older pairs, and any half-written pair of a killed run."""
    for file in directory.glob("step-*"):
        if file.name not in (kept.name, train_state_path(kept).name):
            file.unlink(missing_ok=True)


def rng_state() -> dict[str, Any]:
    """The random-number generators of this process (PyTorch, CUDA, NumPy, Python), as tensors and plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": random.getstate(),
        "cuda": [],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`~.rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    numpy = state["numpy"]
    keys = numpy["keys"].numpy().astype(np.uint32)
    np.random.set_state((numpy["kind"], keys, numpy["pos"], numpy["has_gauss"], numpy["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def save_training_state(
    path: str | os.PathLike[str],
    model: nn.Module,
    parts: dict[str, Any],
    loop: dict[str, Any],
    metadata: dict[str, Any],
    rank_rngs: list[dict[str, Any]],
) -> None:
    """Write the training state (``parts``: ``optimizer``, ``scheduler``, ``scaler``) first, then the model.

    ``rank_rngs`` holds every rank's :func:`~.rng_state`, in rank order (one entry for one process).
    Both files record the step, so a crash between the two writes is detected on resume. ``path``
    may be a checkpoint directory (see the module's docstring).
    """
    directory, path = (Path(path), step_checkpoint_path(path, loop["step"])) if Path(path).is_dir() else (None, path)
    scheduler = {k: v for k, v in parts["scheduler"].state_dict().items() if k != "lr_lambdas"}
    state = {
        "format": STATE_FORMAT,
        "loop": loop,
        "optimizer": parts["optimizer"].state_dict(),
        "scheduler": scheduler,
        "scaler": parts["scaler"].state_dict() if parts["scaler"] is not None else None,
        "rng": rank_rngs,
    }
    atomic_write(train_state_path(path), lambda tmp: torch.save(state, tmp))
    training = {"step": loop["step"], "epoch": loop["epoch"], "world_size": loop.get("world_size", 1)}
    save_checkpoint(model, path, **{**metadata, "training": training})
    if directory is not None:
        _remove_all_but(directory, Path(path))


def _read_state(path: Path, mmap: bool = False) -> dict[str, Any]:
    state_file = train_state_path(path)
    if not state_file.is_file():
        raise FileNotFoundError(
            f"resume_from={str(path)!r} has no training state {str(state_file)!r} beside it; it is a model-only "
            f"checkpoint (use load_checkpoint to use the model, or train from scratch)"
        )
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as error:  # a truncated file, or one that is not a torch.save archive
        raise ValueError(f"training state {str(state_file)!r} could not be read: {error}") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{str(state_file)!r} was not written by train() (format {found!r})")
    return state


def _check_matches(path: Path, model: nn.Module, state: dict[str, Any], world_size: int) -> None:
    config, metadata = read_checkpoint_header(path)
    if config != model.config:
        raise ValueError(
            f"resume_from={str(path)!r} holds a model with config {config} but the model passed to train() "
            f"has {model.config}"
        )
    saved_world = state["loop"].get("world_size", 1)
    if saved_world != world_size:
        raise ValueError(
            f"resume_from={str(path)!r} was written by a run of {saved_world} process(es) but this run has "
            f"{world_size}: resume with the same number of processes (each one's share of the data depends on it), "
            f"or start a new run from the weights (load_checkpoint)"
        )
    step, model_step = state["loop"]["step"], metadata.get("training", {}).get("step")
    if model_step != step:
        raise ValueError(
            f"resume_from={str(path)!r} holds the model of step {model_step} but "
            f"{str(train_state_path(path))!r} the training state of step {step} (interrupted while saving?)"
        )


def _resolve(path: Path) -> Path:
    """``path``, or the newest whole checkpoint when ``path`` is a checkpoint directory."""
    if not path.is_dir():
        return path
    newest = latest_checkpoint(path)
    if newest is None:
        raise FileNotFoundError(
            f"resume_from={str(path)!r} is a directory without a checkpoint (no step-N.safetensors with its "
            f"step-N.train_state.pt beside it)"
        )
    return newest


def read_loop_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where a saved run stopped: the loop's ``step``, ``epoch``, ``batch_in_epoch``, ... and its ``result``.

    Reads only that part: the tensors of the file are mapped, not loaded. ``path`` may be a
    checkpoint directory (its newest whole checkpoint).
    """
    return _read_state(_resolve(Path(path)), mmap=True)["loop"]


def load_training_state(
    path: str | os.PathLike[str],
    model: nn.Module,
    parts: dict[str, Any],
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, Any]:
    """Restore what :func:`~.save_training_state` wrote into ``model`` and ``parts``; return the loop state.

    Rank ``rank`` of ``world_size`` processes restores its own random-number generators. ``path``
    may be a checkpoint directory: its newest whole checkpoint is read.
    """
    path = _resolve(Path(path))
    state = _read_state(path)
    _check_matches(path, model, state, world_size)
    missing, unexpected = load_model(model, str(path), strict=False, device=str(device))
    if missing or unexpected:
        raise ValueError(f"resume_from={str(path)!r}: missing weights {missing}, unexpected {unexpected}")
    parts["optimizer"].load_state_dict(state["optimizer"])
    lambdas = [None] * len(parts["optimizer"].param_groups)
    parts["scheduler"].load_state_dict({**state["scheduler"], "lr_lambdas": lambdas})
    if parts["scaler"] is not None and state["scaler"] is not None:
        parts["scaler"].load_state_dict(state["scaler"])
    if rank >= len(state["rng"]):
        raise ValueError(f"training state {str(train_state_path(path))!r} holds no random-number state for rank {rank}")
    set_rng_state(state["rng"][rank])
    return state["loop"]
