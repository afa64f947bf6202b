"""The checkpoint directory of a translation run (``train.checkpoint_path``, ``--checkpoint-dir``).

It holds what the training loop keeps (:mod:`~transformer_lib.training.state`): the newest
training state, and the model files of the last ``average_last`` checkpoints and of the best
evaluation so far (the lowest validation loss), from which the run chooses its final weights (a
resumed run too). A run only resumes a directory written with its configuration
(:func:`run_identity`), processes and tokenizer.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields, replace
from pathlib import Path
from typing import Any

from transformer_lib.checkpoint import read_checkpoint_header
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.training.state import latest_checkpoint, read_loop_state

from .data import TASK, checkpoint_metadata
from .profiles import SECTIONS, TranslationConfig

DEFAULT_EVERY = 100  # steps between two states when the run evaluates once per epoch
# Settings a resumed run may change: none of them changes the trained weights.
MAY_DIFFER = (
    "train.checkpoint_path",
    "train.checkpoint_every",
    "train.progress",
    "data.test_limit",
    "decode.",
)


class ResumeError(ValueError):
    """A checkpoint directory that cannot be used as asked: missing, empty, taken, or another
    run's.
    """


def run_identity(config: TranslationConfig) -> dict[str, Any]:
    """What must be equal for a run to continue another, as ``{"train.lr": 0.002, ...}`` (JSON
    values).
    """
    tree = asdict(config)
    flat = {f"{s}.{k}": v for s in SECTIONS for k, v in tree.pop(s).items()} | tree
    kept = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in flat.items()
        if not k.startswith(MAY_DIFFER)
    }
    return dict(sorted(kept.items()))


def _default(key: str) -> Any:
    """The default value of a setting (``"train.lr"``), as :func:`run_identity` writes it (``None``
    when it has none).
    """
    section, _, name = key.rpartition(".")
    owner = SECTIONS.get(section, TranslationConfig)
    for f in fields(owner):
        if f.name == name and f.default is not MISSING:
            return list(f.default) if isinstance(f.default, tuple) else f.default
    return None


def identity_differences(saved: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """The settings in which two run identities differ, as ``"key: value there, value here"``.

    A setting that ``saved`` lacks (a run written before the setting existed) counts as its default:
    a new setting left at its default does not change the run.
    """
    differences = []
    for key in sorted(saved.keys() | here.keys()):
        there = saved[key] if key in saved else _default(key)
        if there != here.get(key):
            differences.append(f"{key}: {there!r} there, {here.get(key)!r} here")
    return differences


class RunDirectory:
    """A run's checkpoint directory, opened to start a run (it must hold no state) or to continue
    one.
    """

    def __init__(self, config: TranslationConfig, resume: bool, world: int) -> None:
        if config.train.checkpoint_path is None:
            raise ValueError("a checkpoint directory needs train.checkpoint_path")
        self.identity = run_identity(config)
        self.directory = Path(config.train.checkpoint_path)
        # writing a state every checkpoint_every steps (default: at every evaluation)
        train = config.train
        self.train = replace(
            train, checkpoint_every=train.checkpoint_every or train.eval_every or DEFAULT_EVERY
        )
        self.resume_metadata: dict[str, Any] | None = None
        loop: dict[str, Any] = {"step": 0, "epoch": 0, "result": {"eval_history": []}}
        where = f"checkpoint directory {str(self.directory)!r}"
        if self.directory.exists() and not self.directory.is_dir():
            raise ResumeError(f"{where} is a file, not a directory")
        newest = latest_checkpoint(self.directory) if self.directory.is_dir() else None
        if resume and not self.directory.exists():
            raise ResumeError(f"cannot resume: {where} does not exist")
        if resume and newest is None:
            raise ResumeError(
                f"cannot resume: {where} holds no state (no step-N.safetensors with its "
                "step-N.train_state.pt); start the run without resume"
            )
        if resume and newest is not None:
            loop = self._check_resumable(newest, world)
        elif newest is not None:
            raise ResumeError(
                f"{where} already holds the state of a run ({newest.name}): "
                "continue it with resume (--resume), or give an empty or new directory"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        # where the run continues (0, 0: afresh)
        self.step, self.epoch = int(loop["step"]), int(loop["epoch"])
        self.eval_history: list[dict[str, Any]] = loop["result"]["eval_history"]
        # what train() resumes from: its newest state
        self.resume_from = self.directory if resume else None

    def _check_resumable(self, newest: Path, world: int) -> dict[str, Any]:
        """Check that the newest state was written by this run; return its loop state."""
        try:
            _, metadata = read_checkpoint_header(newest)
            loop = read_loop_state(newest)
        except (OSError, ValueError) as error:
            raise ResumeError(f"cannot resume from {str(newest)!r}: {error}") from None
        saved = metadata.get("run")
        if metadata.get("task") != TASK or not isinstance(saved, dict):
            raise ResumeError(
                f"cannot resume: {str(newest)!r} was not written by a translation run"
            )
        differences = identity_differences(saved, self.identity)
        if differences:
            raise ResumeError(
                f"cannot resume: {str(self.directory)!r} was written by another run "
                f"({'; '.join(differences)}); resume with the settings that started it, or start a "
                "new run in another directory"
            )
        saved_world = metadata.get("training", {}).get("world_size", 1)
        if saved_world != world:
            raise ResumeError(
                f"cannot resume: {str(newest)!r} was written by {saved_world} process(es), "
                f"this run has {world}"
            )
        self.resume_metadata = metadata
        return loop

    def check_tokenizer(self, tokenizer: BPETokenizer) -> None:
        """A resumed run must have learnt the tokenizer that wrote the state (the same data, the
        same vocabulary).
        """
        if (
            self.resume_metadata is not None
            and self.resume_metadata.get("tokenizer") != tokenizer.to_json_str()
        ):
            raise ResumeError(
                "cannot resume: the tokenizer learnt now differs from the one in "
                f"{str(self.directory)!r}; the training data differ from those of the run that "
                "wrote it (another --data-dir?)"
            )

    def metadata(self, tokenizer: BPETokenizer, decoding: dict[str, Any]) -> dict[str, Any]:
        """What every state's model file records: :func:`~.checkpoint_metadata` and the run's
        settings.
        """
        return {**checkpoint_metadata(tokenizer, decoding), "run": self.identity}
