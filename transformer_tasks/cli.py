"""The command line: ``python -m transformer_tasks {copy,train-translation,translate,export-onnx}``.

Training and export commands print their results as one JSON object on the **last line of stdout**
(under ``torchrun``, rank 0 only); mistakes end with exit status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from transformer_lib.runtime import DEVICES, pick_device
from transformer_lib.training.distributed import barrier, cleanup, init_distributed, is_main_process

from .copy import CopyTaskSettings, copy_model_config, run_copy_task
from .export import export_onnx
from .multi30k import Multi30kError
from .translation import (
    TRANSLATION_PROFILES,
    ResumeError,
    apply_overrides,
    budget_settings,
    checkpoint_decoding,
    default_profile,
    load_translation_checkpoint,
    run_translation,
    translate,
    translation_profile,
    write_translation_results,
)

PROG = "python -m transformer_tasks"
TRAIN_TRANSLATION = "train-translation"
TRANSLATE = "translate"
EXPORT_ONNX = "export-onnx"
MADE_BY = f"saved by '{TRAIN_TRANSLATION} --save'"
NEEDS_DIR = "needs --checkpoint-dir DIR (the directory the run writes its checkpoints into)"


class CLIError(Exception):
    """A mistake of the user's, reported as one line on stderr with exit status 2."""


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= low``."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"\s*[+-]?\d+\s*", text) or int(text) < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return int(text)

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its ``--help`` lists the sub-commands)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train and use the Transformer of the book.",
        epilog="Training commands print their results as one JSON object on the last line of "
        "stdout.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_copy(commands)
    _add_train_translation(commands)
    _add_translate(commands)
    _add_export_onnx(commands)
    return parser


def _add_common(command: argparse.ArgumentParser) -> None:
    """The flags of both training commands."""
    command.add_argument(
        "--device", choices=DEVICES, default="auto", help="where to run (default: auto)"
    )
    command.add_argument(
        "--seed", type=_int_at_least(0), default=0, help="random seed (default: 0)"
    )
    command.add_argument(
        "--save", metavar="PATH", help="save the trained model to this .safetensors file"
    )
    command.add_argument(
        "--threads",
        type=_int_at_least(1),
        metavar="N",
        help="CPU threads (default: PyTorch's choice)",
    )
    command.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved configuration as JSON and exit without training",
    )


def _add_copy(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        "copy",
        help="train the copy task (seconds on a CPU)",
        description="Train a small Transformer to copy sequences of 10 symbols until greedy "
        "decoding copies 1,000 held-out sequences exactly (or a step limit).",
    )
    _add_common(command)
    command.add_argument(
        "--max-steps", type=_int_at_least(1), metavar="N", help="step limit (default: the task's)"
    )
    command.add_argument(
        "--grad-accum", type=_int_at_least(1), default=1, metavar="N", help="batches of 64 per step"
    )


def _add_train_translation(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        TRAIN_TRANSLATION,
        help="train German-to-English translation on Multi30k and report sacreBLEU",
        description="Train German-to-English on Multi30k and score test_2016_flickr with "
        "sacreBLEU (greedy and beam search). Stop a run that writes checkpoints "
        "(--checkpoint-dir) at any time (Ctrl-C) and continue it with the same command and "
        "--resume.",
    )
    add = command.add_argument
    steps = _int_at_least(1)
    add(
        "--data-dir",
        metavar="DIR",
        help="the Multi30k files' folder, downloaded if missing (default: $MULTI30K_DIR, else "
        "~/.cache/transformer_lib/multi30k)",
    )
    add(
        "--profile",
        choices=list(TRANSLATION_PROFILES),
        help="smoke (seconds, for the tests), cpu (2,467 steps), gpu (one GPU); "
        "default: gpu on CUDA, else cpu ($TRANSFORMER_PROFILE overrides)",
    )
    budget = command.add_mutually_exclusive_group()
    budget.add_argument(
        "--max-steps", type=steps, metavar="N", help="train exactly N steps, no time limit"
    )
    budget.add_argument(
        "--time-budget", type=steps, metavar="SECONDS", help="train SECONDS of steps, no step limit"
    )
    add(
        "--results",
        metavar="PATH",
        help="also write the results, the machine and date to this JSON",
    )
    add(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="set any field of the configuration after the other flags (repeatable), e.g. "
        "train.lr=2e-3, model.positional=rope, average_last=1; sections: model, train, decode, "
        "data",
    )
    _add_checkpoint_flags(command)
    _add_common(command)


