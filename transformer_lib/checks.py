"""Behaviour checks (行为检查): reusable tests of what a piece of a Transformer must do.

Each ``check_*`` function runs a piece of code, measures one property that every correct
implementation has, and raises :class:`CheckFailed` (an ``AssertionError``) with a message that
says what failed and by how much. On success it returns ``None`` or a small measured value.

The checks take **callables** (a function, a module, a lambda around a model) rather than
library classes, so the same check applies to a deliberately wrong toy implementation and to
``transformer_lib`` alike: the library's tests use them, and the errata chapter applies each one
to a wrong version (it fails) and to the library (it passes). This module sits at the level of
the building blocks: it imports only PyTorch.

A check proves a property only for the inputs it is given; they are chosen small and generic
(random values, all positions, several scales), so that a defect of the kind the check looks for
shows up on them.
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


class CheckFailed(AssertionError):
    """A behaviour check found a defect; the message says what failed and by how much."""


def _output(result: Any) -> Tensor:
    """The output tensor of a call: modules such as attention return ``(output, weights)``."""
    return result[0] if isinstance(result, tuple) else result


def max_abs_diff(a: Tensor, b: Tensor) -> float:
    """Largest absolute element-wise difference, computed in float64 (0.0 for empty tensors)."""
    if a.shape != b.shape:
        raise ValueError(f"cannot compare tensors of shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return (a.detach().double() - b.detach().double()).abs().max().item()


def _other_values(values: Tensor, vocab_size: int | None) -> Tensor:
    """Values that differ from ``values`` everywhere: another non-zero token id, or ``x + 1``."""
    if values.is_floating_point():
        return values + 1.0
    if vocab_size is None or vocab_size < 3:
        raise ValueError("integer inputs (token ids) need vocab_size >= 3 to be changed into other tokens")
    return values % (vocab_size - 1) + 1  # ids 1..V-1 -> 2..V-1, 1 (never 0, the usual padding id)


# ---------------------------------------------------------------------------------------------
# What the output depends on
# ---------------------------------------------------------------------------------------------
def check_depends_on_input(
    fn: Callable[[Tensor], Any], x: Tensor, x_changed: Tensor, *, min_change: float = 1e-6
) -> float:
    """Check that ``fn``'s output changes when its input changes from ``x`` to ``x_changed``.

    Proves that information flows from the input to the output at all. A model whose input is
    overwritten (for example by the positional encoding) returns the same output for every input
    and still has the right shape, so a shape check never notices.

    Returns:
        The largest change of the output.
    """
    if x.shape == x_changed.shape and torch.equal(x, x_changed):
        raise ValueError("x_changed must differ from x")
    before, after = _output(fn(x)), _output(fn(x_changed))
    change = max_abs_diff(before, after) if before.shape == after.shape else math.inf
    if not change > min_change:
        raise CheckFailed(
            f"the output does not depend on the input: changing the input changed the output by {change:.3g} "
            f"(at most), less than {min_change:g}"
        )
    return change


def check_causal(
    fn: Callable[[Tensor], Any],
    x: Tensor,
    *,
    vocab_size: int | None = None,
    dim: int = 1,
    atol: float = 1e-6,
    min_change: float = 1e-6,
) -> None:
    """Check that the output at position ``i`` depends on input positions ``<= i`` only (因果性).

    For every position ``t`` the input at ``t`` is changed (to another token id, or by +1 for
    float inputs); the outputs at positions ``< t`` must stay within ``atol``, and every output
    at a position ``>= t`` must change by more than ``min_change``. The first half is what a
    causal mask guarantees: a decoder trained with teacher forcing cannot read the token it has
    to predict. The second half keeps the check from passing on a function that ignores its input.

    Args:
        fn: maps ``x`` to an output whose dimension ``dim`` is the same sequence of positions.
        x: a batch of inputs, positions along ``dim``; token ids need ``vocab_size``.
    """
    out = _output(fn(x))
    length = x.size(dim)
    for t in range(length):
        changed = x.clone()
        changed.select(dim, t).copy_(_other_values(x.select(dim, t), vocab_size))
        new = _output(fn(changed))
        leak = max_abs_diff(new.narrow(dim, 0, t), out.narrow(dim, 0, t))
        if leak > atol:
            raise CheckFailed(
                f"not causal: changing input position {t} changed the outputs at earlier positions 0..{t - 1} "
                f"by up to {leak:.3g} (allowed {atol:g}), so those positions see the future"
            )
        for later in range(t, length):
            change = max_abs_diff(new.select(dim, later), out.select(dim, later))
            if not change > min_change:
                raise CheckFailed(
                    f"output position {later} ignores input position {t}: it changed by {change:.3g} "
                    f"(at least {min_change:g} expected)"
                )


def _same_positions(big: Tensor, small: Tensor, dim: int) -> Tensor:
    """The part of ``big`` at the positions ``small`` has (outputs of a longer, padded input)."""
    return big if big.shape == small.shape else big.narrow(dim, 0, small.size(dim))


def check_padding_invariant(
    fn: Callable[[Tensor], Any],
    tokens: Tensor,
    pad_id: int,
    *,
    num_pad: int = 3,
    out_dim: int = 1,
    atol: float = 1e-6,
) -> None:
    """Check that padding (填充) added to a sequence does not change the outputs of its real tokens.

    Two cases: (1) ``num_pad`` padding tokens appended to every row; (2) a ragged batch, where the
    last row keeps only its first half of tokens and the rest is padding: that row's outputs must
    equal those of the same batch cut to that half-length. Outputs are compared at the real
    positions (outputs with a sequence dimension ``out_dim`` that grows with the input are cut;
    outputs that do not grow, such as decoder logits against a padded source, are compared whole).

    Args:
        fn: maps a ``(B, T)`` batch of token ids to an output.
        tokens: ``(B, T)`` ids without padding, ``T >= 2``.
    """
    if tokens.dim() != 2 or tokens.size(1) < 2:
        raise ValueError(f"tokens must be a (B, T >= 2) batch of ids, got shape {tuple(tokens.shape)}")
    if (tokens == pad_id).any():
        raise ValueError(f"tokens must not already contain pad_id={pad_id}")
    out = _output(fn(tokens))
    padded = torch.cat([tokens, torch.full((tokens.size(0), num_pad), pad_id, dtype=tokens.dtype)], dim=1)
    change = max_abs_diff(_same_positions(_output(fn(padded)), out, out_dim), out)
    if change > atol:
        raise CheckFailed(
            f"padding changes the output: appending {num_pad} padding tokens changed the outputs of the real "
            f"tokens by up to {change:.3g} (allowed {atol:g}); padding is being attended to"
        )
    keep = tokens.size(1) // 2
    ragged = padded.clone()
    ragged[-1, keep:] = pad_id  # (B, T + num_pad): the last row is shorter than the others
    row = _output(fn(ragged))[-1]
    alone = _output(fn(tokens[:, :keep]))[-1]
    change = max_abs_diff(_same_positions(row, alone, out_dim - 1), alone)
    if change > atol:
        raise CheckFailed(
            f"padding changes the output in a ragged batch: a row with {keep} real tokens and "
            f"{padded.size(1) - keep} padding tokens differs from the unpadded row by up to {change:.3g} "
            f"(allowed {atol:g})"
        )


# ---------------------------------------------------------------------------------------------
# Positional encoding
# ---------------------------------------------------------------------------------------------
def check_positions_distinct(table: Tensor, *, min_distance: float = 1e-3) -> float:
    """Check that every position gets its own code: all rows of ``table`` are pairwise apart.

    A positional encoding whose rows coincide tells the model nothing about order. Returns the
    smallest distance between two rows.

    Shape:
        table: ``(num_positions, d)``.
    """
    if table.dim() != 2 or table.size(0) < 2:
        raise ValueError(f"table must be (num_positions >= 2, d), got shape {tuple(table.shape)}")
    distances = torch.cdist(table.double(), table.double())  # (P, P)
    distances.fill_diagonal_(math.inf)
    smallest = distances.min().item()
    if not smallest > min_distance:
        i, j = divmod(int(distances.argmin()), table.size(0))
        same = int((distances < min_distance).sum().item()) // 2
        raise CheckFailed(
            f"positions are not distinct: positions {min(i, j)} and {max(i, j)} get codes only {smallest:.3g} apart "
            f"(at least {min_distance:g} needed); {same} of {table.size(0) * (table.size(0) - 1) // 2} pairs coincide"
        )
    return smallest


def check_values_in_range(
    values: Tensor, low: float, high: float, *, reach_ends: bool = True, tol: float = 1e-3
) -> tuple[float, float]:
    """Check that ``values`` lie in ``[low, high]`` and, with ``reach_ends``, come within ``tol`` of both ends.

    Used to test a claimed range against the real one: the sinusoidal table lies in ``[-1, 1]``
    and uses all of it. The bounds are strict; only reaching the ends has the tolerance ``tol``.
    Returns ``(min, max)``.
    """
    smallest, largest = values.min().item(), values.max().item()
    if smallest < low or largest > high:
        raise CheckFailed(f"values span [{smallest:.4f}, {largest:.4f}], outside the range [{low:g}, {high:g}]")
    if reach_ends and (smallest > low + tol or largest < high - tol):
        raise CheckFailed(
            f"values span [{smallest:.4f}, {largest:.4f}]: they do not cover the range [{low:g}, {high:g}]"
        )
    return smallest, largest


def check_buffer_follows_module(module: nn.Module, name: str) -> None:
    """Check that the tensor ``module.<name>`` is a registered buffer that moves with the module.

    ``register_buffer`` makes a tensor part of the module: ``.to(device)``, ``.to(dtype)``,
    ``.cuda()`` move it along with the parameters. A tensor created on a global ``DEVICE`` and
    stored as a plain attribute stays where it was made, and the first forward pass on another
    device fails. Tested without a GPU: a copy of the module is moved to PyTorch's ``"meta"``
    device and to float64, and the tensor must follow both times.
    """
    tensor = getattr(module, name, None)
    if not isinstance(tensor, Tensor):
        raise ValueError(f"module has no tensor attribute {name!r}")
    if name not in dict(module.named_buffers(recurse=False)):
        raise CheckFailed(
            f"{name} is a plain tensor attribute on {tensor.device.type}, not a registered buffer: "
            f"module.to(...) will not move it"
        )
    moved = copy.deepcopy(module).to("meta")
    if getattr(moved, name).device.type != "meta":
        raise CheckFailed(f"after module.to('meta') the tensor {name} is still on {getattr(moved, name).device}")
    if tensor.is_floating_point():
        converted = copy.deepcopy(module).to(torch.float64)
        if getattr(converted, name).dtype != torch.float64:
            raise CheckFailed(f"after module.to(torch.float64) the tensor {name} is {getattr(converted, name).dtype}")


def check_variable_is_noop(x: Tensor) -> None:
    """Check that ``torch.autograd.Variable(x)`` is just ``x`` again (true since PyTorch 0.4).

    ``Variable`` survives only for old code: it returns an ordinary tensor sharing ``x``'s memory,
    and ``requires_grad`` means what it means on any tensor.
    """
    from torch.autograd import Variable

    wrapped = Variable(x)
    if type(wrapped) is not Tensor or not torch.equal(wrapped, x) or wrapped.data_ptr() != x.data_ptr():
        raise CheckFailed(f"Variable(x) is a {type(wrapped).__name__} that does not share x's memory")
    if Variable(x, requires_grad=True).requires_grad is not True or wrapped.requires_grad != x.requires_grad:
        raise CheckFailed("Variable(x, requires_grad=...) does not behave like x.requires_grad_(...)")


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------
def check_cross_attention_lengths(
    fn: Callable[[Tensor, Tensor], Any], x: Tensor, memory: Tensor, *, min_change: float = 1e-6
) -> None:
    """Check cross-attention (交叉注意力) with a target and a source of **different** lengths.

    The query comes from the decoder (``x``, ``T`` positions), key and value from the encoder
    output (``memory``, ``S`` positions). Then the call works for any ``T != S``, the output has
    one row per target position, and it depends on both the memory and the decoder states. Any
    other arrangement of Q, K and V either fails when ``T != S`` or returns ``S`` rows.

    Shape:
        x: ``(B, T, d)``; memory: ``(B, S, d)`` with ``S != T``; output: ``(B, T, d)``.
    """
    batch, t_len = x.shape[:2]
    s_len = memory.size(1)
    if t_len == s_len:
        raise ValueError(f"x and memory must have different lengths for this check, both have {t_len}")
    try:
        out = _output(fn(x, memory))
    except (RuntimeError, ValueError) as error:
        raise CheckFailed(
            f"cross-attention fails when the target has {t_len} positions and the source {s_len}: "
            f"{type(error).__name__}: {str(error).splitlines()[0]}"
        ) from error
    if tuple(out.shape[:2]) != (batch, t_len):
        raise CheckFailed(
            f"cross-attention returns {tuple(out.shape[:2])} (batch, positions), not ({batch}, {t_len}): "
            f"the queries must come from the target"
        )
    gen = torch.Generator().manual_seed(0)
    other_memory = memory + torch.randn(memory.shape, generator=gen, dtype=memory.dtype)
    other_x = x + torch.randn(x.shape, generator=gen, dtype=x.dtype)
    if not max_abs_diff(_output(fn(x, other_memory)), out) > min_change:
        raise CheckFailed("cross-attention output does not depend on the memory (the encoder output)")
    if not max_abs_diff(_output(fn(other_x, memory)), out) > min_change:
        raise CheckFailed("cross-attention output does not depend on the decoder states")


def check_heads_concatenate_to_d_model(
    build: Callable[[int, int], nn.Module], d_model: int, num_heads: int, *, length: int = 3
) -> str:
    """Check that multi-head attention (多头注意力) uses all ``d_model`` features.

    ``build(d_model, num_heads)`` either refuses (a ``ValueError`` naming both numbers, the right
    answer when ``num_heads`` does not divide ``d_model``) or builds a module whose heads,
    concatenated, are exactly ``d_model`` wide. The width is measured at the input of the last
    ``nn.Linear`` the module runs in a self-attention call ``module(x, x, x)``: the output
    projection, which reads the concatenated heads.

    Returns:
        ``"rejected"`` or ``"built"``.
    """
    try:
        module = build(d_model, num_heads)
    except ValueError as error:
        if str(d_model) in str(error) and str(num_heads) in str(error):
            return "rejected"
        raise CheckFailed(f"build raised a ValueError that names neither d_model nor num_heads: {error}") from error
    widths: list[int] = []
    hooks = [
        m.register_forward_pre_hook(lambda _m, args: widths.append(args[0].size(-1)))
        for m in module.modules()
        if isinstance(m, nn.Linear)
    ]
    try:
        x = torch.randn(2, length, d_model, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            out = _output(module(x, x, x))
    finally:
        for hook in hooks:
            hook.remove()
    if not widths:
        raise ValueError("the module ran no nn.Linear: cannot find its output projection")
    if widths[-1] != d_model:
        raise CheckFailed(
            f"the heads concatenate to {widths[-1]} features, not d_model={d_model}: {d_model - widths[-1]} "
            f"features are lost (num_heads={num_heads} does not divide d_model={d_model}, each head got "
            f"{d_model // num_heads})"
        )
    if out.size(-1) != d_model:
        raise CheckFailed(f"the output has width {out.size(-1)}, not d_model={d_model}")
    return "built"


def check_mask_fp16_safe(
    attention_fn: Callable[[Tensor, Tensor, Tensor, Tensor], Any], *, dtype: torch.dtype = torch.float16
) -> None:
    """Check that masked attention works in half precision (半精度), fully masked rows included.

    ``attention_fn(q, k, v, mask)`` with a boolean mask (``True`` = may attend) must run in
    ``dtype``, return finite values (also for a query row whose keys are all masked), and ignore
    masked keys: changing the values at masked positions must not change the output. A mask
    written as ``masked_fill(..., -1e9)`` fails here: ``-1e9`` does not exist in float16.

    Shape:
        q, k, v: ``(2, 2, 4, 8)``; mask: ``(2, 1, 4, 4)``.
    """
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=gen).to(dtype) for _ in range(3))
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, 0, 1] = False  # batch 0, query 1 may attend to nothing
    mask[1, 0, :, 3:] = False  # batch 1: key 3 is padding
    try:
        out = _output(attention_fn(q, k, v, mask))
    except RuntimeError as error:
        raise CheckFailed(f"masked attention fails in {dtype}: RuntimeError: {str(error).splitlines()[0]}") from error
    if not torch.isfinite(out).all():
        bad = int((~torch.isfinite(out)).sum())
        raise CheckFailed(f"masked attention in {dtype} returns {bad} non-finite values (inf or NaN)")
    v_changed = v.clone()
    v_changed[1, :, 3:] += 1.0  # values of the masked key only
    leak = max_abs_diff(_output(attention_fn(q, k, v_changed, mask))[1], out[1])
    if leak > 0.0:
        raise CheckFailed(f"a masked key still affects the output in {dtype} (change {leak:.3g})")


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
    found = "Pre-LN (output = input)" if pre <= atol else "Post-LN (output = LN(input))" if post <= atol else None
    if found is None:
        found = (
            f"neither: the output is {out.abs().max().item():.3g} at most while the input reaches "
            f"{x.abs().max().item():.3g}, so a sub-layer has no residual connection (or its norm is not `normalize`)"
        )
    expected, error = ("Pre-LN", pre) if norm_first else ("Post-LN", post)
    if error > atol:
        raise CheckFailed(
            f"the layer claims {expected} (norm_first={norm_first}) but with its sub-layers switched off it is "
            f"{found}; distance from {expected}: {error:.3g}"
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
                f"differs from nn.LayerNorm (biased variance, eps={eps:g} inside the square root) by up to "
                f"{error:.3g} ({relative:.2%} of the output's size) on inputs of scale {scale:g}"
            )


def check_outputs_are_logits(
    output: Tensor, vocab_size: int, *, allow_log_probabilities: bool = False, atol: float = 1e-3
) -> None:
    """Check that ``output`` holds **logits** (未归一化的分数) over a vocabulary of ``vocab_size``.

    Logits are one unnormalised score per vocabulary entry: the last dimension is ``vocab_size``,
    some scores are negative, and the rows do not sum to 1. ``F.cross_entropy`` expects exactly
    that; given probabilities it would apply a second softmax and could no longer reach a small
    loss. Log-probabilities (rows whose ``logsumexp`` is 0) are refused unless
    ``allow_log_probabilities``.

    Shape:
        output: ``(..., vocab_size)``.
    """
    if output.size(-1) != vocab_size:
        raise CheckFailed(
            f"the last dimension is {output.size(-1)}, not vocab_size={vocab_size}: there is no projection "
            f"to the vocabulary"
        )
    sums = output.double().sum(-1)
    if not (output < 0).any() or torch.allclose(sums, torch.ones_like(sums), atol=atol):
        raise CheckFailed(
            f"the outputs look like probabilities (smallest {output.min().item():.4f}, row sums "
            f"{sums.min().item():.4f}..{sums.max().item():.4f}): softmax was applied; return logits"
        )
    lse = output.double().logsumexp(-1)
    if not allow_log_probabilities and torch.allclose(lse, torch.zeros_like(lse), atol=atol):
        raise CheckFailed("the outputs are log-probabilities (every row's logsumexp is 0), not logits")


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
            f"it takes the log of probabilities; compute it from logits (log_softmax / F.cross_entropy)"
        )
    loss.backward()
    if logits.grad is None or not torch.isfinite(logits.grad).all():
        raise CheckFailed("the loss is finite but its gradient is not")
    return value


def check_lr_per_optimizer_step(used_lrs: Sequence[float], rate: Callable[[int], float], *, rtol: float = 1e-6) -> None:
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
            matches = [k for k in range(1, 50 * len(used_lrs) + 2) if math.isclose(used, rate(k), rel_tol=rtol)]
            hint = f" (that is the schedule's rate for step {matches[0]})" if matches else ""
            raise CheckFailed(
                f"optimizer step {step} used lr={used:.4e}{hint}, but the schedule gives lr={expected:.4e} "
                f"for step {step}: the scheduler is not stepped once per optimizer step"
            )


def check_vocab_ignores_split(
    build_vocab: Callable[[dict[str, list[tuple[str, str]]]], Any],
    data: Mapping[str, list[tuple[str, str]]],
    split: str,
) -> int:
    """Check that a vocabulary (词表) built from ``data`` does not depend on the ``split`` (e.g. the test set).

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
            f"the vocabulary changes when the {split!r} split changes: {len(other - vocab)} entries appear "
            f"(e.g. {added[:3]}) and {len(vocab - other)} disappear; it was built with {split!r} text"
        )
    return len(vocab)


