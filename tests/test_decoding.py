"""Greedy and beam search: output format, cache equivalence, beam quality, argument checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor, nn

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.decoding import (
    beam_search,
    greedy_decode,
    length_penalty_factor,
    sequence_log_prob,
)

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def random_model(tiny_config: Callable[..., TransformerConfig]) -> Callable[..., Transformer]:
    """Factory: the tiny model with a vocabulary of 20, seeded, its dropout on (decoding must turn
    it off)."""

    def make(seed: int, norm_first: bool = False) -> Transformer:
        torch.manual_seed(seed)
        config = tiny_config(
            src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.1, norm_first=norm_first
        )
        model = Transformer(config)
        with torch.no_grad():  # sharper output distributions: fewer near-ties, more early eos
            model.generator.weight.mul_(4.0)
        return model

    return make


def padded_sources(seed: int, batch: int = 6, vocab: int = VOCAB) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, 9), generator=generator)  # (B, S)
    lengths = torch.randint(3, 10, (batch,), generator=generator)
    src[torch.arange(9)[None, :] >= lengths[:, None]] = PAD  # right padding of various lengths
    return src


def check_format(out: Tensor, max_len: int) -> None:
    assert out.dtype == torch.long and out.size(1) <= max_len
    assert (out[:, 0] == BOS).all()
    for row in out.tolist():
        body = row[1:]
        if EOS in body:
            end = body.index(EOS)
            assert all(t == PAD for t in body[end + 1 :]), row
            body = body[:end]
        assert PAD not in body, row  # padding only after eos


class BigramModel(nn.Module):
    """A hand-built 'model' whose next-token distribution depends only on the previous token.

    From bos: a 0.6, b 0.4. From a: a 0.35, b 0.33, eos 0.32 (every continuation is poor).
    From b: eos 0.9. Greedy picks a, then a, a, a ... (never eos); the best sequence is b eos.
    """

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(pad_id=PAD, src_vocab_size=5, tgt_vocab_size=5)
        probs = torch.full((5, 5), 1e-6)
        probs[BOS, 3], probs[BOS, 4] = 0.6, 0.4
        probs[3, 3], probs[3, 4], probs[3, EOS] = 0.35, 0.33, 0.32
        probs[4, EOS], probs[4, 3], probs[4, 4] = 0.9, 0.05, 0.05
        probs[EOS, 3], probs[PAD, 3] = 1.0, 1.0
        # a parameter, frozen: the decoders find the model's device from its parameters
        self.table = nn.Parameter((probs / probs.sum(-1, keepdim=True)).log(), requires_grad=False)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None) -> Tensor:
        return self.table[tgt]  # (B, T) -> (B, T, V)

    def new_cache(self) -> list:
        return []


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_is_argmax_of_teacher_forced_logits_and_well_formed(norm_first, random_model):
    model = random_model(1, norm_first)
    src = padded_sources(1)
    out = greedy_decode(model, src, 15, BOS, EOS)
    check_format(out, 15)
    model.eval()
    with torch.no_grad():
        logits = model(src, out[:, :-1])  # (B, L-1, V)
    logits[..., PAD] = -math.inf
    predicted = logits.argmax(-1)
    live = torch.cumsum((out[:, :-1] == EOS).long(), dim=1) == 0  # positions before the row's eos
    live &= out[:, :-1] != PAD
    assert live.sum() > 20
    assert torch.equal(predicted[live], out[:, 1:][live])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_and_uncached_decoding_give_identical_tokens(norm_first, seed, random_model):
    model = random_model(seed, norm_first)
    src = padded_sources(seed)
    cached = greedy_decode(model, src, 20, BOS, EOS, use_cache=True)
    uncached = greedy_decode(model, src, 20, BOS, EOS, use_cache=False)
    assert torch.equal(cached, uncached)
    beam_cached = beam_search(model, src, 3, 20, BOS, EOS, use_cache=True)
    beam_uncached = beam_search(model, src, 3, 20, BOS, EOS, use_cache=False)
    assert torch.equal(beam_cached, beam_uncached)
    check_format(beam_cached, 20)


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_beam_size_one_equals_greedy(seed, random_model):
    model = random_model(seed)
    src = padded_sources(seed, batch=8)
    greedy = greedy_decode(model, src, 16, BOS, EOS)
    beam = beam_search(model, src, 1, 16, BOS, EOS, length_penalty=0.0)
    assert torch.equal(beam, greedy)
    # with a length penalty the chosen tokens do not change either (one hypothesis per row)
    assert torch.equal(beam_search(model, src, 1, 16, BOS, EOS, length_penalty=0.6), greedy)


def test_some_rows_stop_early_and_decoding_ends_when_all_rows_are_done():
    model = BigramModel()
    src = torch.ones(2, 3, dtype=torch.long)
    out = beam_search(model, src, 2, 30, BOS, EOS)
    assert out.tolist() == [[BOS, 4, EOS]] * 2  # stopped long before max_len
    greedy = greedy_decode(model, src, 30, BOS, EOS)
    assert greedy.shape == (2, 30) and EOS not in greedy.tolist()[0]  # greedy never finds eos here


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_beam_search_finds_a_more_probable_sequence_than_greedy(length_penalty):
    model = BigramModel()
    src = torch.ones(1, 4, dtype=torch.long)
    greedy = greedy_decode(model, src, 8, BOS, EOS)
    beam = beam_search(model, src, 2, 8, BOS, EOS, length_penalty=length_penalty)
    assert greedy.tolist() == [[BOS, 3, 3, 3, 3, 3, 3, 3]]
    assert beam.tolist() == [[BOS, 4, EOS]]
    lp_greedy = sequence_log_prob(model, src, greedy, EOS)
    lp_beam = sequence_log_prob(model, src, beam, EOS)
    assert lp_beam.item() > lp_greedy.item() + 4.0
    torch.testing.assert_close(lp_beam, torch.tensor([math.log(0.4 * 0.9)]), rtol=1e-4, atol=1e-4)


def test_beam_search_ranks_by_the_length_normalised_log_prob():
    """With 2 beams the bigram model finishes ``b eos`` (P = 0.36, 2 tokens) and ``a b eos``
    (P = 0.18, 3 tokens). Raw log-probability prefers the short one; a length penalty strong enough
    (``alpha = 6``: ``lp(3) / lp(2) = (8/7)^6 > 2``) prefers the long one, and beam search follows.
    """
    model = BigramModel()
    src = torch.ones(1, 4, dtype=torch.long)
    short = torch.tensor([[BOS, 4, EOS]])
    long = torch.tensor([[BOS, 3, 4, EOS]])
    log_p_short = sequence_log_prob(model, src, short, EOS).item()
    log_p_long = sequence_log_prob(model, src, long, EOS).item()
    for alpha, expected in ((0.0, short), (6.0, long)):
        score_short = log_p_short / length_penalty_factor(2, alpha)
        score_long = log_p_long / length_penalty_factor(3, alpha)
        assert (score_short > score_long) == (expected is short)
        out = beam_search(model, src, 2, 5, BOS, EOS, length_penalty=alpha)
        assert out.tolist() == expected.tolist(), alpha


def test_wider_beam_never_scores_below_greedy_on_average(random_model):
    # Not a theorem per row, but over many rows a beam of 4 must find sequences at least as likely.
    model = random_model(6)
    src = padded_sources(6, batch=16)
    greedy = greedy_decode(model, src, 12, BOS, EOS)
    beam = beam_search(model, src, 4, 12, BOS, EOS, length_penalty=0.0)
    assert (
        sequence_log_prob(model, src, beam, EOS).mean()
        >= sequence_log_prob(model, src, greedy, EOS).mean()
    )


def test_decoding_restores_training_mode_and_needs_no_grad(random_model):
    model = random_model(0)
    model.train()
    out = greedy_decode(model, padded_sources(0), 6, BOS, EOS)
    assert model.training and not out.requires_grad
    beam_search(model, padded_sources(0), 2, 6, BOS, EOS)
    assert model.training


def test_bad_arguments_raise_clear_errors(random_model):
    model = random_model(0)
    src = padded_sources(0)
    with pytest.raises(TypeError, match="src"):
        greedy_decode(model, src.float(), 5, BOS, EOS)
    with pytest.raises(ValueError, match="src"):
        greedy_decode(model, src[0], 5, BOS, EOS)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, 0, BOS, EOS)
    with pytest.raises(ValueError, match="bos_id"):
        greedy_decode(model, src, 5, PAD, EOS)
    with pytest.raises(ValueError, match="eos_id"):
        greedy_decode(model, src, 5, BOS, 99)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, 0, 5, BOS, EOS)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, 2, 5, BOS, EOS, length_penalty=-1.0)
