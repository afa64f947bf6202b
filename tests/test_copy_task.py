"""The copy task end to end: training reaches 100% exact match on 1,000 held-out sequences."""

from __future__ import annotations

import json

import pytest
import torch

from transformer_book.attention_maps import record_attention
from transformer_lib import load_checkpoint
from transformer_lib.decoding import beam_search, greedy_decode
from transformer_tasks.copy import (
    BOS_ID,
    EOS_ID,
    FIRST_SYMBOL,
    PAD_ID,
    SEQ_LEN,
    VOCAB_SIZE,
    copy_batch,
    copy_batches,
    copy_exact_match,
    copy_targets,
    held_out_sequences,
    run_copy_task,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One real run of the task (the expensive part, shared by the tests below)."""
    path = tmp_path_factory.mktemp("copy") / "copy.safetensors"
    result = run_copy_task("cpu", seed=0, max_steps=1500, progress=False, save_path=str(path))
    return result, path


def test_training_copies_every_held_out_sequence_exactly(trained):
    result, _ = trained
    assert result["exact_match"] == 1.0 and result["reached"]
    assert result["steps"] < 1500 and result["steps"] % 50 == 0
    # evaluation is excluded from train_seconds
    assert 0 < result["train_seconds"] < result["wall_seconds"]
    assert result["device"] == "cpu" and result["params"] > 10_000
    history = result["eval_history"]
    assert history[-1]["exact_match"] == 1.0 and all(e["exact_match"] < 1.0 for e in history[:-1])
    json.loads(json.dumps(result))  # the CLI prints it as JSON


def test_saved_model_copies_with_greedy_and_beam_search(trained):
    _, path = trained
    model, metadata = load_checkpoint(path)
    assert metadata["task"] == "copy" and metadata["exact_match"] == 1.0
    held = held_out_sequences(1000)
    assert copy_exact_match(model, held) == 1.0
    assert copy_exact_match(model, held[:200], use_cache=False) == 1.0
    fresh = torch.randint(
        FIRST_SYMBOL, VOCAB_SIZE, (50, SEQ_LEN), generator=torch.Generator().manual_seed(7)
    )
    beams = beam_search(model, fresh, 3, SEQ_LEN + 2, BOS_ID, EOS_ID)
    greedy = greedy_decode(model, fresh, SEQ_LEN + 2, BOS_ID, EOS_ID)
    # Training stops once all 1,000 held-out sequences are right; a fresh sequence can still be
    # wrong (on one CPU, 1 of these 50: one with a symbol repeated twice), so: at least 48 of 50.
    for name, output in (("beam search", beams), ("greedy", greedy)):
        assert output.shape == (50, SEQ_LEN + 2), name
        right = int((output == copy_targets(fresh)).all(dim=1).sum())
        assert right >= 48, f"{name} copied {right} of 50 fresh sequences"


def test_trained_cross_attention_aligns_each_output_with_its_source_position(trained):
    """Chapter 10's reading of the attention maps: output position t looks up source position t."""
    _, path = trained
    model, _ = load_checkpoint(path)
    model.eval()
    batch = copy_batch(held_out_sequences(1000))
    with torch.no_grad(), record_attention(model) as maps:
        model(batch.src, batch.tgt_in)
    # (1000, H, SEQ_LEN queries, SEQ_LEN keys)
    cross = maps["decoder.layers.0.cross_attn"][:, :, :SEQ_LEN, :]
    mean_map = cross.mean(dim=1)  # (1000, SEQ_LEN, SEQ_LEN): the heads' average
    t = torch.arange(SEQ_LEN)
    assert (mean_map.argmax(dim=-1) == t).float().mean() > 0.9
    assert mean_map[:, t, t].mean() > 5 / SEQ_LEN  # five times the mass of uniform attention
    torch.manual_seed(0)
    # the control: the same model before training has no diagonal
    untrained = type(model)(model.config).eval()
    with torch.no_grad(), record_attention(untrained) as maps:
        untrained(batch.src, batch.tgt_in)
    # (1000, SEQ_LEN, SEQ_LEN)
    before = maps["decoder.layers.0.cross_attn"][:, :, :SEQ_LEN, :].mean(dim=1)
    assert (before.argmax(dim=-1) == t).float().mean() < 0.5 and before[
        :, t, t
    ].mean() < 2 / SEQ_LEN


def test_untrained_model_does_not_copy():
    from transformer_lib import Transformer
    from transformer_tasks.copy import copy_model_config

    torch.manual_seed(0)
    assert copy_exact_match(Transformer(copy_model_config()), held_out_sequences(100)) == 0.0


def test_data_layout_and_determinism():
    seqs = held_out_sequences(1000)
    assert seqs.shape == (1000, SEQ_LEN) and seqs.min() >= FIRST_SYMBOL and seqs.max() < VOCAB_SIZE
    assert torch.equal(seqs, held_out_sequences(1000))
    assert len(set(map(tuple, seqs.tolist()))) > 990
    batch = copy_batch(seqs[:2])
    assert torch.equal(batch.src, seqs[:2])
    assert batch.tgt_in[:, 0].tolist() == [BOS_ID, BOS_ID] and torch.equal(
        batch.tgt_in[:, 1:], seqs[:2]
    )
    assert batch.tgt_out[:, -1].tolist() == [EOS_ID, EOS_ID] and torch.equal(
        batch.tgt_out[:, :-1], seqs[:2]
    )
    assert batch.pad_id == PAD_ID and batch.num_tokens == 2 * (SEQ_LEN + 1)
    a = [b.src for b in copy_batches(4, seed=3, num_batches=2)]
    b = [b.src for b in copy_batches(4, seed=3, num_batches=2)]
    c = [b.src for b in copy_batches(4, seed=4, num_batches=2)]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True)) and not torch.equal(a[0], c[0])


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="max_steps"):
        run_copy_task(max_steps=0, progress=False)
    with pytest.raises(ValueError, match="device"):
        run_copy_task(device="tpu", progress=False)
    with pytest.raises(ValueError, match="sequences"):
        copy_batch(torch.zeros(3))
