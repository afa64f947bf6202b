"""German-to-English translation on Multi30k, end to end: data (:mod:`.data`), training and
checkpoint averaging (:mod:`.train`), greedy and beam search scored by sacreBLEU (:mod:`.score`,
with the whole pipeline, :func:`~.run_translation`), all set by one :class:`~.TranslationConfig`
(:mod:`.profiles`); a run stopped midway resumes from its checkpoint directory
(:mod:`.checkpoints`).
"""

from .checkpoints import ResumeError
from .data import TASK, TranslationData, encode_pairs, prepare_translation_data
from .profiles import (
    PROFILE_ENV_VAR,
    TRANSLATION_PROFILES,
    DataConfig,
    TranslationConfig,
    apply_overrides,
    budget_settings,
    default_profile,
    translation_profile,
)
from .results import save_translation, translation_summary, write_translation_results
from .score import (
    DecodingSweep,
    TranslationEvaluation,
    evaluate_translation,
    run_translation,
    sweep_decoding,
    translate,
)
from .train import TranslationRun, train_translation

__all__ = [
    "PROFILE_ENV_VAR",
    "TASK",
    "TRANSLATION_PROFILES",
    "DataConfig",
    "DecodingSweep",
    "ResumeError",
    "TranslationConfig",
    "TranslationData",
    "TranslationEvaluation",
    "TranslationRun",
    "apply_overrides",
    "budget_settings",
    "default_profile",
    "encode_pairs",
    "evaluate_translation",
    "prepare_translation_data",
    "run_translation",
    "save_translation",
    "sweep_decoding",
    "train_translation",
    "translate",
    "translation_profile",
    "translation_summary",
    "write_translation_results",
]
