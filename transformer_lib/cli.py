"""The command line: ``python -m transformer_lib {copy,translate,translate-text}``.

Training sub-commands show progress bars on stderr and print, as the **last line of stdout**, one
JSON object with their results, so a script can read them with
``json.loads(output.splitlines()[-1])``. Mistakes (a bad flag, a missing checkpoint or data set, a
checkpoint of the wrong task) end with exit status 2 and a one-line message on stderr.

``copy`` and ``translate`` also run unchanged under ``torchrun`` (data parallelism over several
processes, e.g. ``torchrun --nproc_per_node 4 -m transformer_lib translate``): they join the
process group (gloo on CPUs, NCCL on GPUs, each process on GPU ``LOCAL_RANK``), train together,
and only rank 0 shows progress, writes files and prints the JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
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
from .tasks.translation import TASK, run_translation, translate, translation_profile, write_translation_results
from .training.distributed import cleanup, init_distributed, is_main_process

PROG = "python -m transformer_lib"


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its ``--help`` lists the sub-commands)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train and use the Transformer of the book 'transformer_lib'.",
        epilog="Training commands print their results as one JSON object on the last line of stdout.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--device", choices=DEVICES, default="auto", help="where to run (default: auto)")
        p.add_argument("--seed", type=_non_negative_int, default=0, help="random seed (default: 0)")
        p.add_argument("--save", metavar="PATH", help="save the trained model to this .safetensors file")
        p.add_argument(
            "--threads", type=_positive_int, metavar="N", help="CPU threads for PyTorch (default: PyTorch's choice)"
        )

    copy = sub.add_parser(
        "copy",
        help="train the copy task (seconds on a CPU)",
        description="Train a small Transformer to copy sequences of 10 symbols until greedy decoding copies "
        "1,000 held-out sequences exactly (or a step limit).",
    )
    common(copy)
    copy.add_argument("--max-steps", type=_positive_int, metavar="N", help="step limit (default: the task's)")
    copy.add_argument(
        "--grad-accum",
        type=_positive_int,
        default=1,
        metavar="N",
        help="batches of 64 per optimizer step and process (default: 1)",
    )

    translate = sub.add_parser(
        "translate",
        help="train German-to-English translation on Multi30k and report sacreBLEU",
        description="Train German-to-English on Multi30k and score test_2016_flickr with sacreBLEU "
        "(greedy and beam search).",
    )
    translate.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding (or to download) the six Multi30k .gz files (default: $MULTI30K_DIR, "
        "else ~/.cache/transformer_lib/multi30k)",
    )
    translate.add_argument(
        "--profile",
        choices=PROFILES,
        help="smoke (seconds, for the tests), cpu (900 steps, at most 30 minutes of training), gpu (one GPU); "
        "default: gpu on CUDA, else cpu ($TRANSFORMER_PROFILE overrides; make test sets it to smoke)",
    )
    budget = translate.add_mutually_exclusive_group()
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
    translate.add_argument(
        "--results",
        metavar="PATH",
        help="also write the results, with the machine, the git commit and the date, to this JSON file",
    )
    common(translate)

    text = sub.add_parser(
        "translate-text",
        help="translate German sentences with a checkpoint saved by 'translate --save'",
        description="Translate German sentences (one output line per sentence).",
    )
    text.add_argument("sentences", nargs="+", metavar="SENTENCE", help='German text, e.g. "Ein Mann fährt Fahrrad."')
    text.add_argument("--checkpoint", required=True, metavar="PATH", help="a checkpoint saved by 'translate --save'")
    text.add_argument("--beam", type=_positive_int, default=1, metavar="N", help="beam size (default: 1, greedy)")
    text.add_argument("--device", choices=DEVICES, default="auto", help="where to run (default: auto)")
    return parser


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


def _run_translate(args: argparse.Namespace) -> int:
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
        )
    except Multi30kError as error:
        raise CLIError(f"the Multi30k data set is not available: {error}") from None
    if args.results and is_main_process():
        write_translation_results(args.results, result, device)
    _print_json(result)
    return 0


def load_translation_checkpoint(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> tuple[Transformer, BPETokenizer, dict[str, Any]]:
    """Load a checkpoint saved by ``translate --save``: ``(model, tokenizer, metadata)``.

    Raises :class:`~.CLIError` with a clear message when the file is missing, is not a checkpoint,
    or was saved by another task.
    """
    path = Path(path)
    if not path.is_file():
        raise CLIError(f"checkpoint {str(path)!r} does not exist (train one with: {PROG} translate --save PATH)")
    try:
        _, metadata = read_checkpoint_header(path)
    except ValueError as error:
        raise CLIError(str(error)) from None
    task = metadata.get("task")
    if task != TASK:
        raise CLIError(
            f"checkpoint {str(path)!r} was saved by the {task!r} task, not by {TASK!r}: translate-text needs a "
            f"checkpoint written by '{PROG} translate --save PATH'"
        )
    if not isinstance(metadata.get("tokenizer"), str):
        raise CLIError(f"checkpoint {str(path)!r} has no tokenizer in its metadata; it cannot translate text")
    try:
        tokenizer = BPETokenizer.from_json_str(metadata["tokenizer"])
        model, metadata = load_checkpoint(path, map_location=device)
    except ValueError as error:
        raise CLIError(str(error)) from None
    return model, tokenizer, metadata


def _run_translate_text(args: argparse.Namespace) -> int:
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


COMMANDS = {"copy": _run_copy, "translate": _run_translate, "translate-text": _run_translate_text}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (argparse exits with 2 by itself on bad flags)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CLIError as error:
        sys.stderr.write(f"{PROG} {args.command}: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG} {args.command}: interrupted\n")
        return 130
    finally:
        cleanup()  # leave the process group, if torchrun made us join one
