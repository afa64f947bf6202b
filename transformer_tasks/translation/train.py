"""Steps 2-3 of the translation pipeline: train, then keep the better of the last weights and their
average.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from transformer_lib.data.batching import Batch, batch_loader
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


class _CountedBatches:
    """The training batches of each epoch, counting their source + target non-padding tokens (a run
    resumed in ``first_epoch`` counts the epochs before it; the loop reads the batches it skips).
    """

    def __init__(self, batches: Callable[[int], DataLoader[Batch]], first_epoch: int = 0) -> None:
        self.batches = batches
        self.tokens = sum(
            b.num_src_tokens + b.num_tokens for e in range(first_epoch) for b in batches(e)
        )

    def __call__(self, epoch: int) -> Iterator[Batch]:
        for batch in self.batches(epoch):
            self.tokens += batch.num_src_tokens + batch.num_tokens
            yield batch


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
        steps_per_epoch, tokens: batches in one pass over ``train_pairs``; source + target
            non-padding tokens seen.
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
    tokens: int
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


def _train_model(
    data: TranslationData,
    profile: TranslationConfig,
    device: torch.device,
    run_dir: RunDirectory | None,
) -> tuple[Transformer, TrainResult, _CountedBatches, list[dict[str, torch.Tensor]]]:
    """Build the profile's model from ``train.seed`` and train it, or continue ``run_dir``'s run;
    return the model, the loop's result, the batches and the snapshots of the last ``average_last``
    evaluations.
    """
    seed, keep = profile.train.seed, profile.average_last
    set_seed(seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    special = (data.tokenizer.pad_id, data.tokenizer.bos_id, data.tokenizer.eos_id)
    batches = _CountedBatches(
        lambda epoch: batch_loader(  # pinned batches: their copies to a GPU do not block
            data.train_ids,
            profile.data.max_tokens,
            *special,
            seed * 1000 + epoch,
            device.type == "cuda",
        ),
        first_epoch=run_dir.epoch if run_dir is not None else 0,
    )
    snapshots = run_dir.restore_snapshots(keep) if run_dir is not None else []

    def evaluate(m: Transformer) -> dict[str, float]:
        """Validation loss, and a snapshot of the weights (not counted as training time)."""
        metrics = evaluate_loss(m, data.val_batches, device)
        snapshots.append({k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()})
        if run_dir is not None:
            run_dir.save_snapshot(snapshots[-1], keep)
        del snapshots[:-keep]
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    if run_dir is None:
        return model, train(model, batches, profile.train, device, evaluate), batches, snapshots
    run_dir.check_tokenizer(data.tokenizer)
    metadata = run_dir.metadata(data.tokenizer, asdict(profile.decode))
    result = train(model, batches, run_dir.train, device, evaluate, run_dir.resume_from, metadata)
    return model, result, batches, snapshots


def train_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationConfig | None = None,
    device: str | torch.device = "auto",
    save: str | Path | None = None,
    resume: bool = False,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data (:mod:`~transformer_tasks.multi30k`), tokenizer, training,
    averaging;
    ``profile``: a name, a :class:`~.TranslationConfig` (e.g. from :func:`~.apply_overrides`) or
    ``None`` for :func:`~.default_profile`. ``save``: write the model there
    (:func:`~.save_translation`, without test results). ``resume``: continue the run whose state
    ``train.checkpoint_path`` holds, to the weights of the uninterrupted run (:mod:`.checkpoints`;
    :class:`~.ResumeError` when it does not fit).
    """
    wall_start = time.perf_counter()
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    if not isinstance(profile, TranslationConfig):
        if profile is not None and not isinstance(profile, str):
            raise TypeError(
                f"profile must be a name, a TranslationConfig or None, got {type(profile).__name__}"
            )
        profile = translation_profile(profile or default_profile(torch_device))
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {resume!r}")
    if resume and profile.train.checkpoint_path is None:
        raise ValueError(
            "resume=True needs train.checkpoint_path (the directory holding the run's state)"
        )
    world = world_size() if is_distributed() else 1
    run_dir = (
        RunDirectory(profile, resume, world) if profile.train.checkpoint_path is not None else None
    )
    with torch_threads(profile.num_threads) as used_threads:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            raw = load_multi30k(data_dir)
        data = prepare_translation_data(raw, profile.data)
        model, result, batches, snapshots = _train_model(data, profile, torch_device, run_dir)
        val_loss_last, val_loss_averaged = result.eval_history[-1]["val_loss"], None
        # checkpoint averaging: keep the average if its validation loss is lower
        if len(snapshots) > 1:
            last_state = {k: v.clone() for k, v in model.state_dict().items()}
            model.load_state_dict(_average_state_dicts(snapshots))
            val_loss_averaged = evaluate_loss(model, data.val_batches, torch_device)["loss"]
            if not val_loss_averaged < val_loss_last:
                model.load_state_dict(last_state)
        model.eval()
    averaged = val_loss_averaged is not None and val_loss_averaged < val_loss_last
    # each rank takes every world-th batch
    steps_per_epoch = max(1, len(batches.batches(0)) // world)
    run = TranslationRun(
        model,
        data.tokenizer,
        profile,
        result,
        torch_device,
        used_threads,
        data.train_pairs,
        data.val_pairs,
        data.test_pairs,
        steps_per_epoch,
        batches.tokens,
        len(snapshots) if averaged else 1,
        val_loss_last,
        val_loss_averaged,
        time.perf_counter() - wall_start,
        world_size=world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    if save is not None and is_main_process():
        save_translation(run, save)
    return run
