"""The translation pipeline in pieces: train_translation, evaluate_translation, translation_summary,
save_translation.

Everything runs a profile smaller still than ``smoke`` (400 training pairs, a 1+1-layer model of
width 16, 24 steps, one thread) on Multi30k (the ``multi30k_dir`` fixture), so each training takes a
second or two. Nothing here downloads.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from transformer_lib import evaluate_loss, read_checkpoint_header, save_checkpoint, token_batches
from transformer_lib.data.batching import epoch_seed
from transformer_lib.training import TrainResult
from transformer_lib.training import state as training_state
from transformer_tasks import (
    DecodeConfig,
    TranslationEvaluation,
    TranslationRun,
    corpus_bleu,
    evaluate_translation,
    run_translation,
    save_translation,
    train_translation,
    translate,
    translation_summary,
)
from transformer_tasks.multi30k import load_multi30k
from transformer_tasks.translation import (
    TRANSLATION_PROFILES,
    ResumeError,
    apply_overrides,
    encode_pairs,
    load_translation_checkpoint,
    sweep_decoding,
    train_translation_tokenizer,
)
from transformer_tasks.translation import train as translation_training
from transformer_tasks.translation.checkpoints import RunDirectory

SEED = 3

# Smaller than the smoke profile: no time budget (so two runs with one seed are identical), an
# evaluation every 8 steps, and the last 3 snapshots averaged; set as a user would, by dotted names.
TINY = apply_overrides(
    TRANSLATION_PROFILES["smoke"],
    [
        "name=tiny",
        "average_last=3",
        "num_threads=1",
        "data.train_limit=400",
        "data.test_limit=12",
        "data.vocab_size=300",
        "data.max_tokens=600",
        "model.d_model=16",
        "model.num_heads=2",
        "model.num_encoder_layers=1",
        "model.num_decoder_layers=1",
        "model.d_ff=32",
        "train.lr=3e-3",
        "train.warmup_steps=10",
        "train.max_steps=24",
        "train.time_budget_s=None",
        "train.eval_every=8",
        f"train.seed={SEED}",
        "train.progress=false",
        "decode.beam_size=2",
    ],
)
# Keys of the summary that measure time (they differ between two identical runs).
TIMINGS = {
    "train_seconds",
    "wall_seconds",
    "tokens_per_s",
    "decode_seconds_greedy",
    "decode_seconds_beam",
}


@pytest.fixture(scope="module")
def run(multi30k_dir: Path) -> TranslationRun:
    return train_translation(multi30k_dir, profile=TINY, device="cpu")


@pytest.fixture(scope="module")
def evaluation(run: TranslationRun) -> TranslationEvaluation:
    return evaluate_translation(run, progress=False)


def _batches(run: TranslationRun, pairs: list[tuple[str, str]], **kwargs: object) -> list:
    tok = run.tokenizer
    ids = encode_pairs(tok, pairs)
    return token_batches(
        ids, run.profile.data.max_tokens, tok.pad_id, tok.bos_id, tok.eos_id, **kwargs
    )


# ----------------------------------------------------------------------------- train_translation


def test_run_holds_the_profiles_data_slices(run: TranslationRun, multi30k_dir: Path) -> None:
    data = load_multi30k(multi30k_dir)
    assert run.train_pairs == data["train"][:400]
    assert run.val_pairs == data["val"]
    assert run.test_pairs == data["test_2016_flickr"][:12]
    assert run.tokenizer.vocab_size == 300 == run.model.config.src_vocab_size
    assert run.profile is TINY and run.seed == SEED and run.device == torch.device("cpu")


def test_run_history_and_throughput_describe_the_training(run: TranslationRun) -> None:
    assert run.steps == len(run.history) == TINY.train.max_steps and run.stop_reason == "max_steps"
    assert [row["step"] for row in run.history] == list(range(1, TINY.train.max_steps + 1))
    assert [row["step"] for row in run.val_history] == [8, 16, 24]
    assert run.steps_per_epoch == len(_batches(run, run.train_pairs, shuffle=True, seed=0))
    assert math.isclose(run.epochs, run.steps / run.steps_per_epoch)
    # tokens counts the source and target tokens of exactly the batches trained on, in their order.
    expected, epoch = [], 0
    while len(expected) < run.steps:
        expected += _batches(run, run.train_pairs, shuffle=True, seed=epoch_seed(SEED, epoch))
        epoch += 1
    assert run.tokens == sum(b.num_src_tokens + b.num_tokens for b in expected[: run.steps])
    assert run.tokens_per_s == pytest.approx(run.tokens / run.train_seconds)
    assert 0 < run.train_seconds < run.wall_seconds
    # The model learns: the validation loss falls, well below a uniform guess over the vocabulary.
    losses = [row["val_loss"] for row in run.val_history]
    assert losses[-1] < losses[0] and losses[-1] < math.log(300)


def test_kept_weights_are_the_candidate_of_lowest_validation_loss(run: TranslationRun) -> None:
    assert not run.model.training, "the trained model is handed back in eval mode"
    assert run.val_loss_last == run.val_history[-1]["val_loss"]
    assert run.val_loss_averaged is not None, "three checkpoints were kept, so an average was tried"
    names = set(run.candidates)
    assert {"last", "average of the last 2", "average of the last 3"} <= names
    assert run.val_loss_averaged == run.candidates["average of the last 3"]
    assert run.val_loss == min(run.candidates.values())
    assert run.candidates[run.checkpoint_choice] == run.val_loss
    expected = int(run.checkpoint_choice[-1]) if run.checkpoint_choice.startswith("average") else 1
    assert run.averaged_checkpoints == expected
    # The model in the run really is the one whose loss the run reports.
    measured = evaluate_loss(run.model, _batches(run, run.val_pairs, shuffle=False))["loss"]
    assert measured == pytest.approx(run.val_loss, rel=1e-5)


def test_training_uses_the_threads_asked_for_then_restores_them(
    multi30k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real_train = translation_training.train

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(torch.get_num_threads())
        return real_train(*args, **kwargs)

    monkeypatch.setattr(translation_training, "train", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        short = apply_overrides(TINY, ["train.max_steps=2", "train.eval_every=None"])
        path = tmp_path / "trained.safetensors"
        # num_threads=1
        done = train_translation(multi30k_dir, profile=short, device="cpu")
        assert seen == [1] and done.threads == 1
        assert torch.get_num_threads() == 2, "the thread setting is restored after training"
    finally:
        torch.set_num_threads(before)
    # save_translation writes a checkpoint `translate` can load, with the training results (no
    # BLEU without an evaluation).
    assert save_translation(done, path) == path and done.checkpoint == path
    _, metadata = read_checkpoint_header(path)
    assert metadata["task"] == "translation" and metadata["decoding"] == done.decoding
    assert metadata["results"]["steps"] == 2 and "bleu" not in metadata["results"]


# ----------------------------------------------------------------------------- checkpoints and
# resume


class _Stopped(Exception):
    """Stands for a crash: raised while the checkpoint of one step is being written."""


def test_a_run_stopped_while_checkpointing_resumes_to_the_uninterrupted_run(
    run: TranslationRun, multi30k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped at step 20, after the evaluations of steps 8 and 16: the resumed run needs both
    evaluations' checkpoints.

    The run averages the checkpoints of its last 3 evaluations (8, 16, 24): the resumed run reads
    the first two from the directory, so its kept weights are those of the uninterrupted ``run``
    (whose checkpoints went to a temporary folder), exactly.
    """
    save_model = training_state.save_checkpoint

    def save_or_stop(model: object, path: object, **metadata: object) -> object:
        if metadata["training"]["step"] == 20:  # type: ignore[index]
            raise _Stopped  # after the training state of step 20, before its model
        return save_model(model, path, **metadata)  # type: ignore[arg-type]

    every = apply_overrides(
        TINY, [f"train.checkpoint_path={tmp_path / 'run'}", "train.checkpoint_every=4"]
    )
    with monkeypatch.context() as patch:
        patch.setattr(training_state, "save_checkpoint", save_or_stop)
        with pytest.raises(_Stopped):
            train_translation(multi30k_dir, every, "cpu")
    evaluated = sorted((tmp_path / "run").glob("step-*.safetensors"))
    assert [p.name for p in evaluated] == ["step-0000008.safetensors", "step-0000016.safetensors"]
    written = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in evaluated]
    resumed = train_translation(multi30k_dir, every, "cpu", resume=True)
    assert resumed.resumed_from_step == 16 and run.resumed_from_step == 0
    # Steps 8 and 16 were not evaluated again (a run started from scratch would have written these
    # anew).
    assert [
        (p.stat().st_ino, p.stat().st_mtime_ns) if p.exists() else None for p in evaluated
    ] == written
    assert run.averaged_checkpoints == resumed.averaged_checkpoints
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), name
    assert (
        resumed.val_history == run.val_history
        and resumed.val_loss_averaged == run.val_loss_averaged
    )
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in run.history]
    assert resumed.tokens == run.tokens, (
        "tokens count the whole run, the epochs before the resumed one too"
    )
    assert resumed.epochs == run.epochs and resumed.stop_reason == "max_steps"


