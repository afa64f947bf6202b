"""The training loop, the loss, batching, and exact resumption from checkpoints."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from itertools import count
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader

from transformer_book.reference import TorchTransformer, torch_state_dict
from transformer_lib import Transformer, TransformerConfig, noam_rate
from transformer_lib.data.batching import (
    Batch,
    TokenBudgetSampler,
    batch_loader,
    make_batch,
    token_batches,
)
from transformer_lib.training import (
    TrainConfig,
    TrainResult,
    evaluate_loss,
    linear_decay_rate,
    precision,
    sequence_loss,
    train,
    train_state_path,
)
from transformer_lib.training import loop as training_loop
from transformer_tasks.copy import copy_batch

PAD, BOS, EOS = 0, 1, 2
VOCAB = 13


pytestmark = pytest.mark.usefixtures("one_thread")


def small_model(seed: int = 0, dropout: float = 0.0, norm_first: bool = True) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(
        TransformerConfig(
            src_vocab_size=VOCAB,
            tgt_vocab_size=VOCAB,
            d_model=32,
            num_heads=4,
            num_encoder_layers=1,
            num_decoder_layers=1,
            d_ff=64,
            dropout=dropout,
            max_len=32,
            norm_first=norm_first,
        )
    )


def random_batch(seed: int, batch: int = 8, length: int = 6) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    return copy_batch(torch.randint(3, VOCAB, (batch, length), generator=generator))


def epoch_data(batches_per_epoch: int = 3):
    """Batches that depend on the epoch only (what exact resumption needs)."""
    return lambda epoch: [random_batch(100 * epoch + i) for i in range(batches_per_epoch)]


def quiet(**kwargs) -> TrainConfig:
    return TrainConfig(progress=False, **kwargs)


# ----------------------------------------------------------------------------------------------
# loss


def test_label_smoothed_loss_matches_a_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    target = torch.tensor([[3, 4, 5, 0], [6, 0, 0, 0]])  # 0 = padding, ignored
    eps = 0.1
    log_p = logits.log_softmax(-1)
    total, count = 0.0, 0
    for b in range(2):
        for t in range(4):
            y = int(target[b, t])
            if y == 0:
                continue
            # the true class gets 1 - eps + eps/K, every class gets eps/K
            q = torch.full((7,), eps / 7)
            q[y] += 1 - eps
            total += float(-(q * log_p[b, t]).sum())
            count += 1
    expected = total / count
    assert sequence_loss(logits, target, pad_id=0, label_smoothing=eps).item() == pytest.approx(
        expected, rel=1e-5
    )
    plain = -log_p[target != 0].gather(-1, target[target != 0][:, None]).mean()
    assert sequence_loss(logits, target, pad_id=0).item() == pytest.approx(plain.item(), rel=1e-5)
    assert sequence_loss(logits, target, 0, eps, reduction="sum").item() == pytest.approx(
        expected * count, rel=1e-5
    )
    # padding positions do not matter at all
    changed = logits.clone()
    changed[target == 0] = 100.0
    assert sequence_loss(changed, target, 0, eps).item() == pytest.approx(expected, rel=1e-5)


def test_the_tied_padding_row_gets_a_gradient_through_the_output_layer():
    """``padding_idx`` stops the lookup's gradient only: tied to the output layer, the ``<pad>``
    row gets one from every logit of ``<pad>``."""
    batch = random_batch(0)
    model = small_model()
    sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, PAD, 0.1).backward()
    assert model.tgt_embed.embedding.weight.grad[PAD].norm() > 1e-4
    untied = small_model()
    untied.generator.weight = torch.nn.Parameter(untied.generator.weight.detach().clone())
    sequence_loss(untied(batch.src, batch.tgt_in), batch.tgt_out, PAD, 0.1).backward()
    assert untied.tgt_embed.embedding.weight.grad[PAD].norm() == 0


def test_reported_loss_is_the_label_smoothed_loss_of_the_model_before_the_step():
    model = small_model()
    batch = random_batch(0)
    model.eval()
    with torch.no_grad():
        before = sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, PAD, 0.1).item()
    result = train(model, [batch], quiet(max_steps=1, label_smoothing=0.1, warmup_steps=1, lr=1e-3))
    assert result.history[0]["loss"] == pytest.approx(before, rel=1e-5)


def test_one_training_step_lowers_the_loss_on_a_fixed_batch():
    model = small_model()
    batch = random_batch(0)
    loss_before = evaluate_loss(model, [batch])["loss"]
    result = train(model, [batch], quiet(max_steps=1, warmup_steps=1, lr=3e-3, label_smoothing=0.0))
    loss_after = evaluate_loss(model, [batch])["loss"]
    assert result.steps == 1 and result.history[0]["loss"] == pytest.approx(loss_before, rel=1e-5)
    assert loss_after < loss_before - 0.05


def test_evaluate_loss_is_the_mean_nll_per_token():
    model = small_model()
    batches = [random_batch(0, batch=3), random_batch(1, batch=5)]
    model.eval()
    with torch.no_grad():
        nll = sum(
            sequence_loss(model(b.src, b.tgt_in), b.tgt_out, PAD, reduction="sum") for b in batches
        )
    metrics = evaluate_loss(model, batches)
    tokens = sum(b.num_tokens for b in batches)
    assert metrics["tokens"] == tokens
    assert metrics["loss"] == pytest.approx(nll.item() / tokens, rel=1e-5)
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["loss"]), rel=1e-6)


# ----------------------------------------------------------------------------------------------
# schedule


def test_noam_schedule_steps_once_per_optimizer_step_under_gradient_accumulation():
    model = small_model()
    config = quiet(max_steps=5, grad_accum=3, warmup_steps=4, lr=2e-3)
    # 6 batches per epoch = 2 optimizer steps per epoch
    result = train(model, epoch_data(6), config)
    assert result.steps == 5 and [h["step"] for h in result.history] == [1, 2, 3, 4, 5]
    assert [h["epoch"] for h in result.history] == [0, 0, 1, 1, 2]
    factor = config.noam_factor(model.config.d_model)
    for h in result.history:
        assert h["lr"] == pytest.approx(noam_rate(h["step"], 32, 4, factor), rel=1e-9)
    assert result.history[3]["lr"] == pytest.approx(2e-3)  # the peak, at the end of warm-up


def test_gradient_accumulation_equals_one_big_batch():
    big = random_batch(7, batch=8)
    halves = [
        Batch(big.src[i : i + 4], big.tgt_in[i : i + 4], big.tgt_out[i : i + 4]) for i in (0, 4)
    ]
    one, two = small_model(3), small_model(3)
    r1 = train(one, [big], quiet(max_steps=1, warmup_steps=1, lr=1e-3))
    r2 = train(two, halves, quiet(max_steps=1, grad_accum=2, warmup_steps=1, lr=1e-3))
    assert r1.history[0]["loss"] == pytest.approx(r2.history[0]["loss"], rel=1e-5)
    for (name, p1), p2 in zip(one.named_parameters(), two.parameters(), strict=True):
        if name.endswith("k_proj.bias"):
            # A key bias adds the same amount to every score of a query, which softmax ignores: its
            # gradient is 0 up to rounding, and Adam turns rounding noise into full-size steps.
            continue
        torch.testing.assert_close(p1, p2, rtol=1e-4, atol=1e-6, msg=name)


def test_the_loop_trains_pytorchs_own_transformer_through_forward():
    """Any nn.Module trains: nn.Transformer (in TorchTransformer), given forward=, follows our model
    step by step."""
    ours = small_model(0)
    theirs = TorchTransformer(ours.config)
    theirs.load_state_dict(torch_state_dict(ours))
    config = quiet(max_steps=6, warmup_steps=2, lr=2e-3, seed=1)
    mine = train(ours, epoch_data(3), config)
    pytorch = train(
        theirs, epoch_data(3), config, forward=lambda model, batch: model(batch.src, batch.tgt_in)
    )
    losses = [h["loss"] for h in pytorch.history]
    assert losses == pytest.approx([h["loss"] for h in mine.history], rel=1e-3)
    assert losses[-1] < losses[0]
    # A forward that does not give (B, T, V) logits is refused by the loss, naming the shapes.
    with pytest.raises(ValueError, match="logits must be"):
        train(
            theirs,
            epoch_data(1),
            quiet(max_steps=1),
            forward=lambda model, batch: model(batch.src, batch.tgt_in)[0],
        )


# ----------------------------------------------------------------------------------------------
# checkpoints


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path):
    data = epoch_data(3)
    config = dict(warmup_steps=3, lr=2e-3, label_smoothing=0.1, seed=5)
    full = train(small_model(0, dropout=0.2), data, quiet(max_steps=7, **config))

    path = tmp_path / "run.safetensors"
    first = train(
        small_model(0, dropout=0.2), data, quiet(max_steps=4, checkpoint_path=str(path), **config)
    )
    assert path.is_file() and train_state_path(path).is_file()
    # the state file loads with weights_only=True (tensors and plain containers, no arbitrary
    # objects)
    # and records Adam's moments and where training stopped
    state = torch.load(train_state_path(path), weights_only=True)
    assert all("exp_avg" in moments for moments in state["optimizer"]["state"].values())
    assert (
        state["loop"]["step"] == 4
        and state["loop"]["epoch"] == 1
        and state["loop"]["batch_in_epoch"] == 1
    )

    # a different global RNG state and different initial weights: resume must undo both
    torch.manual_seed(123)
    resumed_model = small_model(99, dropout=0.2)
    resumed = train(resumed_model, data, quiet(max_steps=7, **config), resume_from=path)

    assert [h["loss"] for h in first.history] == [h["loss"] for h in full.history[:4]]
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]  # bit-exact
    assert [h["lr"] for h in resumed.history] == [h["lr"] for h in full.history]
    assert resumed.steps == 7 and resumed.stop_reason == "max_steps"


def test_resume_rejects_a_different_model_and_a_missing_state(tmp_path):
    path = tmp_path / "run.safetensors"
    train(
        small_model(),
        [random_batch(0)],
        quiet(max_steps=1, warmup_steps=1, checkpoint_path=str(path)),
    )
    other = Transformer(
        TransformerConfig(
            VOCAB,
            VOCAB,
            d_model=16,
            num_heads=2,
            num_encoder_layers=1,
            num_decoder_layers=1,
            d_ff=32,
        )
    )
    with pytest.raises(ValueError, match="config"):
        train(other, [random_batch(0)], quiet(max_steps=2, warmup_steps=1), resume_from=path)
    train_state_path(path).unlink()
    with pytest.raises(FileNotFoundError, match="training state"):
        train(
            small_model(), [random_batch(0)], quiet(max_steps=2, warmup_steps=1), resume_from=path
        )


def test_a_checkpoint_directory_keeps_the_newest_whole_state_and_resumes_from_it(
    tmp_path, monkeypatch
):
    """Every save writes ``step-N`` files; resuming takes the newest whole pair, evaluations
    included.

    Checkpoints fall on evaluation steps (every 2): the state of step 4 must hold step 4's
    evaluation, or the resumed run would have a hole in its ``eval_history``.
    """
    data, config = epoch_data(3), dict(warmup_steps=3, lr=2e-3, seed=5, eval_every=2)

    def scores(model):  # a metric of the weights: equal only if the weights are
        return {"w": float(sum(p.double().sum() for p in model.parameters()))}

    full = train(small_model(0, dropout=0.2), data, quiet(max_steps=8, **config), evaluate=scores)

    folder = tmp_path / "run"
    folder.mkdir()
    from transformer_lib.training import state

    save_model = state.save_checkpoint

    def save_or_die(model, path, **metadata):
        if metadata["training"]["step"] == 6:
            raise KeyboardInterrupt  # a crash between the training state of step 6 and its model
        return save_model(model, path, **metadata)

    monkeypatch.setattr(state, "save_checkpoint", save_or_die)
    with pytest.raises(KeyboardInterrupt):
        train(
            small_model(0, dropout=0.2),
            data,
            quiet(max_steps=8, checkpoint_path=str(folder), checkpoint_every=2, **config),
            evaluate=scores,
        )
    monkeypatch.undo()
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "step-0000004.safetensors",
        "step-0000004.train_state.pt",
        "step-0000006.train_state.pt",
    ]
    assert state.latest_checkpoint(folder) == folder / "step-0000004.safetensors"
    assert state.read_loop_state(folder)["step"] == 4

    resumed = train(
        small_model(99, dropout=0.2),
        data,
        quiet(max_steps=8, checkpoint_path=str(folder), checkpoint_every=2, **config),
        evaluate=scores,
        resume_from=folder,
    )
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert resumed.eval_history == full.eval_history and [e["step"] for e in full.eval_history] == [
        2,
        4,
        6,
        8,
    ]
    assert sorted(p.name for p in folder.iterdir()) == [
        "step-0000008.safetensors",
        "step-0000008.train_state.pt",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="directory without a checkpoint"):
        train(small_model(), data, quiet(max_steps=8, **config), resume_from=empty)


def test_keep_last_writes_every_evaluation_and_keeps_the_last_ones_and_the_best(tmp_path):
    """With ``keep_last=3`` every evaluation writes a checkpoint, and the directory keeps the model
    files of the last 3 evaluations and of the best one (the highest metric, step 2 here), and the
    training state of the newest only: what checkpoint averaging reads, without Adam's moments."""
    history = iter([5.0, 1.0, 2.0, 3.0, 4.0, 0.5])  # the metric at steps 2, 4, ..., 12

    def scores(model):
        return {"m": next(history)}

    folder = tmp_path / "run"
    folder.mkdir()
    config = quiet(
        max_steps=12,
        warmup_steps=3,
        eval_every=2,
        monitor="m",
        checkpoint_path=str(folder),
        keep_last=3,
    )
    result = train(small_model(0), epoch_data(3), config, evaluate=scores)
    assert result.best_step == 2
    assert sorted(p.name for p in folder.iterdir()) == [
        "step-0000002.safetensors",  # the best
        "step-0000008.safetensors",  # the last three evaluations
        "step-0000010.safetensors",
        "step-0000012.safetensors",
        "step-0000012.train_state.pt",  # the newest state, to resume from
    ]
    with pytest.raises(ValueError, match="keep_last"):
        TrainConfig(keep_last=0, max_steps=1)


