"""Training (训练): the loop, its configuration, the loss, the learning-rate schedule, resumable
state and data parallelism.

Layer: imports the model, the checkpoint format, the data (batches) and the building blocks below
it; the tasks and the command line build on it. Its modules:

* :mod:`~transformer_lib.training.loop`: :func:`~.train`, a short loop over named steps;
* :mod:`~transformer_lib.training.step`: one optimizer step (gradient accumulation, several ranks);
* :mod:`~transformer_lib.training.config`: :class:`~.TrainConfig` and :class:`~.TrainResult`;
* :mod:`~transformer_lib.training.loss`: the label-smoothed cross-entropy and the validation loss;
* :mod:`~transformer_lib.training.schedule`: the paper's (Noam) learning-rate schedule;
* :mod:`~transformer_lib.training.state`: saving and restoring a run so that it resumes exactly;
* :mod:`~transformer_lib.training.distributed`: ``torchrun`` and ``torch.distributed``.
"""

from .config import AMP_MODES, SCHEDULES, TrainConfig, TrainResult
from .loop import TrainData, train
from .loss import BatchForward, batch_logits, evaluate_loss, sequence_loss
from .schedule import linear_decay_rate, linear_decay_schedule, noam_rate, noam_schedule
from .state import train_state_path

__all__ = [
    "AMP_MODES",
    "SCHEDULES",
    "BatchForward",
    "TrainConfig",
    "TrainData",
    "TrainResult",
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