def _add_checkpoint_flags(command: argparse.ArgumentParser) -> None:
    add = command.add_argument
    add(
        "--checkpoint-dir",
        metavar="DIR",
        help="write the resumable training state into DIR every --checkpoint-every steps and at "
        "the end, keeping the newest",
    )
    every = ", ".join(f"{k} {p.train.eval_every}" for k, p in TRANSLATION_PROFILES.items())
    add(
        "--checkpoint-every",
        type=_int_at_least(1),
        metavar="N",
        help=f"steps between two (default: each evaluation, {every})",
    )
    add("--resume", action="store_true", help="continue the run in --checkpoint-dir (same flags)")


def _add_translate(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        TRANSLATE,
        help=f"translate German sentences with a model {MADE_BY}",
        description="Translate German sentences (one output line per sentence).",
    )
    command.add_argument(
        "sentences",
        nargs="+",
        metavar="SENTENCE",
        help='German text, e.g. "Ein Mann fährt Fahrrad."',
    )
    command.add_argument("--checkpoint", required=True, metavar="PATH", help=MADE_BY)
    command.add_argument(
        "--beam",
        type=_int_at_least(1),
        default=1,
        metavar="N",
        help="beam size (default: 1, greedy)",
    )
    command.add_argument(
        "--device", choices=DEVICES, default="auto", help="where to run (default: auto)"
    )


