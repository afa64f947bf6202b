"""Behaviour checks of the building blocks: what the output depends on, masks, positions, heads.

See :mod:`transformer_book.checks` for what a check is.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn


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
        raise ValueError(
            "integer inputs (token ids) need vocab_size >= 3 to be changed into other tokens"
        )
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
            "the output does not depend on the input: changing the input changed the output by "
            f"{change:.3g} (at most), less than {min_change:g}"
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
                f"not causal: changing input position {t} changed the outputs at earlier "
                f"positions 0..{t - 1} "
                f"by up to {leak:.3g} (allowed {atol:g}), so those positions see the future"
            )
        for later in range(t, length):
            change = max_abs_diff(new.select(dim, later), out.select(dim, later))
            if not change > min_change:
                raise CheckFailed(
                    f"output position {later} ignores input position {t}: it changed by "
                    f"{change:.3g} (at least {min_change:g} expected)"
                )


def check_position_wise(
    fn: Callable[[Tensor], Any],
    x: Tensor,
    *,
    dim: int = 1,
    atol: float = 1e-6,
    min_change: float = 1e-6,
) -> None:
    """Check that ``fn`` treats every position on its own: input ``t`` moves output ``t`` only.

    For every position ``t`` the input at ``t`` is changed (by +1); the output at ``t`` must change
    by more than ``min_change``, and every other output must stay within ``atol``. A linear map
    applied along the features (the Q, K and V projections, the feed-forward network) passes; a
    convolution wider than one position, or anything that mixes positions, fails.

    Args:
        fn: maps ``x`` to an output whose dimension ``dim`` is the same sequence of positions.
        x: a float batch, positions along ``dim``.
    """
    out = _output(fn(x))
    for t in range(x.size(dim)):
        changed = x.clone()
        changed.select(dim, t).add_(1.0)
        new = _output(fn(changed))
        if not max_abs_diff(new.select(dim, t), out.select(dim, t)) > min_change:
            raise CheckFailed(f"output position {t} ignores its own input")
        others = [d for d in range(new.dim()) if d != dim % new.dim()]
        moved = (new - out).detach().abs().amax(dim=others)  # (T,): largest change per position
        moved[t] = 0.0
        if moved.max().item() > atol:
            other = int(moved.argmax())
            raise CheckFailed(
                f"not position-wise: changing input position {t} changed output position "
                f"{other} by {moved.max().item():.3g} (allowed {atol:g}), so positions are mixed"
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
        raise ValueError(
            f"tokens must be a (B, T >= 2) batch of ids, got shape {tuple(tokens.shape)}"
        )
    if (tokens == pad_id).any():
        raise ValueError(f"tokens must not already contain pad_id={pad_id}")
    out = _output(fn(tokens))
    padded = torch.cat(
        [tokens, torch.full((tokens.size(0), num_pad), pad_id, dtype=tokens.dtype)], dim=1
    )
    change = max_abs_diff(_same_positions(_output(fn(padded)), out, out_dim), out)
    if change > atol:
        raise CheckFailed(
            f"padding changes the output: appending {num_pad} padding tokens changed the outputs "
            "of the real "
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
            f"{padded.size(1) - keep} padding tokens differs from the unpadded row by up to "
            f"{change:.3g} (allowed {atol:g})"
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
            f"positions are not distinct: positions {min(i, j)} and {max(i, j)} get codes only "
            f"{smallest:.3g} apart (at least {min_distance:g} needed); {same} of "
            f"{table.size(0) * (table.size(0) - 1) // 2} pairs coincide"
        )
    return smallest


def check_values_in_range(
    values: Tensor, low: float, high: float, *, reach_ends: bool = True, tol: float = 1e-3
) -> tuple[float, float]:
    """Check that ``values`` lie in ``[low, high]`` and, with ``reach_ends``, come within ``tol`` of
    both ends.

    Used to test a claimed range against the real one: the sinusoidal table lies in ``[-1, 1]``
    and uses all of it. The bounds are strict; only reaching the ends has the tolerance ``tol``.
    Returns ``(min, max)``.
    """
    smallest, largest = values.min().item(), values.max().item()
    if smallest < low or largest > high:
        raise CheckFailed(
            f"values span [{smallest:.4f}, {largest:.4f}], outside the range [{low:g}, {high:g}]"
        )
    if reach_ends and (smallest > low + tol or largest < high - tol):
        raise CheckFailed(
            f"values span [{smallest:.4f}, {largest:.4f}]: they do not cover the range [{low:g}, "
            f"{high:g}]"
        )
    return smallest, largest


def check_buffer_follows_module(module: nn.Module | Callable[[], nn.Module], name: str) -> None:
    """Check that the tensor ``<module>.<name>`` is a buffer that goes wherever its module goes.

    A tensor can stay behind in two ways. Stored as a plain attribute (``self.pe = table``)
    instead of with ``register_buffer``, it is not part of the module: ``.to(device)``,
    ``.to(dtype)`` and ``.cuda()`` move the parameters and leave it where it was made. Created on
    a fixed device (``torch.zeros(..., device=DEVICE)`` with a global ``DEVICE``), it ignores where
    the caller builds the module: PyTorch's own layers create their tensors on the default device,
    which the caller sets with ``with torch.device(...)``. With ``DEVICE = "cuda"`` such a module
    cannot be built on a machine without a GPU, and built on the CPU it holds that tensor on the
    GPU (its embeddings on the CPU) until ``.to()`` is called.

    Tested without a GPU. ``module`` is either a module or a function that builds one (a class, a
    lambda). A module is copied and moved to PyTorch's ``"meta"`` device and to float64, and the
    tensor must be a registered buffer that follows both moves. A function is also called once
    under ``with torch.device("meta")``, and the tensor must be created on the meta device.
    """
    built_under_meta = None
    if not isinstance(module, nn.Module):
        build = module
        module = build()
        with torch.device("meta"):
            built_under_meta = build()
    tensor = getattr(module, name, None)
    if not isinstance(tensor, Tensor):
        raise ValueError(f"module has no tensor attribute {name!r}")
    if name not in dict(module.named_buffers(recurse=False)):
        raise CheckFailed(
            f"{name} is a plain tensor attribute on {tensor.device.type}, not a registered buffer: "
            f"module.to(...) will not move it"
        )
    if built_under_meta is not None and getattr(built_under_meta, name).device.type != "meta":
        raise CheckFailed(
            f"built under torch.device('meta'), the module created {name} on "
            f"{getattr(built_under_meta, name).device}: the tensor is made on a fixed device (a "
            "global DEVICE?), not on the device the module is built on"
        )
    moved = copy.deepcopy(module).to("meta")
    if getattr(moved, name).device.type != "meta":
        raise CheckFailed(
            f"after module.to('meta') the tensor {name} is still on {getattr(moved, name).device}"
        )
    if tensor.is_floating_point():
        converted = copy.deepcopy(module).to(torch.float64)
        if getattr(converted, name).dtype != torch.float64:
            raise CheckFailed(
                f"after module.to(torch.float64) the tensor {name} is "
                f"{getattr(converted, name).dtype}"
            )


def check_variable_is_noop(x: Tensor) -> None:
    """Check that ``torch.autograd.Variable(x)`` is just ``x`` again (true since PyTorch 0.4).

    ``Variable`` survives only for old code: it returns an ordinary tensor sharing ``x``'s memory,
    and ``requires_grad`` means what it means on any tensor.
    """
    from torch.autograd import Variable

    wrapped = Variable(x)
    if (
        type(wrapped) is not Tensor
        or not torch.equal(wrapped, x)
        or wrapped.data_ptr() != x.data_ptr()
    ):
        raise CheckFailed(
            f"Variable(x) is a {type(wrapped).__name__} that does not share x's memory"
        )
    if (
        Variable(x, requires_grad=True).requires_grad is not True
        or wrapped.requires_grad != x.requires_grad
    ):
        raise CheckFailed(
            "Variable(x, requires_grad=...) does not behave like x.requires_grad_(...)"
        )


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
        raise ValueError(
            f"x and memory must have different lengths for this check, both have {t_len}"
        )
    try:
        out = _output(fn(x, memory))
    except (RuntimeError, ValueError) as error:
        raise CheckFailed(
            f"cross-attention fails when the target has {t_len} positions and the source {s_len}: "
            f"{type(error).__name__}: {str(error).splitlines()[0]}"
        ) from error
    if tuple(out.shape[:2]) != (batch, t_len):
        raise CheckFailed(
            f"cross-attention returns {tuple(out.shape[:2])} (batch, positions), not ({batch}, "
            f"{t_len}): the queries must come from the target"
        )
    gen = torch.Generator().manual_seed(0)
    other_memory = memory + torch.randn(memory.shape, generator=gen, dtype=memory.dtype)
    other_x = x + torch.randn(x.shape, generator=gen, dtype=x.dtype)
    if not max_abs_diff(_output(fn(x, other_memory)), out) > min_change:
        raise CheckFailed(
            "cross-attention output does not depend on the memory (the encoder output)"
        )
    if not max_abs_diff(_output(fn(other_x, memory)), out) > min_change:
        raise CheckFailed("cross-attention output does not depend on the decoder states")


def check_attention_scale(fn: Callable[..., Any], *, widths: tuple[int, ...] = (8, 32)) -> None:
    """Check that ``fn(q, k, v)`` is ``softmax(q k^T / sqrt(d_k)) v``, ``d_k`` the keys' width.

    Runs float64 queries, keys and values of each width in ``widths``. A function that takes its
    scale from anywhere but the keys (a global ``d_k``, the model's width) matches at most one of
    them; one that fails to run fails the check with its error.

    Shape:
        q, k, v: ``(2, 5, d_k)`` for each ``d_k`` in ``widths``; output: ``(2, 5, d_k)``.
    """
    generator = torch.Generator().manual_seed(0)
    for d_k in widths:
        shape = (2, 5, d_k)
        q, k, v = (torch.randn(shape, generator=generator, dtype=torch.float64) for _ in range(3))
        expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v
        try:
            out = _output(fn(q, k, v))
        except Exception as error:  # any failure to run (a NameError, say) is the finding
            message = f"{type(error).__name__}: {error}"
            raise CheckFailed(f"attention fails on keys of width {d_k}: {message}") from error
        if out.shape != expected.shape or max_abs_diff(out, expected) > 1e-9:
            raise CheckFailed(
                f"with keys of width d_k={d_k} the output is not softmax(q k^T / sqrt(d_k)) v: "
                "the scores are not divided by the square root of the keys' width"
            )


def check_heads_concatenate_to_d_model(
    build: Callable[[int, int], nn.Module], d_model: int, num_heads: int, *, length: int = 3
) -> str:
    """Check that the heads of multi-head attention (多头注意力) concatenate to exactly ``d_model``
    features.

    ``build(d_model, num_heads)`` either refuses (a ``ValueError`` naming both numbers, the right
    answer when ``num_heads`` does not divide ``d_model``) or builds a module whose heads,
    concatenated, are exactly ``d_model`` wide. (Each head may read all ``d_model`` input
    features; what goes wrong with ``d_head = d_model // num_heads`` is the width of attention
    itself, ``num_heads * d_head < d_model``, and the shape of the output projection.) The width
    is measured at the input of the last ``nn.Linear`` the module runs in a self-attention call
    ``module(x, x, x)``: the output projection, which reads the concatenated heads.

    Returns:
        ``"rejected"`` or ``"built"``.
    """
    try:
        module = build(d_model, num_heads)
    except ValueError as error:
        if str(d_model) in str(error) and str(num_heads) in str(error):
            return "rejected"
        raise CheckFailed(
            f"build raised a ValueError that names neither d_model nor num_heads: {error}"
        ) from error
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
        gap = d_model - widths[-1]
        relation = f"{gap} fewer than" if gap > 0 else f"{-gap} more than"
        cause = (
            f"num_heads={num_heads} does not divide d_model={d_model}, each head got "
            f"{d_model // num_heads}, and "
            if d_model % num_heads
            else ""
        )
        raise CheckFailed(
            f"the heads concatenate to {widths[-1]} features, {relation} d_model={d_model}: "
            f"{cause}the output projection reads {widths[-1]} features instead of {d_model}"
        )
    if out.size(-1) != d_model:
        raise CheckFailed(f"the output has width {out.size(-1)}, not d_model={d_model}")
    return "built"


def check_mask_fp16_safe(
    attention_fn: Callable[[Tensor, Tensor, Tensor, Tensor], Any],
    *,
    dtype: torch.dtype = torch.float16,
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
        raise CheckFailed(
            f"masked attention fails in {dtype}: RuntimeError: {str(error).splitlines()[0]}"
        ) from error
    if not torch.isfinite(out).all():
        bad = int((~torch.isfinite(out)).sum())
        raise CheckFailed(
            f"masked attention in {dtype} returns {bad} non-finite values (inf or NaN)"
        )
    v_changed = v.clone()
    v_changed[1, :, 3:] += 1.0  # values of the masked key only
    leak = max_abs_diff(_output(attention_fn(q, k, v_changed, mask))[1], out[1])
    if leak > 0.0:
        raise CheckFailed(f"a masked key still affects the output in {dtype} (change {leak:.3g})")
