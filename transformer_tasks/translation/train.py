"""Steps 2-3 of the translation pipeline: train, then keep the weights of lowest validation loss
among the last, the averages of the last snapshots and the best one (:func:`choose_weights`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from transformer_lib.data.batching import Batch, batch_loader, epoch_seed
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.model import Transformer
from transformer_lib.runtime import pick_device, set_seed, torch_threads
from transformer_lib.training import TrainResult, evaluate_loss, train
from transformer_lib.training.distributed import (
    is_distributed,
    main_process_first,
    world_size,
)

from ..multi30k import load_multi30k
from .checkpoints import RunDirectory
from .data import TranslationData, prepare_translation_data
from .profiles import TranslationConfig, default_profile, translation_profile


def _average_state_dicts(snapshots: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several ``state_dict`` snapshots of the same model.

    A tensor that several names share in the first snapshot (tied weights: one embedding matrix for
    the source, the target and the output layer) is averaged once, and the names share the mean.
    """
    means: dict[tuple[Any, ...], torch.Tensor] = {}
    average = {}
    for name, first in snapshots[0].items():
        key = _storage_key(first)
        if key not in means:
            stacked = torch.stack([snap[name].float() for snap in snapshots])  # (k, *shape)
            means[key] = stacked.mean(0).to(first.dtype)
        average[name] = means[key]
    return average


def _storage_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    """What tells apart the tensors of a ``state_dict``: two names with one key hold one tensor."""
    return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())


def _weights_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s ``state_dict`` on the CPU. A tensor held under several names (tied
    weights) is copied once and shared by its names, as in the model: the cpu profile's embedding
    matrix is a third of its weights, and 13 snapshots are kept.
    """
    copies: dict[tuple[Any, ...], torch.Tensor] = {}
    snapshot = {}
    for name, tensor in model.state_dict().items():
        key = _storage_key(tensor)
        if key not in copies:
            copies[key] = tensor.detach().to("cpu", copy=True)
        snapshot[name] = copies[key]
    return snapshot


@dataclass
class TranslationRun:
    """What :func:`~.train_translation` returns: the trained model and everything about its
    training.

    Attributes:
        model: the :class:`~.Transformer` (eval mode) with the weights ``checkpoint_choice`` names.
        steps_per_epoch: batches in one pass over ``train_pairs`` (of each process).
        averaged_checkpoints: snapshots averaged into ``model`` (1: one snapshot, the last or the
            best).
        val_loss_last, val_loss_averaged: validation loss of the last weights and of the average of
            all the kept snapshots (``None`` with fewer than two snapshots).
        checkpoint_choice: which weights ``model`` holds: ``"last"``, ``"average of the last k"`` or
            ``"best, step s"``, the candidate with the lowest validation loss
            (:func:`choose_weights`).
        candidates: every candidate's validation loss, by name.
        resumed_from_step: the step of the checkpoint this run continued from (0: it started
            afresh).
    """

    model: Transformer
    tokenizer: BPETokenizer
    profile: TranslationConfig
    result: TrainResult
    device: torch.device
    threads: int
    train_pairs: list[tuple[str, str]]
    val_pairs: list[tuple[str, str]]
    test_pairs: list[tuple[str, str]]
    steps_per_epoch: int
    averaged_checkpoints: int
    val_loss_last: float
    val_loss_averaged: float | None
    wall_seconds: float
    checkpoint_choice: str = "last"
    candidates: dict[str, float] = field(default_factory=dict)
    checkpoint: Path | None = None
    world_size: int = 1
    resumed_from_step: int = 0

    @property
    def seed(self) -> int:
        """The seed of the initial weights, the dropout and the order of the batches
        (``train.seed``).
        """
        return self.profile.train.seed

    @property
    def stop_reason(self) -> str:
        """Why training stopped (``"time_budget"``, ``"max_steps"``, ...)."""
        return self.result.stop_reason

    @property
    def history(self) -> list[dict[str, float]]:
        """A dict per optimizer step, with ``step``, ``epoch``, ``loss``, ``lr`` and
        ``tokens_per_s``.
        """
        return self.result.history

    @property
    def val_history(self) -> list[dict[str, float]]:
        """A dict per evaluation, with ``step``, ``epoch``, ``val_loss`` and ``val_perplexity``."""
        return self.result.eval_history

    @property
    def steps(self) -> int:
        """Optimizer steps done."""
        return self.result.steps

    @property
    def epochs(self) -> float:
        """Passes over the training data (a fraction when training ended midway through one)."""
        return self.result.steps / self.steps_per_epoch

    @property
    def train_seconds(self) -> float:
        """Seconds spent in training steps (validation and averaging excluded)."""
        return self.result.train_seconds

    @property
    def tokens(self) -> int:
        """Source + target tokens trained on, padding excluded (all processes, all epochs)."""
        return self.result.tokens

    @property
    def tokens_per_s(self) -> float:
        """Source + target tokens (padding excluded) per second of training steps."""
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    @property
    def val_loss(self) -> float:
        """Validation loss of the weights kept in ``model``."""
        return self.candidates.get(self.checkpoint_choice, self.val_loss_last)

    @property
    def decoding(self) -> dict[str, Any]:
        """The profile's decoding settings, as stored in a saved checkpoint."""
        return asdict(self.profile.decode)


