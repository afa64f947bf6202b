"""The book's running example (贯穿示例): one caption from Multi30k, carried through chapters 1-5.

Chapter 1 splits the caption into words, gives each an id and looks up its vector; chapter 2 adds
the positions; chapters 3 and 4 let the words attend to each other and to the German original,
first through projections set by hand (:func:`hand_set_projections`: *play* looks for its
subject, *dogs*); chapter 5 splits the same vectors across heads. Each chapter builds its own step
in the open and then checks it against the function here, so that the next chapter can start where
it stopped.

The caption is line 1,967 of Multi30k's training split (English and German). Its vocabulary is the
sentence's own words: a toy, enough to follow every number. Chapter 11 learns a real one.
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from transformer_lib.nn.embedding import TokenEmbedding
from transformer_lib.nn.positional import sinusoidal_table

__all__ = [
    "ENGLISH",
    "FEATURES",
    "GERMAN",
    "SPECIALS",
    "embed",
    "encode",
    "feature_rows",
    "hand_set_projections",
    "next_word_pairs",
    "vocabulary",
    "words",
]

ENGLISH = "Two dogs play in the grass."
GERMAN = "Zwei Hunde spielen im Gras."
SPECIALS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2, as in the copy task and the translator


def words(sentence: str) -> list[str]:
    """The sentence lower-cased and split into words, punctuation split off as words of its own.

    ``words("Two dogs play in the grass.")`` is ``["two", "dogs", "play", "in", "the", "grass",
    "."]``.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, got {sentence!r}")
    return re.findall(r"\w+|[^\w\s]", sentence.lower())


def vocabulary(*sentences: str) -> dict[str, int]:
    """Word -> id: the special tokens first, then each new word in the order the sentences use
    it.
    """
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for sentence in sentences:
        for word in words(sentence):
            vocab.setdefault(word, len(vocab))
    return vocab


def encode(sentence: str, vocab: dict[str, int]) -> Tensor:
    """The ids of the sentence's words.

    Shape:
        ``(T,)``, ``T = len(words(sentence))``, dtype ``torch.long``.
    """
    unknown = [word for word in words(sentence) if word not in vocab]
    if unknown:
        raise ValueError(f"sentence has words the vocabulary lacks: {unknown}")
    return torch.tensor([vocab[word] for word in words(sentence)])


def embed(
    sentence: str = ENGLISH, d_model: int = 8, seed: int = 0, positions: bool = True
) -> Tensor:
    """The sentence as chapters 1 and 2 leave it: scaled token embeddings plus sinusoidal positions.

    The embedding table is :class:`~transformer_lib.TokenEmbedding`'s, initialised right after
    ``torch.manual_seed(seed)`` for the sentence's own vocabulary; ``positions=False`` stops after
    chapter 1 (no positional encoding).

    Shape:
        ``(T, d_model)``.
    """
    vocab = vocabulary(sentence)
    torch.manual_seed(seed)
    table = TokenEmbedding(len(vocab), d_model, padding_idx=vocab["<pad>"])
    with torch.no_grad():
        x = table(encode(sentence, vocab)[None])[0]  # (1, T) -> (T, d_model)
    if positions:
        x = x + sinusoidal_table(x.size(0), d_model)
    return x


# Chapter 3's hand-set attention. Each word of ENGLISH offers (as its key) and hands over (as its
# value) a few of four features; "play" asks (as its query) for a plural noun: its subject, "dogs".
FEATURES = ("noun", "plural", "verb", "number")
OFFERS = {
    "two": ("plural", "number"),
    "dogs": ("noun", "plural"),
    "play": ("verb",),
    "grass": ("noun",),
}
ASKS = {"play": ("noun", "plural")}
LOUDNESS = 3.0  # how strongly play asks: the size of its query's entries


def feature_rows(
    tokens: list[str],
    features_of: dict[str, tuple[str, ...]],
    size: float = 1.0,
) -> Tensor:
    """One row per token, ``size`` where ``features_of[token]`` names a feature, 0 elsewhere.

    Shape:
        ``(len(tokens), len(FEATURES))``.
    """
    unknown = sorted({f for named in features_of.values() for f in named} - set(FEATURES))
    if unknown:
        raise ValueError(f"features_of names features outside FEATURES {FEATURES}: {unknown}")
    rows = torch.zeros(len(tokens), len(FEATURES))
    for i, token in enumerate(tokens):
        for feature in features_of.get(token, ()):
            rows[i, FEATURES.index(feature)] = size
    return rows


def hand_set_projections(queries: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``W_Q, W_K, W_V`` that turn ``embed(ENGLISH)`` into chapter 3's hand-set Q, K and V.

    The wanted tables are :func:`feature_rows` of :data:`OFFERS` (keys and values) and
    ``queries``, by default of :data:`ASKS` times :data:`LOUDNESS` (chapter 5's heads ask other
    questions); each matrix is the pseudo-inverse of the
    sentence's vectors times its table, so that ``embed() @ W`` gives the table exactly (the seven
    vectors of width 8 are linearly independent).

    Shape:
        queries: ``(T, len(FEATURES))``; each ``W``: ``(d_model, len(FEATURES))``, used as
        ``x @ W``.
    """
    x = embed(ENGLISH)  # (T, d_model)
    tokens = words(ENGLISH)
    keys = feature_rows(tokens, OFFERS)  # (T, 4)
    if queries is None:
        queries = feature_rows(tokens, ASKS, LOUDNESS)  # (T, 4)
    inverse = torch.linalg.pinv(x)  # (d_model, T): x @ inverse = I
    return inverse @ queries, inverse @ keys, inverse @ keys


def next_word_pairs(sentence: str = ENGLISH) -> tuple[list[str], list[str]]:
    """The decoder's input in training and the word it learns to predict at each position.

    ``next_word_pairs("Two dogs.")`` is ``(["<bos>", "two", "dogs", "."], ["two", "dogs", ".",
    "<eos>"])``: position ``t`` reads the input up to ``t`` and learns to predict ``target[t]``.
    """
    tokens = words(sentence)
    return [SPECIALS[1], *tokens], [*tokens, SPECIALS[2]]
