"""The learning-rate schedule of the paper (the "Noam" schedule)."""

from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from ..validation import check_positive_int


def noam_rate(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """Learning rate at optimizer step ``step >= 1``: ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup_steps`` steps, peaks at ``factor * (d_model * warmup_steps)^-0.5``
    and then decays as ``step^-0.5``. Step 0 is treated as step 1 (no zero learning rate).
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_schedule(optimizer: Optimizer, d_model: int, warmup_steps: int, factor: float = 1.0) -> LambdaLR:
    """A ``LambdaLR`` under which optimizer step ``s`` (counting from 1) uses ``noam_rate(s, ...)``.

    The schedule gives the absolute rate whatever ``lr`` the optimizer was built with. Call
    ``scheduler.step()`` once per **optimizer** step (not per micro-batch under gradient
    accumulation): after ``n`` calls the rate is ``noam_rate(n + 1, ...)``.
    """
    check_positive_int("d_model", d_model)
    check_positive_int("warmup_steps", warmup_steps)
    lambdas = []
    for group in optimizer.param_groups:
        base = group["lr"]
        if not base > 0:
            raise ValueError(f"optimizer lr must be positive for noam_schedule, got lr={base}")
        lambdas.append(lambda s, base=base: noam_rate(s + 1, d_model, warmup_steps, factor) / base)
    return LambdaLR(optimizer, lambdas)