def test_a_run_resumed_at_its_time_budget_takes_no_more_step(tmp_path):
    path = tmp_path / "run.safetensors"
    config = quiet(max_steps=10_000, time_budget_s=0.2, warmup_steps=1, checkpoint_path=str(path))
    done = train(small_model(), _SlowBatches(0.05), config)
    assert done.stop_reason == "time_budget"
    again = train(small_model(), _SlowBatches(0.05), config, resume_from=path)
    assert again.steps == done.steps and again.stop_reason == "time_budget"


def test_periodic_checkpoints_are_written_and_the_best_metric_recorded(tmp_path):
    scores = iter([0.1, 0.5, 0.3, 0.2])
    result = train(
        small_model(),
        epoch_data(2),
        quiet(
            max_steps=4,
            warmup_steps=1,
            eval_every=1,
            monitor="acc",
            checkpoint_path=str(tmp_path / "last.safetensors"),
            checkpoint_every=2,
        ),
        evaluate=lambda m: {"acc": next(scores)},
        metadata={"note": "test"},
    )
    from transformer_lib import load_checkpoint

    assert result.best_metric == 0.5 and result.best_step == 2
    _, last = load_checkpoint(tmp_path / "last.safetensors")
    assert last["training"]["step"] == 4 and last["note"] == "test"


