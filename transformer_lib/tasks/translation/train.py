"""Steps 2 and 3 of the translation pipeline: train the model, then keep the better of the last
weights and the average of the last snapshots (checkpoint averaging, 检查点平均).

:func:`~.train_translation` loads Multi30k, prepares it (:mod:`.data`), builds a
:class:`~.Transformer` whose source embedding, target embedding and output
projection are one shared matrix, and trains it with :func:`~.train` on
batches of similar-length sentences, measuring the validation loss as it goes and stopping at the
profile's step limit or time budget. With a :class:`~.Checkpointing` it writes its resumable state
into a checkpoint directory as it goes, or continues the run whose state the directory holds
(:mod:`.checkpoints`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...data.batching import Batch, token_batches
from ...data.multi30k import load_multi30k
from ...data.tokenizer import BPETokenizer
from ...model import Transformer
from ...runtime import default_profile, pick_device, set_seed, torch_threads
from ...training import TrainResult, evaluate_loss, train
from ...training.distributed import is_distributed, is_main_process, main_process_first, world_size
from ...validation import check_positive_int
from .checkpoints import Checkpointing, RunDirectory
from .data import TranslationData, prepare_translation_data
from .profiles import TranslationProfile, translation_profile
from .results import save_translation


class _CountedBatches:
    """The training batches of each epoch (``train`` calls this once per epoch), counting their tokens.

    A run resumed in epoch ``first_epoch`` starts with the tokens of the epochs before it (the loop
    reads the batches of ``first_epoch`` already trained on again, to skip them, and so counts those).
    """

    def __init__(self, batches: Callable[[int], list[Batch]], first_epoch: int = 0) -> None:
        self.batches = batches
        # source + target non-padding tokens handed to training
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
        model: the trained :class:`~.Transformer`, in eval mode: the average
            of the last snapshots if checkpoint averaging helped, else the last weights.
        tokenizer: the joint BPE tokenizer, learnt on ``train_pairs`` only.
        profile: the :class:`~.TranslationProfile` of the run.
        result: the :class:`~.TrainResult` of the training loop (per-step
            ``history``, validation ``eval_history``, ``train_seconds``, ...).
        device: where the model lives.
        seed: the seed of the initial weights, the dropout and the order of the batches.
        threads: CPU threads PyTorch used during the run.
        train_pairs, val_pairs, test_pairs: the ``(german, english)`` pairs of the profile's slice of
            the training split, the whole validation split and the profile's slice of
            ``test_2016_flickr``.
        steps_per_epoch: training batches in one pass over ``train_pairs``.
        tokens: source + target tokens (padding excluded) handed to the training steps.
        stop_reason: the training loop's ``stop_reason`` (``"time_budget"``, ``"max_steps"``,
            ``"max_epochs"``, ...).
        averaged_checkpoints: snapshots averaged into ``model`` (1: the last weights were kept).
        val_loss_last: validation loss of the last weights.
        val_loss_averaged: validation loss of the average of the last snapshots (``None`` with
            fewer than two snapshots).
        wall_seconds: wall time of :func:`~.train_translation` (data, tokenizer, training,
            validation and averaging).
        checkpoint: where the model was saved (``None``: not saved).
        world_size: processes that trained together (1 without ``torchrun``).
        resumed_from_step: the step of the checkpoint this run continued from (0: it started afresh).
    """

    model: Transformer
    tokenizer: BPETokenizer
    profile: TranslationProfile
    result: TrainResult
    device: torch.device
    seed: int
    threads: int
    train_pairs: list[tuple[str, str]]
    val_pairs: list[tuple[str, str]]
    test_pairs: list[tuple[str, str]]
    steps_per_epoch: int
    tokens: int
    stop_reason: str
    averaged_checkpoints: int
    val_loss_last: float
    val_loss_averaged: float | None
    wall_seconds: float
    checkpoint: Path | None = None
    world_size: int = 1
    resumed_from_step: int = 0

    @property
    def history(self) -> list[dict[str, float]]:
        """One dict per optimizer step, with ``step``, ``epoch``, ``loss``, ``lr`` and ``tokens_per_s``."""
        return self.result.history

    @property
    def val_history(self) -> list[dict[str, float]]:
        """One dict per evaluation, with ``step``, ``epoch``, ``val_loss`` and ``val_perplexity``."""
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
        """The training throughput, in source + target tokens (padding excluded) per second of training steps."""
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    @property
    def val_loss(self) -> float:
        """Validation loss of the weights kept in ``model``."""
        if self.averaged_checkpoints > 1 and self.val_loss_averaged is not None:
            return self.val_loss_averaged
        return self.val_loss_last

    @property
    def decoding(self) -> dict[str, Any]:
        """The profile's decoding settings, as stored in a saved checkpoint."""
        return _decoding(self.profile)


def _decoding(profile: TranslationProfile) -> dict[str, Any]:
    return {
        "beam_size": profile.beam_size,
        "length_penalty": profile.length_penalty,
        "max_len_a": profile.max_len_a,
        "max_len_b": profile.max_len_b,
    }


def _check_seed_and_threads(seed: int, threads: int | None) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if threads is not None:
        check_positive_int("threads", threads)


def _resolve_profile(profile: str | TranslationProfile | None, device: torch.device) -> TranslationProfile:
    if profile is None:
        profile = default_profile(device)
    if isinstance(profile, TranslationProfile):
        return profile
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a name, a TranslationProfile or None, got {type(profile).__name__}")
    return translation_profile(profile)


