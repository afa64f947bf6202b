"""Behaviour checks of layers, outputs and the training recipe: norm placement, logits, label
smoothing, the schedule, the vocabulary, clear failures, claimed settings and costs.

See :mod:`transformer_book.checks` for what a check is.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from .blocks import CheckFailed, _output, max_abs_diff


# ---------------------------------------------------------------------------------------------
# Layers and normalisation
# ---------------------------------------------------------------------------------------------
def _standardize(x: Tensor) -> Tensor:
    return F.layer_norm(x, x.shape[-1:])


def check_norm_placement(
    layer: nn.Module,
    x: Tensor,
    *,
    norm_first: bool,
    forward: Callable[[nn.Module, Tensor], Any] | None = None,
    normalize: Callable[[Tensor], Tensor] = _standardize,
    atol: float = 1e-4,
) -> None:
    """Check where a layer puts its residual connections (残差连接) and LayerNorms.

    In a copy of ``layer``, every ``nn.Linear`` is zeroed (weights and biases) and every norm is
    reset to weight 1, bias 0. Each sub-layer (attention, feed-forward) ends in a linear map, so
    it now outputs exactly 0, and what is left is the skeleton of the layer:

    * Pre-LN, ``x + F(LN(x))`` per sub-layer: the output equals the input ``x``;
    * Post-LN, ``LN(x + F(x))`` per sub-layer: the output equals ``LN(x)``;
    * a sub-layer **without** its residual connection outputs 0 (or a constant) instead.

    Args:
        layer: the layer (encoder or decoder); it is not modified.
        x: input ``(B, T, d)`` that is not already normalised (mean far from 0 or std far from 1).
        norm_first: the placement the layer claims (``True`` = Pre-LN).
        forward: how to call the layer (default ``layer(x)``; e.g. ``lambda m, x: m(x, memory)``).
        normalize: the layer's norm with weight 1 and bias 0 (default: LayerNorm; pass an RMS
            normalisation for a layer built with RMSNorm).
    """
    if max_abs_diff(x, normalize(x)) < 0.1:
        raise ValueError("x must not already be normalised: use e.g. 3 * torch.randn(...) + 1")
    skeleton = copy.deepcopy(layer).eval()
    with torch.no_grad():
        for module in skeleton.modules():
            if isinstance(module, nn.Linear):
                module.weight.zero_()
                if module.bias is not None:
                    module.bias.zero_()
            elif "norm" in type(module).__name__.lower():
                if isinstance(getattr(module, "weight", None), Tensor):
                    module.weight.fill_(1.0)
                if isinstance(getattr(module, "bias", None), Tensor):
                    module.bias.zero_()
        out = _output(forward(skeleton, x) if forward is not None else skeleton(x))
    pre, post = max_abs_diff(out, x), max_abs_diff(out, normalize(x))
    found = (
        "Pre-LN (output = input)"
        if pre <= atol
        else "Post-LN (output = LN(input))"
        if post <= atol
        else None
    )
    if found is None:
        found = (
            f"neither: the output is {out.abs().max().item():.3g} at most while the input reaches "
            f"{x.abs().max().item():.3g}, so a sub-layer has no residual connection (or its norm "
            "is not `normalize`)"
        )
    expected, error = ("Pre-LN", pre) if norm_first else ("Post-LN", post)
    if error > atol:
        raise CheckFailed(
            f"the layer claims {expected} (norm_first={norm_first}) but with its sub-layers "
            f"switched off it is {found}; distance from {expected}: {error:.3g}"
        )


def check_layer_norm_matches_torch(
    norm: Callable[[Tensor], Tensor],
    d_model: int,
    *,
    eps: float = 1e-5,
    scales: Sequence[float] = (1.0, 100.0, 1e-3),
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Check a layer normalisation (层归一化) against ``F.layer_norm`` on inputs of several scales.

    The reference is ``(x - mean) / sqrt(var + eps) * weight + bias`` with the **biased** variance
    (divide by ``d``) and ``eps`` **inside** the square root, as in ``nn.LayerNorm``. ``weight`` and
    ``bias`` are taken from ``norm`` if it has them. The scale 1e-3 makes the variance comparable
    with ``eps``, where the position of ``eps`` matters; the unbiased variance shows at every scale.
    """
    weight = getattr(norm, "weight", None)
    bias = getattr(norm, "bias", None)
    dtype = weight.dtype if isinstance(weight, Tensor) else torch.float32
    gen = torch.Generator().manual_seed(0)
    for scale in scales:
        x = (torch.randn(4, 6, d_model, generator=gen, dtype=dtype) + 2.0) * scale
        with torch.no_grad():
            ours = norm(x)
            reference = F.layer_norm(x, (d_model,), weight, bias, eps)
        error = max_abs_diff(ours, reference)
        if error > atol + rtol * reference.abs().max().item():
            relative = error / max(reference.abs().max().item(), 1e-30)
            raise CheckFailed(
                f"differs from nn.LayerNorm (biased variance, eps={eps:g} inside the square root) "
                "by up to "
                f"{error:.3g} ({relative:.2%} of the output's size) on inputs of scale {scale:g}"
            )


