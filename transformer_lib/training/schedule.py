"""Learning-rate schedules: the paper's ("Noam": warm-up, then decay as ``step**-0.5``) and a linear
decay.

Both rise linearly for ``warmup_steps`` to a peak. Noam's never reaches zero, for training with no
known end; the linear one falls to (almost) zero at the end of a budget of steps, of seconds, or of
both.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from ..validation import check_positive_int


def noam_rate(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """Learning rate at optimizer step ``step >= 1``: ``factor * d_model^-0.5 * min(step^-0.5, step
    * warmup^-1.5)``.

    It peaks at step ``warmup_steps``, at ``factor * (d_model * warmup_steps)^-0.5``. Step 0 counts
    as step 1.
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_schedule(
    optimizer: Optimizer, d_model: int, warmup_steps: int, factor: float = 1.0
) -> LambdaLR:
    """A ``LambdaLR`` under which optimizer step ``s`` (counting from 1) uses ``noam_rate(s, ...)``.

    The rate is absolute, whatever ``lr`` the optimizer was built with. Call ``scheduler.step()``
    once per **optimizer** step, not per micro-batch of gradient accumulation.
    """
    check_positive_int("d_model", d_model)
    check_positive_int("warmup_steps", warmup_steps)
    rates = [group["lr"] for group in optimizer.param_groups]
    if not all(base > 0 for base in rates):
        raise ValueError(f"optimizer lr must be positive for noam_schedule, got lr={rates}")
    return LambdaLR(
        optimizer,
        [
            lambda s, base=base: noam_rate(s + 1, d_model, warmup_steps, factor) / base
            for base in rates
        ],
    )


def linear_decay_rate(
    step: int, peak: float, warmup_steps: int, total_steps: int | None, time_used: float = 0.0
) -> float:
    """Learning rate at optimizer step ``step >= 1``: linear warm-up to ``peak``, then linear decay.

    After the warm-up it falls as ``peak * (total + 1 - step) / (total + 1 - warmup)`` (the last
    step still moves the weights), capped at ``peak * (1 - time_used)``, ``time_used`` the share of
    a time budget spent.
    """
    step = max(step, 1)
    if step <= warmup_steps:
        rate = peak * step / warmup_steps
    elif total_steps is None:
        rate = peak
    else:
        rate = peak * max(total_steps + 1 - step, 0) / (total_steps + 1 - warmup_steps)
    return min(rate, peak * max(1.0 - time_used, 0.0))


def linear_decay_schedule(
    optimizer: Optimizer,
    peak: float,
    warmup_steps: int,
    total_steps: int | None,
    time_used: Callable[[], float] | None = None,
) -> LambdaLR:
    """A ``LambdaLR`` under which optimizer step ``s`` (from 1) uses :func:`linear_decay_rate`.

    ``time_used`` gives the share of the time budget spent, read at every step (``None``: no
    budget). With neither ``total_steps`` nor ``time_used`` the rate stays at ``peak`` after the
    warm-up.
    """
    check_positive_int("warmup_steps", warmup_steps)
    if total_steps is not None and warmup_steps >= total_steps:
        raise ValueError(
            f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}"
        )
    clock = time_used or (lambda: 0.0)
    lambdas = [
        lambda s, base=group["lr"]: (
            linear_decay_rate(s + 1, peak, warmup_steps, total_steps, clock()) / base
        )
        for group in optimizer.param_groups
    ]
    return LambdaLR(optimizer, lambdas)
