"""The translation pipeline and the command line, end to end on Multi30k.

The smoke profile trains once as a real subprocess (``python -m transformer_tasks
train-translation``, writing checkpoints), the way the chapters and the benchmarks call it; a second
run of the same command is killed while writing a checkpoint and resumed, and must end with the
first run's weights. The other checks call :func:`transformer_tasks.cli.main` in process. Nothing
here downloads: the data comes from the ``multi30k_dir`` fixture (the repository's ``conftest.py``)
and the one download attempt is aimed at a closed local port.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from transformer_lib import load_checkpoint, read_checkpoint_header, save_checkpoint
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.model import Transformer
from transformer_tasks import DecodeConfig, cli, translation
from transformer_tasks.copy import copy_model_config
from transformer_tasks.multi30k import load_multi30k
from transformer_tasks.translation import data as translation_data
from transformer_tasks.translation import train as translation_training

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[1]
CLOSED_PORT_URL = "http://127.0.0.1:1/"  # nothing listens there: a download attempt fails at once
# a step budget: the smoke profile's model and data, fewer steps (the pipeline is what is tested)
SMOKE_STEPS = 40
CHECKPOINT_EVERY = 5
# The smoke run, flags shared by the uninterrupted run and the run that is killed and resumed.
SMOKE_RUN = [
    "--device",
    "cpu",
    "--seed",
    "0",
    "--max-steps",
    str(SMOKE_STEPS),
    "--checkpoint-every",
    str(CHECKPOINT_EVERY),
]
# `python -c KILLED_AT_STEP STEP transformer_tasks ARGS...` runs the command line and kills its
# process
# (SIGKILL, as an out-of-memory killer or a lost machine would) while it writes the checkpoint of
# step STEP: after that step's training state, before its model, the worst moment to die.
KILLED_AT_STEP = """
import os, signal, sys
from transformer_tasks import cli
from transformer_lib.training import state

kill_at, save_model = int(sys.argv[1]), state.save_checkpoint

def save_or_die(model, path, **metadata):
    if metadata["training"]["step"] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return save_model(model, path, **metadata)

