"""The running example of chapters 1-5: one caption, its toy vocabulary, and its vectors."""

from __future__ import annotations

import pytest
import torch

from transformer_book.example import ENGLISH, GERMAN, SPECIALS, embed, encode, vocabulary, words
from transformer_lib import TokenEmbedding, sinusoidal_table

pytestmark = pytest.mark.book


def test_words_split_off_punctuation_and_lower_case():
    assert words(ENGLISH) == ["two", "dogs", "play", "in", "the", "grass", "."]
    assert words(GERMAN) == ["zwei", "hunde", "spielen", "im", "gras", "."]
    with pytest.raises(ValueError, match="sentence must be a non-empty string"):
        words("  ")


def test_vocabulary_puts_the_specials_first_then_each_new_word_once():
    vocab = vocabulary(ENGLISH, "The dogs.")
    assert list(vocab)[:3] == list(SPECIALS) and list(vocab.values()) == list(range(len(vocab)))
    assert len(vocab) == 3 + 7  # "the", "dogs" and "." are not new
    assert encode(ENGLISH, vocab).tolist() == [3, 4, 5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match=r"words the vocabulary lacks: \['hunde'\]"):
        encode("Hunde", vocab)


def test_embed_is_the_token_embedding_of_chapter_1_plus_the_positions_of_chapter_2():
    vocab = vocabulary(ENGLISH)
    torch.manual_seed(3)
    table = TokenEmbedding(len(vocab), 16, padding_idx=0)
    tokens = table(encode(ENGLISH, vocab)[None])[0].detach()
    torch.testing.assert_close(embed(d_model=16, seed=3, positions=False), tokens)
    torch.testing.assert_close(embed(d_model=16, seed=3), tokens + sinusoidal_table(7, 16))
    assert embed(GERMAN).shape == (6, 8)
    assert not torch.equal(embed(seed=0), embed(seed=1))


def test_the_copy_task_and_the_translator_start_with_the_same_special_tokens():
    """Chapter 1 says its vocabulary, the copy task's and the translator's share ids 0 to 2."""
    from transformer_lib.data.tokenizer import SPECIAL_TOKENS
    from transformer_tasks.copy import BOS_ID, EOS_ID, PAD_ID

    assert SPECIAL_TOKENS[:3] == SPECIALS
    assert (PAD_ID, BOS_ID, EOS_ID) == tuple(vocabulary(ENGLISH)[s] for s in SPECIALS) == (0, 1, 2)
