"""Memory (内存 / 显存): the peak a computation allocates, and the bytes a key/value cache holds.

Part of the book's harness: chapter 12 and the benchmarks ``attention_scaling`` and
``kv_cache_scaling`` measure with it; the library itself does not.

* :func:`~.peak_memory` runs a function once and reports the most memory it had allocated at any
  moment. On CUDA PyTorch keeps that counter itself (``torch.cuda.max_memory_allocated``). On the
  CPU it keeps none, so the function runs under ``torch.profiler`` with ``profile_memory=True``:
  PyTorch's CPU allocator then reports every allocation and every free (scratch buffers that a
  kernel allocates and frees inside one operation included), and the peak is the largest running
  total of those reports. Memory that does not come from PyTorch's allocator (Python objects, a
  BLAS library's private buffers) is not counted, on either device.
* :func:`~.kv_cache_nbytes` adds up the bytes of the key and value tensors a decoder cache holds
  (what :meth:`~.Transformer.new_cache` returns, after decoding), and
  :func:`~.kv_cache_formula_bytes` is the formula it must agree with:
  ``2 * layers * batch * heads * length * d_k * bytes_per_element``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from transformer_lib.nn.cache import KVCache
from transformer_lib.validation import check_positive_int

__all__ = ["kv_cache_formula_bytes", "kv_cache_nbytes", "peak_memory"]

R = TypeVar("R")


def peak_memory(fn: Callable[[], R], device: torch.device | str = "cpu") -> tuple[R, int]:
    """Run ``fn()`` once; return its result and the peak bytes it allocated on ``device``.

    The peak counts only what was allocated after ``fn`` started (tensors that already existed,
    such as the inputs, are not included; what ``fn`` returns is). On the CPU the run is profiled,
    so it is slower than usual: measure memory and time in separate calls. (The profiler's own log
    lines on stderr are silenced by setting ``KINETO_LOG_LEVEL=6`` if that variable is not set.)

    Args:
        fn: a function of no arguments (wrap the call in a ``lambda``).
        device: ``"cpu"`` or a CUDA device; other devices raise ``ValueError``.

    Returns:
        ``(fn(), peak_bytes)`` with ``peak_bytes >= 0``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        torch.cuda.synchronize(device)
        return result, max(0, torch.cuda.max_memory_allocated(device) - before)
    if device.type != "cpu":
        raise ValueError(f"peak_memory measures device='cpu' or 'cuda', got device={str(device)!r}")

    from torch.profiler import ProfilerActivity, profile

    # Kineto (the profiler's engine) logs "profiler_start"/"profiler_stop" lines with time stamps
    # on stderr at each run; level 6 silences them, unless the user chose a level.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    events = (
        prof.profiler.kineto_results.events()
        if prof.profiler and prof.profiler.kineto_results
        else []
    )
    host = {
        torch.autograd.DeviceType.CPU,
        torch.autograd.DeviceType.MKLDNN,
        torch.autograd.DeviceType.IDEEP,
    }
    # "[memory]" events: +bytes for an allocation, -bytes for a free, in the order they happened.
    changes = sorted(
        (event.start_ns(), index, event.nbytes())
        for index, event in enumerate(events)
        if event.name() == "[memory]" and event.device_type() in host
    )
    running = peak = 0
    for _, _, nbytes in changes:
        running += nbytes
        peak = max(peak, running)
    return result, peak


def kv_cache_nbytes(cache: Sequence[tuple[KVCache, KVCache]]) -> dict[str, int]:
    """Bytes of the key and value tensors in a decoder's cache, self- and cross-attention apart.

    Each tensor counts ``numel * element_size`` bytes (its own elements; a view into a larger
    tensor is counted for its own size, not for the storage behind it).

    Args:
        cache: one ``(self_attention, cross_attention)`` pair of :class:`~.KVCache` per decoder
            layer, as returned by ``Transformer.new_cache()`` and filled by incremental decoding.

    Returns:
        ``{"self": ..., "cross": ..., "total": ...}`` in bytes.
    """
    if isinstance(cache, KVCache) or not isinstance(cache, Sequence):
        raise TypeError(
            "cache must be a list of (self-attention KVCache, cross-attention KVCache) pairs, "
            f"one per decoder layer (as from Transformer.new_cache()), got {type(cache).__name__}"
        )
    sizes = {"self": 0, "cross": 0}
    for layer, pair in enumerate(cache):
        if not (
            isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(c, KVCache) for c in pair)
        ):
            raise TypeError(
                f"cache[{layer}] must be a (KVCache, KVCache) pair, got {type(pair).__name__}"
            )
        for kind, part in zip(("self", "cross"), pair, strict=True):
            for tensor in (part.key, part.value):
                if tensor is not None:
                    sizes[kind] += tensor.numel() * tensor.element_size()
    return {**sizes, "total": sizes["self"] + sizes["cross"]}


def kv_cache_formula_bytes(
    num_layers: int,
    batch: int,
    num_heads: int,
    length: int,
    d_k: int,
    dtype: torch.dtype = torch.float32,
) -> int:
    """The size a key/value cache must have: ``2 * layers * batch * heads * length * d_k * bytes``.

    The 2 counts keys and values; ``bytes`` is the size of one element of ``dtype`` (4 for float32,
    2 for bfloat16). ``num_heads`` counts the heads that keep keys and values (with grouped-query
    attention, the key/value heads). For the self-attention cache ``length`` is the number of
    positions decoded so far; for the cross-attention cache it is the source length.
    """
    for name, value in (
        ("num_layers", num_layers),
        ("batch", batch),
        ("num_heads", num_heads),
        ("d_k", d_k),
    ):
        check_positive_int(name, value)
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"length must be a non-negative int, got length={length!r}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {type(dtype).__name__}")
    bytes_per_element = torch.empty((), dtype=dtype).element_size()
    return 2 * num_layers * batch * num_heads * length * d_k * bytes_per_element
