"""The results of a translation run: the JSON summary the command line prints, and the saved checkpoint."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...checkpoint import save_checkpoint
from ...files import atomic_write
from ...runtime import describe_machine, source_commit
from .data import SOURCE_LANGUAGE, TARGET_LANGUAGE, TASK

if TYPE_CHECKING:  # types only: the modules of training and scoring import this one
    from .score import TranslationEvaluation
    from .train import TranslationRun


def translation_summary(
    run: TranslationRun, evaluation: TranslationEvaluation | None = None, wall_seconds: float | None = None
) -> dict[str, Any]:
    """The JSON-serialisable results of a run, as ``python -m transformer_lib train-translation`` prints them.

    Without ``evaluation`` the test-set keys (``bleu``, ``examples``, ...) are left out.
    ``wall_seconds`` defaults to the training's wall time plus the decoding time.
    """
    scores = evaluation.summary() if evaluation is not None else {}
    if wall_seconds is None:
        wall_seconds = run.wall_seconds + (
            evaluation.greedy_seconds + evaluation.beam_seconds if evaluation is not None else 0.0
        )
    summary: dict[str, Any] = {"task": TASK}
    summary.update({k: scores[k] for k in ("bleu", "bleu_beam", "sacrebleu_signature") if k in scores})
    summary.update(
        {
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
            "beam_size": scores.get("beam_size", run.profile.beam_size),
            "length_penalty": scores.get("length_penalty", run.profile.length_penalty),
        }
    )
    summary.update({k: scores[k] for k in ("brevity_penalty", "brevity_penalty_beam") if k in scores})
    summary.update(
        {
            "averaged_checkpoints": run.averaged_checkpoints,
            "val_loss_last": round(run.val_loss_last, 4),
            "val_loss_averaged": None if run.val_loss_averaged is None else round(run.val_loss_averaged, 4),
            "final_train_loss": round(run.result.final_loss, 4),
        }
    )
    summary.update({k: scores[k] for k in ("decode_seconds_greedy", "decode_seconds_beam") if k in scores})
    summary["val_history"] = [
        {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()} for row in run.val_history
    ]
    if "examples" in scores:
        summary["examples"] = scores["examples"]
    summary["config"] = asdict(run.profile)
    if run.resumed_from_step:  # only then: a run that started afresh keeps the keys it always had
        summary["resumed_from_step"] = run.resumed_from_step
    return summary


def save_translation(
    run: TranslationRun,
    path: str | Path,
    evaluation: TranslationEvaluation | None = None,
    wall_seconds: float | None = None,
) -> Path:
    """Save the model of ``run`` as ``train-translation --save`` does; ``translate`` can load it.

    The checkpoint's metadata holds ``task="translation"``, the languages, the tokenizer, the
    profile's decoding settings and the :func:`~.translation_summary` (without its per-evaluation
    history, examples and profile) as ``results``. Sets ``run.checkpoint``; returns the path.
    """
    summary = translation_summary(run, evaluation, wall_seconds)
    written = save_checkpoint(
        run.model,
        path,
        task=TASK,
        source_language=SOURCE_LANGUAGE,
        target_language=TARGET_LANGUAGE,
        tokenizer=run.tokenizer.to_json_str(),
        decoding=run.decoding,
        results={k: v for k, v in summary.items() if k not in ("val_history", "examples", "config")},
    )
    run.checkpoint = written
    return written


def write_translation_results(path: str | Path, summary: dict[str, Any], device: Any = None) -> Path:
    """Write a run's ``summary`` with where and when it was measured, as JSON, atomically.

    The file holds ``{"results": summary, "machine": ..., "commit": ..., "date": ...}``: the machine
    from :func:`~.describe_machine`, the git commit of the package's code (with ``+changes`` when it
    had uncommitted changes; ``None`` outside a clone) and the UTC time the file was written.
    """
    record = {
        "results": summary,
        "machine": describe_machine(device),
        "commit": source_commit(Path(__file__).parent),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
