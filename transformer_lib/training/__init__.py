"""Training (训练): :func:`~.train` over a :class:`~.TrainState`, :func:`~.optimizer_step`,
:class:`~.TrainConfig`, the loss, the learning-rate schedules and ``torchrun``; built on the model,
the checkpoints and the data.
"""

from .config import SCHEDULES, TrainConfig, TrainResult
from .loop import TrainData, train
from .loss import BatchForward, batch_logits, evaluate_loss, sequence_loss
from .schedule import linear_decay_rate, linear_decay_schedule, noam_rate, noam_schedule
from .state import TrainState, train_state_path

__all__ = [
    "SCHEDULES",
    "BatchForward",
    "TrainConfig",
    "TrainData",
    "TrainResult",
    "TrainState",
    "batch_logits",
    "evaluate_loss",
    "linear_decay_rate",
    "linear_decay_schedule",
    "noam_rate",
    "noam_schedule",
    "sequence_loss",
    "train",
    "train_state_path",
]
