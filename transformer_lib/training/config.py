"""What a training run is told (:class:`~.TrainConfig`) and what it reports (:class:`~.TrainResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..validation import check_positive_int, check_probability

AMP_MODES = ("auto", "none", "bf16", "fp16")
SCHEDULES = ("noam", "linear")


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`~.train` needs besides the model and the data.

    Learning rate: ``lr`` is the **peak** rate, reached after ``warmup_steps`` optimizer steps.
    With ``schedule="noam"`` it has the paper's shape (linear rise, then decay as ``step**-0.5``):
    the Noam schedule with ``factor = lr * sqrt(d_model * warmup_steps)``; the paper's setting
    (``factor=1``, ``d_model=512``, ``warmup_steps=4000``) is ``lr = 512**-0.5 * 4000**-0.5 = 7.0e-4``.
    With ``schedule="linear"`` it falls linearly after the warm-up to almost zero at ``max_steps``,
    or at ``time_budget_s``, whichever comes first (:func:`~.linear_decay_rate`).

    Attributes:
        max_steps: stop after this many optimizer steps (``None``: no limit).
        max_epochs: stop after this many passes over the data (``None``: no limit).
        time_budget_s: stop once the training steps have taken this many seconds (evaluation and
            checkpoints do not count; ``None``: no limit). Under ``torchrun`` the slowest rank's
            clock counts, so that every rank stops, and sets its rate, alike.
            At least one of the three limits must be set.
        lr: peak learning rate (see above).
        warmup_steps: optimizer steps of linear warm-up.
        schedule: ``"noam"`` (the paper's) or ``"linear"`` (decay to zero at ``max_steps`` or
            ``time_budget_s``, whichever comes first; it needs one of them).
        label_smoothing: ``epsilon_ls`` of ``F.cross_entropy`` (the paper: 0.1).
        grad_accum: batches whose gradients are summed before each optimizer step (per process:
            under ``torchrun`` one step sees ``world_size * grad_accum`` batches in all).
        clip_norm: clip the global gradient norm to this value (``None``: off, as in the paper).
        amp: ``"none"`` (float32), ``"bf16"`` (autocast to bfloat16 on CUDA or CPU), ``"fp16"``
            (autocast to float16 with a ``GradScaler``; CUDA only), or ``"auto"``: what pays on the
            device (:func:`~.amp_for_device`: bf16 on Ampere and later GPUs and on CPUs with native
            bfloat16, fp16 on older GPUs such as the T4, none otherwise).
        adam_betas, adam_eps: Adam's hyper-parameters (the paper: ``(0.9, 0.98)``, ``1e-9``).
        eval_every: evaluate every this many optimizer steps; ``None``: at the end of every epoch.
            Training always ends with an evaluation when ``evaluate`` is given.
        monitor: name of the metric (a key of ``evaluate``'s dict) for ``patience``, ``target``
            and ``best_checkpoint_path``.
        mode: ``"max"`` if a larger ``monitor`` is better (BLEU, accuracy), ``"min"`` for a loss.
        patience: stop after this many evaluations in a row without improvement (``None``: never).
        target: stop as soon as ``monitor`` reaches this value (``>=`` for max, ``<=`` for min).
        checkpoint_path: where to write the resumable checkpoint (``None``: never).
        checkpoint_every: write it every this many optimizer steps (and always at the end).
        best_checkpoint_path: where to write the model whenever ``monitor`` improves.
        seed: seeds Python, NumPy and PyTorch at the start of training (dropout, and any
            randomness in the data); the model's initial weights are the caller's business.
            Under ``torchrun`` rank ``r`` uses ``seed + r``, so that the ranks draw different
            dropout masks.
        progress: show a tqdm bar on stderr (also off when the ``TQDM_DISABLE`` variable is set;
            under ``torchrun`` only rank 0 shows one).
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    time_budget_s: float | None = None
    lr: float = 7e-4
    warmup_steps: int = 4000
    schedule: str = "noam"
    label_smoothing: float = 0.1
    grad_accum: int = 1
    clip_norm: float | None = None
    amp: str = "none"
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    eval_every: int | None = None
    monitor: str | None = None
    mode: str = "max"
    patience: int | None = None
    target: float | None = None
    checkpoint_path: str | None = None
    checkpoint_every: int | None = None
    best_checkpoint_path: str | None = None
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_epochs is None and self.time_budget_s is None:
            raise ValueError("TrainConfig needs max_steps, max_epochs or time_budget_s (or several); got none")
        budget = self.time_budget_s
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0):
            raise ValueError(f"time_budget_s must be a positive number of seconds or None, got {budget!r}")
        for name in ("max_steps", "max_epochs", "eval_every", "patience", "checkpoint_every"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_positive_int("warmup_steps", self.warmup_steps)
        check_positive_int("grad_accum", self.grad_accum)
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not self.lr > 0:
            raise ValueError(f"lr must be a positive float (the peak learning rate), got lr={self.lr!r}")
        check_probability("label_smoothing", self.label_smoothing)
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be positive or None, got clip_norm={self.clip_norm!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} is not one of {list(SCHEDULES)}")
        if self.schedule == "linear":
            self._check_linear_budget()
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp={self.amp!r} is not one of {list(AMP_MODES)}")
        if self.mode not in ("max", "min"):
            raise ValueError(f"mode={self.mode!r} must be 'max' (larger is better) or 'min' (smaller is better)")
        if self.monitor is None and (self.patience is not None or self.target is not None):
            raise ValueError("patience and target need monitor= (the name of the metric to watch)")
        if self.best_checkpoint_path is not None and self.monitor is None:
            raise ValueError("best_checkpoint_path needs monitor= (the metric that decides what is best)")
        if len(self.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in self.adam_betas):
            raise ValueError(f"adam_betas must be two floats in [0, 1), got {self.adam_betas!r}")
        if not self.adam_eps > 0:
            raise ValueError(f"adam_eps must be positive, got {self.adam_eps!r}")

    def _check_linear_budget(self) -> None:
        if self.max_steps is None and self.time_budget_s is None:
            raise ValueError(
                "schedule='linear' decays to zero at the end of the budget, so it needs max_steps or time_budget_s; "
                "got neither"
            )
        if self.max_steps is not None and self.warmup_steps >= self.max_steps:
            raise ValueError(
                f"schedule='linear' needs max_steps > warmup_steps; "
                f"got max_steps={self.max_steps}, warmup_steps={self.warmup_steps}"
            )

    def noam_factor(self, d_model: int) -> float:
        """The Noam ``factor`` that makes the schedule peak at ``lr``: ``lr * sqrt(d_model * warmup_steps)``."""
        return self.lr * math.sqrt(d_model * self.warmup_steps)


@dataclass
class TrainResult:
    """What :func:`~.train` returns.

    Attributes:
        history: one dict per optimizer step: ``step``, ``epoch``, ``loss`` (mean per target
            token, label smoothing included), ``lr`` (the rate used by that step), ``tokens_per_s``
            (source + target non-padding tokens per second of that step).
        eval_history: one dict per evaluation: ``step``, ``epoch``, then the metrics.
        steps: optimizer steps done in total (including those before a resume).
        epochs: completed passes over the data.
        train_seconds: time spent in training steps (data, forward, backward, update); evaluation
            and checkpoint writing are excluded.
        stopped_early: ``True`` when ``patience`` or ``target`` ended training.
        stop_reason: ``"max_steps"``, ``"max_epochs"``, ``"time_budget"``, ``"patience"``,
            ``"target"`` or ``"data_exhausted"`` (an epoch yielded no batch).
        best_metric, best_step: best value of ``monitor`` seen and its step (``None`` without one).
        world_size: processes that trained together (1 without ``torchrun``); losses and
            ``tokens_per_s`` in ``history`` are over all of them.
        amp: the mixed precision the run used (``"auto"`` resolved: ``"none"``, ``"bf16"`` or ``"fp16"``).
    """

    history: list[dict[str, float]] = field(default_factory=list)
    eval_history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    epochs: int = 0
    train_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""
    best_metric: float | None = None
    best_step: int | None = None
    world_size: int = 1
    amp: str = "none"

    @property
    def final_loss(self) -> float:
        """Training loss of the last optimizer step (``nan`` before any step)."""
        return self.history[-1]["loss"] if self.history else math.nan

    @property
    def last_eval(self) -> dict[str, float]:
        """Metrics of the last evaluation (empty dict if none)."""
        return self.eval_history[-1] if self.eval_history else {}
