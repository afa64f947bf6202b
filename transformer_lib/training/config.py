"""What a training run is told (:class:`~.TrainConfig`) and what it reports
(:class:`~.TrainResult`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..runtime import AMP_CHOICES, AmpMode
from ..validation import check_bool, check_choice, check_positive_int, check_probability

Schedule = Literal["noam", "linear"]
SCHEDULES: tuple[str, ...] = get_args(Schedule)


def _positive_number(name: str, value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive {what}, got {name}={value!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`~.train` needs besides the model and the data; checked when built.

    ``lr`` is the **peak** rate, reached after ``warmup_steps`` optimizer steps. ``schedule="noam"``
    has the paper's shape (linear rise, then decay as ``step**-0.5``; the paper's ``factor=1``,
    ``d_model=512``, ``warmup_steps=4000`` is ``lr = 7.0e-4``); ``"linear"`` falls after the warm-up
    to almost zero at ``max_steps`` or at ``time_budget_s``, whichever comes first (it needs one).

    Attributes:
        max_steps, max_epochs: stop after this many optimizer steps / passes over the data.
        time_budget_s: stop after this many seconds of training steps (the slowest rank's under
            ``torchrun``).
        label_smoothing: ``epsilon_ls`` of ``F.cross_entropy`` (the paper: 0.1).
        grad_accum: batches whose gradients are summed before each optimizer step (per process).
        clip_norm: clip the global gradient norm to this value (``None``: off, as in the paper).
        amp: ``"none"`` (float32), ``"bf16"``, ``"fp16"`` (CUDA, ``GradScaler``), ``"auto"`` (on
            a GPU :func:`~.amp_for_device`; on a CPU the faster of float32 and bfloat16, timed on
            the model's own step: :func:`~.choose_cpu_amp`).
        adam_betas, adam_eps: Adam's hyper-parameters (the paper: ``(0.9, 0.98)``, ``1e-9``).
        eval_every: evaluate every this many steps (``None``: every epoch), and always at the end.
        monitor, mode: the metric (a key of ``evaluate``'s dict) whose best value the result
            records, and that ``target`` watches; ``"max"`` if larger is better.
        target: stop once ``monitor`` reaches this.
        checkpoint_path, checkpoint_every: write the resumable state there every this many steps
            and at the end (a directory keeps the newest ``step-N`` pair: model and state).
        keep_last: above 1, every evaluation also writes a checkpoint, and a checkpoint
            directory keeps the model files of the last this many evaluations besides the newest
            and the ``best_step``'s (with ``monitor``): what checkpoint averaging reads. Only the
            newest keeps its training state (Adam's moments are twice the weights).
        seed: seeds dropout and the data order (rank ``r`` of ``torchrun``: ``seed + r``), not the
            weights.
        progress: a tqdm bar on stderr (rank 0 only; tqdm's ``TQDM_DISABLE`` also hides it).
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    time_budget_s: float | None = None
    lr: float = 7e-4
    warmup_steps: int = 4000
    schedule: Schedule = "noam"
    label_smoothing: float = 0.1
    grad_accum: int = 1
    clip_norm: float | None = None
    amp: AmpMode = "none"
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    eval_every: int | None = None
    monitor: str | None = None
    mode: Literal["max", "min"] = "max"
    target: float | None = None
    checkpoint_path: str | None = None
    checkpoint_every: int | None = None
    keep_last: int = 1
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        self._check_budget()
        self._check_optimizer()
        self._check_evaluation()

    def _check_budget(self) -> None:
        if self.max_steps is None and self.max_epochs is None and self.time_budget_s is None:
            raise ValueError(
                "TrainConfig needs max_steps, max_epochs or time_budget_s (or several); got none"
            )
        for name in ("max_steps", "max_epochs"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        if self.time_budget_s is not None:
            _positive_number("time_budget_s", self.time_budget_s, "number of seconds or None")
        check_choice("schedule", self.schedule, SCHEDULES)
        check_positive_int("warmup_steps", self.warmup_steps)
        if self.schedule == "linear" and self.max_steps is None and self.time_budget_s is None:
            raise ValueError(
                "schedule='linear' decays to zero at the end of the budget, so it needs max_steps "
                "or time_budget_s; got neither"
            )
        if self.schedule == "linear" and self.max_steps is not None:
            if self.warmup_steps >= self.max_steps:
                raise ValueError(
                    f"schedule='linear' needs max_steps > warmup_steps; "
                    f"got max_steps={self.max_steps}, warmup_steps={self.warmup_steps}"
                )

    def _check_optimizer(self) -> None:
        _positive_number("lr", self.lr, "float (the peak learning rate)")
        check_probability("label_smoothing", self.label_smoothing)
        check_positive_int("grad_accum", self.grad_accum)
        check_choice("amp", self.amp, AMP_CHOICES)
        if self.clip_norm is not None:
            _positive_number("clip_norm", self.clip_norm, "number or None")
        _positive_number("adam_eps", self.adam_eps, "number")
        if len(self.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in self.adam_betas):
            raise ValueError(f"adam_betas must be two floats in [0, 1), got {self.adam_betas!r}")

    def _check_evaluation(self) -> None:
        for name in ("eval_every", "checkpoint_every"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_positive_int("keep_last", self.keep_last)
        check_choice("mode", self.mode, ("max", "min"))
        check_bool("progress", self.progress)
        if self.monitor is None and self.target is not None:
            raise ValueError("target needs monitor= (the metric to watch)")

    def noam_factor(self, d_model: int) -> float:
        """The Noam ``factor`` that makes the schedule peak at ``lr``: ``lr * sqrt(d_model *
        warmup_steps)``.
        """
        return self.lr * math.sqrt(d_model * self.warmup_steps)


@dataclass
class TrainResult:
    """What :func:`~.train` returns.

    Attributes:
        history: one dict per optimizer step: ``step``, ``epoch``, ``loss`` (mean per target token),
            ``lr``, ``tokens_per_s`` (source + target non-padding tokens, over all processes).
        eval_history: one dict per evaluation: ``step``, ``epoch``, then the metrics.
        steps, epochs: optimizer steps done (those before a resume included); completed passes over
            the data.
        train_seconds: time in training steps (data, forward, backward, update).
        tokens: source + target tokens trained on, padding excluded, over all processes (those
            before a resume included).
        stop_reason: why the run stopped: ``"max_steps"``, ``"max_epochs"``, ``"time_budget"``,
            ``"target"`` (:attr:`stopped_early`), or ``"data_exhausted"`` (an epoch yielded no
            batch); ``""`` while it runs.
        best_metric, best_step: best value of ``monitor`` seen and its step (``None`` without one).
        world_size, amp: processes that trained together; the mixed precision used (``"auto"``
            resolved).
        amp_probe: for ``amp="auto"`` on a CPU, what decided it (:func:`~.choose_cpu_amp`): the
            median seconds of a step in float32 (``"none"``) and in bfloat16, and whether the
            answer came from this machine's cache; ``None`` otherwise.
    """

    history: list[dict[str, float]] = field(default_factory=list)
    eval_history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    epochs: int = 0
    train_seconds: float = 0.0
    tokens: int = 0
    stop_reason: str = ""
    best_metric: float | None = None
    best_step: int | None = None
    world_size: int = 1
    amp: AmpMode = "none"
    amp_probe: dict[str, Any] | None = None

    @property
    def stopped_early(self) -> bool:
        """Whether early stopping ended the run (``monitor`` reached ``target``)."""
        return self.stop_reason == "target"

    @property
    def final_loss(self) -> float:
        """Training loss of the last optimizer step (``nan`` before any step)."""
        return self.history[-1]["loss"] if self.history else math.nan

    @property
    def last_eval(self) -> dict[str, float]:
        """Metrics of the last evaluation (empty dict if none)."""
        return self.eval_history[-1] if self.eval_history else {}