# ----------------------------------------------------------------------------------------------
# loop control


def test_early_stopping_at_the_target():
    losses = iter([2.0, 1.0, 0.4, 0.3])
    result = train(
        small_model(),
        epoch_data(4),
        quiet(max_steps=50, warmup_steps=1, eval_every=1, monitor="loss", mode="min", target=0.5),
        evaluate=lambda m: {"loss": next(losses)},
    )
    assert result.stopped_early and result.stop_reason == "target" and result.steps == 3
    assert [e["step"] for e in result.eval_history] == [1, 2, 3]
    assert result.best_metric == 0.4 and result.best_step == 3


def test_epochs_end_evaluation_and_data_exhaustion():
    result = train(
        small_model(),
        epoch_data(2),
        quiet(max_epochs=3, warmup_steps=1),
        evaluate=lambda m: {"x": 1.0},
    )
    assert result.steps == 6 and result.epochs == 3 and result.stop_reason == "max_epochs"
    assert [e["step"] for e in result.eval_history] == [2, 4, 6]  # eval_every=None: once per epoch
    one_shot = iter([random_batch(0), random_batch(1)])  # an iterator is used up after one epoch
    result = train(small_model(), one_shot, quiet(max_epochs=5, warmup_steps=1))
    assert result.steps == 2 and result.stop_reason == "data_exhausted"