def _add_export_onnx(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser(
        EXPORT_ONNX,
        help=f"export a model {MADE_BY} to ONNX for ONNX Runtime",
        description="Write encoder.onnx, decoder.onnx and tokenizer.json into a folder.",
    )
    command.add_argument("--checkpoint", required=True, metavar="PATH", help=MADE_BY)
    command.add_argument(
        "--out", required=True, metavar="DIR", help="the folder to write them into"
    )


def _device(name: str, training: bool = False) -> torch.device:
    """The device; to train under ``torchrun``, also join the process group (this rank's GPU on
    CUDA).
    """
    try:
        return init_distributed(pick_device(name)) if training else pick_device(name)
    except ValueError as error:
        raise CLIError(str(error)) from None


def _print_json(result: dict[str, Any]) -> None:
    if is_main_process():  # under torchrun, one line from rank 0 only
        print(json.dumps(result), flush=True)


def _dry_run(command: str, config: dict[str, Any]) -> int:
    """Print what a training command would run, resolved, as one JSON line; train nothing."""
    _print_json({"dry_run": True, "command": command, "config": config})
    return 0


def _run_copy(args: argparse.Namespace) -> int:
    settings = CopyTaskSettings(grad_accum=args.grad_accum)
    if args.max_steps is not None:
        settings = replace(settings, max_steps=args.max_steps)
    if args.dry_run:
        config = {
            "settings": asdict(settings),
            "model": copy_model_config().to_dict(),
            "seed": args.seed,
            "num_threads": args.threads,
        }
        return _dry_run("copy", config)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    result = run_copy_task(
        _device(args.device, training=True),
        seed=args.seed,
        save_path=args.save,
        settings=settings,
    )
    if args.save:
        result["checkpoint"] = str(args.save)
    _print_json(result)
    return 0


def _run_train_translation(args: argparse.Namespace) -> int:
    """Run the profile with its budget, then the shorthand flags and the ``--set`` settings, in that
    order.
    """
    # A dry run only resolves the configuration: it joins no process group under torchrun.
    device = _device(args.device, training=not args.dry_run)
    if args.checkpoint_dir is None and args.checkpoint_every is not None:
        raise CLIError(f"--checkpoint-every {NEEDS_DIR}")
    shorthands = {
        "train.seed": args.seed,
        "num_threads": args.threads,
        "train.checkpoint_path": args.checkpoint_dir,
        "train.checkpoint_every": args.checkpoint_every,
    }
    settings = [f"{name}={value}" for name, value in shorthands.items() if value is not None]
    try:  # a bad TRANSFORMER_PROFILE, budget or setting
        name = args.profile or default_profile(device)
        budget = budget_settings(args.max_steps, args.time_budget)
        # One call: the section checks see every new value at once, so that --max-steps 300 with
        # --set train.warmup_steps=100 is valid whatever the profile's own warm-up.
        config = apply_overrides(translation_profile(name), budget + settings + args.set)
    except (TypeError, ValueError) as error:
        raise CLIError(f"--set: {error}" if args.set else str(error)) from None
    if args.resume and config.train.checkpoint_path is None:
        raise CLIError(f"--resume {NEEDS_DIR}")
    if args.dry_run:
        return _dry_run(TRAIN_TRANSLATION, asdict(config))
    try:
        result = run_translation(
            data_dir=args.data_dir,
            profile=config,
            device=device,
            save=args.save,
            resume=args.resume,
        )
    except Multi30kError as error:
        raise CLIError(f"the Multi30k data set is not available: {error}") from None
    except ResumeError as error:
        raise CLIError(f"--checkpoint-dir: {error}") from None
    if args.results and is_main_process():
        write_translation_results(args.results, result, device)
    _print_json(result)
    return 0


def _load(checkpoint: str, device: str | torch.device = "cpu") -> tuple[Any, ...]:
    """:func:`~.load_translation_checkpoint`, its mistakes reported as a :class:`CLIError`."""
    try:
        model, tokenizer, metadata = load_translation_checkpoint(checkpoint, device)
        return model, tokenizer, metadata, checkpoint_decoding(metadata, checkpoint)
    except (FileNotFoundError, ValueError) as error:
        raise CLIError(str(error)) from None


def _run_translate(args: argparse.Namespace) -> int:
    model, tokenizer, _, decode = _load(args.checkpoint, _device(args.device))
    sentences = [s.strip() for s in args.sentences]
    if not all(sentences):
        raise CLIError("every SENTENCE must hold some text")
    decode = replace(decode, beam_size=args.beam)
    print(
        *translate(model, tokenizer, sentences, decode),
        sep="\n",
        flush=True,
    )
    return 0


def _run_export_onnx(args: argparse.Namespace) -> int:
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise CLIError(f"--out {args.out!r} is a file; expected a folder (created if missing)")
    model, tokenizer, *_ = _load(args.checkpoint)
    try:
        paths = export_onnx(model, tokenizer, args.out)
    except ImportError as error:  # the optional dependencies
        raise CLIError(
            f"{error}; exporting needs onnx and onnxscript: pip install 'transformer-lib[export]'"
        ) from None
    _print_json({name: str(path) for name, path in paths.items()})
    return 0


COMMANDS = {"copy": _run_copy, TRAIN_TRANSLATION: _run_train_translation, TRANSLATE: _run_translate}
COMMANDS[EXPORT_ONNX] = _run_export_onnx


def _moved_command(argv: Sequence[str]) -> str | None:
    """What to say to a command of the earlier command line, where ``translate`` trained and
    ``translate-text`` translated; ``None`` for any other.
    """
    if argv and argv[0] == "translate-text":
        return f"translate-text is now '{TRANSLATE}': {PROG} {TRANSLATE} --checkpoint PATH SENTENCE"
    checkpoint = any(a == "--checkpoint" or a.startswith("--checkpoint=") for a in argv)
    asks_help = any(a in ("-h", "--help") for a in argv)
    if argv and argv[0] == TRANSLATE and not checkpoint and not asks_help:
        return (
            f"{TRANSLATE} translates with a trained model ({TRANSLATE} --checkpoint PATH "
            f"SENTENCE); to train one, run: {PROG} {TRAIN_TRANSLATION} --save PATH"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (argparse exits with 2 by itself on bad
    flags).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    moved = _moved_command(argv)
    if moved:
        sys.stderr.write(f"{PROG}: error: {moved}\n")
        return 2
    args = build_parser().parse_args(argv)
    try:
        status = COMMANDS[args.command](args)
        # Under torchrun, no rank leaves the group while another still works (rank 0 writes the
        # results after the last collective), because gloo can abort a process whose peer closes
        # its connections under it. A rank that failed skips this and leaves at once.
        barrier()
        return status
    except CLIError as error:
        sys.stderr.write(f"{PROG} {args.command}: error: {error}\n")
        return 2
    except KeyboardInterrupt:  # say how to continue, when the run wrote checkpoints
        sys.stderr.write(f"{PROG} {args.command}: interrupted\n")
        if getattr(args, "checkpoint_dir", None) is not None:
            sys.stderr.write(
                f"continue from the newest checkpoint in {args.checkpoint_dir} with the same "
                "command and --resume\n"
            )
        return 130
    finally:
        cleanup()  # leave the process group, if torchrun made us join one