# ---------------------------------------------------------------------------------------------
# Data and files
# ---------------------------------------------------------------------------------------------
def check_fails_clearly(
    fn: Callable[[], Any], *, mentions: Sequence[str], exception: type[BaseException] = Exception
) -> BaseException:
    """Check that ``fn()`` fails with an ``exception`` whose message mentions every string in ``mentions``.

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
    summary = f"{type(result).__name__} of {len(result)} items" if hasattr(result, "__len__") else repr(result)
    raise CheckFailed(f"returned {summary} instead of failing: the bad input was accepted")


# ---------------------------------------------------------------------------------------------
# Claims about numbers
# ---------------------------------------------------------------------------------------------
def check_settings(settings: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Check that every setting in ``settings`` that ``expected`` also states has the expected value.

    Used to compare training recipes (optimizer, dropout, clipping, batch size) with a reference
    such as the paper. At least one key must be shared.
    """
    shared = [key for key in settings if key in expected]
    if not shared:
        raise ValueError(f"settings {sorted(settings)} and expected {sorted(expected)} share no key")
    wrong = [
        f"{key}={settings[key]!r} (expected {expected[key]!r})" for key in shared if settings[key] != expected[key]
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
    slope = sum((a - mean_x) * (b - mean_y) for a, b in zip(xs, ys, strict=True)) / sum((a - mean_x) ** 2 for a in xs)
    if abs(slope - exponent) > tol:
        raise CheckFailed(f"the cost grows like n^{slope:.2f} over n in {list(sizes)}, not like n^{exponent:g}")
    return slope
