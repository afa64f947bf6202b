"""The complete state of a training run, saved so that :func:`~.train` resumes exactly.

A run's checkpoint is two files, each written atomically (:func:`~.atomic_write`):

* ``run.safetensors``: the model, as :func:`~.save_checkpoint` writes it
  (no pickle; it records the step it belongs to);
* ``run.train_state.pt`` beside it (:func:`~.train_state_path`): Adam's moments, the schedule, the
  gradient scaler, every rank's random-number generators and the loop's position and histories,
  written with ``torch.save`` and read back with ``torch.load(weights_only=True)``, which accepts
  tensors and plain containers only, never arbitrary objects.
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
    Both files record the step, so a crash between the two writes is detected on resume.
    """
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
    save_checkpoint(model, path, **{**metadata, "training": {"step": loop["step"], "epoch": loop["epoch"]}})


def _read_state(path: Path) -> dict[str, Any]:
    state_file = train_state_path(path)
    if not state_file.is_file():
        raise FileNotFoundError(
            f"resume_from={str(path)!r} has no training state {str(state_file)!r} beside it; it is a model-only "
            f"checkpoint (use load_checkpoint to use the model, or train from scratch)"
        )
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True)
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


def load_training_state(
    path: str | os.PathLike[str],
    model: nn.Module,
    parts: dict[str, Any],
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, Any]:
    """Restore what :func:`~.save_training_state` wrote into ``model`` and ``parts``; return the loop state.

    Rank ``rank`` of ``world_size`` processes restores its own random-number generators.
    """
    path = Path(path)
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