state.save_checkpoint = save_or_die
raise SystemExit(cli.main(sys.argv[3:]))
"""


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "TRANSFORMER_PROFILE": "smoke", "MULTI30K_URL": CLOSED_PORT_URL, **extra}


def _train(multi30k_dir: Path, folder: Path, *flags: str, launch: tuple[str, ...] = ("-m",)) -> Any:
    """``train-translation`` of the smoke run in a subprocess, writing into ``folder``."""
    command = [
        sys.executable,
        *launch,
        "transformer_tasks",
        "train-translation",
        "--data-dir",
        str(multi30k_dir),
    ]
    command += [
        *SMOKE_RUN,
        "--checkpoint-dir",
        str(folder / "checkpoints"),
        "--save",
        str(folder / "model.safetensors"),
    ]
    return subprocess.run(
        command + list(flags),
        cwd=REPO_ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def smoke(multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``train-translation`` with ``TRANSFORMER_PROFILE=smoke`` (as ``make test`` sets it), once for
    the module."""
    folder = tmp_path_factory.mktemp("smoke")
    results = folder / "results.json"
    done = _train(multi30k_dir, folder, "--results", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        "stdout": done.stdout,
        "stderr": done.stderr,
        "checkpoint": folder / "model.safetensors",
        "checkpoints": folder / "checkpoints",
        "results": results,
    }


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the command line in process; return (exit status, stdout, stderr)."""
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse exits by itself on bad flags
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- train-translation


def test_smoke_training_prints_its_results_as_json_on_the_last_line(smoke: dict[str, Any]) -> None:
    lines = smoke["stdout"].strip().splitlines()
    assert len(lines) == 1, "progress must go to stderr, leaving only the JSON line on stdout"
    result = json.loads(lines[-1])
    expected = {
        "bleu",
        "bleu_beam",
        "sacrebleu_signature",
        "train_seconds",
        "wall_seconds",
        "epochs",
        "steps",
    }
    assert expected | {"device", "params", "profile", "val_history"} <= set(result)
    assert result["profile"] == "smoke" and result["device"] == "cpu"
    assert result["threads"] == 1, "the smoke profile runs on one thread"
    for key in ("bleu", "bleu_beam"):
        assert isinstance(result[key], float) and 0.0 <= result[key] <= 100.0
    assert (
        result["sacrebleu_signature"].startswith("nrefs:1|")
        and "tok:13a" in result["sacrebleu_signature"]
    )
    assert result["steps"] == SMOKE_STEPS and result["stop_reason"] == "max_steps"
    assert 0 < result["train_seconds"] < result["wall_seconds"]
    assert result["epochs"] > 0 and result["params"] > 0
    # The model learns: the validation loss falls over training, far below a uniform guess.
    losses = [row["val_loss"] for row in result["val_history"]]
    assert len(losses) >= 2 and losses[-1] < losses[0] < torch.log(torch.tensor(1000.0)).item()
    assert "step" in smoke["stderr"], "the training progress bar belongs on stderr"


def test_results_file_holds_the_printed_results_and_where_they_come_from(
    smoke: dict[str, Any],
) -> None:
    record = json.loads(smoke["results"].read_text(encoding="utf-8"))
    assert record["results"] == json.loads(smoke["stdout"].strip().splitlines()[-1])
    assert (
        record["machine"]["torch"] == torch.__version__ and record["machine"]["logical_cpus"] >= 1
    )
    assert record["date"].startswith("20") and record["date"].endswith("+00:00")
    # a clone: the commit's sha
    assert record["commit"] is None or len(record["commit"].split("+")[0]) == 40
    assert record["results"]["amp"] in ("none", "bf16")


def test_smoke_checkpoint_holds_the_tokenizer_and_the_task(smoke: dict[str, Any]) -> None:
    config, metadata = read_checkpoint_header(smoke["checkpoint"])
    assert metadata["task"] == "translation"
    assert config.share_embeddings and config.src_vocab_size == config.tgt_vocab_size
    tokenizer = BPETokenizer.from_json_str(metadata["tokenizer"])
    assert tokenizer.vocab_size == config.src_vocab_size
    assert (
        tokenizer.decode(tokenizer.encode("Ein Mann fährt Fahrrad.")) == "Ein Mann fährt Fahrrad."
    )


def test_translate_prints_one_translation_per_sentence(smoke: dict[str, Any]) -> None:
    command = [
        sys.executable,
        "-m",
        "transformer_tasks",
        "translate",
        "--checkpoint",
        str(smoke["checkpoint"]),
    ]
    command += ["--device", "cpu", "Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.strip() for line in lines)
    assert "\u2581" not in done.stdout and "<eos>" not in done.stdout, (
        "output must be detokenized text"
    )


def test_batched_translation_equals_one_sentence_at_a_time(smoke: dict[str, Any]) -> None:
    model, metadata = load_checkpoint(smoke["checkpoint"])
    tokenizer = BPETokenizer.from_json_str(metadata["tokenizer"])
    sentences = [
        "Ein Hund.",
        "Eine Frau mit einem roten Hut sitzt auf einer Bank im Park.",
        "Zwei Männer arbeiten.",
    ]
    for beam in (1, 3):
        decode = DecodeConfig(beam_size=beam, batch_size=8)
        together = translation.translate(model, tokenizer, sentences, decode)
        alone = [translation.translate(model, tokenizer, [s], decode)[0] for s in sentences]
        assert together == alone


def test_beam_translate_uses_the_beam(
    smoke: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(
        ["translate", "--checkpoint", str(smoke["checkpoint"]), "--beam", "4", "Ein Hund."], capsys
    )
    assert code == 0, err
    model, metadata = load_checkpoint(smoke["checkpoint"])
    tokenizer = BPETokenizer.from_json_str(metadata["tokenizer"])
    expected = translation.translate(
        model,
        tokenizer,
        ["Ein Hund."],
        DecodeConfig(beam_size=4, length_penalty=metadata["decoding"]["length_penalty"]),
    )
    assert out.splitlines() == expected


def _profile_given(
    flags: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> translation.TranslationConfig:
    """The configuration `train-translation --profile cpu FLAGS` hands to run_translation (which
    does not run)."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(
        cli, "run_translation", lambda **kwargs: seen.update(kwargs) or {"task": "translation"}
    )
    code, _, err = _main(
        ["train-translation", "--profile", "cpu", *flags, "--device", "cpu"], capsys
    )
    assert code == 0, err
    return seen["profile"]


