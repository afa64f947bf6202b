"""The checkpoint directory of a translation run: what ``train-translation --checkpoint-dir DIR`` writes
and ``--resume`` continues.

The directory holds

* the newest resumable training state, ``step-N.safetensors`` and ``step-N.train_state.pt``
  (:mod:`~transformer_lib.training.state`), written every ``every`` optimizer steps and at the end.
  Its metadata records the run (profile and seed), the tokenizer and the decoding settings, so the
  model file also translates (``translate --checkpoint DIR/step-N.safetensors``) while the run goes on;
* ``snapshot-K.safetensors``: the weights at the K-th evaluation, for the last ``average_last``
  evaluations, which the run averages at its end (checkpoint averaging, 检查点平均). A resumed run
  needs them too, or its average would differ from the uninterrupted run's.

Resuming first checks that this run is the one that wrote the directory: the same profile and seed,
the same number of processes, and the same tokenizer (learnt from the same data). Continuing the
state of another run would give a model that neither run describes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ...checkpoint import read_checkpoint_header
from ...data.tokenizer import BPETokenizer
from ...files import atomic_write
from ...training import TrainConfig
from ...training.distributed import is_main_process
from ...training.state import latest_checkpoint, read_loop_state
from ...validation import check_positive_int
from .data import SOURCE_LANGUAGE, TARGET_LANGUAGE, TASK
from .profiles import TranslationProfile

DEFAULT_EVERY = 100  # steps between two states when the profile evaluates once per epoch


class ResumeError(ValueError):
    """A checkpoint directory that cannot be used as asked: missing, empty, taken, or another run's."""


@dataclass(frozen=True)
class Checkpointing:
    """Where a translation run writes its resumable state, how often, and whether it continues one.

    Attributes:
        directory: the checkpoint directory (created when a new run starts).
        every: write the state every this many optimizer steps, and always at the end (``None``: at
            every evaluation, the profile's ``eval_every``).
        resume: continue the run whose newest state ``directory`` holds, from that step; ``False``
            starts a new run, which needs a directory without a state in it.
    """

    directory: Path
    every: int | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a path, got {type(self.directory).__name__}")
        object.__setattr__(self, "directory", Path(self.directory))
        if self.every is not None:
            check_positive_int("every", self.every)
        if not isinstance(self.resume, bool):
            raise TypeError(f"resume must be True or False, got {self.resume!r}")


def _run_identity(profile: TranslationProfile, seed: int) -> dict[str, Any]:
    """What must be equal for a run to continue another: its profile and seed, as JSON would hold them."""
    return json.loads(json.dumps({"profile": asdict(profile), "seed": seed}))


