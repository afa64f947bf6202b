"""Steps 2-3 of the translation pipeline: train, then keep the better of the last weights and their
average.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
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
    is_main_process,
    main_process_first,
    world_size,
)

from ..multi30k import load_multi30k
from .checkpoints import RunDirectory
from .data import TranslationData, prepare_translation_data
from .profiles import TranslationConfig, default_profile, translation_profile
from .results import save_translation


def _average_state_dicts(snapshots: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several ``state_dict`` snapshots of the same model."""
    return {
        name: torch.stack([snap[name].float() for snap in snapshots])
        .mean(0)
        .to(snapshots[0][name].dtype)
        for name in snapshots[0]
    }


@dataclass
class TranslationRun:
    """What :func:`~.train_translation` returns: the trained model and everything about its
    training.

    Attributes:
        model: the :class:`~.Transformer` (eval mode): the snapshots' average if it helped, else the
            last weights.
        steps_per_epoch: batches in one pass over ``train_pairs`` (of each process).
        averaged_checkpoints: snapshots averaged into ``model`` (1: the last weights were kept).
        val_loss_last, val_loss_averaged: validation loss of the last weights and of the average
            (``None`` with fewer than two snapshots).
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
        averaged = self.averaged_checkpoints > 1 and self.val_loss_averaged is not None
        return self.val_loss_averaged if averaged else self.val_loss_last  # type: ignore[return-value]

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


def _train_model(
    data: TranslationData,
    profile: TranslationConfig,
    device: torch.device,
    run_dir: RunDirectory | None,
) -> tuple[Transformer, TrainResult, list[dict[str, torch.Tensor]]]:
    """Build the profile's model from ``train.seed`` and train it, or continue ``run_dir``'s run;
    return the model, the loop's result and the snapshots of the last ``average_last``
    evaluations.
    """
    keep = profile.average_last
    set_seed(profile.train.seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    snapshots = run_dir.restore_snapshots(keep) if run_dir is not None else []

    def batches(epoch: int) -> DataLoader[Batch]:
        return _epoch_batches(data, profile, device, epoch)

    def evaluate(m: Transformer) -> dict[str, float]:
        """Validation loss, and a snapshot of the weights (not counted as training time)."""
        metrics = evaluate_loss(m, data.val_batches, device)
        snapshots.append({k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()})
        if run_dir is not None:
            run_dir.save_snapshot(snapshots[-1], keep)
        del snapshots[:-keep]
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    if run_dir is None:
        return model, train(model, batches, profile.train, device, evaluate), snapshots
    run_dir.check_tokenizer(data.tokenizer)
    metadata = run_dir.metadata(data.tokenizer, asdict(profile.decode))
    result = train(model, batches, run_dir.train, device, evaluate, run_dir.resume_from, metadata)
    return model, result, snapshots


def _keep_average_if_better(
    model: Transformer,
    snapshots: list[dict[str, torch.Tensor]],
    last_loss: float,
    data: TranslationData,
    device: torch.device,
) -> float | None:
    """Checkpoint averaging: load the snapshots' average into ``model`` if its validation loss is
    lower than ``last_loss``, the last weights'; return that loss (``None`` with fewer than two
    snapshots).
    """
    if len(snapshots) < 2:
        return None
    last_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(_average_state_dicts(snapshots))
    averaged_loss = evaluate_loss(model, data.val_batches, device)["loss"]
    if not averaged_loss < last_loss:
        model.load_state_dict(last_state)
    return averaged_loss


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
    save: str | Path | None = None,
    resume: bool = False,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data (:mod:`~transformer_tasks.multi30k`), tokenizer, training,
    averaging. ``profile``: a name, a :class:`~.TranslationConfig` (e.g. from
    :func:`~.apply_overrides`) or ``None`` for :func:`~.default_profile`. ``save``: write the model
    there (:func:`~.save_translation`, without test results). ``resume``: continue the run whose
    state ``train.checkpoint_path`` holds, to the weights of the uninterrupted run
    (:mod:`.checkpoints`; :class:`~.ResumeError` when it does not fit).
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
        val_loss_last = result.eval_history[-1]["val_loss"]
        val_loss_averaged = _keep_average_if_better(
            model, snapshots, val_loss_last, data, torch_device
        )
        model.eval()
    averaged = val_loss_averaged is not None and val_loss_averaged < val_loss_last
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
        averaged_checkpoints=len(snapshots) if averaged else 1,
        val_loss_last=val_loss_last,
        val_loss_averaged=val_loss_averaged,
        wall_seconds=time.perf_counter() - wall_start,
        world_size=world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    if save is not None and is_main_process():
        save_translation(run, save)
    return run
