"""Data parallelism (数据并行) with ``torch.distributed``: one process per device, launched by
``torchrun``.

``torchrun --nproc_per_node N script.py`` starts ``N`` copies of the program and tells each who it
is in ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (its number on its machine: the GPU it drives).
Without ``torchrun`` every function here describes a single process (rank 0 of 1): the same code
runs either way.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, NamedTuple, TypeVar

import torch
import torch.distributed as dist

from ..validation import check_positive_int

T = TypeVar("T")
ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


class LaunchInfo(NamedTuple):
    """Who this process is, as ``torchrun`` told it: its global rank, the world size, its rank on
    this machine.
    """

    rank: int
    world_size: int
    local_rank: int


def launch_info() -> LaunchInfo | None:
    """``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; ``None`` without ``torchrun``, a ``ValueError``
    if half-set.
    """
    present = [name for name in ENV_VARS if name in os.environ]
    if not present:
        return None
    if len(present) < len(ENV_VARS):
        raise ValueError(
            f"only {present} of the variables {list(ENV_VARS)} are set: launch with torchrun"
        )
    try:
        info = LaunchInfo(*(int(os.environ[name]) for name in ENV_VARS))
    except ValueError:
        got = ", ".join(f"{name}={os.environ[name]!r}" for name in ENV_VARS)
        raise ValueError(f"torchrun's environment variables must be integers, got {got}") from None
    if min(info) < 0 or info.rank >= info.world_size or info.local_rank >= info.world_size:
        raise ValueError(f"inconsistent launch: {info} (ranks must be in [0, world_size))")
    return info


def is_distributed() -> bool:
    """Whether this process has joined a process group (:func:`~.init_distributed` ran under
    ``torchrun``).
    """
    return dist.is_available() and dist.is_initialized()


def _this_process() -> tuple[int, int]:
    """(rank, world size): from the process group if joined, else from ``torchrun``'s variables,
    else (0, 1).
    """
    if is_distributed():
        return dist.get_rank(), dist.get_world_size()
    info = launch_info()
    return (info.rank, info.world_size) if info is not None else (0, 1)


def rank() -> int:
    """The global rank of this process (0 without ``torchrun``)."""
    return _this_process()[0]


def world_size() -> int:
    """The number of processes (1 without ``torchrun``)."""
    return _this_process()[1]


def local_rank() -> int:
    """The rank of this process on its own machine (0 without ``torchrun``)."""
    info = launch_info()
    return info.local_rank if info is not None else 0


def is_main_process() -> bool:
    """``True`` on rank 0 (and in a plain single process): the process that prints and writes
    files.
    """
    return rank() == 0


def init_distributed(device: torch.device | str = "cpu") -> torch.device:
    """Join the process group when launched by ``torchrun``; return the device this process must
    use.

    On CUDA the backend is NCCL and the process drives ``cuda:LOCAL_RANK``; on the CPU it is gloo;
    other devices have none. Without ``torchrun``, or once joined, it only returns the device.
    """
    device = torch.device(device)
    info = launch_info()
    if info is None:
        return device
    if not dist.is_available():
        raise RuntimeError(
            "this PyTorch build has no torch.distributed support; run without torchrun"
        )
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if info.local_rank >= count:
            raise ValueError(
                f"LOCAL_RANK={info.local_rank} but only {count} CUDA device(s) are visible"
            )
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ValueError(
            f"device={str(device)!r}: torch.distributed has no backend for {device.type}; use cpu "
            "or cuda"
        )
    # its env:// rendezvous names a missing MASTER_ADDR or MASTER_PORT itself
    if not dist.is_initialized():
        nccl = device.type == "cuda"
        dist.init_process_group("nccl" if nccl else "gloo", device_id=device if nccl else None)
    return device


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for in a single process)."""
    if is_distributed():
        dist.barrier()


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (picklable objects; a single process gets ``obj``
    back).
    """
    if not is_distributed():
        return obj
    holder: list[Any] = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def all_gather_object(obj: T) -> list[T]:
    """Every rank's ``obj``, in rank order, on every rank (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


@contextlib.contextmanager
def main_process_first(local: bool = True) -> Iterator[None]:
    """Run the body on each machine's first process (``local=False``: rank 0) first, then on the
    others.
    """
    first = (local_rank() if local else rank()) == 0
    if not first:
        barrier()
    try:
        yield
    finally:
        if first:
            barrier()


def shard_batches(
    batches: Iterable[T], rank: int | None = None, world_size: int | None = None, tail: str = "drop"
) -> Iterator[T]:
    """The share of ``batches`` of one rank: items ``rank, rank + W, rank + 2W, ...`` (``W =
    world_size``).

    Every rank must pass the **same** sequence; it is read lazily, ``W`` items at a time. A last
    group of fewer than ``W`` is left out (``tail="drop"``) or completed with the first items
    (``"pad"``, as ``DistributedSampler`` does): every rank gets as many items, so that no
    collective operation waits forever for a rank that ran out. ``rank`` and ``world_size`` default
    to this process's. For example ``shard_batches(range(7), rank=1, world_size=3)`` gives ``1, 4``
    (with ``tail="pad"``: ``1, 4, 0``).
    """
    this_rank, this_size = _this_process()
    size = check_positive_int("world_size", this_size if world_size is None else world_size)
    index = this_rank if rank is None else rank
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"rank must be an int, got {type(index).__name__} ({index!r})")
    if not 0 <= index < size:
        raise ValueError(f"rank must be in [0, {size}), got rank={index}")
    if tail not in ("drop", "pad"):
        raise ValueError(f"tail={tail!r} must be 'drop' or 'pad'")
    if not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable, got {type(batches).__name__}")
    return _shard(iter(batches), index, size, tail)


def _shard(items: Iterator[T], index: int, size: int, tail: str) -> Iterator[T]:
    first: list[T] = []  # the first group, kept for tail="pad"
    while group := list(islice(items, size)):
        first = first or group
        if len(group) == size:
            yield group[index]
        elif tail == "pad":
            yield (group + first * size)[index]


def cleanup() -> None:
    """Leave the process group (a no-op when there is none). Call it once at the end of the
    program.
    """
    if is_distributed():
        # DistributedDataParallel sits in a reference cycle (via its constructor's frame): free it
        # now
        gc.collect()
        dist.destroy_process_group()
