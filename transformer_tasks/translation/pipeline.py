"""The whole translation pipeline in one call: train, score the test set, save, summarise."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from transformer_lib.training.distributed import is_main_process

from .profiles import TranslationConfig
from .results import save_translation, translation_summary
from .score import evaluate_translation
from .train import train_translation


def run_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationConfig | None = None,
    device: str | torch.device = "auto",
    save: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """:func:`~.train_translation` (whose arguments these are), :func:`~.evaluate_translation` and
    :func:`~.save_translation`; return :func:`~.translation_summary` (without test scores on ranks >
    0).
    """
    wall_start = time.perf_counter()
    run = train_translation(data_dir, profile, device, resume=resume)
    if not is_main_process():
        return translation_summary(run)
    evaluation = evaluate_translation(run, progress=run.profile.train.progress)
    wall_seconds = time.perf_counter() - wall_start
    summary = translation_summary(run, evaluation, wall_seconds)
    if save is not None:
        save_translation(run, save, evaluation, wall_seconds)
        summary["checkpoint"] = str(save)
    return summary
