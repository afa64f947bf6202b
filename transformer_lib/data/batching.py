"""Batches for teacher-forced training (教师强制): padding, shifting and grouping by length.

A sentence pair becomes three rows of ids::

    src     = x_1 ... x_S                      (padded with pad_id)
    tgt_in  = bos y_1 ... y_T                  what the decoder reads
    tgt_out =     y_1 ... y_T eos              what it must predict at each position

so position ``t`` of the decoder, which sees ``bos y_1 .. y_t`` only (causal mask), learns to
predict ``y_{t+1}``. A ``DataLoader`` makes the batches: :class:`~.TokenBudgetSampler` groups
sentences of similar length under a budget of padded tokens, :class:`~.PadCollate` pads each group
into a :class:`~.Batch`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Sampler

from ..nn.masks import padding_mask, target_mask
from ..validation import check_positive_int, check_token_id


@dataclass(frozen=True)
class Batch:
    """One padded batch of sentence pairs: ``model(src, tgt_in)`` is trained to predict ``tgt_out``.

    Shape:
        src: ``(B, S)``; tgt_in, tgt_out: ``(B, T)``; src_mask: ``(B, 1, 1, S)``; tgt_mask: ``(B, 1,
        T, T)``.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor  # tgt_in shifted left by one: y_1 .. y_T eos
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("src", "tgt_in", "tgt_out"):
            value = getattr(self, name)
            if not isinstance(value, Tensor) or value.dim() != 2 or value.dtype != torch.long:
                got = (
                    f"{value.dtype} {tuple(value.shape)}"
                    if isinstance(value, Tensor)
                    else type(value).__name__
                )
                raise ValueError(f"Batch.{name} must be a (B, T) torch.long tensor, got {got}")
        if self.tgt_in.shape != self.tgt_out.shape or self.src.size(0) != self.tgt_in.size(0):
            shapes = [tuple(t.shape) for t in (self.src, self.tgt_in, self.tgt_out)]
            raise ValueError(
                f"Batch needs src (B, S) and tgt_in, tgt_out of one shape (B, T); got {shapes}"
            )

    def __len__(self) -> int:
        return self.src.size(0)

    @property
    def num_tokens(self) -> int:
        """Number of non-padding target tokens (what the loss is averaged over)."""
        return int((self.tgt_out != self.pad_id).sum())

    @property
    def num_src_tokens(self) -> int:
        """Number of non-padding source tokens."""
        return int((self.src != self.pad_id).sum())

    @property
    def src_mask(self) -> Tensor:
        """Padding mask of the source, ``(B, 1, 1, S)``, ``True`` = may attend."""
        return padding_mask(self.src, self.pad_id)

    @property
    def tgt_mask(self) -> Tensor:
        """Causal and padding mask of the decoder input, ``(B, 1, T, T)``, ``True`` = may attend."""
        return target_mask(self.tgt_in, self.pad_id)

    def to(self, device: torch.device | str) -> Batch:
        """The batch on ``device``; copies from pinned memory (:meth:`pin_memory`) do not block."""
        return Batch(
            src=self.src.to(device, non_blocking=True),
            tgt_in=self.tgt_in.to(device, non_blocking=True),
            tgt_out=self.tgt_out.to(device, non_blocking=True),
            pad_id=self.pad_id,
        )

    def pin_memory(self) -> Batch:
        """The batch in page-locked memory (what ``DataLoader(pin_memory=True)`` calls)."""
        return Batch(
            src=self.src.pin_memory(),
            tgt_in=self.tgt_in.pin_memory(),
            tgt_out=self.tgt_out.pin_memory(),
            pad_id=self.pad_id,
        )


def _check_ids(name: str, seqs: object) -> list[list[int]]:
    if not isinstance(seqs, Sequence) or isinstance(seqs, (str, bytes)):
        raise TypeError(f"{name} must be a list of lists of token ids, got {type(seqs).__name__}")
    rows = [seq.tolist() if isinstance(seq, Tensor) else seq for seq in seqs]
    for i, seq in enumerate(rows):
        ints = isinstance(seq, Sequence) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in seq
        )
        if not ints or isinstance(seq, (str, bytes)):
            raise TypeError(f"{name}[{i}] must be a list of int token ids, got {seq!r:.60}")
    return [list(seq) for seq in rows]