def test_run_directory_checks_its_arguments_and_the_tokenizer(
    run: TranslationRun, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="checkpoint_every"):
        apply_overrides(TINY, ["train.checkpoint_every=0"])
    with pytest.raises(TypeError, match="resume must be True or False"):
        train_translation(tmp_path / "no-data", TINY, "cpu", resume="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resume=True needs train.checkpoint_path"):
        train_translation(tmp_path / "no-data", TINY, "cpu", resume=True)
    # A resumed run whose tokenizer differs was given other data: its state would not fit them.
    in_run = apply_overrides(TINY, [f"train.checkpoint_path={tmp_path / 'run'}"])
    directory = RunDirectory(in_run, resume=False, world=1)
    directory.resume_metadata = {"tokenizer": run.tokenizer.to_json_str()}
    directory.check_tokenizer(run.tokenizer)
    other = train_translation_tokenizer(run.train_pairs[:100], vocab_size=300)
    with pytest.raises(ResumeError, match="tokenizer learnt now differs"):
        directory.check_tokenizer(other)


# ----------------------------------------------------------------------------- evaluate_translation


def test_evaluation_scores_the_translations_it_returns(
    run: TranslationRun, evaluation: TranslationEvaluation
) -> None:
    assert evaluation.sources == [de for de, _ in run.test_pairs]
    assert evaluation.references == [en for _, en in run.test_pairs]
    limits = dict(max_len_a=TINY.decode.max_len_a, max_len_b=TINY.decode.max_len_b)
    assert evaluation.greedy == translate(
        run.model, run.tokenizer, evaluation.sources, DecodeConfig(beam_size=1, **limits)
    )
    assert evaluation.beam == translate(
        run.model,
        run.tokenizer,
        evaluation.sources,
        DecodeConfig(beam_size=2, length_penalty=TINY.decode.length_penalty, **limits),
    )
    assert vars(evaluation.bleu_greedy) == vars(
        corpus_bleu(evaluation.greedy, evaluation.references)
    )
    assert vars(evaluation.bleu_beam) == vars(corpus_bleu(evaluation.beam, evaluation.references))
    assert evaluation.signature.startswith("nrefs:1|") and "tok:13a" in evaluation.signature
    assert evaluation.beam_size == 2 and evaluation.threads == 1
    summary = evaluation.summary()
    assert summary["bleu"] == round(evaluation.bleu_greedy.score, 2)
    rows = zip(
        evaluation.sources, evaluation.references, evaluation.greedy, evaluation.beam, strict=True
    )
    assert (
        summary["examples"]
        == [{"source": s, "reference": r, "greedy": g, "beam": b} for s, r, g, b in rows][:3]
    )


