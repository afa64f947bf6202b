"""Steps 2-3 of the translation pipeline: train, then keep the better of the last weights and their average."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from ...data.batching import Batch, batch_loader
from ...data.multi30k import load_multi30k
from ...data.tokenizer import BPETokenizer
from ...model import Transformer
from ...runtime import default_profile, pick_device, set_seed, torch_threads
from ...training import TrainResult, evaluate_loss, train
from ...training.distributed import is_distributed, is_main_process, main_process_first, world_size
from .checkpoints import RunDirectory
from .data import TranslationData, prepare_translation_data
from .profiles import TranslationConfig, translation_profile
from .results import save_translation


class _CountedBatches:
    """The training batches of each epoch, counting their source + target non-padding tokens (a run
    resumed in ``first_epoch`` counts the epochs before it; the loop reads the batches it skips).
    """

    def __init__(self, batches: Callable[[int], DataLoader[Batch]], first_epoch: int = 0) -> None:
        self.batches = batches
        self.tokens = sum(b.num_src_tokens + b.num_tokens for e in range(first_epoch) for b in batches(e))

    def __call__(self, epoch: int) -> Iterator[Batch]:
        for batch in self.batches(epoch):
            self.tokens += batch.num_src_tokens + batch.num_tokens
            yield batch


def _average_state_dicts(snapshots: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several ``state_dict`` snapshots of the same model."""
    return {
        name: torch.stack([snap[name].float() for snap in snapshots]).mean(0).to(snapshots[0][name].dtype)
        for name in snapshots[0]
    }


@dataclass
class TranslationRun:
    """What :func:`~.train_translation` returns: the trained model and everything about its training.

    Attributes:
        model: the :class:`~.Transformer` (eval mode) with the weights ``checkpoint_choice`` names.
        steps_per_epoch, tokens: batches in one pass over ``train_pairs``; source + target non-padding tokens seen.
        averaged_checkpoints: snapshots averaged into ``model`` (1: one snapshot, the last or the best).
        val_loss_last, val_loss_averaged: validation loss of the last weights and of the average of all the
            kept snapshots (``None`` with fewer than two snapshots).
        checkpoint_choice: which weights ``model`` holds: ``"last"``, ``"average of the last k"`` or
            ``"best, step s"``, the candidate with the lowest validation loss (:func:`choose_weights`).
        candidates: every candidate's validation loss, by name.
        resumed_from_step: the step of the checkpoint this run continued from (0: it started afresh).
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
    tokens: int
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
        """The seed of the initial weights, the dropout and the order of the batches (``train.seed``)."""
        return self.profile.train.seed

    @property
    def stop_reason(self) -> str:
        """Why training stopped (``"time_budget"``, ``"max_steps"``, ...)."""
        return self.result.stop_reason

    @property
    def history(self) -> list[dict[str, float]]:
        """A dict per optimizer step, with ``step``, ``epoch``, ``loss``, ``lr`` and ``tokens_per_s``."""
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


@dataclass
class _Snapshots:
    """The weights a run may end with: those of the last ``keep`` evaluations, and those of the best one
    (the lowest validation loss so far, kept even when it is older than the last ``keep``).
    """

    keep: int
    last: list[dict[str, torch.Tensor]] = field(default_factory=list)
    best: dict[str, torch.Tensor] | None = None
    best_loss: float = math.inf

    def add(self, weights: dict[str, torch.Tensor], val_loss: float) -> bool:
        """Keep ``weights`` (of an evaluation with this validation loss); ``True`` if it is the new best."""
        self.last.append(weights)
        del self.last[: -self.keep]
        if not val_loss < self.best_loss:
            return False
        self.best = weights
        self.best_loss = val_loss
        return True


def _train_model(
    data: TranslationData, profile: TranslationConfig, device: torch.device, run_dir: RunDirectory | None
) -> tuple[Transformer, TrainResult, _CountedBatches, _Snapshots]:
    """Build the profile's model from ``train.seed`` and train it, or continue ``run_dir``'s run; return the
    model, the loop's result, the batches and the snapshots (the last ``average_last`` and the best).
    """
    seed = profile.train.seed
    set_seed(seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    special = (data.tokenizer.pad_id, data.tokenizer.bos_id, data.tokenizer.eos_id)
    batches = _CountedBatches(
        lambda epoch: batch_loader(  # pinned batches: their copies to a GPU do not block
            data.train_ids, profile.data.max_tokens, *special, seed * 1000 + epoch, device.type == "cuda"
        ),
        first_epoch=run_dir.epoch if run_dir is not None else 0,
    )
    snapshots = _Snapshots(profile.average_last)
    if run_dir is not None:  # a resumed run continues with the snapshots it had
        snapshots.last = run_dir.restore_snapshots(snapshots.keep)
        snapshots.best, snapshots.best_loss = run_dir.restore_best()

    def evaluate(m: Transformer) -> dict[str, float]:
        """Validation loss, and a snapshot of the weights (not counted as training time)."""
        metrics = evaluate_loss(m, data.val_batches, device)
        weights = {k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()}
        is_best = snapshots.add(weights, metrics["loss"])
        if run_dir is not None:
            run_dir.save_snapshot(weights, snapshots.keep, is_best)
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    if run_dir is None:
        return model, train(model, batches, profile.train, device, evaluate), batches, snapshots
    run_dir.check_tokenizer(data.tokenizer)
    metadata = run_dir.metadata(data.tokenizer, asdict(profile.decode))
    result = train(model, batches, run_dir.train, device, evaluate, run_dir.resume_from, metadata)
    return model, result, batches, snapshots


@dataclass(frozen=True)
class WeightsChoice:
    """What :func:`choose_weights` decided: the name of the kept candidate, every candidate's validation
    loss, and how many snapshots the kept weights average (1: a single snapshot).
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

    The candidates: the last weights, the average of the last ``k`` snapshots for every ``k`` from 2 to
    ``average_last``, and the best snapshot when it is older than the last. Only the validation split
    decides, so the test score stays an unbiased estimate. ``val_loss`` scores the model as it is loaded.
    """
    losses = [row["val_loss"] for row in eval_history]
    candidates = {"last": losses[-1]}
    weights = {"last": snapshots.last[-1]} if snapshots.last else {}
    for k in range(2, len(snapshots.last) + 1):
        name = f"average of the last {k}"
        weights[name] = _average_state_dicts(snapshots.last[-k:])
        model.load_state_dict(weights[name])
        candidates[name] = val_loss(model)
    best_index = losses.index(min(losses))
    if snapshots.best is not None and best_index < len(losses) - 1:  # an older evaluation was better
        name = f"best, step {int(eval_history[best_index]['step'])}"
        weights[name] = snapshots.best
        candidates[name] = snapshots.best_loss
    chosen = min(candidates, key=candidates.__getitem__)  # the first of equals: "last" wins a tie
    if chosen in weights:
        model.load_state_dict(weights[chosen])
    averaged = int(chosen.rsplit(" ", 1)[-1]) if chosen.startswith("average") else 1
    return WeightsChoice(chosen, candidates, averaged)


def _checked_profile(profile: str | TranslationConfig | None, resume: bool, device: torch.device) -> TranslationConfig:
    """``train_translation``'s ``profile`` as a configuration, and ``resume`` checked against it."""
    if not isinstance(profile, TranslationConfig):
        if profile is not None and not isinstance(profile, str):
            raise TypeError(f"profile must be a name, a TranslationConfig or None, got {type(profile).__name__}")
        profile = translation_profile(profile or default_profile(device))
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {resume!r}")
    if resume and profile.train.checkpoint_path is None:
        raise ValueError("resume=True needs train.checkpoint_path (the directory holding the run's state)")
    return profile


