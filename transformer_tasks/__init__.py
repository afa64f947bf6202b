"""transformer_tasks: the application built on ``transformer_lib``.

The copy task and German-to-English translation end to end (their data, profiles, run directories
and resume, results files and BLEU scores), the Multi30k download, the ONNX export and the command
line, ``python -m transformer_tasks``. It imports the library; the library never imports it, so a
reader of ``transformer_lib`` meets only what the chapters teach.
"""

from .bleu import bleu_signature, corpus_bleu
from .copy import CopyTaskSettings, copy_exact_match, copy_model_config, run_copy_task
from .export import export_onnx
from .multi30k import ChecksumError, DownloadError, Multi30kError, load_multi30k, load_split
from .translation import (
    TRANSLATION_PROFILES,
    DecodeConfig,
    TranslationConfig,
    TranslationEvaluation,
    TranslationRun,
    apply_overrides,
    default_profile,
    evaluate_translation,
    run_translation,
    save_translation,
    train_translation,
    translate,
    translation_profile,
    translation_summary,
)

__all__ = [
    "ChecksumError",
    "CopyTaskSettings",
    "DecodeConfig",
    "DownloadError",
    "Multi30kError",
    "TRANSLATION_PROFILES",
    "TranslationConfig",
    "TranslationEvaluation",
    "TranslationRun",
    "apply_overrides",
    "bleu_signature",
    "copy_exact_match",
    "copy_model_config",
    "corpus_bleu",
    "default_profile",
    "evaluate_translation",
    "export_onnx",
    "load_multi30k",
    "load_split",
    "run_copy_task",
    "run_translation",
    "save_translation",
    "train_translation",
    "translate",
    "translation_profile",
    "translation_summary",
]