def test_evaluation_of_other_pairs_and_beam_settings(
    run: TranslationRun, evaluation: TranslationEvaluation
) -> None:
    pairs = [list(pair) for pair in run.test_pairs[:4]]  # lists work as pairs too
    other = evaluate_translation(run, pairs, beam_size=3, length_penalty=1.0, progress=False)
    assert other.greedy == evaluation.greedy[:4], (
        "greedy output does not depend on the other sentences"
    )
    assert other.beam_size == 3 and other.length_penalty == 1.0
    assert other.beam == translate(
        run.model,
        run.tokenizer,
        other.sources,
        DecodeConfig(beam_size=3, length_penalty=1.0, max_len_a=1.5, max_len_b=10),
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"pairs": []}, ValueError, "pairs is empty"),
        ({"pairs": [("Ein Hund.", 7)]}, TypeError, "pairs[0]"),
        ({"pairs": ["Ein Hund."]}, TypeError, "pairs[0]"),
        ({"beam_size": 0}, ValueError, "beam_size"),
        ({"threads": 0}, ValueError, "threads"),
    ],
)
def test_evaluate_translation_rejects_bad_arguments(
    run: TranslationRun, kwargs: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        evaluate_translation(run, progress=False, **kwargs)  # type: ignore[arg-type]


def test_evaluate_translation_needs_a_run() -> None:
    with pytest.raises(TypeError, match="run must be a TranslationRun"):
        evaluate_translation({"bleu": 1.0})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"profile": 42}, TypeError, "profile must be"),
        ({"profile": "huge"}, ValueError, "profile='huge'"),
        ({"device": "tpu"}, ValueError, "device='tpu'"),
        ({"resume": 1}, TypeError, "resume must be True or False"),
    ],
)
def test_train_translation_rejects_bad_arguments_before_loading_data(
    tmp_path: Path, kwargs: dict[str, object], error: type[Exception], words: str
) -> None:
    empty = tmp_path / "no-data"  # never reached: the arguments are checked first
    with pytest.raises(error, match=words):
        train_translation(empty, **{"profile": TINY, "device": "cpu", **kwargs})  # type: ignore[arg-type]
    assert not empty.exists()