def test_train_seconds_exclude_evaluation():
    def slow_eval(model):
        time.sleep(0.3)
        return {"x": 0.0}

    start = time.perf_counter()
    result = train(
        small_model(),
        epoch_data(3),
        quiet(max_steps=3, warmup_steps=1, eval_every=1),
        evaluate=slow_eval,
    )
    wall = time.perf_counter() - start
    assert len(result.eval_history) == 3
    assert result.train_seconds < wall - 0.85
    assert all(h["tokens_per_s"] > 0 for h in result.history)


def test_evaluation_runs_in_eval_mode_without_grad_and_training_resumes_in_train_mode():
    seen = []

    def evaluate(model):
        seen.append((model.training, torch.is_grad_enabled()))
        return {}

    model = small_model(dropout=0.1)
    train(model, epoch_data(2), quiet(max_steps=2, warmup_steps=1, eval_every=1), evaluate=evaluate)
    assert seen == [(False, False), (False, False)]


@pytest.mark.slow  # a new Python process
def test_progress_bar_goes_to_stderr_unless_disabled():
    """tqdm reads ``TQDM_DISABLE`` when it is imported, so each case runs in a fresh process."""
    script = (
        "import sys; sys.path.insert(0, 'tests'); from test_training import epoch_data, "
        "small_model\nfrom transformer_lib.training import TrainConfig, "
        "train\ntrain(small_model(), epoch_data(2), TrainConfig(max_steps=2, warmup_steps=1, "
        "progress=sys.argv[1] == 'on'))\n"
    )

    def run(progress: str, **env: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
        return subprocess.run(
            [sys.executable, "-c", script, progress],
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=True,
        )

    shown = run("on")
    assert shown.stdout == "" and "2/2" in shown.stderr and "loss=" in shown.stderr
    assert run("on", TQDM_DISABLE="1").stderr == ""  # tqdm's own variable
    assert run("off").stderr == ""  # TrainConfig(progress=False)


def test_bf16_autocast_on_cpu_trains_and_fp16_on_cpu_is_refused():
    result = train(small_model(), epoch_data(2), quiet(max_steps=2, warmup_steps=1, amp="bf16"))
    assert all(math.isfinite(h["loss"]) for h in result.history)
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        train(small_model(), epoch_data(2), quiet(max_steps=2, amp="fp16"), device="cpu")


def test_clip_norm_limits_the_update():
    batch = random_batch(0)
    clipped, free, loose = small_model(), small_model(), small_model()
    start = [p.detach().clone() for p in clipped.parameters()]
    # Adam is nearly invariant to the gradient's scale, but not exactly (eps, and the clip changes
    # the mix of the two steps' gradients): a tight clip changes the update, a loose one does not.
    train(clipped, [batch], quiet(max_steps=2, warmup_steps=1, lr=1e-3, clip_norm=1e-4))
    train(free, [batch], quiet(max_steps=2, warmup_steps=1, lr=1e-3))
    train(loose, [batch], quiet(max_steps=2, warmup_steps=1, lr=1e-3, clip_norm=1e6))
    for p1, p2 in zip(free.parameters(), loose.parameters(), strict=True):
        assert torch.equal(p1, p2)
    moved_c = sum((p - s).abs().sum() for p, s in zip(clipped.parameters(), start, strict=True))
    moved_f = sum((p - s).abs().sum() for p, s in zip(free.parameters(), start, strict=True))
    assert not torch.isclose(moved_c, moved_f)


def test_train_result_defaults():
    result = TrainResult()
    assert math.isnan(result.final_loss) and result.last_eval == {}


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="needs max_steps, max_epochs or time_budget_s"):
        TrainConfig()
    with pytest.raises(ValueError, match="amp"):
        TrainConfig(max_steps=1, amp="fp32")
    with pytest.raises(ValueError, match="monitor"):
        TrainConfig(max_steps=1, target=0.9)
    with pytest.raises(ValueError, match="mode"):
        TrainConfig(max_steps=1, mode="up")
    with pytest.raises(ValueError, match="grad_accum"):
        TrainConfig(max_steps=1, grad_accum=0)
    with pytest.raises(TypeError, match="grad_accum"):
        TrainConfig(max_steps=1, grad_accum=1.5)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(max_steps=1, label_smoothing=1.0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(max_steps=1, lr=0.0)
    with pytest.raises(TypeError, match="model must be a torch nn.Module"):
        train(object(), [random_batch(0)], quiet(max_steps=1))
    with pytest.raises(TypeError, match="checkpoint_path .* need a transformer_lib.Transformer"):
        train(
            torch.nn.Linear(2, 2),
            [random_batch(0)],
            quiet(max_steps=1, checkpoint_path="run.safetensors"),
        )
    with pytest.raises(TypeError, match="Batch"):
        train(small_model(), [(1, 2)], quiet(max_steps=1))
    with pytest.raises(ValueError, match="evaluate"):
        train(small_model(), [random_batch(0)], quiet(max_steps=1, monitor="bleu"))
    with pytest.raises(ValueError, match="'bleu' is not among"):
        train(
            small_model(),
            [random_batch(0)],
            quiet(max_steps=1, monitor="bleu"),
            evaluate=lambda m: {"loss": 1},
        )
    with pytest.raises(ValueError, match="logits"):
        sequence_loss(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), 0)


