"""Steps 2-3 of the translation pipeline: train, then keep the weights of lowest validation loss
among the last, the averages of the last checkpoints and the best one (:func:`choose_weights`),
read from the checkpoints the training loop keeps (``keep_last``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch.utils.data import DataLoader

from transformer_lib.data.batching import Batch, batch_loader, epoch_seed
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.model import Transformer
from transformer_lib.runtime import pick_device, set_seed, torch_threads
from transformer_lib.training import TrainResult, evaluate_loss, train
from transformer_lib.training.distributed import (
    barrier,
    broadcast_object,
    is_distributed,
    is_main_process,
    main_process_first,
    world_size,
)
from transformer_lib.training.state import kept_checkpoints

from ..multi30k import load_multi30k
from .checkpoints import RunDirectory
from .data import TranslationData, prepare_translation_data
from .profiles import TranslationConfig, default_profile, translation_profile


@dataclass
class TranslationRun:
    """What :func:`~.train_translation` returns: the trained model and everything about its
    training.

    Attributes:
        model: the :class:`~.Transformer` (eval mode) with the weights ``checkpoint_choice`` names.
        steps_per_epoch: batches in one pass over ``train_pairs`` (of each process).
        averaged_checkpoints: checkpoints averaged into ``model`` (1: one, the last or the best).
        val_loss_last, val_loss_averaged: validation loss of the last weights and of the average of
            all the kept checkpoints (``None`` with fewer than two).
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


def _train_model(
    data: TranslationData,
    profile: TranslationConfig,
    device: torch.device,
    run_dir: RunDirectory | None,
    directory: Path,
) -> tuple[Transformer, TrainResult]:
    """Build the profile's model from ``train.seed`` and train it, or continue ``run_dir``'s run,
    keeping its last ``average_last`` checkpoints and its best in ``directory``.
    """
    set_seed(profile.train.seed)
    model = Transformer(profile.model_config(data.tokenizer.vocab_size)).to(device)
    # Every evaluation writes its weights; the loop keeps the last average_last of them, and the
    # best evaluation's (the result's best_step).
    settings = replace(
        run_dir.train if run_dir is not None else profile.train,
        checkpoint_path=str(directory),
        keep_last=max(2, profile.average_last),
    )
    if settings.monitor is None:
        settings = replace(settings, monitor="val_loss", mode="min")

    def batches(epoch: int) -> DataLoader[Batch]:
        return _epoch_batches(data, profile, device, epoch)

    def evaluate(m: Transformer) -> dict[str, float]:
        metrics = evaluate_loss(m, data.val_batches, device)
        return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

    if run_dir is None:
        return model, train(model, batches, settings, device, evaluate)
    run_dir.check_tokenizer(data.tokenizer)
    metadata = run_dir.metadata(data.tokenizer, asdict(profile.decode))
    result = train(model, batches, settings, device, evaluate, run_dir.resume_from, metadata)
    return model, result


@dataclass(frozen=True)
class WeightsChoice:
    """What :func:`choose_weights` decided: the name of the kept candidate, every candidate's
    validation loss, how many checkpoints the kept weights average (1: a single one), and the
    validation loss of the average of all the last ones (``None`` with fewer than two).
    """

    name: str
    candidates: dict[str, float]
    averaged: int
    full_average_loss: float | None = None


def choose_weights(
    model: Transformer,
    directory: str | Path,
    result: TrainResult,
    keep: int,
    val_loss: Callable[[Transformer], float],
) -> WeightsChoice:
    """Load into ``model`` the candidate weights with the lowest validation loss, and say which.

    The candidates come from the model files the training loop kept in ``directory``
    (``keep_last``): the last weights, the average of the last ``k`` checkpoints for every ``k``
    from 2 to ``keep``, and the best evaluation's (``result.best_step``) when it is older than the
    last. Only the validation split decides, so the test score stays an unbiased estimate.
    ``val_loss`` scores the model as it is loaded.
    """
    files = dict(kept_checkpoints(directory))
    losses = {int(row["step"]): row["val_loss"] for row in result.eval_history}
    last = max(files)  # the end of the run, always evaluated
    candidates = {"last": losses[last]}
    chosen, chosen_file, averaged = "last", [files[last]], 1
    # A running sum, newest first: each file is read once, and one sum is held, not k copies.
    total: dict[str, torch.Tensor] = {}
    recent = [step for step in losses if step in files][-keep:]
    for k, step in enumerate(reversed(recent), start=1):
        dtypes = _accumulate(total, files[step])
        if k == 1:
            continue
        _load_weights(model, {name: (t / k).to(dtypes[name]) for name, t in total.items()})
        name = f"average of the last {k}"
        candidates[name] = val_loss(model)
        if candidates[name] < candidates[chosen]:
            chosen, chosen_file, averaged = name, [files[s] for s in recent[-k:]], k
    best = result.best_step
    if best is not None and best != last and best in files:  # an older evaluation was better
        name = f"best, step {best}"
        candidates[name] = losses[best]
        if candidates[name] < candidates[chosen]:
            chosen, chosen_file, averaged = name, [files[best]], 1
    _load_weights(model, _mean_of(chosen_file))
    full = f"average of the last {len(recent)}"
    return WeightsChoice(chosen, candidates, averaged, candidates.get(full))


def _mean_of(paths: Sequence[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the weights in ``paths`` (model files of one run), each in its
    own dtype.
    """
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        dtypes = _accumulate(total, path)
    return {name: (t / len(paths)).to(dtypes[name]) for name, t in total.items()}


def _accumulate(total: dict[str, torch.Tensor], path: Path) -> dict[str, torch.dtype]:
    """Add the weights of the model file ``path`` to ``total`` (in float64); their dtypes."""
    weights = load_file(str(path))
    for name, tensor in weights.items():
        total[name] = total[name] + tensor.double() if name in total else tensor.double()
    return {name: tensor.dtype for name, tensor in weights.items()}


def _load_weights(model: Transformer, weights: dict[str, torch.Tensor]) -> None:
    """Load a model file's weights into ``model``: a tensor tied under several names (the shared
    embedding) is stored under one of them.
    """
    missing, unexpected = model.load_state_dict(weights, strict=False)
    state = model.state_dict()
    loaded = {state[name].data_ptr() for name in weights if name in state}
    if unexpected or any(state[name].data_ptr() not in loaded for name in missing):
        raise ValueError(
            f"weights do not fit the model: missing {missing}, unexpected {unexpected}"
        )


@contextlib.contextmanager
def _checkpoint_folder(run_dir: RunDirectory | None) -> Iterator[Path]:
    """Where the loop keeps the checkpoints the run chooses from: the run's directory, or a
    temporary one removed afterwards (rank 0's, on the same machine, under ``torchrun``).
    """
    if run_dir is not None:
        yield run_dir.directory
        return
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory()) if is_main_process() else ""
        if is_distributed():
            folder = broadcast_object(folder)
        yield Path(folder)
        barrier()  # every rank has read the files before rank 0 removes them


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
    with torch_threads(profile.num_threads) as used_threads, _checkpoint_folder(run_dir) as folder:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            raw = load_multi30k(data_dir)
        data = prepare_translation_data(raw, profile.data)
        model, result = _train_model(data, profile, torch_device, run_dir, folder)
        choice = choose_weights(
            model,
            folder,
            result,
            profile.average_last,
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
        val_loss_averaged=choice.full_average_loss,
        wall_seconds=time.perf_counter() - wall_start,
        checkpoint_choice=choice.name,
        candidates=choice.candidates,
        world_size=world,
        resumed_from_step=run_dir.step if run_dir is not None else 0,
    )
    return run
