"""The copy task (复制任务): train a Transformer to copy random sequences, until every held-out one is exact.

The data (token ids, batches, the held-out set) lives in :mod:`transformer_lib.data.copy`; this
module holds the task's model, its training settings and its measure, exact match under greedy
decoding. It trains in seconds on a CPU, so it is the book's first end-to-end check that the
model, the training loop and decoding fit together.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ..checkpoint import save_checkpoint
from ..config import TransformerConfig
from ..data.batching import Batch
from ..data.copy import (
    BOS_ID,
    EOS_ID,
    FIRST_SYMBOL,
    HELD_OUT_SEED,
    NUM_SYMBOLS,
    PAD_ID,
    SEQ_LEN,
    VOCAB_SIZE,
    copy_batch,
    copy_batches,
    copy_targets,
    held_out_sequences,
    random_sequences,
)
from ..decoding import greedy_decode
from ..model import Transformer
from ..runtime import pick_device, set_seed
from ..training import TrainConfig, TrainResult, train
from ..training.distributed import is_main_process
from ..validation import check_positive_int

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "FIRST_SYMBOL",
    "HELD_OUT_SEED",
    "NUM_SYMBOLS",
    "PAD_ID",
    "SEQ_LEN",
    "VOCAB_SIZE",
    "CopyTaskSettings",
    "copy_batch",
    "copy_batches",
    "copy_exact_match",
    "copy_model_config",
    "copy_targets",
    "held_out_sequences",
    "random_sequences",
    "run_copy_task",
]


def copy_exact_match(model: Transformer, sequences: Tensor, batch_size: int = 1000, use_cache: bool = True) -> float:
    """Fraction of ``sequences`` that greedy decoding copies exactly (``bos s_1 .. s_L eos``).

    A row counts only if every token, the final ``eos`` included, is right.
    """
    check_positive_int("batch_size", batch_size)
    device = next(model.parameters()).device
    sequences = sequences.to(device)
    correct = 0
    for start in range(0, sequences.size(0), batch_size):
        chunk = sequences[start : start + batch_size]  # (b, L)
        expected = copy_targets(chunk)  # (b, L + 2)
        out = greedy_decode(model, chunk, expected.size(1), BOS_ID, EOS_ID, use_cache=use_cache)
        assert isinstance(out, Tensor)
        if out.size(1) < expected.size(1):  # every row stopped early, so none can be right
            continue
        correct += int((out == expected).all(dim=1).sum())
    return correct / sequences.size(0)


def copy_model_config(**overrides: Any) -> TransformerConfig:
    """The model the library trains on the copy task (see :class:`~.CopyTaskSettings` for why)."""
    base = {
        "src_vocab_size": VOCAB_SIZE,
        "tgt_vocab_size": VOCAB_SIZE,
        "d_model": 64,
        "num_heads": 4,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "d_ff": 128,
        "dropout": 0.0,
        "max_len": 64,
        "norm_first": True,
        "tie_embeddings": True,
        "pad_id": PAD_ID,
    }
    base.update(overrides)
    return TransformerConfig(**base)


@dataclass(frozen=True)
class CopyTaskSettings:
    """Training settings of :func:`~.run_copy_task`.

    The copy task has no noise to regularise against, so dropout and label smoothing are off
    (label smoothing would also keep the loss from reaching 0). Pre-LN trains stably at a higher
    peak learning rate with a short warm-up. These values were tuned for the time to 100% on
    a 2-core CPU (``benchmarks/copy_task.py`` compares them with a
    plain ``nn.Transformer``).

    ``batch_size`` and ``grad_accum`` are per process: under ``torchrun`` with ``W`` processes an
    optimizer step sees ``W * grad_accum * batch_size`` sequences.
    """

    batch_size: int = 64
    grad_accum: int = 1
    lr: float = 3e-3
    warmup_steps: int = 100
    max_steps: int = 3000
    eval_every: int = 50
    label_smoothing: float = 0.0


def run_copy_task(
    device: str | torch.device = "cpu",
    seed: int = 0,
    max_steps: int | None = None,
    eval_every: int | None = None,
    held_out: int = 1000,
    settings: CopyTaskSettings | None = None,
    model_config: TransformerConfig | None = None,
    progress: bool = True,
    save_path: str | None = None,
) -> dict[str, Any]:
    """Train a Transformer to copy until greedy decoding copies every held-out sequence, or ``max_steps``.

    Every ``eval_every`` optimizer steps the model greedily decodes the ``held_out`` fixed
    sequences (:func:`~.held_out_sequences`); training stops at the first evaluation with 100%
    exact match. ``device`` may be ``"auto"``.

    Returns a JSON-serialisable dict: ``exact_match`` (0..1, at the last evaluation), ``steps``,
    ``train_seconds`` (training steps only; evaluation excluded), ``wall_seconds`` (everything,
    model building and evaluation included), ``device``, ``params``, ``seed``, ``reached``
    (whether 100% was reached), ``settings`` and ``model`` (the configuration used), and
    ``eval_history``, ``world_size`` and ``global_batch_size`` (sequences per optimizer step, all
    processes together). With ``save_path``, the trained model is saved there with
    :func:`~.save_checkpoint`.

    Under ``torchrun`` (after :func:`~.init_distributed`, as
    ``python -m transformer_lib copy`` does), every rank runs this function: the ranks draw the
    same stream of batches and :func:`~.train` gives each one its share;
    every rank evaluates the held-out set and only rank 0 saves the model.
    """
    wall_start = time.perf_counter()
    settings = _resolve_settings(settings, max_steps, eval_every)
    check_positive_int("held_out", held_out)
    device = pick_device(device) if isinstance(device, str) else torch.device(device)
    set_seed(seed)
    config = model_config or copy_model_config()
    model = Transformer(config).to(device)
    sequences = held_out_sequences(held_out).to(device)

    def data(epoch: int) -> Iterator[Batch]:
        return copy_batches(settings.batch_size, seed=seed * 1_000_003 + epoch, num_batches=1000)

    def evaluate(m: Transformer) -> dict[str, float]:
        return {"exact_match": copy_exact_match(m, sequences)}

    result = train(model, data, _train_config(settings, seed, progress), device, evaluate=evaluate)
    if save_path is not None and is_main_process():
        _save_copy_model(model, save_path, result)
    summary = {"wall_seconds": time.perf_counter() - wall_start, "device": str(device), "seed": seed}
    return _summary(model, settings, result, summary)


def _resolve_settings(
    settings: CopyTaskSettings | None, max_steps: int | None, eval_every: int | None
) -> CopyTaskSettings:
    """The settings with ``max_steps`` and ``eval_every`` applied over them, checked."""
    settings = settings or CopyTaskSettings()
    if max_steps is not None:
        settings = replace(settings, max_steps=max_steps)
    if eval_every is not None:
        settings = replace(settings, eval_every=eval_every)
    check_positive_int("max_steps", settings.max_steps)
    check_positive_int("eval_every", settings.eval_every)
    check_positive_int("grad_accum", settings.grad_accum)
    return settings


def _train_config(settings: CopyTaskSettings, seed: int, progress: bool) -> TrainConfig:
    """Train until the first evaluation where every held-out sequence is copied exactly."""
    return TrainConfig(
        max_steps=settings.max_steps,
        lr=settings.lr,
        warmup_steps=settings.warmup_steps,
        label_smoothing=settings.label_smoothing,
        grad_accum=settings.grad_accum,
        eval_every=settings.eval_every,
        monitor="exact_match",
        mode="max",
        target=1.0,
        seed=seed,
        progress=progress,
    )


def _save_copy_model(model: Transformer, path: str, result: TrainResult) -> None:
    exact = result.last_eval.get("exact_match", 0.0)
    ids = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}
    save_checkpoint(model, path, task="copy", **ids, steps=result.steps, exact_match=exact)


def _summary(
    model: Transformer, settings: CopyTaskSettings, result: TrainResult, extra: dict[str, Any]
) -> dict[str, Any]:
    exact = result.last_eval.get("exact_match", 0.0)
    return {
        "task": "copy",
        "exact_match": exact,
        "reached": exact == 1.0,
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        "wall_seconds": extra["wall_seconds"],
        "device": extra["device"],
        "params": model.num_parameters(),
        "seed": extra["seed"],
        "threads": torch.get_num_threads(),
        "world_size": result.world_size,
        "global_batch_size": settings.batch_size * settings.grad_accum * result.world_size,
        "settings": asdict(settings),
        "model": model.config.to_dict(),
        "eval_history": result.eval_history,
    }