def test_max_steps_is_a_step_budget_that_lifts_the_time_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profile_given(["--max-steps", "700"], monkeypatch, capsys)
    assert (profile.train.max_steps, profile.train.max_epochs, profile.train.time_budget_s) == (
        700,
        None,
        None,
    )
    cpu = translation.TRANSLATION_PROFILES["cpu"]
    limits = {"max_steps": 2467, "max_epochs": None, "time_budget_s": None}
    assert replace(profile, train=replace(profile.train, **limits)) == cpu, "nothing else changed"
    with pytest.raises(ValueError, match="max_steps"):
        translation.translation_profile("cpu", max_steps=0)
    # The configuration is checked when it is built: a linear decay needs more steps than its
    # warm-up.
    code, _, err = _main(
        ["train-translation", "--profile", "cpu", "--max-steps", "7", "--device", "cpu"], capsys
    )
    assert code == 2 and "needs max_steps > warmup_steps; got max_steps=7, warmup_steps=400" in err


def test_time_budget_lifts_the_step_limit_and_excludes_max_steps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profile_given(["--time-budget", "1800"], monkeypatch, capsys)
    assert (profile.train.max_steps, profile.train.max_epochs, profile.train.time_budget_s) == (
        None,
        None,
        1800.0,
    )
    with pytest.raises(SystemExit):
        cli.main(
            ["train-translation", "--profile", "cpu", "--time-budget", "60", "--max-steps", "5"]
        )
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not both"):
        translation.translation_profile("cpu", max_steps=5, time_budget_s=60.0)
    with pytest.raises(ValueError, match="time_budget_s must be a positive number"):
        translation.translation_profile("cpu", time_budget_s=0)


def test_set_changes_any_field_after_the_shorthand_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [
        "--seed",
        "4",
        "--threads",
        "2",
        "--set",
        "train.lr=1e-3",
        "--set",
        "model.positional=rope",
    ]
    profile = _profile_given(
        [*flags, "--set", "decode.beam_size=6", "--set", "train.seed=5"], monkeypatch, capsys
    )
    assert (profile.train.lr, profile.model.positional, profile.decode.beam_size) == (
        1e-3,
        "rope",
        6,
    )
    assert profile.num_threads == 2 and profile.train.seed == 5, "--set comes after --seed"
    cpu = translation.TRANSLATION_PROFILES["cpu"]
    assert (
        profile.train.warmup_steps == cpu.train.warmup_steps
        and profile.model.d_model == cpu.model.d_model
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("train.lrate=1", "section 'train' has no field 'lrate'; it has max_steps"),
        ("optim.lr=1", "unknown section 'optim'"),
        (
            "model.positional=alibi",
            "model.positional='alibi' is not one of ['sinusoidal', 'learned', 'rope']",
        ),
        ("train.warmup_steps=ten", "train.warmup_steps='ten' is not an int"),
        ("model.num_heads=5", "setting 'model.num_heads=5'"),
    ],
)
def test_a_bad_set_is_a_one_line_error_naming_it(
    setting: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        cli, "run_translation", lambda **kwargs: pytest.fail("a bad --set must not start a run")
    )
    code, out, err = _main(
        ["train-translation", "--profile", "cpu", "--device", "cpu", "--set", setting], capsys
    )
    assert code == 2 and out == "" and "Traceback" not in err
    assert "error: --set: " in err and message in err


# ----------------------------------------------------------------------------- stop and resume


def _assert_equal_tensors(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), name