# ----------------------------------------------------------------------------------------------
# batching


def test_make_batch_shifts_the_target_and_pads():
    b = make_batch([[5, 6, 7], [8]], [[9, 10], [11, 12, 3]], pad_id=PAD, bos_id=BOS, eos_id=EOS)
    assert b.src.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert b.tgt_in.tolist() == [[1, 9, 10, 0], [1, 11, 12, 3]]
    assert b.tgt_out.tolist() == [[9, 10, 2, 0], [11, 12, 3, 2]]
    assert b.num_tokens == 7 and b.num_src_tokens == 4 and len(b) == 2
    assert b.src_mask.tolist() == [[[[True, True, True]]], [[[True, False, False]]]]
    assert b.tgt_mask.shape == (2, 1, 4, 4)
    # causal and hides the padding key
    assert b.tgt_mask[0, 0, 3].tolist() == [True, True, True, False]
    assert b.to("cpu").tgt_out.tolist() == b.tgt_out.tolist()
    with pytest.raises(ValueError, match="pair up"):
        make_batch([[5]], [[6], [7]], PAD, BOS, EOS)
    with pytest.raises(ValueError, match="different"):
        make_batch([[5]], [[6]], PAD, PAD, EOS)
    with pytest.raises(TypeError, match="src_seqs"):
        make_batch("abc", [[6]], PAD, BOS, EOS)