def _pad(rows: list[list[int]], pad_id: int) -> Tensor:
    out = pad_sequence(
        [torch.tensor(row, dtype=torch.long) for row in rows],
        batch_first=True,
        padding_value=pad_id,
    )
    # (B, T); empty rows still get a column
    return out if out.size(1) > 0 else torch.full((len(rows), 1), pad_id)


def make_batch(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    pad_id: int,
    bos_id: int,
    eos_id: int,
) -> Batch:
    """Pad lists of id lists into a :class:`~.Batch`; ``bos`` and ``eos`` are added to the target,
    not the source.

    Example:
        >>> b = make_batch([[5, 6, 7]], [[8, 9]], pad_id=0, bos_id=1, eos_id=2)
        >>> b.tgt_in.tolist(), b.tgt_out.tolist()
        ([[1, 8, 9]], [[8, 9, 2]])

    Shape:
        output: ``src (B, max S_i)``, ``tgt_in``/``tgt_out`` ``(B, max T_i + 1)``.
    """
    src = _check_ids("src_seqs", src_seqs)
    tgt = _check_ids("tgt_seqs", tgt_seqs)
    if len(src) != len(tgt):
        raise ValueError(
            f"src_seqs has {len(src)} sentences but tgt_seqs has {len(tgt)}; they must pair up"
        )
    if not src:
        raise ValueError("src_seqs and tgt_seqs are empty; a batch needs at least one pair")
    for name, value in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
        check_token_id(name, value)
    if len({pad_id, bos_id, eos_id}) != 3:
        raise ValueError(
            f"pad_id={pad_id}, bos_id={bos_id} and eos_id={eos_id} must be three different ids"
        )
    return Batch(
        src=_pad(src, pad_id),
        tgt_in=_pad([[bos_id, *t] for t in tgt], pad_id),
        tgt_out=_pad([[*t, eos_id] for t in tgt], pad_id),
        pad_id=pad_id,
    )


Pair = tuple[Sequence[int], Sequence[int]]  # (source ids, target ids)


