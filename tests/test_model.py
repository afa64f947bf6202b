"""Whole-model properties: causality, padding invariance, logits, weight tying, KV-cached
decoding."""

from __future__ import annotations

import pytest
import torch
from helpers import randomize_
from torch.testing import assert_close

from transformer_book.checks import (
    check_causal,
    check_depends_on_input,
    check_outputs_are_logits,
    check_padding_invariant,
)
from transformer_book.reference import TorchTransformer, torch_state_dict
from transformer_lib import Transformer, padding_mask, target_mask

PAD = 0


def ids(batch: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """Random non-padding ids in ``[1, vocab)``."""
    return torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("norm_first", [False, True])
def test_target_token_only_affects_later_positions(tiny_model, norm_first: bool) -> None:
    model = tiny_model(norm_first=norm_first)
    src, tgt = ids(2, 7, 11), ids(2, 6, 13, seed=1)
    # changing target token t leaves logits < t unchanged (to 1e-12) and changes every position >= t
    check_causal(lambda t: model(src, t), tgt, vocab_size=13, atol=1e-12, min_change=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_source_padding_does_not_change_logits(tiny_model, norm_first: bool) -> None:
    model = tiny_model(norm_first=norm_first)
    src, tgt = ids(2, 5, 11), ids(2, 4, 13, seed=1)
    # 3 padding tokens appended to every row, and a ragged batch (one row padded from position 2)
    check_padding_invariant(lambda s: model(s, tgt), src, PAD, num_pad=3, atol=1e-10)


def test_source_changes_logits(tiny_model) -> None:
    model = tiny_model()
    src, tgt = ids(2, 5, 11), ids(2, 4, 13, seed=1)
    changed = src.clone()
    changed[:, 2] = changed[:, 2] % 10 + 1
    check_depends_on_input(lambda s: model(s, tgt), src, changed, min_change=1e-4)
    # order matters (positions)
    check_depends_on_input(lambda s: model(s, tgt), src, src.flip(1), min_change=1e-4)


def test_encode_then_decode_equals_forward(tiny_model) -> None:
    model = tiny_model()
    src, tgt = ids(2, 6, 11), ids(2, 5, 13, seed=1)
    src[0, 4:] = PAD
    src_mask = padding_mask(src, PAD)
    split = model.decode(tgt, model.encode(src, src_mask), src_mask)
    assert_close(split, model(src, tgt), rtol=0, atol=1e-12)
    # without the source mask the padded memory would be attended: proves the mask reaches decode
    assert max_diff(model.decode(tgt, model.encode(src, src_mask)), split) > 1e-6


def test_masks_left_as_none_are_built_from_the_padding(tiny_model) -> None:
    """``model(src, tgt)`` = the same call with ``padding_mask(src)`` and ``target_mask(tgt)``
    given, padded or not."""
    model = tiny_model()
    src, tgt = ids(2, 6, 11), ids(2, 5, 13, seed=1)
    padded_src, padded_tgt = src.clone(), tgt.clone()
    padded_src[1, 3:], padded_tgt[0, 2:] = PAD, PAD
    for s, t in ((src, tgt), (padded_src, padded_tgt)):
        explicit = model(s, t, padding_mask(s, PAD), target_mask(t, PAD))
        assert_close(model(s, t), explicit, rtol=0, atol=0)
    assert (
        max_diff(
            model(padded_src, padded_tgt, padding_mask(src, PAD)), model(padded_src, padded_tgt)
        )
        > 1e-6
    )


def test_outputs_are_logits(tiny_model) -> None:
    model = tiny_model()
    logits = model(ids(2, 6, 11), ids(2, 5, 13, seed=1))
    # width 13, not probabilities, not log-probabilities
    check_outputs_are_logits(logits, vocab_size=13)
    assert max_diff(logits.log_softmax(-1), logits) > 1e-3  # not log-probabilities either


def test_tied_and_shared_embeddings_count_parameters_once(tiny_config) -> None:
    d_model, vocab = 16, 13
    untied = Transformer(tiny_config(src_vocab_size=vocab, tie_embeddings=False))
    tied = Transformer(tiny_config(src_vocab_size=vocab, tie_embeddings=True))
    shared = Transformer(
        tiny_config(src_vocab_size=vocab, tie_embeddings=True, share_embeddings=True)
    )
    assert untied.num_parameters() - tied.num_parameters() == vocab * d_model
    assert tied.num_parameters() - shared.num_parameters() == vocab * d_model
    assert tied.generator.weight is tied.tgt_embed.embedding.weight
    assert shared.src_embed.embedding.weight is shared.tgt_embed.embedding.weight
    assert untied.generator.weight is not untied.tgt_embed.embedding.weight
    assert untied.num_parameters() == sum(p.numel() for p in untied.parameters())


@pytest.mark.parametrize("norm_first", [False, True])
def test_kv_cached_decoding_equals_full_decoding(tiny_model, norm_first: bool) -> None:
    model = tiny_model(norm_first=norm_first)
    src, tgt = ids(3, 6, 11), ids(3, 7, 13, seed=1)
    src[1, 3:] = PAD
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    steps = []
    for t in range(tgt.size(1)):
        steps.append(model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache))
        assert cache[0][0].length == t + 1 and cache[-1][1].length == src.size(1)
    assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-10)