def test_token_batches_cover_every_pair_once_within_the_budget_and_group_similar_lengths():
    generator = torch.Generator().manual_seed(0)
    pairs = []
    for i in range(600):
        s, t = torch.randint(1, 30, (2,), generator=generator).tolist()
        # the last id names the pair
        pairs.append(([3 + i % 7] * s + [100 + i], [4] * t + [100 + i]))
    batches = token_batches(pairs, max_tokens=200, pad_id=PAD, bos_id=BOS, eos_id=EOS, seed=1)
    seen = []
    for b in batches:
        assert b.src.numel() <= 200 and b.tgt_in.numel() <= 200
        for row in b.src.tolist():
            seen.append(max(row))
    assert sorted(seen) == sorted(100 + i for i in range(600))
    padding = sum((b.tgt_out == PAD).sum().item() for b in batches) / sum(
        b.tgt_out.numel() for b in batches
    )
    assert padding < 0.15  # random batches of the same sizes would be about 40% padding
    again = token_batches(pairs, 200, PAD, BOS, EOS, seed=1)
    other = token_batches(pairs, 200, PAD, BOS, EOS, seed=2)
    assert [b.src.tolist() for b in again] == [b.src.tolist() for b in batches]
    assert [b.src.tolist() for b in other] != [b.src.tolist() for b in batches]
    ordered = token_batches(pairs, 200, PAD, BOS, EOS, shuffle=False)
    widths = [b.tgt_in.size(1) for b in ordered]
    assert widths == sorted(widths)