def test_a_killed_run_resumes_to_the_weights_of_the_uninterrupted_run(
    smoke: dict[str, Any], multi30k_dir: Path, tmp_path: Path
) -> None:
    """Killed while writing the checkpoint of step 35, the run resumes from step 30 and ends as the
    smoke run did.

    Exactly (``torch.equal``): one process on one thread does the same operations in the same order
    as the uninterrupted run, so it gets the same floating-point numbers. A resume that lost Adam's
    moments, the schedule, the data position, the dropout generator or the checkpoints averaged at
    the end would not; one that started again from scratch would report no ``resumed_from_step``.
    """
    killed = _train(multi30k_dir, tmp_path, launch=("-c", KILLED_AT_STEP, "35"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    folder = tmp_path / "checkpoints"
    left = [
        "step-0000020.safetensors",
        "step-0000030.safetensors",
        "step-0000030.train_state.pt",
        "step-0000035.train_state.pt",
    ]
    assert sorted(p.name for p in folder.glob("step-*")) == left, (
        "step 20's evaluated weights (averaging reads them), step 30 whole, step 35 half-written"
    )
    assert not (tmp_path / "model.safetensors").exists()
    first_evaluated = folder / "step-0000020.safetensors"
    written = first_evaluated.stat()

    resumed = _train(multi30k_dir, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result, expected = (
        json.loads(run.splitlines()[-1]) for run in (resumed.stdout, smoke["stdout"])
    )
    assert result.pop("resumed_from_step") == 30 and "resumed_from_step" not in expected
    # A run that started again from scratch would reach the same weights: it would also evaluate
    # step 20 again, writing its checkpoint anew (a new file, renamed over the old one).
    again = first_evaluated.stat() if first_evaluated.exists() else None
    assert again is not None and (again.st_ino, again.st_mtime_ns) == (
        written.st_ino,
        written.st_mtime_ns,
    ), "the resumed run trained steps 1-30 again"
    timings = {
        "train_seconds",
        "wall_seconds",
        "tokens_per_s",
        "decode_seconds_greedy",
        "decode_seconds_beam",
    }
    for key in timings | {"checkpoint"}:
        result.pop(key), expected.pop(key)
    configs = [run.pop("config") for run in (result, expected)]
    assert [c["train"].pop("checkpoint_path") for c in configs] == [
        str(folder),
        str(smoke["checkpoints"]),
    ]
    assert configs[0] == configs[1], "the same configuration, but for the directory"
    # losses, BLEU, translations, averaging
    assert result == expected and result["steps"] == SMOKE_STEPS
    # The saved model (the last weights or the average of the last checkpoints), the last
    # checkpoint's weights, Adam's moments and every step's loss are those of the uninterrupted run.
    _assert_equal_tensors(load_file(tmp_path / "model.safetensors"), load_file(smoke["checkpoint"]))
    last = "step-0000040"
    assert sorted(p.name for p in folder.glob("step-*")) == [
        "step-0000020.safetensors",
        f"{last}.safetensors",
        f"{last}.train_state.pt",
    ], "the last two evaluations' weights, and the newest state"
    _assert_equal_tensors(
        load_file(folder / f"{last}.safetensors"),
        load_file(smoke["checkpoints"] / f"{last}.safetensors"),
    )
    state, reference = (
        torch.load(d / f"{last}.train_state.pt", weights_only=True)
        for d in (folder, smoke["checkpoints"])
    )
    for param, moments in reference["optimizer"]["state"].items():
        _assert_equal_tensors(state["optimizer"]["state"][param], moments)
    losses = [[row["loss"] for row in s["loop"]["result"]["history"]] for s in (state, reference)]
    assert losses[0] == losses[1] and len(losses[0]) == SMOKE_STEPS


def test_a_checkpoint_directory_is_continued_only_by_the_run_that_wrote_it(
    smoke: dict[str, Any], multi30k_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = sorted(smoke["checkpoints"].iterdir())
    flags = [
        "--data-dir",
        str(multi30k_dir),
        "--profile",
        "smoke",
        *SMOKE_RUN,
        "--checkpoint-dir",
        str(smoke["checkpoints"]),
    ]
    code, out, err = _main(["train-translation", *flags], capsys)  # a new run would overwrite it
    assert (
        code == 2 and out == "" and "already holds the state of a run" in err and "--resume" in err
    )
    code, out, err = _main(
        ["train-translation", *flags, "--seed", "1", "--max-steps", "50", "--resume"], capsys
    )
    assert code == 2 and out == "" and "written by another run" in err
    assert "train.max_steps: 40 there, 50 here" in err and "train.seed: 0 there, 1 here" in err
    assert sorted(smoke["checkpoints"].iterdir()) == written, "refused before anything was written"


def test_resume_needs_a_directory_with_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ["train-translation", "--profile", "smoke", "--device", "cpu"]
    code, _, err = _main([*run, "--resume"], capsys)
    assert code == 2 and "--resume needs --checkpoint-dir DIR" in err
    code, _, err = _main([*run, "--checkpoint-every", "10"], capsys)
    assert code == 2 and "--checkpoint-every needs --checkpoint-dir DIR" in err
    code, _, err = _main([*run, "--checkpoint-dir", str(tmp_path / "none"), "--resume"], capsys)
    assert code == 2 and "does not exist" in err and "none" in err
    (tmp_path / "empty").mkdir()
    code, _, err = _main([*run, "--checkpoint-dir", str(tmp_path / "empty"), "--resume"], capsys)
    assert code == 2 and "holds no state" in err and "Traceback" not in err
    (tmp_path / "file").write_text("x")
    code, _, err = _main([*run, "--checkpoint-dir", str(tmp_path / "file")], capsys)
    assert code == 2 and "is a file, not a directory" in err


def test_an_interrupted_run_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(**kwargs: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_translation", interrupted)
    folder = str(tmp_path / "run")
    code, out, err = _main(
        ["train-translation", "--profile", "smoke", "--device", "cpu", "--checkpoint-dir", folder],
        capsys,
    )
    assert (
        code == 130 and out == "" and "interrupted" in err and folder in err and "--resume" in err
    )


def test_the_old_program_name_runs_nothing_and_names_the_new_one() -> None:
    """``python -m transformer_lib`` was the command line: an old shell history now only says where
    it went."""
    command = [sys.executable, "-m", "transformer_lib", "train-translation", "--profile", "cpu"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr.strip()
        == "the command line is now: python -m transformer_tasks train-translation --profile cpu"
    )


def test_tokenizer_is_trained_on_the_training_split_only(
    multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[tuple[str, str]]] = []

    class Stop(Exception):
        pass

    def spy(pairs: list[tuple[str, str]], **kwargs: Any) -> BPETokenizer:
        seen.append(list(pairs))
        raise Stop

    monkeypatch.setattr(translation_data, "train_translation_tokenizer", spy)
    for profile in ("smoke", "cpu"):
        with pytest.raises(Stop):
            translation.run_translation(multi30k_dir, profile=profile, device="cpu")
    train = load_multi30k(multi30k_dir, ["train"])["train"]
    assert seen == [train[: translation.TRANSLATION_PROFILES["smoke"].data.train_limit], train]


def test_time_budget_ends_training(multi30k_dir: Path) -> None:
    tiny = translation.apply_overrides(
        translation.TRANSLATION_PROFILES["smoke"],
        [
            "name=tiny",
            "average_last=1",
            "data.train_limit=400",
            "data.test_limit=8",
            "data.vocab_size=300",
            "model.d_model=16",
            "model.num_heads=2",
            "model.num_encoder_layers=1",
            "model.num_decoder_layers=1",
            "model.d_ff=32",
            "train.max_steps=100000",
            "train.time_budget_s=1.5",
            "train.seed=1",
            "train.eval_every=10000",  # only the final evaluation
            "train.progress=false",
            "decode.beam_size=2",
        ],
    )
    result = translation.run_translation(multi30k_dir, profile=tiny, device="cpu")
    # No upper bound on a busy machine's clock (a step can stall for seconds there);
    # test_training.py checks on a clock of its own that the run stops at the first step past it.
    assert result["stop_reason"] == "time_budget"
    assert result["train_seconds"] >= 1.5
    assert result["steps"] < 100_000 and result["test_pairs"] == 8


def test_checkpoint_average_is_the_elementwise_mean(tmp_path: Path) -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor([2, 4])}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor([4, 8])}
    paths = [tmp_path / "a.safetensors", tmp_path / "b.safetensors"]
    for weights, path in zip((a, b), paths, strict=True):
        save_file(weights, str(path))
    mean = translation_training._mean_of(paths)
    torch.testing.assert_close(mean["w"], torch.tensor([2.0, 4.0]))
    assert mean["n"].dtype == torch.int64 and mean["n"].tolist() == [3, 6]


# ----------------------------------------------------------------------------- copy


def test_copy_command_prints_json_and_saves_a_copy_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "copy.safetensors"
    argv = [
        "copy",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--max-steps",
        "3",
        "--seed",
        "1",
        "--save",
        str(path),
    ]
    code, out, err = _main(argv, capsys)
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert {"exact_match", "steps", "train_seconds", "wall_seconds", "device", "params"} <= set(
        result
    )
    assert result["steps"] == 3 and 0.0 <= result["exact_match"] <= 1.0
    assert read_checkpoint_header(path)[1]["task"] == "copy"


# ----------------------------------------------------------------------------- errors


def test_help_lists_the_sub_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "transformer_tasks", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    for command in ("copy", "train-translation", "translate"):
        assert command in done.stdout
    assert "translate-text" not in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["fly"],
        ["train-translation", "--profile", "huge"],
        ["train-translation", "--device", "tpu"],
        ["train-translation", "--checkpoint-dir", "runs/x", "--checkpoint-every", "0"],
        ["copy", "--seed", "abc"],
        ["copy", "--seed", "-1"],
        ["translate", "--checkpoint", "x.safetensors"],  # no sentence
        ["translate", "--checkpoint", "x.safetensors", "--beam", "0", "Hallo"],
    ],
)
def test_bad_flags_exit_2_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(argv, capsys)
    assert code == 2
    assert "usage:" in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["translate-text", "--checkpoint", "x.safetensors", "Hallo"], "translate --checkpoint"),
        (["translate", "--profile", "cpu"], "train-translation"),
        (["translate", "Hallo"], "train-translation"),
    ],
)
def test_the_earlier_forms_name_the_command_that_replaced_them(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(argv, capsys)
    assert code == 2 and out == ""
    assert names in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_dry_run_prints_the_resolved_configuration_and_trains_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRANSFORMER_PROFILE", raising=False)

    def no_training(**_: Any) -> dict[str, Any]:
        raise AssertionError("a dry run must not train")

    monkeypatch.setattr(cli, "run_translation", no_training)
    argv = ["train-translation", "--profile", "cpu", "--seed", "3", "--max-steps", "700"]
    code, out, _ = _main([*argv, "--set", "train.lr=1e-3", "--dry-run"], capsys)
    assert code == 0
    printed = json.loads(out.strip().splitlines()[-1])
    expected = translation.apply_overrides(
        translation.translation_profile("cpu", max_steps=700), ["train.seed=3", "train.lr=1e-3"]
    )
    assert printed["dry_run"] is True and printed["config"] == json.loads(
        json.dumps(dataclasses.asdict(expected))
    )


def test_a_dry_run_of_the_copy_task_prints_its_settings_and_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "run_copy_task", lambda *a, **k: pytest.fail("a dry run trains"))
    code, out, _ = _main(["copy", "--max-steps", "20", "--grad-accum", "2", "--dry-run"], capsys)
    config = json.loads(out.strip().splitlines()[-1])["config"]
    assert code == 0 and config["model"] == copy_model_config().to_dict()
    assert (config["settings"]["max_steps"], config["settings"]["grad_accum"]) == (20, 2)


