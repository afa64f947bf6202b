"""Argument checks, made once where an argument enters: when a configuration or a module is built,
at the model's entry points (``Transformer.forward``, ``encode``, ``decode``), in the decoders and
in the public functions the chapters call directly (``scaled_dot_product_attention``,
``causal_mask``).

What is checked there is what would otherwise fail silently or obscurely: a mask that broadcasts to
the wrong positions, float ids, a sequence longer than the positional table, keys and values of
different lengths (which PyTorch's fused CPU kernel accepts without an error). The blocks'
``forward`` methods check nothing else: a shape that does not fit fails loudly in PyTorch's own
product, and a ``model(src, tgt)`` makes the same few checks however deep the model is (9 calls
for a 6 + 6 model, counted by a test).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int``; raise naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {name}={value}")
    return value


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float if it lies in ``[0, 1)``; raise naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__} ({value!r})")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {name}={value}")
    return float(value)


def check_non_negative(name: str, value: object) -> float:
    """Return ``value`` if it is a number ``>= 0`` (not a bool); raise naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (not ``1`` or ``"yes"``)."""
    if not isinstance(value, bool):
        kind = type(value).__name__
        raise TypeError(f"{name} must be a bool (True or False), got {kind} ({value!r})")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {list(choices)}")
    return value


def check_token_id(name: str, value: object, vocab_size: int | None = None) -> int:
    """Return ``value`` if it is a token id: an ``int`` in ``[0, vocab_size)``, or ``>= 0``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int token id, got {type(value).__name__} ({value!r})")
    if value < 0 or (vocab_size is not None and value >= vocab_size):
        valid = "a non-negative int" if vocab_size is None else f"in [0, {vocab_size})"
        raise ValueError(f"{name}={value} is not a valid token id: it must be {valid}")
    return value


def check_divisible(d_model: int, num_heads: int) -> int:
    """Return the per-head width ``d_model // num_heads``; raise if it does not divide exactly."""
    if d_model % num_heads != 0:
        choices = [h for h in range(1, 17) if d_model % h == 0]
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: every head must get "
            f"the same width (try num_heads in {choices})"
        )
    return d_model // num_heads


def check_kv_heads(num_heads: int, num_kv_heads: int | None) -> int:
    """Return the number of key/value heads (``num_heads`` for ``None``); it must divide
    ``num_heads``, since each key/value head serves the same number of query heads.
    """
    if num_kv_heads is None:
        return num_heads
    check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads != 0:
        divisors = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
        raise ValueError(
            f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads} (each key/value head "
            f"serves the same number of query heads); try one of {divisors}"
        )
    return num_kv_heads


INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def check_token_tensor(name: str, tokens: object) -> Tensor:
    """Check that ``tokens`` is a tensor of an integer dtype; its values are not read.

    This is the forward pass's check: reading a value back would make the host wait for a GPU at
    every call, so the ids' range is checked once where they enter the library, by
    :func:`check_token_ids`.
    """
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.dtype not in INTEGER_DTYPES:
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}; "
            f"floats are not token ids (did you pass embeddings instead of ids?)"
        )
    return tokens


def check_token_batch(name: str, tokens: object) -> Tensor:
    """:func:`check_token_tensor`, and the shape of a batch of rows, ``(B, T)``."""
    tokens = check_token_tensor(name, tokens)
    if tokens.dim() != 2:
        shape = tuple(tokens.shape)
        raise ValueError(f"{name} must be a (B, T) tensor of token ids, got shape {shape}")
    return tokens


def check_token_ids(name: str, tokens: object, vocab_size: int) -> Tensor:
    """Check that ``tokens`` is a ``(B, T)`` integer tensor of ids in ``[0, vocab_size)``.

    For the entry points that take ids from a user (the decoders): it reads the smallest and the
    largest id back to the host, once per call, never inside a forward pass.
    """
    tokens = check_token_batch(name, tokens)
    if tokens.numel() > 0:
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} has ids in [{low}, {high}] but the vocabulary has vocab_size={vocab_size} "
                f"(valid ids are 0..{vocab_size - 1})"
            )
    return tokens


def check_mask(
    name: str, mask: Tensor | None, target_shape: tuple[int, ...], ndim: int | None = None
) -> Tensor | None:
    """Check that a boolean attention mask (``True`` = may attend) broadcasts to ``target_shape``.

    With ``ndim``, the mask must also have that many dimensions: a padding mask given as ``(B,
    S)`` instead of ``(B, 1, 1, S)`` broadcasts as if it were ``(T_q, S)`` whenever ``B`` equals
    ``T_q``, and its shape alone cannot tell the two apart.

    Shape:
        mask: e.g. ``(T_q, T_k)``, ``(B, 1, 1, T_k)`` or ``(B, 1, T_q, T_k)``; target:
        ``(B, H, T_q, T_k)``.
    """
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor where True means 'may attend', got dtype {mask.dtype} "
            f"(additive float masks are not accepted: convert with mask == 0 or mask > 0)"
        )
    if ndim is not None and mask.dim() != ndim:
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)}; it must have {ndim} dimensions, e.g. (B, 1, 1, "
            f"S) from padding_mask: a (B, S) mask would be read as (query_len, key_len)"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, target_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(target_shape):  # also refuses extra leading dimensions
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)}, which does not broadcast to "
            f"(batch, heads, query_len, key_len) = {tuple(target_shape)}"
        )
    return mask