# ----------------------------------------------------------------------------- the whole run


def test_run_translation_is_train_then_evaluate_then_summary(
    multi30k_dir: Path, run: TranslationRun, evaluation: TranslationEvaluation, tmp_path: Path
) -> None:
    path = tmp_path / "run.safetensors"
    result = run_translation(multi30k_dir, profile=TINY, device="cpu", save=path)
    pieces = translation_summary(run, evaluation)
    assert list(result) == [*pieces, "checkpoint"], "the same keys, in the same order"
    assert {k: v for k, v in result.items() if k not in TIMINGS | {"checkpoint"}} == {
        k: v for k, v in pieces.items() if k not in TIMINGS
    }, "one seed, no time budget: the same training and the same translations"
    assert result["checkpoint"] == str(path) and result["wall_seconds"] >= result["train_seconds"]
    _, metadata = read_checkpoint_header(path)
    bulky = ("val_history", "examples", "config", "checkpoint")
    assert metadata["results"] == {k: v for k, v in result.items() if k not in bulky}


def test_saved_run_translates_like_the_model_in_memory(
    run: TranslationRun, evaluation: TranslationEvaluation, tmp_path: Path
) -> None:
    path = save_translation(run, tmp_path / "saved.safetensors", evaluation)
    assert run.checkpoint == path
    model, tokenizer, metadata = load_translation_checkpoint(path)
    assert metadata["results"]["bleu"] == round(evaluation.bleu_greedy.score, 2)
    assert metadata["decoding"] == run.decoding
    assert (
        translate(model, tokenizer, evaluation.sources[:5], DecodeConfig(beam_size=1))
        == evaluation.greedy[:5]
    )


