"""Learning-rate schedules: the paper's ("Noam": warm-up, then decay as ``step**-0.5``) and a linear decay.

Both rise linearly for ``warmup_steps`` to a peak. The Noam schedule then decays slowly and never
reaches zero, which suits training with no known end; the linear schedule falls in a straight line
to (almost) zero at the end of a known budget, a common choice for a fixed budget: a number of
steps, a number of seconds of training, or both (it then reaches zero at whichever ends first, so a
run cut short by a slow machine still ends with a small rate).
"""

from __future__ import annotations

from collections.abc import Callable

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


def linear_decay_rate(
    step: int, peak: float, warmup_steps: int, total_steps: int | None, time_used: float = 0.0
) -> float:
    """Learning rate at optimizer step ``step >= 1``: linear warm-up to ``peak``, then linear decay.

    Steps ``1..warmup_steps`` rise as ``peak * step / warmup_steps``; the later steps fall as
    ``peak * (total + 1 - step) / (total + 1 - warmup)``, so that the last step, ``total_steps``,
    still moves the weights (by ``peak / (total + 1 - warmup)``) and the rate would reach zero one
    step later. ``time_used`` is the fraction of a time budget already spent (0 without one): the
    rate is also capped at ``peak * (1 - time_used)``, so that it reaches zero at whichever of the
    two budgets ends first. With ``total_steps=None`` only the time budget decays it.
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

    ``time_used``: a callable giving the fraction of the time budget spent so far, read at every
    step (``None``: no time budget; then ``total_steps`` is needed).
    """
    check_positive_int("warmup_steps", warmup_steps)
    if total_steps is None and time_used is None:
        raise ValueError("linear_decay_schedule needs total_steps, time_used, or both (it decays to zero at their end)")
    if total_steps is not None:
        check_positive_int("total_steps", total_steps)
        if warmup_steps >= total_steps:
            raise ValueError(f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}")
    clock = time_used or (lambda: 0.0)
    lambdas = [
        lambda s, base=group["lr"]: linear_decay_rate(s + 1, peak, warmup_steps, total_steps, clock()) / base
        for group in optimizer.param_groups
    ]
    return LambdaLR(optimizer, lambdas)
