"""Data parallelism (数据并行) with ``torch.distributed``: one process per device, launched by ``torchrun``.

``torchrun --nproc_per_node N script.py`` (or ``python -m torch.distributed.run ...``) starts ``N``
copies of the same program and tells each one who it is through environment variables:

* ``RANK``: the process's number among all processes, ``0 .. WORLD_SIZE - 1`` (rank 0 is the
  "main" process: the one that prints, shows progress and writes files);
* ``WORLD_SIZE``: how many processes there are in all (all machines together);
* ``LOCAL_RANK``: the process's number on its own machine (which GPU it drives);
* ``MASTER_ADDR`` / ``MASTER_PORT``: where the processes meet to set up communication.

:func:`~.init_distributed` reads them and joins the process group (gloo on CPUs, NCCL on NVIDIA
GPUs). A program that was **not** launched by ``torchrun`` sees none of these variables, and
every function here then describes a single process (``rank() == 0``, ``world_size() == 1``),
so the same code runs unchanged with or without ``torchrun``.

:func:`~.shard_batches` gives each rank its share of an epoch's batches, the same number on every
rank, so that the collective operations (all-reduce, barrier), which wait for *every* rank,
never wait for one that has run out of data.

This module is a building block: it imports only ``torch``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")
ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
TAILS = ("drop", "pad")


@dataclass(frozen=True)
class LaunchInfo:
    """Who this process is, as ``torchrun`` told it (see :func:`~.launch_info`).

    Attributes:
        rank: global rank, ``0 .. world_size - 1``.
        world_size: number of processes on all machines.
        local_rank: rank on this machine (the GPU index this process should use).
    """

    rank: int
    world_size: int
    local_rank: int


def _env_int(name: str) -> int:
    text = os.environ[name]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} must be an integer (set by torchrun)") from None
    if value < 0:
        raise ValueError(f"environment variable {name}={value} must be >= 0 (set by torchrun)")
    return value


def launch_info() -> LaunchInfo | None:
    """Read ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; ``None`` when the process was not launched by ``torchrun``.

    Raises ``ValueError`` when only some of the variables are set or they do not make sense
    (e.g. ``RANK >= WORLD_SIZE``): a half-configured launch is a mistake worth stopping for.
    """
    present = [name for name in ENV_VARS if name in os.environ]
    if not present:
        return None
    missing = [name for name in ENV_VARS if name not in os.environ]
    if missing:
        raise ValueError(
            f"environment variables {missing} are missing but {present} are set: launch with "
            f"torchrun (or python -m torch.distributed.run), which sets RANK, WORLD_SIZE and LOCAL_RANK"
        )
    info = LaunchInfo(_env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK"))
    if info.world_size < 1 or info.rank >= info.world_size or info.local_rank >= info.world_size:
        raise ValueError(
            f"inconsistent launch: RANK={info.rank}, LOCAL_RANK={info.local_rank}, WORLD_SIZE={info.world_size} "
            f"(ranks must be smaller than the world size)"
        )
    return info


def is_distributed() -> bool:
    """Whether this process has joined a process group (:func:`~.init_distributed` ran under ``torchrun``)."""
    return dist.is_available() and dist.is_initialized()


def _current_rank() -> int:
    if is_distributed():
        return dist.get_rank()
    info = launch_info()
    return info.rank if info is not None else 0


def _current_world_size() -> int:
    if is_distributed():
        return dist.get_world_size()
    info = launch_info()
    return info.world_size if info is not None else 1


def rank() -> int:
    """The global rank of this process: from the process group if joined, else from ``RANK``, else 0."""
    return _current_rank()


def world_size() -> int:
    """Number of processes: from the process group if joined, else from ``WORLD_SIZE``, else 1."""
    return _current_world_size()


def local_rank() -> int:
    """The rank of this process on its own machine (``LOCAL_RANK``; 0 without ``torchrun``)."""
    info = launch_info()
    return info.local_rank if info is not None else 0


def is_main_process() -> bool:
    """``True`` on rank 0 (and in a plain single process): the process that prints and writes files."""
    return _current_rank() == 0


def init_distributed(device: torch.device | str = "cpu") -> torch.device:
    """Join the process group when launched by ``torchrun``; return the device this process must use.

    * Not launched by ``torchrun``: nothing happens and ``device`` is returned as given.
    * ``device`` on CUDA: the backend is NCCL and the process uses GPU ``LOCAL_RANK``
      (``torch.cuda.set_device``); the returned device is ``cuda:LOCAL_RANK``.
    * ``device`` on the CPU: the backend is gloo.
    * Apple's MPS has no collective backend: a ``ValueError`` says to use ``cpu``.

    Calling it again after the group exists is harmless (it returns the device again).
    """
    device = torch.device(device)
    info = launch_info()
    if info is None:
        return device
    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed support; run without torchrun")
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if info.local_rank >= count:
            raise ValueError(
                f"LOCAL_RANK={info.local_rank} but only {count} CUDA device(s) are visible: --nproc_per_node must "
                f"not exceed the number of GPUs on each machine"
            )
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    elif device.type == "cpu":
        backend = "gloo"
    else:
        raise ValueError(
            f"device={str(device)!r}: torch.distributed has no backend for {device.type}; use device='cpu' (gloo) "
            f"or 'cuda' (NCCL) under torchrun"
        )
    if not dist.is_initialized():
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if name not in os.environ:
                raise ValueError(f"environment variable {name} is not set: launch with torchrun")
        if backend == "nccl":
            dist.init_process_group(backend, device_id=device)
        else:
            dist.init_process_group(backend)
    return device


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for in a single process)."""
    if is_distributed():
        dist.barrier()


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (picklable objects; a single process gets ``obj`` back)."""
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
    """Run the body on the main process first, then on the others (e.g. download once, then read).

    With ``local=True`` the first process of **each machine** (``LOCAL_RANK == 0``) goes first,
    which suits files on a machine's own disk; ``local=False`` lets global rank 0 go first.
    """
    first = (local_rank() if local else _current_rank()) == 0
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
    """The share of ``batches`` of one rank: items ``rank, rank + W, rank + 2W, ...`` (``W = world_size``).

    Every rank must pass the **same** sequence (build it from the same seed on every rank, as
    ``torch.utils.data.DistributedSampler`` requires). The items are read ``W`` at a time and
    rank ``r`` keeps the ``r``-th of each group, so ranks 0 and 1 of two get items 0, 2, 4, ... and
    1, 3, 5, .... The last group can hold fewer than ``W`` items:

    * ``tail="drop"`` (default) leaves it out, so every rank gets ``len(batches) // W`` items;
    * ``tail="pad"`` completes it with the first items again (what ``DistributedSampler`` does
      by default), so every rank gets ``ceil(len(batches) / W)`` items.

    Either way every rank gets the same number of items, which a collective operation needs:
    a rank that ran out of data would leave the others waiting forever. The input is read
    lazily (a generator of batches is fine). ``rank`` and ``world_size`` default to this
    process's (:func:`~.rank`, :func:`~.world_size`).

    Example:
        >>> list(shard_batches(range(7), rank=1, world_size=3))
        [1, 4]
        >>> list(shard_batches(range(7), rank=1, world_size=3, tail="pad"))
        [1, 4, 0]
    """
    size = _current_world_size() if world_size is None else world_size
    index = _current_rank() if rank is None else rank
    for name, value in (("world_size", size), ("rank", index)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if size < 1:
        raise ValueError(f"world_size must be >= 1, got world_size={size}")
    if not 0 <= index < size:
        raise ValueError(f"rank must be in [0, {size}), got rank={index}")
    if tail not in TAILS:
        raise ValueError(f"tail={tail!r} must be one of {list(TAILS)}")
    if not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable, got {type(batches).__name__}")
    return _shard(iter(batches), index, size, tail)


def _shard(items: Iterator[T], index: int, size: int, tail: str) -> Iterator[T]:
    first: list[T] = []  # the first group, kept for tail="pad"
    group: list[T] = []
    for item in items:
        group.append(item)
        if len(first) < size:
            first.append(item)
        if len(group) == size:
            yield group[index]
            group = []
    if group and tail == "pad":
        padded = group + [first[i % len(first)] for i in range(size - len(group))]
        yield padded[index]


def cleanup() -> None:
    """Leave the process group (a no-op when there is none). Call it once at the end of the program."""
    if is_distributed():
        dist.destroy_process_group()
