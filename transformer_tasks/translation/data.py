"""Step 1 of the translation pipeline: the configured slices of Multi30k, a joint tokenizer, token
ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformer_lib.data.batching import Batch, token_batches
from transformer_lib.data.tokenizer import BPETokenizer, train_bpe_tokenizer
from transformer_lib.training.distributed import broadcast_object, is_distributed, is_main_process

from .profiles import DataConfig

TASK = "translation"
SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"
TEST_SPLIT = "test_2016_flickr"
Pair = tuple[str, str]


def train_translation_tokenizer(
    train_pairs: Sequence[tuple[str, str]], vocab_size: int = 8000, min_frequency: int = 2
) -> BPETokenizer:
    """A joint tokenizer for both sides of ``train_pairs`` (give it the **training** split only).

    Learning the vocabulary from validation or test sentences would leak them into the model.
    """
    if len(train_pairs) == 0:
        raise ValueError("train_pairs is empty")
    return train_bpe_tokenizer(
        (sentence for pair in train_pairs for sentence in pair),
        vocab_size=vocab_size,
        min_frequency=min_frequency,
    )


def checkpoint_metadata(tokenizer: BPETokenizer, decoding: dict[str, Any]) -> dict[str, Any]:
    """What a translation model file records besides its weights, so that ``translate`` can use
    it.
    """
    languages = {"source_language": SOURCE_LANGUAGE, "target_language": TARGET_LANGUAGE}
    return {"task": TASK, **languages, "tokenizer": tokenizer.to_json_str(), "decoding": decoding}


def encode_pairs(
    tokenizer: BPETokenizer, pairs: Sequence[Pair]
) -> list[tuple[list[int], list[int]]]:
    """Token ids of both sides of every pair: ``[(source_ids, target_ids), ...]`` (no bos/eos
    yet).
    """
    source = tokenizer.encode_batch([de for de, _ in pairs])
    target = tokenizer.encode_batch([en for _, en in pairs])
    return list(zip(source, target, strict=True))


@dataclass
class TranslationData:
    """What a translation run trains on: the configured slices of the training and test splits, the
    whole validation split (as fixed batches too), and the tokenizer learnt on ``train_pairs`` only.
    """

    tokenizer: BPETokenizer
    train_pairs: list[Pair]
    val_pairs: list[Pair]
    test_pairs: list[Pair]
    train_ids: list[tuple[list[int], list[int]]]
    val_batches: list[Batch]


def prepare_translation_data(data: dict[str, list[Pair]], config: DataConfig) -> TranslationData:
    """Slice ``data`` (``{split: [(german, english), ...]}``) as ``config`` says, learn the
    tokenizer (under ``torchrun``: rank 0, which sends it to the others), encode.
    """
    train_pairs = data["train"][: config.train_limit]
    tokenizer = _learn_tokenizer(train_pairs, config.vocab_size)
    val_batches = token_batches(
        encode_pairs(tokenizer, data["val"]),
        config.max_tokens,
        pad_id=tokenizer.pad_id,
        bos_id=tokenizer.bos_id,
        eos_id=tokenizer.eos_id,
        shuffle=False,
    )
    return TranslationData(
        tokenizer=tokenizer,
        train_pairs=train_pairs,
        val_pairs=data["val"],
        test_pairs=data[TEST_SPLIT][: config.test_limit],
        train_ids=encode_pairs(tokenizer, train_pairs),
        val_batches=val_batches,
    )


def _learn_tokenizer(train_pairs: list[Pair], vocab_size: int) -> BPETokenizer:
    """The joint tokenizer of ``train_pairs``; under ``torchrun`` rank 0 learns it and sends it."""
    if not is_distributed():
        return train_translation_tokenizer(train_pairs, vocab_size=vocab_size)
    learnt = train_translation_tokenizer(train_pairs, vocab_size) if is_main_process() else None
    return BPETokenizer.from_json_str(broadcast_object(learnt.to_json_str() if learnt else None))