def _differences(saved: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """``"profile.max_steps: 900 there, None here"`` for every field that differs."""
    found = []
    for key in sorted(set(saved["profile"]) | set(here["profile"])):
        there, now = saved["profile"].get(key), here["profile"].get(key)
        if there != now:
            found.append(f"profile.{key}: {there!r} there, {now!r} here")
    if saved["seed"] != here["seed"]:
        found.append(f"seed: {saved['seed']!r} there, {here['seed']!r} here")
    return found


class RunDirectory:
    """A translation run's checkpoint directory, opened to start a run or to continue one.

    Opening checks everything that can be checked before the data are loaded: a new run needs a
    directory without a state; a resumed run needs one whose newest state was written by the same
    profile, seed and number of processes. :meth:`check_tokenizer` checks the rest once the
    tokenizer is learnt.
    """

    def __init__(self, checkpointing: Checkpointing, profile: TranslationProfile, seed: int, world: int) -> None:
        self.checkpointing, self.profile, self.identity = checkpointing, profile, _run_identity(profile, seed)
        self.directory = checkpointing.directory
        self.resume_metadata: dict[str, Any] | None = None
        self.loop: dict[str, Any] = {"step": 0, "epoch": 0, "result": {"eval_history": []}}
        if checkpointing.resume:
            self._open_for_resume(world)
        else:
            self._open_for_new_run()
        self.evaluations = len(self.loop["result"]["eval_history"])  # evaluations done (and snapshots taken)

    def _open_for_new_run(self) -> None:
        if self.directory.exists() and not self.directory.is_dir():
            raise ResumeError(f"checkpoint directory {str(self.directory)!r} is a file, not a directory")
        newest = latest_checkpoint(self.directory) if self.directory.is_dir() else None
        if newest is not None:
            raise ResumeError(
                f"checkpoint directory {str(self.directory)!r} already holds the state of a run ({newest.name}): "
                f"continue it with resume (--resume), or give an empty or new directory"
            )
        self.directory.mkdir(parents=True, exist_ok=True)

    def _open_for_resume(self, world: int) -> None:
        if not self.directory.is_dir():
            raise ResumeError(f"cannot resume: checkpoint directory {str(self.directory)!r} does not exist")
        newest = latest_checkpoint(self.directory)
        if newest is None:
            raise ResumeError(
                f"cannot resume: checkpoint directory {str(self.directory)!r} holds no state (no step-N.safetensors "
                f"with its step-N.train_state.pt); start the run without resume"
            )
        try:
            _, metadata = read_checkpoint_header(newest)
            self.loop = read_loop_state(newest)
        except (OSError, ValueError) as error:
            raise ResumeError(f"cannot resume from {str(newest)!r}: {error}") from None
        saved = metadata.get("run")
        if metadata.get("task") != TASK or not isinstance(saved, dict):
            raise ResumeError(f"cannot resume: {str(newest)!r} was not written by a translation run")
        differences = _differences(saved, self.identity)
        if differences:
            raise ResumeError(
                f"cannot resume: checkpoint directory {str(self.directory)!r} was written by another run "
                f"({'; '.join(differences)}); resume with the profile, step or time budget and seed that started it, "
                f"or start a new run in another directory"
            )
        saved_world = metadata.get("training", {}).get("world_size", 1)
        if saved_world != world:
            raise ResumeError(
                f"cannot resume: {str(newest)!r} was written by {saved_world} process(es), this run has {world}"
            )
        self.resume_metadata = metadata

    @property
    def resume_from(self) -> Path | None:
        """What :func:`~.train` resumes from (the directory: its newest state), or ``None`` for a new run."""
        return self.directory if self.resume_metadata is not None else None

    @property
    def step(self) -> int:
        """The step the run continues from (0 for a new run)."""
        return int(self.loop["step"])

    @property
    def epoch(self) -> int:
        """The epoch the run continues in (0 for a new run)."""
        return int(self.loop["epoch"])

    def train_config(self, config: TrainConfig) -> TrainConfig:
        """``config`` writing its state into the directory every ``every`` steps."""
        every = self.checkpointing.every or self.profile.eval_every or DEFAULT_EVERY
        return replace(config, checkpoint_path=str(self.directory), checkpoint_every=every)

    def check_tokenizer(self, tokenizer: BPETokenizer) -> None:
        """A resumed run must have learnt the tokenizer that wrote the state (the same data, the same vocabulary)."""
        if self.resume_metadata is not None and self.resume_metadata.get("tokenizer") != tokenizer.to_json_str():
            raise ResumeError(
                f"cannot resume: the tokenizer learnt now differs from the one in {str(self.directory)!r}; "
                f"the training data differ from those of the run that wrote it (another --data-dir?)"
            )

    def metadata(self, tokenizer: BPETokenizer, decoding: dict[str, Any]) -> dict[str, Any]:
        """What every state's model file records: the task, the run, the tokenizer and the decoding settings."""
        return {
            "task": TASK,
            "source_language": SOURCE_LANGUAGE,
            "target_language": TARGET_LANGUAGE,
            "run": self.identity,
            "tokenizer": tokenizer.to_json_str(),
            "decoding": decoding,
        }

    # -- the snapshots that checkpoint averaging needs ---------------------------------------------

    def _snapshot_path(self, evaluation: int) -> Path:
        return self.directory / f"snapshot-{evaluation:04d}.safetensors"

    def _snapshot_files(self) -> dict[int, Path]:
        found = {}
        for path in self.directory.glob("snapshot-*.safetensors"):
            digits = path.stem.removeprefix("snapshot-")
            if digits.isdigit():
                found[int(digits)] = path
        return found

    def restore_snapshots(self, keep: int) -> list[dict[str, torch.Tensor]]:
        """The snapshots of the last ``keep`` evaluations before the resumed step (none for a new run).

        Snapshots of later evaluations (a run killed after an evaluation, before its next state)
        are removed: the resumed run evaluates those steps again.
        """
        files = self._snapshot_files()
        if is_main_process():
            for evaluation in [k for k in files if k > self.evaluations]:
                files.pop(evaluation).unlink(missing_ok=True)
        wanted = range(self.evaluations - keep + 1, self.evaluations + 1)
        return [load_file(str(files[k])) for k in wanted if k in files]

    def save_snapshot(self, weights: dict[str, torch.Tensor], keep: int) -> None:
        """Write the snapshot of this evaluation and remove those averaging no longer needs (rank 0 writes)."""
        self.evaluations += 1
        if keep < 2 or not is_main_process():  # averaging one snapshot is no averaging
            return
        atomic_write(self._snapshot_path(self.evaluations), lambda tmp: save_file(weights, str(tmp)))
        for evaluation, path in self._snapshot_files().items():
            if evaluation <= self.evaluations - keep:
                path.unlink(missing_ok=True)