def test_batch_loader_is_a_dataloader_whose_sampler_gives_token_batches():
    pairs = [([5] * (1 + i % 17), [6] * (1 + i % 11)) for i in range(300)]
    loader = batch_loader(pairs, 120, PAD, BOS, EOS, seed=3)
    assert isinstance(loader, DataLoader) and isinstance(loader.batch_sampler, TokenBudgetSampler)
    expected = token_batches(pairs, 120, PAD, BOS, EOS, seed=3)
    assert len(loader) == len(expected) > 1
    for _ in range(2):  # the same batches, in the same order, every time the epoch is read
        assert [(b.src.tolist(), b.tgt_in.tolist()) for b in loader] == [
            (b.src.tolist(), b.tgt_in.tolist()) for b in expected
        ]
    indices = sorted(i for batch in TokenBudgetSampler(pairs, 120, seed=3) for i in batch)
    assert indices == list(range(300))
    # Reading the batches leaves the global generator (dropout's) alone: a resumed run depends on
    # it.
    before = torch.get_rng_state()
    list(loader), token_batches(pairs, 120, PAD, BOS, EOS)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_batch_loader_pins_the_batches_for_asynchronous_copies():
    pairs = [([5] * 3, [6] * 4)] * 10
    batches = list(batch_loader(pairs, 40, PAD, BOS, EOS, pin_memory=True))
    assert all(
        b.src.is_pinned() and b.tgt_in.is_pinned() and b.tgt_out.is_pinned() for b in batches
    )
    assert not any(b.src.is_pinned() for b in batch_loader(pairs, 40, PAD, BOS, EOS))


def test_token_batches_give_an_overlong_pair_its_own_batch():
    batches = token_batches(
        [([5] * 50, [6] * 50), ([5], [6])], max_tokens=10, pad_id=PAD, bos_id=BOS, eos_id=EOS
    )
    assert sorted(len(b) for b in batches) == [1, 1]
    with pytest.raises(ValueError, match="max_tokens"):
        token_batches([([5], [6])], max_tokens=0, pad_id=PAD, bos_id=BOS, eos_id=EOS)


def test_a_few_bfloat16_steps_on_the_cpu():
    """amp="bf16": autocast runs the products in bfloat16; weights, gradients and Adam stay in
    float32."""
    model = small_model(0)
    result = train(model, epoch_data(3), quiet(max_steps=3, warmup_steps=2, lr=2e-3, amp="bf16"))
    assert result.amp == "bf16" and result.steps == 3
    assert all(math.isfinite(h["loss"]) for h in result.history)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    full = train(small_model(0), epoch_data(3), quiet(max_steps=3, warmup_steps=2, lr=2e-3))
    # rounding only
    assert result.history[0]["loss"] == pytest.approx(full.history[0]["loss"], rel=2e-2)
    assert result.history[0]["loss"] != full.history[0]["loss"]  # bfloat16 did run


@pytest.mark.parametrize(("none", "bf16", "expected"), [(1.5, 1.0, "bf16"), (1.0, 1.5, "none")])
def test_auto_amp_on_a_cpu_times_the_models_own_step_and_trains_in_the_faster(
    monkeypatch: pytest.MonkeyPatch, tmp_path, none: float, bf16: float, expected: str
):
    """``amp="auto"`` on a CPU times the training step both ways (here on a fake clock: each step
    of float32 takes ``none`` seconds, of bfloat16 ``bf16``), trains in the faster and records why;
    the probe leaves the run as a run without it, and a second run reads the answer back."""
    monkeypatch.setenv("TRANSFORMER_LIB_CACHE", str(tmp_path))
    model, data = small_model(0), epoch_data(1)
    config = quiet(max_steps=1, warmup_steps=1, amp="auto")
    steps: list[str] = []
    real_timer = precision._step_timer

    def fake_timer(*args):
        timed = real_timer(*args)

        def seconds(amp: str) -> float:
            steps.append(amp)
            timed(amp)  # the real step runs, on the model's copy
            return {"none": none, "bf16": bf16}[amp]

        return seconds

    monkeypatch.setattr(precision, "_step_timer", fake_timer)
    result = train(model, data, config)
    forced = train(small_model(0), data, quiet(max_steps=1, warmup_steps=1, amp=expected))
    assert result.amp == expected and steps == ["none", "bf16"] * 4
    assert result.amp_probe == {"amp": expected, "none": none, "bf16": bf16, "cached": False}
    assert result.history[0]["loss"] == forced.history[0]["loss"]  # the probe changed nothing
    again = train(small_model(0), data, config)
    assert again.amp_probe["cached"] is True and len(steps) == 8  # not timed again


