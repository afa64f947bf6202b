"""Decoding (解码): greedy search and beam search, with or without the key/value cache.

Both return rows ``bos y_1 .. y_n eos pad pad ...`` (cut at ``max_len`` if ``eos_id`` never comes);
the model's ``pad_id`` is never generated (its logit is masked), so a padded row is unambiguous.
With ``use_cache=True`` each step feeds only the newest token (earlier self-attention keys and
values from a :class:`~.KVCache`, the cross-attention ones computed once); with ``False`` each step
re-runs the decoder over the whole prefix (the same tokens, tested, at ``O(t^2)`` attention per step
instead of ``O(t)``). Both run the model in eval mode. :func:`sequence_log_prob` scores any decoded
rows under the same rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch
from torch import Tensor, nn

from .config import TransformerConfig
from .eval_mode import eval_mode
from .nn.cache import KVCache
from .nn.masks import causal_mask, padding_mask
from .validation import check_non_negative, check_positive_int, check_token_id, check_token_ids

__all__ = [
    "EncoderDecoder",
    "beam_search",
    "greedy_decode",
    "length_penalty_factor",
    "sequence_log_prob",
]

Cache = list[tuple[KVCache, KVCache]]


class EncoderDecoder(Protocol):
    """What the decoders need of a model: a :class:`~.Transformer` is one."""

    config: TransformerConfig

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids ``(B, S)`` -> memory ``(B, S, d_model)``."""
        ...

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: Cache | None = None,
    ) -> Tensor:
        """Target ids ``(B, T)`` against ``memory`` -> logits ``(B, T, tgt_vocab_size)``."""
        ...

    def new_cache(self) -> Cache:
        """Empty key/value caches, one (self, cross) pair per decoder layer."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The weights (the decoders put their tensors on the weights' device)."""
        ...


