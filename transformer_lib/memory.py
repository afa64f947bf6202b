"""A run's resident memory: the peak it reached, and the C allocator told to hand freed blocks back.

Training on a CPU allocates and frees the same tensors at every step, in shapes that change with
each batch's length. glibc's ``malloc`` (Linux) serves a block above its *mmap threshold* straight
from the system and returns it when freed, but it raises that threshold to the size of every such
block freed, up to 32 MiB: after a few steps, tensors of a few MiB come from its heap instead, whose
freed holes it keeps and rarely reuses exactly for the next batch's shapes. Resident memory then
grows with the steps. A fixed threshold (``mallopt(M_MMAP_THRESHOLD, ...)``, which also turns the
raising off) keeps every large tensor's memory going back to the system when it is freed.
"""

from __future__ import annotations

import ctypes
import platform
import sys

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

M_MMAP_THRESHOLD = -3
"""``mallopt``'s number for the mmap threshold (glibc's ``malloc.h``)."""
MMAP_THRESHOLD_BYTES = 128 * 1024
"""The threshold :func:`release_freed_memory` sets: glibc's own starting value, kept from rising.
Blocks of 128 KiB and more (any activation of more than a few dozen tokens) go back to the system
when freed; smaller ones, the bulk of Python's and PyTorch's bookkeeping, stay on the heap.
"""


def release_freed_memory(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process; ``True`` if it was set.

    Where the C library is not glibc (macOS, Windows, musl) nothing changes and this returns
    ``False``: their allocators do not raise a threshold of their own. The setting changes where
    memory comes from, never what is computed. ``MALLOC_MMAP_THRESHOLD_=131072`` in the
    environment does the same for a whole program.
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a static or unusual build: leave the allocator as it is
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1


def peak_rss_mb() -> float | None:
    """The peak resident memory of this process so far, in MiB (``None`` where the system does not
    say: Windows).
    """
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss counts KiB on Linux, bytes on macOS.
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