def test_cache_reorder_selects_batch_rows(tiny_model) -> None:
    model = tiny_model()
    src, tgt = ids(2, 5, 11), ids(2, 4, 13, seed=1)
    memory = model.encode(src)
    cache = model.new_cache()
    # several positions at once: still causal
    prefill = model.decode(tgt[:, :3], memory, cache=cache)
    assert_close(prefill, model.decode(tgt[:, :3], memory), rtol=0, atol=1e-10)
    index = torch.tensor([1, 1, 0])
    for self_cache, cross_cache in cache:
        self_cache.reorder(index)
        cross_cache.reorder(index)
    step = model.decode(tgt[index, 3:4], memory[index], cache=cache)
    assert_close(step, model.decode(tgt[index], memory[index])[:, 3:4], rtol=0, atol=1e-10)


def test_model_is_deterministic_in_eval_and_random_in_train(tiny_model) -> None:
    model = tiny_model(dropout=0.3)
    src, tgt = ids(2, 5, 11), ids(2, 4, 13, seed=1)
    assert torch.equal(model(src, tgt), model(src, tgt))
    model.train()
    assert max_diff(model(src, tgt), model(src, tgt)) > 1e-6


@pytest.mark.parametrize("norm_first", [False, True])
def test_pytorchs_transformer_with_the_mapped_weights_gives_our_logits(
    tiny_config, norm_first: bool
) -> None:
    """transformer_book.reference: nn.Transformer inside TorchTransformer, loaded with
    torch_state_dict(ours)."""
    torch.manual_seed(0)
    ours = randomize_(Transformer(tiny_config(norm_first=norm_first, dropout=0.0))).double().eval()
    theirs = TorchTransformer(ours.config).double().eval()
    theirs.load_state_dict(torch_state_dict(ours))
    src = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 0, 0]])  # padded source
    tgt = torch.tensor([[1, 3, 4, 5], [1, 7, 0, 0]])  # padded target
    with torch.no_grad():
        mine, pytorch = ours(src, tgt), theirs(src, tgt)
    # PyTorch gives padded query rows other values; only real positions are compared
    real = tgt != 0
    torch.testing.assert_close(pytorch[real], mine[real])
    with pytest.raises(ValueError, match="the paper's model only"):
        TorchTransformer(tiny_config(positional="rope"))


def test_a_training_forward_with_padding_compiles_as_one_graph(tiny_config) -> None:
    """torch.compile sees the whole forward: it reads no value back to the host, which would end the
    graph there."""
    import torch._dynamo

    model = Transformer(tiny_config(dropout=0.1)).train()
    src = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 0, 0]])  # padded
    tgt = torch.tensor([[1, 3, 4, 5], [1, 7, 0, 0]])
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(src, tgt)
    assert explanation.graph_break_count == 0, [str(r.reason) for r in explanation.break_reasons]
    assert explanation.graph_count == 1


def test_the_model_runs_on_the_meta_device_to_count_flops(tiny_config) -> None:
    """Shapes without values: a forward pass reads none, so FLOPs can be counted without computing
    anything."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = Transformer(tiny_config())
        src, tgt = torch.zeros(3, 5, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long)
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(src, tgt)
    assert logits.shape == (3, 4, tiny_config().tgt_vocab_size) and logits.is_meta
    assert counter.get_total_flops() > 0


def test_the_config_docstring_gives_the_base_models_parameter_count() -> None:
    """TransformerConfig's docstring states the count of its defaults with the paper's shared
    37,000-token vocabulary (chapters 0 and 8 print the same number)."""
    import re

    from transformer_lib import TransformerConfig

    doc = " ".join(TransformerConfig.__doc__.split())
    stated = re.search(r"``share_embeddings=True``\) the model has ([\d,]+) parameters", doc)
    assert stated, "TransformerConfig's docstring no longer states the base model's count"
    with torch.device("meta"):
        base = Transformer(TransformerConfig(37_000, 37_000, share_embeddings=True))
    assert int(stated.group(1).replace(",", "")) == base.num_parameters()