def check_outputs_are_logits(
    output: Tensor, vocab_size: int, *, allow_log_probabilities: bool = False, atol: float = 1e-3
) -> None:
    """Check that ``output`` holds **logits** (未归一化的分数) over a vocabulary of ``vocab_size``.

    Logits are one unnormalised score per vocabulary entry, so the last dimension must be
    ``vocab_size``. Their values are otherwise free: adding a constant to every score of a row
    changes none of its probabilities, so logits that are all positive are as valid as any. What
    logits are not is normalised. Rows of non-negative entries that sum to 1 are probabilities (a
    softmax was applied), and ``F.cross_entropy``, given them, would apply a second softmax and
    could no longer reach a small loss. Rows whose ``logsumexp`` is 0 are log-probabilities (a
    ``log_softmax`` was applied); they are refused unless ``allow_log_probabilities``. The check
    therefore catches a missing vocabulary projection (wrong width) and a softmax at the right
    width.

    Shape:
        output: ``(..., vocab_size)``.
    """
    if output.size(-1) != vocab_size:
        raise CheckFailed(
            f"the last dimension is {output.size(-1)}, not vocab_size={vocab_size}: there is no "
            "projection to the vocabulary"
        )
    values = output.double()
    sums = values.sum(-1)
    if values.min().item() >= 0.0 and torch.allclose(sums, torch.ones_like(sums), atol=atol):
        raise CheckFailed(
            f"the outputs look like probabilities: every entry is in [{values.min().item():.4f}, "
            f"{values.max().item():.4f}] and every row sums to 1 "
            f"({sums.min().item():.4f}..{sums.max().item():.4f}): "
            f"softmax was applied; return logits"
        )
    lse = values.logsumexp(-1)
    if not allow_log_probabilities and torch.allclose(lse, torch.zeros_like(lse), atol=atol):
        raise CheckFailed(
            "the outputs are log-probabilities (every row's logsumexp is 0), not logits"
        )


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def check_finite_label_smoothing_loss(
    loss_fn: Callable[[Tensor, Tensor], Tensor], *, vocab_size: int = 7, gap: float = 200.0
) -> float:
    """Check that a label-smoothed loss (标签平滑) stays finite for a very confident model.

    ``loss_fn(logits, target)`` gets float32 logits ``(2, 3, vocab_size)`` in which the last class
    is ``gap`` below the others, so its softmax probability underflows to exactly 0. A smoothed
    target puts some mass on every class; a loss that takes ``log`` of probabilities then returns
    ``inf`` (or ``NaN``). A loss computed from logits (``log_softmax``) does not. The loss and its
    gradient must be finite. Targets are ids in ``[1, vocab_size - 2]`` (no padding id 0).

    Returns:
        The loss value.
    """
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, vocab_size, generator=gen)
    logits[..., -1] = -gap  # (2, 3, V): softmax of the last class is exactly 0.0 in float32
    logits.requires_grad_()
    target = torch.randint(1, vocab_size - 1, (2, 3), generator=gen)
    loss = loss_fn(logits, target)
    value = loss.item()
    if not math.isfinite(value):
        raise CheckFailed(
            f"the loss is {value} when one class has probability exp(-{gap:g}) = 0.0 in float32: "
            "it takes the log of probabilities; compute it from logits (log_softmax / "
            "F.cross_entropy)"
        )
    loss.backward()
    if logits.grad is None or not torch.isfinite(logits.grad).all():
        raise CheckFailed("the loss is finite but its gradient is not")
    return value


def check_lr_per_optimizer_step(
    used_lrs: Sequence[float], rate: Callable[[int], float], *, rtol: float = 1e-6
) -> None:
    """Check that optimizer step ``s`` (from 1) used the learning rate ``rate(s)`` of its schedule.

    ``used_lrs`` are the rates read from the optimizer (``optimizer.param_groups[0]["lr"]``) just
    before each ``optimizer.step()``. Under gradient accumulation (梯度累积) the scheduler must be
    stepped once per optimizer step, not once per micro-batch; otherwise step ``s`` uses the rate
    of a later step and the warm-up (学习率预热) ends too early.
    """
    if not used_lrs:
        raise ValueError("used_lrs is empty: run at least one optimizer step")
    for step, used in enumerate(used_lrs, start=1):
        expected = rate(step)
        if not math.isclose(used, expected, rel_tol=rtol, abs_tol=0.0):
            matches = [
                k
                for k in range(1, 50 * len(used_lrs) + 2)
                if math.isclose(used, rate(k), rel_tol=rtol)
            ]
            hint = f" (that is the schedule's rate for step {matches[0]})" if matches else ""
            raise CheckFailed(
                f"optimizer step {step} used lr={used:.4e}{hint}, but the schedule gives "
                f"lr={expected:.4e} "
                f"for step {step}: the scheduler is not stepped once per optimizer step"
            )


