"""A joint byte-pair-encoding (BPE, 字节对编码) tokenizer for German and English, built on HF
``tokenizers``.

Both languages share one vocabulary, so the source embedding, the target embedding and the
output projection can be one matrix (``share_embeddings=True``, ``tie_embeddings=True``). Text is
NFC-normalised (``"ä"`` as one or two code points is one token); every space becomes the visible
marker ``"▁"`` glued to the next word, as in SentencePiece, and punctuation is split off
(``"Ein Mann."`` -> ``"▁Ein" "▁Mann" "."``); BPE merges learned on the **training split only** turn
each piece into sub-words. Because spaces are kept, ``decode(encode(s)) == s`` for any NFC
sentence with single spaces and no unknown characters. Ids 0-3 are ``<pad> <bos> <eos> <unk>``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ..validation import check_positive_int

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
META = "\u2581"  # "▁", the visible space of SentencePiece


class BPETokenizer:
    """A trained HF ``tokenizers.Tokenizer`` with the book's special tokens and a small, explicit
    API.

    Build one with :func:`~.train_bpe_tokenizer`; :meth:`~.to_json_str` saves it as a string (it
    fits in a checkpoint's metadata).
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(
                f"tokenizer must be a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
            )
        for expected_id, token in enumerate(SPECIAL_TOKENS):
            if tokenizer.token_to_id(token) != expected_id:
                raise ValueError(
                    f"tokenizer must have the special tokens {list(SPECIAL_TOKENS)} at ids 0-3, "
                    f"but {token!r} has id {tokenizer.token_to_id(token)}"
                )
        self.tokenizer = tokenizer

    # The special tokens' ids, the same for every tokenizer (the constructor checks them).
    pad_id = 0
    bos_id = 1
    eos_id = 2
    unk_id = 3

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, without ``<bos>``/``<eos>`` (the batching adds them)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`~.encode` for many texts at once (parallel inside ``tokenizers``)."""
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
        return [enc.ids for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def tokens(self, text: str) -> list[str]:
        """The sub-word strings of ``text`` (to look at; the model sees :meth:`~.encode`'s ids)."""
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Iterable[int]) -> str:
        """Natural text from ids: stops at the first ``<eos>``, drops ``<bos>``, ``<pad>`` and
        ``<unk>``.
        """
        before_eos = itertools.takewhile(lambda token_id: token_id != self.eos_id, map(int, ids))
        # the four specials
        return self.tokenizer.decode(list(before_eos), skip_special_tokens=True)

    def decode_batch(self, rows: Iterable[Iterable[int]]) -> list[str]:
        """:meth:`~.decode` for each row (e.g. of a ``(B, T)`` tensor's ``.tolist()``)."""
        return [self.decode(row) for row in rows]

    def to_json_str(self) -> str:
        """The whole tokenizer (merges, vocabulary, normaliser, pre-tokenizer, decoder) as a JSON
        string.
        """
        return self.tokenizer.to_str()

    @classmethod
    def from_json_str(cls, text: str) -> BPETokenizer:
        """Rebuild a tokenizer saved with :meth:`~.to_json_str`."""
        if not isinstance(text, str):
            raise TypeError(
                f"text must be the JSON string from to_json_str(), got {type(text).__name__}"
            )
        try:
            json.loads(text)
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises a bare Exception on bad JSON
            raise ValueError(
                f"text is not a saved tokenizer (from to_json_str()): {error}"
            ) from None
        return cls(tokenizer)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


def _untrained_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            # " Mann." -> "▁Mann."
            pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always"),
            pre_tokenizers.Punctuation(behavior="isolated"),  # "▁Mann." -> "▁Mann", "."
        ]
    )
    tokenizer.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always")
    return tokenizer


def train_bpe_tokenizer(
    sentences: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    show_progress: bool = False,
) -> BPETokenizer:
    """Learn BPE merges from ``sentences`` (read once) until the vocabulary has ``vocab_size``
    entries.

    ``vocab_size`` includes the special tokens and single characters; a pair must occur
    ``min_frequency`` times to be merged.
    """
    check_positive_int("vocab_size", vocab_size)
    check_positive_int("min_frequency", min_frequency)
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size={vocab_size} must be larger than the {len(SPECIAL_TOKENS)} special tokens"
        )
    tokenizer = _untrained_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=show_progress,
    )
    count = 0

    def counted() -> Iterable[str]:
        nonlocal count
        for sentence in sentences:
            if not isinstance(sentence, str):
                raise TypeError(f"sentences must hold str, got {type(sentence).__name__}")
            count += 1
            yield sentence

    tokenizer.train_from_iterator(counted(), trainer=trainer)
    if count == 0:
        raise ValueError("sentences is empty: a tokenizer needs text to learn from")
    return BPETokenizer(tokenizer)