def _epoch_batches(
    data: TranslationData, profile: TranslationConfig, device: torch.device, epoch: int
) -> DataLoader[Batch]:
    """One epoch's shuffled training batches; pinned on CUDA, so that their copies do not block."""
    tokenizer = data.tokenizer
    return batch_loader(
        data.train_ids,
        profile.data.max_tokens,
        pad_id=tokenizer.pad_id,
        bos_id=tokenizer.bos_id,
        eos_id=tokenizer.eos_id,
        seed=epoch_seed(profile.train.seed, epoch),
        pin_memory=device.type == "cuda",
    )


@dataclass
class _Snapshots:
    """The weights a run may end with: those of the last ``keep`` evaluations, and those of the
    best one (the lowest validation loss so far, kept even when it is older than the last
    ``keep``).
    """

    keep: int
    last: list[dict[str, torch.Tensor]] = field(default_factory=list)
    best: dict[str, torch.Tensor] | None = None
    best_loss: float = math.inf

    def add(self, weights: dict[str, torch.Tensor], val_loss: float) -> bool:
        """Keep ``weights`` (of an evaluation with this validation loss); ``True`` if it is the new
        best.
        """
        self.last.append(weights)
        del self.last[: -self.keep]
        if not val_loss < self.best_loss:
            return False
        self.best = weights
        self.best_loss = val_loss
        return True