def check_vocab_ignores_split(
    build_vocab: Callable[[dict[str, list[tuple[str, str]]]], Any],
    data: Mapping[str, list[tuple[str, str]]],
    split: str,
) -> int:
    """Check that a vocabulary (词表) built from ``data`` does not depend on the ``split`` (e.g. the
    test set).

    ``build_vocab(data)`` returns the vocabulary (any collection of token strings, e.g. a dict
    ``token -> id``). It is built twice: from ``data``, and from ``data`` with ``split`` replaced by
    sentences of made-up words. If the two vocabularies differ, text of ``split`` went into it,
    and test sentences leak into training (their words get their own tokens). Returns the size.
    """
    if split not in data:
        raise ValueError(f"split={split!r} is not in data (splits: {sorted(data)})")
    words = ["qzxv", "wjyk", "xqzj", "vkqw"]
    canary = [(f"{a} {b}", f"{b} {a}") for a in words for b in words] * 3
    vocab = set(build_vocab(dict(data)))
    other = set(build_vocab({**data, split: canary}))
    if vocab != other:
        added = sorted(other - vocab)
        raise CheckFailed(
            f"the vocabulary changes when the {split!r} split changes: "
            f"{len(other - vocab)} entries appear (e.g. {added[:3]}) and {len(vocab - other)} "
            f"disappear; it was built with {split!r} text"
        )
    return len(vocab)


# ---------------------------------------------------------------------------------------------
# Data and files
# ---------------------------------------------------------------------------------------------
def check_fails_clearly(
    fn: Callable[[], Any], *, mentions: Sequence[str], exception: type[BaseException] = Exception
) -> BaseException:
    """Check that ``fn()`` fails with an ``exception`` whose message mentions every string in
    ``mentions``.

    For code that must refuse bad input: a corrupted download, a missing file without a network.
    Returning data, or failing with a message that does not say what is wrong (a decompression
    error deep inside ``gzip``), fails the check. Returns the exception.
    """
    try:
        result = fn()
    except exception as error:
        message = str(error)
        missing = [m for m in mentions if m not in message]
        if missing:
            raise CheckFailed(
                f"failed with {type(error).__name__}, but the message does not mention {missing}: "
                f"{message.splitlines()[0][:160] if message else '(empty message)'}"
            ) from error
        return error
    summary = (
        f"{type(result).__name__} of {len(result)} items"
        if hasattr(result, "__len__")
        else repr(result)
    )
    raise CheckFailed(f"returned {summary} instead of failing: the bad input was accepted")


# ---------------------------------------------------------------------------------------------
# Claims about numbers
# ---------------------------------------------------------------------------------------------
def check_settings(settings: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Check that every setting in ``settings`` that ``expected`` also states has the expected
    value.

    Used to compare training recipes (optimizer, dropout, clipping, batch size) with a reference
    such as the paper. At least one key must be shared.
    """
    shared = [key for key in settings if key in expected]
    if not shared:
        raise ValueError(
            f"settings {sorted(settings)} and expected {sorted(expected)} share no key"
        )
    wrong = [
        f"{key}={settings[key]!r} (expected {expected[key]!r})"
        for key in shared
        if settings[key] != expected[key]
    ]
    if wrong:
        raise CheckFailed(f"{len(wrong)} of {len(shared)} settings differ: " + "; ".join(wrong))


def count_flops(fn: Callable[..., Any], *args: Any) -> int:
    """Floating-point operations of one call ``fn(*args)``, counted by ``torch.utils.flop_counter``.

    The counter counts matrix products (``mm``, ``addmm``, ``bmm``, attention kernels, ...): a
    product of an ``(m, k)`` and a ``(k, n)`` matrix is ``2 m k n``. Element-wise operations are
    not counted. The count depends on the shapes only, so it is exact and reproducible.
    """
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        fn(*args)
    return int(counter.get_total_flops())


def check_cost_exponent(
    cost: Callable[[int], float], sizes: Sequence[int], exponent: float, *, tol: float = 0.1
) -> float:
    """Check that ``cost(n)`` grows like ``n ** exponent`` over ``sizes`` (slope of a log-log fit).

    Returns the measured exponent. Used to test claims such as "one RNN step costs O(n)" against
    a count of the operations the step performs.
    """
    if len(sizes) < 2:
        raise ValueError("sizes needs at least two values")
    xs = [math.log(n) for n in sizes]
    ys = [math.log(cost(n)) for n in sizes]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((a - mean_x) * (b - mean_y) for a, b in zip(xs, ys, strict=True)) / sum(
        (a - mean_x) ** 2 for a in xs
    )
    if abs(slope - exponent) > tol:
        raise CheckFailed(
            f"the cost grows like n^{slope:.2f} over n in {list(sizes)}, not like n^{exponent:g}"
        )
    return slope
