"""The command line: ``python -m transformer_lib {copy,train-translation,translate}``.

* ``copy`` trains the copy task;
* ``train-translation`` trains German-to-English translation on Multi30k and scores it;
* ``translate`` translates German sentences with a model that ``train-translation --save`` wrote.

Training sub-commands show progress bars on stderr and print, as the **last line of stdout**, one
JSON object with their results, so a script can read them with
``json.loads(output.splitlines()[-1])``. Mistakes (a bad flag, a missing checkpoint or data set, a
checkpoint of the wrong task) end with exit status 2 and a one-line message on stderr.

A long ``train-translation`` run survives being stopped: with ``--checkpoint-dir DIR`` it writes its
resumable state there every N steps and at the end, and the same command with ``--resume`` continues
from the newest state (:mod:`~transformer_lib.tasks.translation.checkpoints`).

Until this version ``translate`` trained and ``translate-text`` translated. The old names are
refused with a message naming the new command, so that a command from an old shell history neither
starts a 30-minute training nor silently does something else.

``copy`` and ``train-translation`` also run unchanged under ``torchrun`` (data parallelism over several
processes, e.g. ``torchrun --nproc_per_node 4 -m transformer_lib train-translation``): they join the
process group (gloo on CPUs, NCCL on GPUs, each process on GPU ``LOCAL_RANK``), train together,
and only rank 0 shows progress, writes files and prints the JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .checkpoint import load_checkpoint, read_checkpoint_header
from .data.multi30k import Multi30kError
from .data.tokenizer import BPETokenizer
from .model import Transformer
from .runtime import DEVICES, PROFILES, default_profile, pick_device
from .tasks.copy import CopyTaskSettings, run_copy_task
from .tasks.translation import (
    TASK,
    TRANSLATION_PROFILES,
    Checkpointing,
    ResumeError,
    run_translation,
    translate,
    translation_profile,
    write_translation_results,
)
from .training.distributed import cleanup, init_distributed, is_main_process

PROG = "python -m transformer_lib"
TRAIN_TRANSLATION, TRANSLATE = "train-translation", "translate"
# The flags only training has: given to 'translate', they mark a command written for its old meaning.
TRAINING_FLAGS = (
    "--data-dir", "--profile", "--max-steps", "--time-budget", "--results", "--seed", "--save", "--threads",
    "--checkpoint-dir", "--checkpoint-every", "--resume",
)  # fmt: skip


class CLIError(Exception):
    """A mistake of the user's, reported as one line on stderr with exit status 2."""


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected an integer >= 1, got 0")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    """The flags of both training commands."""
    p.add_argument("--device", choices=DEVICES, default="auto", help="where to run (default: auto)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="random seed (default: 0)")
    p.add_argument("--save", metavar="PATH", help="save the trained model to this .safetensors file")
    p.add_argument(
        "--threads", type=_positive_int, metavar="N", help="CPU threads for PyTorch (default: PyTorch's choice)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its ``--help`` lists the sub-commands)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train and use the Transformer of the book 'transformer_lib'.",
        epilog="Training commands print their results as one JSON object on the last line of stdout.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    copy = sub.add_parser(
        "copy",
        help="train the copy task (seconds on a CPU)",
        description="Train a small Transformer to copy sequences of 10 symbols until greedy decoding copies "
        "1,000 held-out sequences exactly (or a step limit).",
    )
    _add_common(copy)
    copy.add_argument("--max-steps", type=_positive_int, metavar="N", help="step limit (default: the task's)")
    copy.add_argument(
        "--grad-accum",
        type=_positive_int,
        default=1,
        metavar="N",
        help="batches of 64 per optimizer step and process (default: 1)",
    )

    _add_train_translation(sub)
    _add_translate(sub)
    return parser


def _add_train_translation(sub: Any) -> None:
    train_cmd = sub.add_parser(
        TRAIN_TRANSLATION,
        help="train German-to-English translation on Multi30k and report sacreBLEU",
        description="Train German-to-English on Multi30k and score test_2016_flickr with sacreBLEU "
        "(greedy and beam search). Stop a long run at any time (Ctrl-C) when it writes checkpoints "
        "(--checkpoint-dir), and continue it with the same command and --resume.",
    )
    train_cmd.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding (or to download) the six Multi30k .gz files (default: $MULTI30K_DIR, "
        "else ~/.cache/transformer_lib/multi30k)",
    )
    train_cmd.add_argument(
        "--profile",
        choices=PROFILES,
        help="smoke (seconds, for the tests), cpu (900 steps, at most 30 minutes of training), gpu (one GPU); "
        "default: gpu on CUDA, else cpu ($TRANSFORMER_PROFILE overrides; make test sets it to smoke)",
    )
    budget = train_cmd.add_mutually_exclusive_group()
    budget.add_argument(
        "--max-steps",
        type=_positive_int,
        metavar="N",
        help="train exactly N optimizer steps, instead of the profile's limits",
    )
    budget.add_argument(
        "--time-budget",
        type=_positive_int,
        metavar="SECONDS",
        help="train for SECONDS of training steps, with no step limit, instead of the profile's limits",
    )
    train_cmd.add_argument(
        "--results",
        metavar="PATH",
        help="also write the results, with the machine, the git commit and the date, to this JSON file",
    )
    _add_checkpoint_flags(train_cmd)
    _add_common(train_cmd)


def _add_checkpoint_flags(p: argparse.ArgumentParser) -> None:
    """The flags that let a long training run stop and continue."""
    p.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="write the resumable training state (weights, Adam, schedule, data position, random generators) "
        "into DIR every --checkpoint-every steps and at the end, keeping the newest",
    )
    p.add_argument(
        "--checkpoint-every",
        type=_positive_int,
        metavar="N",
        help="steps between two checkpoints (default: the profile's evaluation interval: "
        + ", ".join(f"{name} {profile.eval_every}" for name, profile in TRANSLATION_PROFILES.items())
        + ")",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose newest state --checkpoint-dir holds; give the flags that started it",
    )


def _add_translate(sub: Any) -> None:
    text = sub.add_parser(
        TRANSLATE,
        help=f"translate German sentences with a model saved by '{TRAIN_TRANSLATION} --save'",
        description="Translate German sentences (one output line per sentence).",
    )
    text.add_argument("sentences", nargs="+", metavar="SENTENCE", help='German text, e.g. "Ein Mann fährt Fahrrad."')
    text.add_argument(
        "--checkpoint", required=True, metavar="PATH", help=f"a model saved by '{TRAIN_TRANSLATION} --save'"
    )
    text.add_argument("--beam", type=_positive_int, default=1, metavar="N", help="beam size (default: 1, greedy)")
    text.add_argument("--device", choices=DEVICES, default="auto", help="where to run (default: auto)")


def _device(name: str) -> torch.device:
    try:
        return pick_device(name)
    except ValueError as error:
        raise CLIError(str(error)) from None


def _training_device(name: str) -> torch.device:
    """The device to train on; under ``torchrun``, also join the process group (this rank's GPU on CUDA)."""
    device = _device(name)
    try:
        return init_distributed(device)
    except ValueError as error:
        raise CLIError(str(error)) from None


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        torch.set_num_threads(threads)


def _print_json(result: dict[str, Any]) -> None:
    if not is_main_process():  # under torchrun, one line from rank 0 only
        return
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _run_copy(args: argparse.Namespace) -> int:
    _set_threads(args.threads)
    device = _training_device(args.device)
    result = run_copy_task(
        device=device,
        seed=args.seed,
        max_steps=args.max_steps,
        save_path=args.save,
        settings=CopyTaskSettings(grad_accum=args.grad_accum),
    )
    if args.save:
        result["checkpoint"] = str(args.save)
    _print_json(result)
    return 0


def _checkpointing(args: argparse.Namespace) -> Checkpointing | None:
    if args.checkpoint_dir is None:
        if args.resume or args.checkpoint_every is not None:
            flag = "--resume" if args.resume else "--checkpoint-every"
            raise CLIError(f"{flag} needs --checkpoint-dir DIR (the directory the run writes its checkpoints into)")
        return None
    return Checkpointing(Path(args.checkpoint_dir), every=args.checkpoint_every, resume=args.resume)


def _run_train_translation(args: argparse.Namespace) -> int:
    checkpoints = _checkpointing(args)
    device = _training_device(args.device)
    try:
        profile = translation_profile(
            args.profile or default_profile(device), max_steps=args.max_steps, time_budget_s=args.time_budget
        )
    except ValueError as error:  # a bad TRANSFORMER_PROFILE
        raise CLIError(str(error)) from None
    try:
        result = run_translation(
            data_dir=args.data_dir,
            profile=profile,
            device=device,
            seed=args.seed,
            save=args.save,
            threads=args.threads,
            checkpoints=checkpoints,
        )
    except Multi30kError as error:
        raise CLIError(f"the Multi30k data set is not available: {error}") from None
    except ResumeError as error:
        raise CLIError(f"--checkpoint-dir: {error}") from None
    if args.results and is_main_process():
        write_translation_results(args.results, result, device)
    _print_json(result)
    return 0


def load_translation_checkpoint(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> tuple[Transformer, BPETokenizer, dict[str, Any]]:
    """Load a checkpoint saved by ``train-translation --save``: ``(model, tokenizer, metadata)``.

    Raises :class:`~.CLIError` with a clear message when the file is missing, is not a checkpoint,
    or was saved by another task.
    """
    path = Path(path)
    if not path.is_file():
        raise CLIError(
            f"checkpoint {str(path)!r} does not exist (train one with: {PROG} {TRAIN_TRANSLATION} --save PATH)"
        )
    try:
        _, metadata = read_checkpoint_header(path)
    except ValueError as error:
        raise CLIError(str(error)) from None
    task = metadata.get("task")
    if task != TASK:
        raise CLIError(
            f"checkpoint {str(path)!r} was saved by the {task!r} task, not by {TASK!r}: {TRANSLATE} needs a "
            f"checkpoint written by '{PROG} {TRAIN_TRANSLATION} --save PATH'"
        )
    if not isinstance(metadata.get("tokenizer"), str):
        raise CLIError(f"checkpoint {str(path)!r} has no tokenizer in its metadata; it cannot translate text")
    try:
        tokenizer = BPETokenizer.from_json_str(metadata["tokenizer"])
        model, metadata = load_checkpoint(path, map_location=device)
    except ValueError as error:
        raise CLIError(str(error)) from None
    return model, tokenizer, metadata


def _run_translate(args: argparse.Namespace) -> int:
    device = _device(args.device)
    model, tokenizer, metadata = load_translation_checkpoint(args.checkpoint, device)
    decoding = metadata.get("decoding", {})
    sentences = [s.strip() for s in args.sentences]
    if not all(sentences):
        raise CLIError("every SENTENCE must hold some text")
    outputs = translate(
        model,
        tokenizer,
        sentences,
        beam_size=args.beam,
        length_penalty=float(decoding.get("length_penalty", 0.6)),
        max_len_a=float(decoding.get("max_len_a", 1.5)),
        max_len_b=int(decoding.get("max_len_b", 10)),
    )
    for line in outputs:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return 0


COMMANDS = {"copy": _run_copy, TRAIN_TRANSLATION: _run_train_translation, TRANSLATE: _run_translate}


def _renamed(argv: Sequence[str]) -> str | None:
    """The message for a command written for the old names (``translate`` trained, ``translate-text``
    translated), or ``None``.

    ``translate`` is refused when it looks like a training command: a training flag, or no
    ``--checkpoint`` (plain ``translate`` used to start the default training run).
    """
    if not argv:
        return None
    command, rest = argv[0], list(argv[1:])
    flags = {arg.split("=", 1)[0] for arg in rest if arg.startswith("--")}
    if command == "translate-text":
        return f"'translate-text' is now called '{TRANSLATE}': run {PROG} {TRANSLATE} {shlex.join(rest)}".rstrip()
    if command == TRANSLATE and not flags & {"--help"} and "-h" not in rest:
        if flags & set(TRAINING_FLAGS) or "--checkpoint" not in flags:
            return (
                f"'{TRANSLATE}' translates sentences now ({PROG} {TRANSLATE} --checkpoint PATH SENTENCE...); "
                f"to train a translation model, what '{TRANSLATE}' did before, run: "
                f"{PROG} {TRAIN_TRANSLATION} {shlex.join(rest)}".rstrip()
            )
    return None


def _interrupted(args: argparse.Namespace) -> str:
    """What to say after Ctrl-C: how to continue, when the run wrote checkpoints."""
    message = f"{PROG} {args.command}: interrupted\n"
    if getattr(args, "checkpoint_dir", None) is not None:
        message += f"continue from the newest checkpoint in {args.checkpoint_dir} with the same command and --resume\n"
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (argparse exits with 2 by itself on bad flags)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    renamed = _renamed(argv)
    if renamed is not None:
        sys.stderr.write(f"{PROG} {argv[0]}: error: {renamed}\n")
        return 2
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CLIError as error:
        sys.stderr.write(f"{PROG} {args.command}: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(_interrupted(args))
        return 130
    finally:
        cleanup()  # leave the process group, if torchrun made us join one
