"""The whole translation pipeline in one call, as ``python -m transformer_lib train-translation`` runs it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ...training.distributed import is_main_process
from .checkpoints import Checkpointing
from .profiles import TranslationProfile
from .results import save_translation, translation_summary
from .score import evaluate_translation
from .train import train_translation


def run_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationProfile | None = None,
    device: str | torch.device = "auto",
    seed: int = 0,
    save: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
    checkpoints: Checkpointing | None = None,
) -> dict[str, Any]:
    """Train a German-to-English Transformer on Multi30k and score it on ``test_2016_flickr``.

    :func:`~.train_translation`, then :func:`~.evaluate_translation`, then :func:`~.translation_summary`
    (and :func:`~.save_translation` when ``save`` is given). The arguments are those of
    :func:`~.train_translation`.

    Returns:
        A JSON-serialisable dict with ``bleu`` (greedy) and ``bleu_beam`` (sacreBLEU, 0-100),
        ``sacrebleu_signature``, ``train_seconds`` (time in training steps), ``wall_seconds``
        (everything, data and decoding included), ``epochs`` (passes over the training data, a
        fraction when the time budget ends one midway), ``steps``, ``device``, ``params``,
        ``profile``, ``val_history`` (validation loss over training) and more details; a resumed
        run also reports ``resumed_from_step``.

    Under ``torchrun`` every rank trains; only rank 0 translates the test set, saves and returns
    the full summary (the other ranks return the summary without test scores).
    """
    wall_start = time.perf_counter()
    run = train_translation(
        data_dir, profile, device, seed, save=None, progress=progress, threads=threads, checkpoints=checkpoints
    )
    if not is_main_process():
        return translation_summary(run)
    evaluation = evaluate_translation(run, progress=progress)
    wall_seconds = time.perf_counter() - wall_start
    summary = translation_summary(run, evaluation, wall_seconds)
    if save is not None:
        save_translation(run, save, evaluation, wall_seconds)
        summary["checkpoint"] = str(save)
    return summary