def train_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationConfig | None = None,
    device: str | torch.device = "auto",
    save: str | Path | None = None,
    resume: bool = False,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data (:mod:`~transformer_lib.data.multi30k`), tokenizer, training, averaging;
    ``profile``: a name, a :class:`~.TranslationConfig` (e.g. from :func:`~.apply_overrides`) or ``None``
    for :func:`~.default_profile`. ``save``: write the model there (:func:`~.save_translation`, without
    test results). ``resume``: continue the run whose state ``train.checkpoint_path`` holds, to the
    weights of the uninterrupted run (:mod:`.checkpoints`; :class:`~.ResumeError` when it does not fit).
    """
    wall_start = time.perf_counter()
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    profile = _checked_profile(profile, resume, torch_device)
    world = world_size() if is_distributed() else 1
    run_dir = RunDirectory(profile, resume, world) if profile.train.checkpoint_path is not None else None
    with torch_threads(profile.num_threads) as used_threads:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            raw = load_multi30k(data_dir)
        data = prepare_translation_data(raw, profile.data)
        model, result, batches, snapshots = _train_model(data, profile, torch_device, run_dir)
        choice = choose_weights(
            model,
            snapshots,
            result.eval_history,
            lambda m: evaluate_loss(m, data.val_batches, torch_device)["loss"],
        )
        model.eval()
    steps_per_epoch = max(1, len(batches.batches(0)) // world)  # each rank takes every world-th batch
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
        steps_per_epoch=steps_per_epoch,
        tokens=batches.tokens,
        averaged_checkpoints=choice.averaged,
        val_loss_last=choice.candidates["last"],
        val_loss_averaged=choice.candidates.get(f"average of the last {len(snapshots.last)}"),
        wall_seconds=time.perf_counter() - wall_start,
        checkpoint_choice=choice.name,
        candidates=choice.candidates,
        world_size=world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    if save is not None and is_main_process():
        save_translation(run, save)
    return run