def _checkpoints(folder: Path, values: dict[int, float]) -> None:
    """Model files of a one-parameter "model", as the training loop names them, by step."""
    folder.mkdir()
    for step, value in values.items():
        save_file({"weight": torch.tensor([[value]])}, str(folder / f"step-{step:07d}.safetensors"))


def test_choose_weights_keeps_an_older_best_checkpoint_and_says_which(tmp_path: Path) -> None:
    # Three "models" of one parameter: the validation loss is the parameter's distance from 1.0.
    model = torch.nn.Linear(1, 1, bias=False)
    values = {10: 0.9, 20: 3.0, 30: 5.0}  # the first evaluation is the best
    _checkpoints(tmp_path / "a", values)
    history = [{"step": step, "val_loss": abs(value - 1.0)} for step, value in values.items()]
    result = TrainResult(eval_history=history, best_step=10)

    def loss(m: torch.nn.Module) -> float:
        return abs(m.weight.item() - 1.0)

    choice = translation_training.choose_weights(model, tmp_path / "a", result, 2, loss)  # type: ignore[arg-type]
    assert choice.candidates == pytest.approx(
        {"last": 4.0, "average of the last 2": 3.0, "best, step 10": 0.1}
    )
    assert choice.name == "best, step 10" and choice.averaged == 1
    assert choice.full_average_loss == pytest.approx(3.0)
    assert model.weight.item() == pytest.approx(0.9)
    # Without an older best, the average of the last two wins over the last weights.
    _checkpoints(tmp_path / "b", {1: 1.5, 2: 0.7})
    history = [{"step": 1, "val_loss": 0.5}, {"step": 2, "val_loss": 0.3}]
    result = TrainResult(eval_history=history, best_step=2)
    choice = translation_training.choose_weights(model, tmp_path / "b", result, 2, loss)  # type: ignore[arg-type]
    assert choice.name == "average of the last 2" and choice.averaged == 2
    assert model.weight.item() == pytest.approx(1.1)


def test_averaged_files_keep_tied_weights_tied(run: TranslationRun, tmp_path: Path) -> None:
    # The source and target embeddings and the output layer are one matrix in the model; a model
    # file stores it once, and the average loads into all three names.
    paths = [save_checkpoint(run.model, tmp_path / f"step-{n:07d}.safetensors") for n in (1, 2)]
    model = copy.deepcopy(run.model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    translation_training._load_weights(model, translation_training._mean_of(paths))
    tied = ["src_embed.embedding.weight", "tgt_embed.embedding.weight", "generator.weight"]
    state = model.state_dict()
    assert len({state[name].data_ptr() for name in tied}) == 1
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(state[name], tensor), name
    with pytest.raises(ValueError, match="do not fit the model"):
        translation_training._load_weights(model, {"no such weight": torch.zeros(1)})


def test_sweep_decoding_scores_every_setting_and_picks_the_best_beam_row(
    run: TranslationRun,
) -> None:
    pairs = run.val_pairs[:6]
    sweep = sweep_decoding(run.model, run.tokenizer, pairs, [2, 3], [0.6, 1.0])
    settings = [(row["beam_size"], row["length_penalty"]) for row in sweep.rows]
    assert settings == [(1, None), (2, 0.6), (2, 1.0), (3, 0.6), (3, 1.0)]
    beam_rows = sweep.rows[1:]
    assert sweep.best in beam_rows and sweep.best["bleu"] == max(row["bleu"] for row in beam_rows)
    # Each row is what translate() + sacreBLEU give for that setting.
    hypotheses = translate(
        run.model,
        run.tokenizer,
        [de for de, _ in pairs],
        DecodeConfig(beam_size=3, length_penalty=1.0),
    )
    assert sweep.rows[-1]["bleu"] == round(
        corpus_bleu(hypotheses, [en for _, en in pairs]).score, 2
    )
    with pytest.raises(ValueError, match="pairs is empty"):
        sweep_decoding(run.model, run.tokenizer, [], [2], [1.0])