def length_penalty_factor(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's length penalty ``lp(len) = ((5 + len) / 6) ** alpha`` (Wu et al., 2016).

    Beam search ranks finished hypotheses by ``log P(y | x) / lp(len)``, where ``len`` counts the
    generated tokens (``eos`` included, ``bos`` excluded). ``alpha = 0`` gives ``lp = 1`` (raw
    log-probability, which favours short outputs); larger ``alpha`` favours longer ones.
    """
    return ((5.0 + length) / 6.0) ** alpha


def _check_decode_args(
    model: EncoderDecoder, src: Tensor, max_len: int, bos_id: int, eos_id: int
) -> None:
    """The decoders' entry checks; the ids' range is read here once per call, never in a forward
    pass.
    """
    check_token_ids("src", src, model.config.src_vocab_size)
    if src.dtype != torch.long:
        raise TypeError(f"src must hold torch.long token ids, got dtype {src.dtype}")
    if 0 in src.shape:
        raise ValueError(f"src must have B, S > 0, got shape {tuple(src.shape)}")
    check_positive_int("max_len", max_len)
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        check_token_id(name, value, model.config.tgt_vocab_size)
        if value == model.config.pad_id:
            raise ValueError(f"{name}={value} equals the model's pad_id; they must differ")


def _next_log_probs(
    model: EncoderDecoder, tokens: Tensor, memory: Tensor, src_mask: Tensor, cache: Cache | None
) -> Tensor:
    """Log-probabilities of the next token after ``tokens`` (padding excluded).

    Shape:
        tokens: ``(N, t)``; memory: ``(N, S, d)``; src_mask: ``(N, 1, 1, S)``; output: ``(N, V)``
        float32.
    """
    if cache is not None:
        # (N, 1, V): newest token only
        logits = model.decode(tokens[:, -1:], memory, src_mask, cache=cache)
    else:
        mask = causal_mask(tokens.size(1), tokens.device)  # (t, t); a live prefix has no padding
        logits = model.decode(tokens, memory, src_mask, mask)  # (N, t, V): the whole prefix again
    logits = logits[:, -1].float()  # (N, V)
    logits[:, model.config.pad_id] = float("-inf")  # padding is never generated
    return torch.log_softmax(logits, dim=-1)


def greedy_decode(
    model: EncoderDecoder,
    src: Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    use_cache: bool = True,
) -> Tensor:
    """Decode a batch by taking the most probable token at every step (贪心解码).

    Args:
        model: a :class:`~.Transformer` (any :class:`EncoderDecoder`).
        max_len: longest output row, ``bos`` included; decoding stops once every row has produced
            ``eos_id``.

    Shape:
        src: ``(B, S)``; output: ``(B, L)`` with ``L <= max_len``.
    """
    _check_decode_args(model, src, max_len, bos_id, eos_id)
    device = next(model.parameters()).device
    src = src.to(device)
    batch = src.size(0)
    pad_id = model.config.pad_id
    with eval_mode(model):
        src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        cache = model.new_cache() if use_cache else None
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)  # (B, 1)
        done = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,)
        for _ in range(max_len - 1):
            log_probs = _next_log_probs(model, tokens, memory, src_mask, cache)  # (B, V)
            best = log_probs.max(dim=-1).indices  # (B,)
            best = best.masked_fill(done, pad_id)  # finished rows only get padding
            tokens = torch.cat([tokens, best[:, None]], dim=1)  # (B, t) -> (B, t + 1)
            done |= best == eos_id
            if bool(done.all()):
                break
    return tokens


def beam_search(
    model: EncoderDecoder,
    src: Tensor,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.6,  # the paper's alpha (section 6.1)
    use_cache: bool = True,
) -> Tensor:
    """Batched beam search (束搜索) with GNMT's length penalty and early stopping per row.

    Each row keeps ``beam_size`` live beams. At every step the ``2 * beam_size`` best extensions of
    its beams (by summed log-probability) are examined in order: one ending in ``eos_id`` among the
    first ``beam_size`` becomes a finished hypothesis, scored ``log P / lp(len)``
    (:func:`~.length_penalty_factor`); the first ``beam_size`` others become the next beams. A row
    is done once it has ``beam_size`` finished hypotheses; at ``max_len`` the live beams of
    unfinished rows compete as they are. With ``beam_size=1`` this is exactly
    :func:`~.greedy_decode`, whose other arguments these are.

    Shape:
        src: ``(B, S)``; output: ``(B, L)``, ``L <= max_len``.
    """
    _check_decode_args(model, src, max_len, bos_id, eos_id)
    check_positive_int("beam_size", beam_size)
    check_non_negative("length_penalty", length_penalty)
    device = next(model.parameters()).device
    src = src.to(device)
    beams = _Beams(src.size(0), beam_size, bos_id, eos_id, length_penalty, device)
    with eval_mode(model):
        src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        # (B, S, d) -> (B*K, S, d): beam j of row b is b*K + j
        memory = memory.repeat_interleave(beam_size, dim=0)
        src_mask = src_mask.repeat_interleave(beam_size, dim=0)  # (B*K, 1, 1, S)
        cache = model.new_cache() if use_cache else None
        for step in range(1, max_len):
            log_probs = _next_log_probs(model, beams.tokens, memory, src_mask, cache)  # (B*K, V)
            index = beams.step(step, log_probs)  # (B*K,): the parent of each new beam
            if cache is not None:
                # the static cross-attention cache stays as is
                for self_cache, _cross_cache in cache:
                    self_cache.reorder(index)
            if all(beams.row_done):
                break
        beams.finish_cut_rows()  # rows cut by max_len: their live beams compete with what finished
    return beams.best(model.config.pad_id)


class _Beams:
    """The state of a batched beam search: live beams, their scores, and each row's finished
    hypotheses.
    """

    def __init__(
        self, batch: int, k: int, bos_id: int, eos_id: int, alpha: float, device: torch.device
    ) -> None:
        self.batch = batch
        self.k = k  # beams per row
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.alpha = alpha  # the length penalty's
        # (B*K, 1)
        self.tokens = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
        self.scores = torch.zeros(batch, k, device=device)  # (B, K) summed log-probabilities
        # at the start only beam 0 is real (the others are copies)
        self.scores[:, 1:] = float("-inf")
        self.finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
        self.row_done = [False] * batch
        self.row_offset = torch.arange(batch, device=device)[:, None] * k  # (B, 1)

    def step(self, step: int, log_probs: Tensor) -> Tensor:
        """Extend every beam by every token, keep the best; return the parent of each new beam
        ``(B*K,)``.
        """
        batch, k = self.batch, self.k
        vocab = log_probs.size(-1)
        # (B*K, V) -> (B, K*V)
        candidates = (self.scores.view(-1, 1) + log_probs).view(batch, k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)  # (B, 2K)
        top_beam = top_index // vocab  # (B, 2K): the beam each candidate extends
        top_token = top_index % vocab  # (B, 2K): the token it adds
        is_eos = top_token == self.eos_id  # (B, 2K)
        self._collect_finished(step, top_scores, top_beam, is_eos)
        # Live beams: the first K candidates of each row that do not end in eos.
        keep = ~is_eos  # (B, 2K)
        rank = keep.long().cumsum(dim=-1) - 1  # (B, 2K): rank among non-eos candidates
        chosen = keep & (rank < k)  # exactly K per row (at most K candidates can be eos)
        next_beam = top_beam[chosen].view(batch, k)  # (B, K)
        next_token = top_token[chosen].view(batch, k)  # (B, K)
        self.scores = top_scores[chosen].view(batch, k)  # (B, K)
        # (B*K,) flat index of each new beam's parent
        index = (self.row_offset + next_beam).view(-1)
        # (B*K, t+1)
        self.tokens = torch.cat([self.tokens.index_select(0, index), next_token.view(-1, 1)], dim=1)
        self.row_done = [len(hyps) >= k for hyps in self.finished]
        return index

    def _collect_finished(
        self, step: int, top_scores: Tensor, top_beam: Tensor, is_eos: Tensor
    ) -> None:
        """Finished hypotheses: eos among the first K candidates of a row that is not done."""
        k = self.k
        rows, ranks = torch.nonzero(
            is_eos[:, :k] & torch.isfinite(top_scores[:, :k]), as_tuple=True
        )
        if rows.numel() == 0:
            return
        prefix_ids = (rows * k + top_beam[rows, ranks]).tolist()
        raw = top_scores[rows, ranks].tolist()
        for row, prefix_id, score in zip(rows.tolist(), prefix_ids, raw, strict=True):
            if not self.row_done[row] and len(self.finished[row]) < k:
                seq = self.tokens[prefix_id, 1:].tolist() + [self.eos_id]
                self.finished[row].append(
                    (score / float(length_penalty_factor(step, self.alpha)), seq)
                )

    def finish_cut_rows(self) -> None:
        """Rows that ``max_len`` cut: their live beams compete as they are with what finished."""
        penalty = float(length_penalty_factor(self.tokens.size(1) - 1, self.alpha))
        for row, scores in enumerate(self.scores.tolist()):
            for j, score in enumerate(scores):
                if not self.row_done[row] and score != float("-inf"):
                    self.finished[row].append(
                        (score / penalty, self.tokens[row * self.k + j, 1:].tolist())
                    )

    def best(self, pad_id: int) -> Tensor:
        """The best-scoring hypothesis of each row, padded into ``(B, L)``."""
        device = self.tokens.device
        best = [max(hyps, key=lambda h: h[0])[1] for hyps in self.finished]
        width = 1 + max(len(seq) for seq in best)
        out = torch.full((self.batch, width), pad_id, dtype=torch.long, device=device)  # (B, L)
        out[:, 0] = self.bos_id
        for row, seq in enumerate(best):
            out[row, 1 : 1 + len(seq)] = torch.tensor(seq, dtype=torch.long, device=device)
        return out


def sequence_log_prob(model: EncoderDecoder, src: Tensor, tokens: Tensor, eos_id: int) -> Tensor:
    """Log-probability the model gives to each decoded row, under the same rules as the decoders.

    ``tokens`` are rows in the decoders' format (``bos``, tokens, ``eos``, padding), every row
    starting with the same ``bos``; a row scores ``sum_t log p(y_t | y_<t, x)`` over its tokens
    after ``bos`` up to its first ``eos``, padding excluded from the softmax as when decoding: one
    independent measure of different decoders (beam search ranks by this score divided by
    :func:`length_penalty_factor` of the row's length).

    Shape:
        src: ``(B, S)``; tokens: ``(B, L)``; output: ``(B,)`` float32.
    """
    check_token_ids("tokens", tokens, model.config.tgt_vocab_size)
    if tokens.size(0) != src.size(0) or tokens.size(1) < 2:
        raise ValueError(f"tokens must be (B={src.size(0)}, L >= 2) ids, got {tuple(tokens.shape)}")
    starts = tokens[:, 0]  # (B,)
    bos_id = int(starts[0])
    if not bool((starts == bos_id).all()):
        raise ValueError(
            f"every row of tokens must start with the same bos id, got {starts.tolist()}"
        )
    _check_decode_args(model, src, tokens.size(1), bos_id, eos_id)
    device = next(model.parameters()).device
    src, tokens = src.to(device), tokens.to(device)
    pad_id = model.config.pad_id
    with eval_mode(model):
        src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, d)
        prefix_mask = causal_mask(tokens.size(1) - 1, device)  # (L-1, L-1)
        logits = model.decode(tokens[:, :-1], memory, src_mask, prefix_mask).float()
        logits[..., pad_id] = float("-inf")
        log_probs = torch.log_softmax(logits, dim=-1)  # (B, L-1, V)
        target = tokens[:, 1:]  # (B, L-1)
        is_pad = target == pad_id
        picked = log_probs.gather(-1, target.masked_fill(is_pad, 0)[..., None]).squeeze(-1)
        # A position counts if no eos came before it and it is not padding.
        is_eos = (target == eos_id).long()  # (B, L-1)
        eos_before = torch.cumsum(is_eos, dim=1) - is_eos  # (B, L-1)
        counted = (eos_before == 0) & ~is_pad
        return torch.where(counted, picked, 0.0).sum(dim=1)  # (B,)