def test_copy_checkpoint_is_refused_by_translate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = save_checkpoint(
        Transformer(copy_model_config()), tmp_path / "copy.safetensors", task="copy"
    )
    code, out, err = _main(["translate", "--checkpoint", str(path), "Ein Hund."], capsys)
    assert code == 2 and out == ""
    assert "'copy' task" in err and "train-translation --save" in err and "Traceback" not in err


def test_missing_or_corrupted_checkpoint_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(
        ["translate", "--checkpoint", str(tmp_path / "none.safetensors"), "Hallo"], capsys
    )
    assert code == 2 and "does not exist" in err and "none.safetensors" in err
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header")
    code, _, err = _main(["translate", "--checkpoint", str(broken), "Hallo"], capsys)
    assert code == 2 and "broken.safetensors" in err and "Traceback" not in err


def test_missing_dataset_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MULTI30K_URL", CLOSED_PORT_URL)
    empty = tmp_path / "no-data"
    argv = ["train-translation", "--data-dir", str(empty), "--profile", "smoke", "--device", "cpu"]
    code, out, err = _main(argv, capsys)
    assert code == 2 and out == ""
    assert "Multi30k" in err and "--data-dir" in err and "MULTI30K_DIR" in err and str(empty) in err
    assert not empty.exists() or not any(empty.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(["copy", "--device", "cuda", "--max-steps", "1"], capsys)
    assert code == 2 and out == "" and "not available" in err and "Traceback" not in err
