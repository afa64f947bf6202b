"""Checkpoints: weights in safetensors, configuration and metadata as JSON in the same file, written
atomically.

Loading never unpickles anything, so a checkpoint from an untrusted source cannot run code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model

from .config import TransformerConfig
from .files import atomic_write
from .model import Transformer

FORMAT = "transformer_lib.checkpoint.v1"


def save_checkpoint(model: Transformer, path: str | os.PathLike[str], **metadata: Any) -> Path:
    """Write ``model`` (weights, config) and JSON-serialisable ``metadata`` to ``path``; tied
    weights stored once.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib.Transformer, got {type(model).__name__}")
    try:
        meta_json = json.dumps(metadata)
    except TypeError as error:
        raise TypeError(f"metadata must be JSON-serialisable: {error}") from None
    header = {"format": FORMAT, "config": json.dumps(model.config.to_dict()), "metadata": meta_json}
    return atomic_write(path, lambda tmp: save_model(model, str(tmp), metadata=header))


def read_checkpoint_header(
    path: str | os.PathLike[str],
) -> tuple[TransformerConfig, dict[str, Any]]:
    """Read the config and metadata of a checkpoint without loading its weights."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    try:
        with safe_open(str(path), framework="pt") as handle:
            header = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(
            f"checkpoint {str(path)!r} is not a valid safetensors file (truncated or corrupted?): "
            f"{error}"
        ) from None
    if header.get("format") != FORMAT:
        raise ValueError(
            f"checkpoint {str(path)!r} was not written by save_checkpoint (format "
            f"{header.get('format')!r})"
        )
    return TransformerConfig.from_dict(json.loads(header["config"])), json.loads(header["metadata"])


def load_checkpoint(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> tuple[Transformer, dict[str, Any]]:
    """Rebuild the model saved by :func:`~.save_checkpoint`; return ``(model, metadata)``.

    A truncated or corrupted file, or weights that do not match the config, raise ``ValueError``.
    """
    config, metadata = read_checkpoint_header(path)
    model = Transformer(config)
    try:
        missing, unexpected = load_model(model, str(path), strict=False, device=str(map_location))
    except (SafetensorError, OSError, RuntimeError, ValueError) as error:
        raise ValueError(
            f"checkpoint {str(path)!r} could not be loaded (truncated or mismatched?): {error}"
        ) from None
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {str(path)!r} does not match its config: missing {missing}, unexpected "
            f"{unexpected}"
        )
    return model.to(map_location), metadata
