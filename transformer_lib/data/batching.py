"""Batches for teacher-forced training (教师强制): padding, shifting and grouping by length.

A sentence pair becomes three rows of ids::

    src     = x_1 ... x_S                      (padded with pad_id)
    tgt_in  = bos y_1 ... y_T                  what the decoder reads
    tgt_out =     y_1 ... y_T eos              what it must predict at each position

so position ``t`` of the decoder, which sees ``bos y_1 .. y_t`` only (causal mask), is trained
to predict ``y_{t+1}`` (or ``eos`` after the last word). :func:`~.token_batches` groups sentences of
similar length so that little of each batch is padding, and caps every batch by its number of
padded tokens rather than its number of sentences (the paper's batches held about 25,000 source
and 25,000 target tokens).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..nn.masks import padding_mask, target_mask
from ..validation import check_positive_int


@dataclass(frozen=True)
class Batch:
    """One padded batch of sentence pairs, ready for ``model(src, tgt_in)`` and the loss on ``tgt_out``.

    Attributes:
        src: source ids, padded with ``pad_id``.
        tgt_in: decoder input, each row ``bos y_1 .. y_T`` then padding.
        tgt_out: decoder target, each row ``y_1 .. y_T eos`` then padding (``tgt_in`` shifted left).
        pad_id: the padding id of both sides.

    Shape:
        src: ``(B, S)``; tgt_in, tgt_out: ``(B, T)``; src_mask: ``(B, 1, 1, S)``; tgt_mask: ``(B, 1, T, T)``.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("src", "tgt_in", "tgt_out"):
            value = getattr(self, name)
            if not isinstance(value, Tensor) or value.dim() != 2 or value.dtype != torch.long:
                got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(f"Batch.{name} must be a (B, T) torch.long tensor, got {got}")
        if self.tgt_in.shape != self.tgt_out.shape:
            raise ValueError(
                f"Batch.tgt_in {tuple(self.tgt_in.shape)} and Batch.tgt_out {tuple(self.tgt_out.shape)} "
                f"must have the same shape"
            )
        if self.src.size(0) != self.tgt_in.size(0):
            raise ValueError(f"Batch.src has {self.src.size(0)} rows but Batch.tgt_in has {self.tgt_in.size(0)}")

    def __len__(self) -> int:
        """Number of sentence pairs."""
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
        """The same batch on ``device`` (a new object: batches are immutable)."""
        return Batch(
            self.src.to(device, non_blocking=True),
            self.tgt_in.to(device, non_blocking=True),
            self.tgt_out.to(device, non_blocking=True),
            self.pad_id,
        )


def _check_ids(name: str, seqs: object) -> list[list[int]]:
    if not isinstance(seqs, Sequence) or isinstance(seqs, (str, bytes)):
        raise TypeError(f"{name} must be a list of lists of token ids, got {type(seqs).__name__}")
    out = []
    for i, seq in enumerate(seqs):
        if isinstance(seq, Tensor):
            seq = seq.tolist()
        if not isinstance(seq, Sequence) or isinstance(seq, (str, bytes)):
            raise TypeError(f"{name}[{i}] must be a list of int token ids, got {type(seq).__name__}")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in seq):
            raise TypeError(f"{name}[{i}] must hold int token ids, got {list(seq)[:8]!r}")
        out.append(list(seq))
    return out


def _pad(rows: list[list[int]], pad_id: int) -> Tensor:
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), max(width, 1)), pad_id, dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def make_batch(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    pad_id: int,
    bos_id: int,
    eos_id: int,
) -> Batch:
    """Pad and shift lists of id lists into a :class:`~.Batch`.

    ``src_seqs[i]`` is used as is (add ``eos`` yourself if your source side wants one);
    ``tgt_seqs[i]`` holds the target words only: ``bos`` and ``eos`` are added here.

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
        raise ValueError(f"src_seqs has {len(src)} sentences but tgt_seqs has {len(tgt)}; they must pair up")
    if not src:
        raise ValueError("src_seqs and tgt_seqs are empty; a batch needs at least one pair")
    for name, value in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if len({pad_id, bos_id, eos_id}) != 3:
        raise ValueError(f"pad_id={pad_id}, bos_id={bos_id} and eos_id={eos_id} must be three different ids")
    return Batch(
        src=_pad(src, pad_id),
        tgt_in=_pad([[bos_id, *t] for t in tgt], pad_id),
        tgt_out=_pad([[*t, eos_id] for t in tgt], pad_id),
        pad_id=pad_id,
    )


def token_batches(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    max_tokens: int,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    shuffle: bool = True,
    seed: int = 0,
    bucket_size: int = 100,
) -> list[Batch]:
    """Group ``(src_ids, tgt_ids)`` pairs into batches of similar length, each under a token budget.

    With ``shuffle``, the pairs are shuffled, cut into buckets of ``bucket_size * (pairs per
    batch)`` pairs, sorted by length inside each bucket, cut into batches, and the batches
    are shuffled: batches hold sentences of similar length (little padding) while the order of
    the data still changes with ``seed``. Without ``shuffle`` the pairs are sorted by length over
    the whole data set and the batches come shortest first (deterministic; for evaluation).

    Every batch has at most ``max_tokens`` padded tokens per side: ``B * S <= max_tokens`` and
    ``B * (T + 1) <= max_tokens`` (``+1`` for ``bos``/``eos``). A single pair longer than
    ``max_tokens`` gets a batch of its own. Every pair appears in exactly one batch.

    Pass ``seed=epoch`` to get a new order every epoch, e.g.
    ``train(..., train_data=lambda epoch: token_batches(pairs, 4000, 0, 1, 2, seed=epoch))``.
    """
    check_positive_int("max_tokens", max_tokens)
    check_positive_int("bucket_size", bucket_size)
    if not isinstance(pairs, Sequence) or isinstance(pairs, (str, bytes)):
        raise TypeError(f"pairs must be a list of (src_ids, tgt_ids) pairs, got {type(pairs).__name__}")
    for i, pair in enumerate(pairs[:1]):
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"pairs[{i}] must be a (src_ids, tgt_ids) pair, got {pair!r}")
    lengths = [(len(s), len(t) + 1) for s, t in pairs]
    order = list(range(len(pairs)))

    def key(i: int) -> tuple[int, int]:
        return (lengths[i][1], lengths[i][0])

    if shuffle:
        rng = random.Random(seed)
        rng.shuffle(order)
        mean_len = max(1, sum(max(s, t) for s, t in lengths) // max(1, len(lengths)))
        bucket = max(1, bucket_size * max(1, max_tokens // mean_len))
        order = [i for start in range(0, len(order), bucket) for i in sorted(order[start : start + bucket], key=key)]
    else:
        order.sort(key=key)

    groups: list[list[int]] = []
    current: list[int] = []
    width_s = width_t = 0
    for i in order:
        s, t = lengths[i]
        new_s, new_t = max(width_s, s, 1), max(width_t, t)
        if current and (len(current) + 1) * max(new_s, new_t) > max_tokens:
            groups.append(current)
            current, new_s, new_t = [], max(s, 1), t
        current.append(i)
        width_s, width_t = new_s, new_t
    if current:
        groups.append(current)
    if shuffle:
        random.Random(seed + 1).shuffle(groups)
    return [make_batch([pairs[i][0] for i in g], [pairs[i][1] for i in g], pad_id, bos_id, eos_id) for g in groups]
