"""German-to-English translation on Multi30k, end to end: data, tokenizer, training, decoding, BLEU.

:func:`~.run_translation` (:mod:`.pipeline`) is what ``python -m transformer_lib train-translation`` runs:
:func:`~.train_translation` (steps 1-3, returns a :class:`~.TranslationRun` with the model, the
tokenizer and the training history), then :func:`~.evaluate_translation` (step 4, returns a
:class:`~.TranslationEvaluation`), then :func:`~.translation_summary` (the JSON it prints):

1. load Multi30k (:mod:`~transformer_lib.data.multi30k`) and learn a joint BPE vocabulary on the
   **training split only** (:mod:`.data`);
2. build a :class:`~.Transformer` whose source embedding, target embedding
   and output projection are one shared matrix, and train it with
   :func:`~.train` on batches of similar-length sentences
   (:func:`~.token_batches`), measuring the validation loss as it
   goes (:mod:`.train`);
3. average the weights of the last few snapshots (checkpoint averaging, 检查点平均), keeping the
   average only if its validation loss is lower;
4. translate ``test_2016_flickr`` with greedy decoding and with beam search, detokenize, and
   score with sacreBLEU against the raw references (:mod:`.score`).

How big a model and how long to train is a :class:`~.TranslationProfile` (:mod:`.profiles`):
``smoke`` (seconds on a laptop CPU, for the tests: checks that everything runs, its BLEU means
nothing), ``cpu`` (30 minutes of training on 2 CPU cores) and ``gpu`` (one GPU).

A long run survives being stopped: with a :class:`~.Checkpointing` it writes its resumable state
into a checkpoint directory every few steps, and a run started again with ``resume=True`` continues
from the newest state to the weights the uninterrupted run would have had (:mod:`.checkpoints`).

Under ``torchrun`` (after :func:`~.init_distributed`, as
``python -m transformer_lib train-translation`` does) every rank runs the pipeline: the first process of
each machine downloads the data before the others read it, rank 0 learns the tokenizer and sends
it to the others, :func:`~.train` splits each epoch's batches between the
ranks (``max_tokens`` is per process, so a step sees ``world_size`` times as many tokens), and
only rank 0 translates the test set and writes files.
"""

from .checkpoints import Checkpointing, ResumeError
from .data import (
    SOURCE_LANGUAGE,
    TARGET_LANGUAGE,
    TASK,
    TEST_SPLIT,
    TranslationData,
    encode_pairs,
    prepare_translation_data,
)
from .pipeline import run_translation
from .profiles import TRANSLATION_PROFILES, TranslationProfile, translation_profile
from .results import save_translation, translation_summary, write_translation_results
from .score import TranslationEvaluation, evaluate_translation, translate
from .train import TranslationRun, train_translation

__all__ = [
    "SOURCE_LANGUAGE",
    "TARGET_LANGUAGE",
    "TASK",
    "TEST_SPLIT",
    "TRANSLATION_PROFILES",
    "Checkpointing",
    "ResumeError",
    "TranslationData",
    "TranslationEvaluation",
    "TranslationProfile",
    "TranslationRun",
    "encode_pairs",
    "evaluate_translation",
    "prepare_translation_data",
    "run_translation",
    "save_translation",
    "train_translation",
    "translate",
    "translation_profile",
    "translation_summary",
    "write_translation_results",
]
