"""German-to-English translation on Multi30k, end to end: data (:mod:`.data`), training and
checkpoint averaging (:mod:`.train`), greedy and beam search scored by sacreBLEU (:mod:`.score`),
the summary, the saved model and the results file (:mod:`.results`), and the whole pipeline in one
call (:mod:`.pipeline`), all set by one :class:`~.TranslationConfig` (:mod:`.profiles`); a run
stopped midway resumes from its checkpoint directory (:mod:`.checkpoints`).
"""

from .checkpoints import ResumeError
from .data import (
    TASK,
    TranslationData,
    encode_pairs,
    prepare_translation_data,
    train_translation_tokenizer,
)
from .pipeline import run_translation
from .profiles import (
    PROFILE_ENV_VAR,
    TRANSLATION_PROFILES,
    DataConfig,
    DecodeConfig,
    TranslationConfig,
    apply_overrides,
    budget_settings,
    default_profile,
    translation_profile,
)
from .results import (
    checkpoint_decoding,
    load_translation_checkpoint,
    save_translation,
    translation_summary,
    write_translation_results,
)
from .score import (
    DecodingSweep,
    TranslationEvaluation,
    evaluate_translation,
    sweep_decoding,
    translate,
)
from .train import TranslationRun, train_translation

__all__ = [
    "PROFILE_ENV_VAR",
    "TASK",
    "TRANSLATION_PROFILES",
    "DataConfig",
    "DecodeConfig",
    "DecodingSweep",
    "ResumeError",
    "TranslationConfig",
    "TranslationData",
    "TranslationEvaluation",
    "TranslationRun",
    "apply_overrides",
    "budget_settings",
    "checkpoint_decoding",
    "default_profile",
    "encode_pairs",
    "evaluate_translation",
    "load_translation_checkpoint",
    "prepare_translation_data",
    "run_translation",
    "save_translation",
    "sweep_decoding",
    "train_translation",
    "translate",
    "translation_profile",
    "train_translation_tokenizer",
    "translation_summary",
    "write_translation_results",
]