def test_the_linear_schedule_rises_then_falls_to_almost_zero_at_max_steps():
    result = train(
        small_model(0),
        epoch_data(3),
        quiet(max_steps=8, warmup_steps=3, lr=1e-3, schedule="linear"),
    )
    used = [h["lr"] for h in result.history]
    expected = [linear_decay_rate(s, 1e-3, 3, 8) for s in range(1, 9)]
    assert used == pytest.approx(expected)
    assert used[2] == pytest.approx(1e-3)
    assert used[:3] == sorted(used[:3]) and used[2:] == sorted(used[2:], reverse=True)
    assert used[-1] == pytest.approx(1e-3 / 6) and linear_decay_rate(9, 1e-3, 3, 8) == 0.0
    with pytest.raises(ValueError, match="needs max_steps or time_budget_s"):
        TrainConfig(max_epochs=3, schedule="linear")
    with pytest.raises(ValueError, match="needs max_steps > warmup_steps"):
        TrainConfig(max_steps=3, warmup_steps=3, schedule="linear")
    with pytest.raises(ValueError, match="schedule='cosine' is not one of"):
        TrainConfig(max_steps=3, schedule="cosine")


def test_the_linear_rate_reaches_zero_at_whichever_budget_ends_first():
    # time only
    assert linear_decay_rate(5, 1e-3, 2, None, time_used=0.25) == pytest.approx(0.75e-3)
    # steps only
    assert linear_decay_rate(5, 1e-3, 2, 8, time_used=0.0) == pytest.approx(1e-3 * 4 / 7)
    assert linear_decay_rate(5, 1e-3, 2, 8, time_used=0.9) == pytest.approx(1e-4)  # time ends first
    # steps end first
    assert linear_decay_rate(5, 1e-3, 2, 8, time_used=0.1) == pytest.approx(1e-3 * 4 / 7)
    assert linear_decay_rate(1, 1e-3, 2, None, time_used=1.5) == 0.0  # past the budget


class _SlowBatches:
    """Batches that each take ``seconds`` to fetch (fetching counts as training time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, epoch: int):
        for batch in epoch_data(4)(epoch):
            time.sleep(self.seconds)
            yield batch


def test_a_time_budget_stops_training_and_the_linear_rate_follows_the_clock():
    budget = 0.6
    config = quiet(max_epochs=100, time_budget_s=budget, warmup_steps=1, lr=1e-3, schedule="linear")
    result = train(small_model(0), _SlowBatches(0.05), config)
    assert result.stop_reason == "time_budget"
    # No upper bound on the real clock: one step of a busy machine can take any time (the test
    # below, on a clock of its own, checks that the run stops at the first step past the budget).
    assert budget <= result.train_seconds
    used = [h["lr"] for h in result.history]
    assert used == sorted(used, reverse=True) and used[0] == pytest.approx(1e-3)
    # The rate falls with the time spent (lagging the clock by one step). Before row i at least i -
    # 1 batches
    # were fetched, 0.05 s each, so its rate is at most 1e-3 * (1 - 0.05 (i - 1) / budget); a
    # slower, busier
    # machine only spends more time, so the bound holds under any load (a fixed threshold on the
    # last rate
    # did not: one stalled step left it at 0.79e-3).
    assert len(used) >= 3
    assert all(
        lr <= 1e-3 * max(0.0, 1 - 0.05 * max(i - 1, 0) / budget) + 1e-12
        for i, lr in enumerate(used)
    ), used
    with pytest.raises(ValueError, match="time_budget_s must be a positive number"):
        TrainConfig(time_budget_s=0)


def test_the_time_budget_stops_at_the_first_step_past_it(monkeypatch: pytest.MonkeyPatch):
    """The loop's clock replaced by one that moves 0.05 s per reading, so every step takes exactly
    0.05 s whatever the machine's load: a 0.22 s budget stops after the fifth step (0.20 s spent
    before it), and the linear rate falls with the share of the budget spent, one step behind.
    """
    ticks = count()
    clock = SimpleNamespace(perf_counter=lambda: 0.05 * next(ticks))  # read at a step's start, end
    monkeypatch.setattr(training_loop, "time", clock)
    budget = 0.22
    config = quiet(max_epochs=100, time_budget_s=budget, warmup_steps=1, lr=1e-3, schedule="linear")
    result = train(small_model(0), epoch_data(4), config)
    assert result.stop_reason == "time_budget" and result.steps == 5
    assert result.train_seconds == pytest.approx(0.25)
    # the rate lags the clock by one step: step i + 1 uses the share left after i - 1 steps
    expected = [1e-3 * (1 - 0.05 * max(i - 1, 0) / budget) for i in range(5)]
    assert [h["lr"] for h in result.history] == pytest.approx(expected)