class TokenBudgetSampler(Sampler[list[int]]):
    """A batch sampler: lists of pair indices of similar length, each batch under a token budget.

    With ``shuffle``, the pairs are shuffled, sorted by length inside buckets of ``bucket_size``
    batches' worth, cut into batches, and the batches shuffled: little padding, yet an order that
    changes with ``seed``; without it they come shortest first. A batch has at most ``max_tokens``
    padded tokens per side (a longer pair: alone).
    """

    def __init__(
        self,
        pairs: Sequence[Pair],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        bucket_size: int = 100,
    ) -> None:
        check_positive_int("max_tokens", max_tokens)
        check_positive_int("bucket_size", bucket_size)
        if not isinstance(pairs, Sequence) or isinstance(pairs, (str, bytes)):
            raise TypeError(
                f"pairs must be a list of (src_ids, tgt_ids) pairs, got {type(pairs).__name__}"
            )
        if pairs and (not isinstance(pairs[0], Sequence) or len(pairs[0]) != 2):
            raise TypeError(f"pairs[0] must be a (src_ids, tgt_ids) pair, got {pairs[0]!r}")
        # + 1: bos (decoder input) or eos (target)
        lengths = [(len(s), len(t) + 1) for s, t in pairs]
        self.batches = _fill(
            _length_order(lengths, max_tokens, shuffle, seed, bucket_size), lengths, max_tokens
        )
        if shuffle:
            random.Random(seed + 1).shuffle(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def _length_order(
    lengths: list[tuple[int, int]], max_tokens: int, shuffle: bool, seed: int, bucket: int
) -> list[int]:
    """The pairs' indices, sorted by length: over the whole data, or (``shuffle``) inside shuffled
    buckets.
    """

    def by_length(i: int) -> tuple[int, int]:
        source, target = lengths[i]
        return target, source  # by target length first

    order = list(range(len(lengths)))
    if not shuffle:
        return sorted(order, key=by_length)
    random.Random(seed).shuffle(order)
    mean_len = max(1, sum(max(s, t) for s, t in lengths) // max(1, len(lengths)))
    size = max(1, bucket * max(1, max_tokens // mean_len))  # pairs per bucket
    sorted_buckets = []
    for start in range(0, len(order), size):
        sorted_buckets += sorted(order[start : start + size], key=by_length)
    return sorted_buckets


def _fill(order: list[int], lengths: list[tuple[int, int]], max_tokens: int) -> list[list[int]]:
    """Cut ``order`` into batches whose padded size ``B * max(S, T)`` stays within
    ``max_tokens``.
    """
    groups: list[list[int]] = []
    width = 0  # the longest side (S or T) of the last batch
    for i in order:
        longest = max(*lengths[i], 1)
        if not groups or (len(groups[-1]) + 1) * max(width, longest) > max_tokens:
            groups.append([])
            width = 0
        groups[-1].append(i)
        width = max(width, longest)
    return groups


@dataclass(frozen=True)
class PadCollate:
    """The ``collate_fn`` of the batches: a list of pairs -> one padded :class:`~.Batch`
    (:func:`~.make_batch`).
    """

    pad_id: int
    bos_id: int
    eos_id: int

    def __call__(self, pairs: list[Pair]) -> Batch:
        """Pad and shift the pairs."""
        return make_batch(
            [s for s, _ in pairs], [t for _, t in pairs], self.pad_id, self.bos_id, self.eos_id
        )


def epoch_seed(seed: int, epoch: int) -> int:
    """The data-order seed of one epoch of a run seeded ``seed`` (``seed * 1_000_003 + epoch``): a
    new order every epoch, and no order shared by two runs of different seeds (up to a million
    epochs). For seed 0 it is the epoch itself.
    """
    return seed * 1_000_003 + epoch


def batch_loader(
    pairs: Sequence[Pair],
    max_tokens: int,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    seed: int = 0,
    pin_memory: bool = False,
) -> DataLoader[Batch]:
    """The shuffled batches of one epoch, from a ``DataLoader`` in :class:`~.TokenBudgetSampler`
    order (``seed=epoch_seed(run_seed, epoch)``: a new order each epoch); ``pin_memory=True`` makes
    their copies to a CUDA GPU non-blocking.
    """
    sampler = TokenBudgetSampler(pairs, max_tokens, shuffle=True, seed=seed)
    return _loader(
        pairs, sampler, PadCollate(pad_id=pad_id, bos_id=bos_id, eos_id=eos_id), pin_memory
    )


def token_batches(
    pairs: Sequence[Pair],
    max_tokens: int,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    shuffle: bool = True,
    seed: int = 0,
    bucket_size: int = 100,
) -> list[Batch]:
    """The batches of :class:`~.TokenBudgetSampler` as a list (with ``shuffle``:
    :func:`~.batch_loader`'s).
    """
    sampler = TokenBudgetSampler(pairs, max_tokens, shuffle, seed, bucket_size)
    return list(
        _loader(
            pairs,
            sampler,
            PadCollate(pad_id=pad_id, bos_id=bos_id, eos_id=eos_id),
            pin_memory=False,
        )
    )


def _loader(
    pairs: Sequence[Pair], sampler: TokenBudgetSampler, collate: PadCollate, pin_memory: bool
) -> DataLoader:
    # A DataLoader draws a seed for its workers each time it is read, from the global generator
    # unless
    # given one: that draw would shift the dropout masks of training, and so a resumed run's losses.
    workers_seed = torch.Generator().manual_seed(0)
    return DataLoader(
        pairs,
        batch_sampler=sampler,
        collate_fn=collate,
        pin_memory=pin_memory,
        generator=workers_seed,
    )
