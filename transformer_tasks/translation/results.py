"""The results of a translation run: the JSON summary the command line prints, and the saved
checkpoint.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from transformer_lib.checkpoint import load_checkpoint, read_checkpoint_header, save_checkpoint
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.files import atomic_write
from transformer_lib.model import Transformer

from ..records import describe_machine, peak_rss_mb, source_commit
from .data import TASK, checkpoint_metadata
from .profiles import DecodeConfig
from .score import TranslationEvaluation
from .train import TranslationRun


def translation_summary(
    run: TranslationRun,
    evaluation: TranslationEvaluation | None = None,
    wall_seconds: float | None = None,
) -> dict[str, Any]:
    """The JSON-serialisable results of a run, as ``train-translation`` prints them (the test-set
    keys need ``evaluation``); ``wall_seconds`` defaults to the training's wall time plus the
    decoding time.
    """
    scores = evaluation.summary() if evaluation is not None else {}
    if wall_seconds is None:
        wall_seconds = _training_and_decoding_seconds(run, evaluation)

    def pick(*keys: str) -> dict[str, Any]:
        return {k: scores[k] for k in keys if k in scores}

    averaged = run.val_loss_averaged
    summary = {
        "task": TASK,
        **pick("bleu", "bleu_beam", "sacrebleu_signature"),
        "train_seconds": round(run.train_seconds, 1),
        "wall_seconds": round(wall_seconds, 1),
        "epochs": round(run.epochs, 2),
        "steps": run.steps,
        "device": str(run.device),
        "params": run.model.num_parameters(),
        "profile": run.profile.name,
        "seed": run.seed,
        "threads": run.threads,
        "world_size": run.world_size,
        "amp": run.result.amp,
        "stop_reason": run.stop_reason,
        "tokens_per_s": round(run.tokens_per_s, 1),
        "steps_per_epoch": run.steps_per_epoch,
        "train_pairs": len(run.train_pairs),
        "test_pairs": scores.get("test_pairs", len(run.test_pairs)),
        "vocab_size": run.tokenizer.vocab_size,
        "beam_size": scores.get("beam_size", run.profile.decode.beam_size),
        "length_penalty": scores.get("length_penalty", run.profile.decode.length_penalty),
        **pick("brevity_penalty", "brevity_penalty_beam"),
        "averaged_checkpoints": run.averaged_checkpoints,
        "val_loss_last": round(run.val_loss_last, 4),
        "val_loss_averaged": None if averaged is None else round(averaged, 4),
        "checkpoint_choice": run.checkpoint_choice,
        "checkpoint_candidates": {name: round(loss, 4) for name, loss in run.candidates.items()},
        "final_train_loss": round(run.result.final_loss, 4),
        **pick("decode_seconds_greedy", "decode_seconds_beam"),
        "val_history": [_rounded(row) for row in run.val_history],
        **pick("examples"),
        "config": asdict(run.profile),
    }
    if run.resumed_from_step:  # only then: a run that started afresh keeps the keys it always had
        summary["resumed_from_step"] = run.resumed_from_step
    return summary


def _training_and_decoding_seconds(
    run: TranslationRun, evaluation: TranslationEvaluation | None
) -> float:
    if evaluation is None:
        return run.wall_seconds
    return run.wall_seconds + evaluation.greedy_seconds + evaluation.beam_seconds


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    """A history row with its floats rounded to 4 decimals."""
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def save_translation(
    run: TranslationRun,
    path: str | Path,
    evaluation: TranslationEvaluation | None = None,
    wall_seconds: float | None = None,
) -> Path:
    """Save the model of ``run`` for ``translate``, with :func:`~.checkpoint_metadata` and, as
    ``results``, the :func:`~.translation_summary` without its history, examples and config; set
    ``run.checkpoint``.
    """
    summary = translation_summary(run, evaluation, wall_seconds)
    results = {k: v for k, v in summary.items() if k not in ("val_history", "examples", "config")}
    metadata = checkpoint_metadata(run.tokenizer, run.decoding)
    run.checkpoint = save_checkpoint(run.model, path, **metadata, results=results)
    return run.checkpoint


def write_translation_results(
    path: str | Path, summary: dict[str, Any], device: Any = None
) -> Path:
    """Write ``{"results": summary, "machine": ..., "peak_rss_mb": ..., "commit": ..., "date":
    ...}`` as JSON, atomically: the process's peak resident memory so far (:func:`~.peak_rss_mb`),
    the commit of the package's code (``+changes`` with uncommitted changes; ``None`` outside a
    clone), UTC time.
    """
    record = {
        "results": summary,
        "machine": describe_machine(device),
        "peak_rss_mb": peak_rss_mb(),
        "commit": source_commit(Path(__file__).parent),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def load_translation_checkpoint(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> tuple[Transformer, BPETokenizer, dict[str, Any]]:
    """``(model, tokenizer, metadata)`` of a checkpoint :func:`save_translation` wrote
    (``train-translation --save``); a ``FileNotFoundError`` or ``ValueError`` that says what is
    wrong otherwise.
    """
    path = Path(path)
    train = "python -m transformer_tasks train-translation --save PATH"  # how to make one
    if not path.is_file():
        raise FileNotFoundError(
            f"checkpoint {str(path)!r} does not exist (train one with: {train})"
        )
    task = read_checkpoint_header(path)[1].get("task")  # a ValueError if it is no checkpoint
    if task != TASK:
        raise ValueError(
            f"checkpoint {str(path)!r} was saved by the {task!r} task, not by {TASK!r}: "
            f"translate needs a checkpoint written by '{train}'"
        )
    model, metadata = load_checkpoint(path, map_location=device)
    if not isinstance(metadata.get("tokenizer"), str):
        raise ValueError(
            f"checkpoint {str(path)!r} has no tokenizer in its metadata: it cannot translate"
        )
    return model, BPETokenizer.from_json_str(metadata["tokenizer"]), metadata


def checkpoint_decoding(metadata: dict[str, Any], path: str | os.PathLike[str]) -> DecodeConfig:
    """The decoding settings a checkpoint's training run stored; :class:`~.DecodeConfig`'s defaults
    for any missing.
    """
    stored = metadata.get("decoding", {})  # an older checkpoint may lack some
    known = {f.name for f in fields(DecodeConfig)}
    try:
        return DecodeConfig(**{f: v for f, v in stored.items() if f in known})
    except (TypeError, ValueError) as error:
        raise ValueError(f"checkpoint {str(path)!r} has bad decoding settings: {error}") from None