def _train_model(
    data: TranslationData,
    profile: TranslationConfig,
    device: torch.device,
    run_dir: RunDirectory | None,
) -> tuple[Transformer, TrainResult, _Snapshots]:
    """Build the profile's model from ``train.seed`` and train it, or continue ``run_dir``'s run;
    return the model, the loop's result and the snapshots (the last ``average_last`` and the best).
    """
    set_seed(profile.train.seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    snapshots = _Snapshots(profile.average_last)
    if run_dir is not None:  # a resumed run continues with the snapshots it had
        snapshots.last = run_dir.restore_snapshots(snapshots.keep)
        snapshots.best, snapshots.best_loss = run_dir.restore_best()

    def batches(epoch: int) -> DataLoader[Batch]:
        return _epoch_batches(data, profile, device, epoch)

    def evaluate(m: Transformer) -> dict[str, float]:
        """Validation loss, and a snapshot of the weights (not counted as training time)."""
        metrics = evaluate_loss(m, data.val_batches, device)
        weights = _weights_snapshot(m)
        is_best = snapshots.add(weights, metrics["loss"])
        if run_dir is not None:
            run_dir.save_snapshot(weights, snapshots.keep, is_best)
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    if run_dir is None:
        return model, train(model, batches, profile.train, device, evaluate), snapshots
    run_dir.check_tokenizer(data.tokenizer)
    metadata = run_dir.metadata(data.tokenizer, asdict(profile.decode))
    result = train(model, batches, run_dir.train, device, evaluate, run_dir.resume_from, metadata)
    return model, result, snapshots


@dataclass(frozen=True)
class WeightsChoice:
    """What :func:`choose_weights` decided: the name of the kept candidate, every candidate's
    validation loss, and how many snapshots the kept weights average (1: a single snapshot).
    """

    name: str
    candidates: dict[str, float]
    averaged: int


def choose_weights(
    model: Transformer,
    snapshots: _Snapshots,
    eval_history: Sequence[dict[str, float]],
    val_loss: Callable[[Transformer], float],
) -> WeightsChoice:
    """Load into ``model`` the candidate weights with the lowest validation loss, and say which.

    The candidates: the last weights, the average of the last ``k`` snapshots for every ``k`` from
    2 to ``average_last``, and the best snapshot when it is older than the last. Only the validation
    split decides, so the test score stays an unbiased estimate. ``val_loss`` scores the model as it
    is loaded.
    """
    losses = [row["val_loss"] for row in eval_history]
    candidates = {"last": losses[-1]}
    # The weights of the candidate with the lowest loss so far (the first of equals: "last" wins a
    # tie). The averages are built one at a time and dropped unless they lead: 11 averages of the
    # cpu profile's weights held at once would take 350 MB.
    chosen, chosen_weights = "last", snapshots.last[-1] if snapshots.last else None
    for k in range(2, len(snapshots.last) + 1):
        name = f"average of the last {k}"
        average = _average_state_dicts(snapshots.last[-k:])
        model.load_state_dict(average)
        candidates[name] = val_loss(model)
        if candidates[name] < candidates[chosen]:
            chosen, chosen_weights = name, average
        del average  # before the next one is built
    best_index = losses.index(min(losses))
    if (
        snapshots.best is not None and best_index < len(losses) - 1
    ):  # an older evaluation was better
        name = f"best, step {int(eval_history[best_index]['step'])}"
        candidates[name] = snapshots.best_loss
        if candidates[name] < candidates[chosen]:
            chosen, chosen_weights = name, snapshots.best
    if chosen_weights is not None:
        model.load_state_dict(chosen_weights)
    averaged = int(chosen.rsplit(" ", 1)[-1]) if chosen.startswith("average") else 1
    return WeightsChoice(name=chosen, candidates=candidates, averaged=averaged)


def _resolve_profile(
    profile: str | TranslationConfig | None, device: torch.device, resume: bool
) -> TranslationConfig:
    """``profile`` as a configuration: a name, or ``None`` for :func:`~.default_profile`."""
    if not isinstance(profile, TranslationConfig):
        if profile is not None and not isinstance(profile, str):
            kind = type(profile).__name__
            raise TypeError(f"profile must be a name, a TranslationConfig or None, got {kind}")
        profile = translation_profile(profile or default_profile(device))
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {resume!r}")
    if resume and profile.train.checkpoint_path is None:
        raise ValueError(
            "resume=True needs train.checkpoint_path (the directory holding the run's state)"
        )
    return profile


def train_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationConfig | None = None,
    device: str | torch.device = "auto",
    resume: bool = False,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data (:mod:`~transformer_tasks.multi30k`), tokenizer, training,
    the choice of weights (:func:`choose_weights`). ``profile``: a name, a
    :class:`~.TranslationConfig` (e.g. from :func:`~.apply_overrides`) or ``None`` for
    :func:`~.default_profile`. ``resume``: continue the run whose state ``train.checkpoint_path``
    holds, to the weights of the uninterrupted run (:mod:`.checkpoints`; :class:`~.ResumeError` when
    it does not fit). :func:`~.save_translation` saves the model for ``translate``.
    """
    wall_start = time.perf_counter()
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    profile = _resolve_profile(profile, torch_device, resume)
    world = world_size() if is_distributed() else 1
    run_dir = None
    if profile.train.checkpoint_path is not None:
        run_dir = RunDirectory(profile, resume, world)
    with torch_threads(profile.num_threads) as used_threads:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            raw = load_multi30k(data_dir)
        data = prepare_translation_data(raw, profile.data)
        model, result, snapshots = _train_model(data, profile, torch_device, run_dir)
        choice = choose_weights(
            model,
            snapshots,
            result.eval_history,
            lambda m: evaluate_loss(m, data.val_batches, torch_device)["loss"],
        )
        model.eval()
    epoch_batches = len(_epoch_batches(data, profile, torch_device, 0))
    run = TranslationRun(
        model=model,
        tokenizer=data.tokenizer,
        profile=profile,
        result=result,
        device=torch_device,
        threads=used_threads,
        train_pairs=data.train_pairs,
        val_pairs=data.val_pairs,
        test_pairs=data.test_pairs,
        steps_per_epoch=max(1, epoch_batches // world),  # each rank takes every world-th batch
        averaged_checkpoints=choice.averaged,
        val_loss_last=choice.candidates["last"],
        val_loss_averaged=choice.candidates.get(f"average of the last {len(snapshots.last)}"),
        wall_seconds=time.perf_counter() - wall_start,
        checkpoint_choice=choice.name,
        candidates=choice.candidates,
        world_size=world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    return run