@dataclass
class _Trained:
    """What :func:`~._train_model` hands back: the model, the loop's result and what was counted around it."""

    model: Transformer
    result: TrainResult
    data: _CountedBatches
    snapshots: list[dict[str, torch.Tensor]]
    steps_per_epoch: int
    world: int


def _train_model(
    data: TranslationData,
    profile: TranslationProfile,
    device: torch.device,
    seed: int,
    progress: bool,
    run_dir: RunDirectory | None,
) -> _Trained:
    """Build the profile's model from ``seed`` and train it, or continue ``run_dir``'s run.

    A snapshot of the weights is kept at every evaluation (and written into ``run_dir``).
    """
    set_seed(seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    batches = _CountedBatches(
        lambda epoch: token_batches(
            data.train_ids, profile.max_tokens, *data.special_ids, shuffle=True, seed=seed * 1000 + epoch
        ),
        first_epoch=run_dir.epoch if run_dir is not None else 0,
    )
    world = world_size() if is_distributed() else 1  # processes training together
    steps_per_epoch = max(1, len(batches.batches(0)) // world)  # each rank takes every world-th batch
    snapshots = run_dir.restore_snapshots(profile.average_last) if run_dir is not None else []

    def evaluate(m: Transformer) -> dict[str, float]:
        """Validation loss, and a snapshot of the weights (not counted as training time)."""
        metrics = evaluate_loss(m, data.val_batches, device)
        snapshots.append({k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()})
        if run_dir is not None:
            run_dir.save_snapshot(snapshots[-1], profile.average_last)
        del snapshots[: -profile.average_last]
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    config = profile.train_config(seed, progress)
    if run_dir is None:
        result = train(model, batches, config, device, evaluate=evaluate)
    else:
        run_dir.check_tokenizer(data.tokenizer)
        metadata = run_dir.metadata(data.tokenizer, _decoding(profile))
        config = run_dir.train_config(config)
        result = train(model, batches, config, device, evaluate, resume_from=run_dir.resume_from, metadata=metadata)
    return _Trained(model, result, batches, snapshots, steps_per_epoch, world)


def _average_if_better(trained: _Trained, val_batches: list[Batch], device: torch.device) -> float | None:
    """Load the average of the snapshots if it has the lower validation loss; return that loss.

    ``None`` with fewer than two snapshots. The model keeps its last weights otherwise.
    """
    if len(trained.snapshots) < 2:
        return None
    model = trained.model
    last_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(_average_state_dicts(trained.snapshots))
    averaged = evaluate_loss(model, val_batches, device)["loss"]
    if not averaged < trained.result.eval_history[-1]["val_loss"]:
        model.load_state_dict(last_state)
    return averaged


def train_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationProfile | None = None,
    device: str | torch.device = "auto",
    seed: int = 0,
    save: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
    checkpoints: Checkpointing | None = None,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data, tokenizer, training and checkpoint averaging.

    Args:
        data_dir: folder with (or for) the Multi30k files; see :mod:`~transformer_lib.data.multi30k`.
        profile: a profile name, a :class:`~.TranslationProfile`, or ``None`` for
            :func:`~.default_profile`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"mps"`` or a ``torch.device``.
        seed: seeds the model's initial weights, dropout and the order of the batches.
        save: write the trained model there with :func:`~.save_translation` (no test results yet).
        progress: a progress bar on stderr.
        threads: CPU threads for PyTorch during training (default: the profile's ``num_threads``);
            the previous setting is restored afterwards.
        checkpoints: write the resumable state into a checkpoint directory as training goes, or
            continue the run whose state it holds (:class:`~.Checkpointing`, :mod:`.checkpoints`).
            A resumed run given the same profile, seed, data and threads ends with the weights of
            the uninterrupted run. Raises :class:`~.ResumeError` when the directory does not fit.

    Returns:
        A :class:`~.TranslationRun`; score it with :func:`~.evaluate_translation`.
    """
    wall_start = time.perf_counter()
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    prof = _resolve_profile(profile, torch_device)
    _check_seed_and_threads(seed, threads)
    if checkpoints is not None and not isinstance(checkpoints, Checkpointing):
        raise TypeError(f"checkpoints must be a Checkpointing or None, got {type(checkpoints).__name__}")
    world = world_size() if is_distributed() else 1
    run_dir = RunDirectory(checkpoints, prof, seed, world) if checkpoints is not None else None
    with torch_threads(threads if threads is not None else prof.num_threads) as used_threads:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            raw = load_multi30k(data_dir)
        data = prepare_translation_data(raw, prof)
        trained = _train_model(data, prof, torch_device, seed, progress, run_dir)
        val_loss_averaged = _average_if_better(trained, data.val_batches, torch_device)
        trained.model.eval()
    val_loss_last = trained.result.eval_history[-1]["val_loss"]
    averaged = val_loss_averaged is not None and val_loss_averaged < val_loss_last
    run = TranslationRun(
        model=trained.model,
        tokenizer=data.tokenizer,
        profile=prof,
        result=trained.result,
        device=torch_device,
        seed=seed,
        threads=used_threads,
        train_pairs=data.train_pairs,
        val_pairs=data.val_pairs,
        test_pairs=data.test_pairs,
        steps_per_epoch=trained.steps_per_epoch,
        tokens=trained.data.tokens,
        stop_reason=trained.result.stop_reason,
        averaged_checkpoints=len(trained.snapshots) if averaged else 1,
        val_loss_last=val_loss_last,
        val_loss_averaged=val_loss_averaged,
        wall_seconds=time.perf_counter() - wall_start,
        world_size=trained.world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    if save is not None and is_main_process():
        save_translation(run, save)
    return run
