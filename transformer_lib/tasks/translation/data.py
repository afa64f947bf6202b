"""Step 1 of the translation pipeline: the profile's slices of Multi30k, a joint tokenizer, token ids.

The tokenizer is learnt on the **training split only**; the validation split is cut once into
fixed batches for the validation loss. Under ``torchrun``, rank 0 learns the tokenizer and sends it
to the other ranks, so that every rank uses exactly the same vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...data.batching import Batch, token_batches
from ...data.tokenizer import BPETokenizer, train_translation_tokenizer
from ...training.distributed import broadcast_object, is_distributed, is_main_process
from .profiles import TranslationProfile

TASK = "translation"
SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"
TEST_SPLIT = "test_2016_flickr"
Pair = tuple[str, str]


def encode_pairs(tokenizer: BPETokenizer, pairs: Sequence[Pair]) -> list[tuple[list[int], list[int]]]:
    """Token ids of both sides of every pair: ``[(source_ids, target_ids), ...]`` (no bos/eos yet)."""
    source = tokenizer.encode_batch([de for de, _ in pairs])
    target = tokenizer.encode_batch([en for _, en in pairs])
    return list(zip(source, target, strict=True))


@dataclass
class TranslationData:
    """What a translation run trains on.

    Attributes:
        tokenizer: the joint BPE tokenizer, learnt on ``train_pairs`` only.
        train_pairs, val_pairs, test_pairs: the profile's slice of the training split, the whole
            validation split and the profile's slice of ``test_2016_flickr``.
        train_ids: ``train_pairs`` as token ids (:func:`~.encode_pairs`).
        val_batches: the validation split as fixed batches of at most ``max_tokens`` per side.
    """

    tokenizer: BPETokenizer
    train_pairs: list[Pair]
    val_pairs: list[Pair]
    test_pairs: list[Pair]
    train_ids: list[tuple[list[int], list[int]]]
    val_batches: list[Batch]

    @property
    def special_ids(self) -> tuple[int, int, int]:
        """``(pad_id, bos_id, eos_id)`` of the tokenizer."""
        return self.tokenizer.pad_id, self.tokenizer.bos_id, self.tokenizer.eos_id


def shared_tokenizer(train_pairs: Sequence[Pair], vocab_size: int) -> BPETokenizer:
    """The joint tokenizer of ``train_pairs``; under ``torchrun`` learnt by rank 0 and sent to the others."""
    if not is_distributed():
        return train_translation_tokenizer(train_pairs, vocab_size=vocab_size)
    learnt = train_translation_tokenizer(train_pairs, vocab_size) if is_main_process() else None
    return BPETokenizer.from_json_str(broadcast_object(learnt.to_json_str() if learnt is not None else None))


def prepare_translation_data(data: dict[str, list[Pair]], profile: TranslationProfile) -> TranslationData:
    """Slice ``data`` (``{split: [(german, english), ...]}``) for ``profile``, learn the tokenizer, encode."""
    train_pairs = data["train"][: profile.train_limit]
    tokenizer = shared_tokenizer(train_pairs, profile.vocab_size)
    special = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    val_ids = encode_pairs(tokenizer, data["val"])
    return TranslationData(
        tokenizer=tokenizer,
        train_pairs=train_pairs,
        val_pairs=data["val"],
        test_pairs=data[TEST_SPLIT][: profile.test_limit],
        train_ids=encode_pairs(tokenizer, train_pairs),
        val_batches=token_batches(val_ids, profile.max_tokens, *special, shuffle=False),
    )
