"""Step 4 of the translation pipeline: translate the test set with greedy and beam search, score with sacreBLEU."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from ...data.tokenizer import BPETokenizer
from ...decoding import beam_search, greedy_decode
from ...model import Transformer
from ...runtime import torch_threads
from ...validation import check_positive_int
from ..bleu import BleuScore, corpus_bleu
from .train import TranslationRun


def _no_progress(progress: bool) -> bool:
    """Whether to hide progress bars: asked to, or the ``TQDM_DISABLE`` environment variable is set."""
    return not progress or os.environ.get("TQDM_DISABLE", "").lower() not in ("", "0", "false")


@torch.no_grad()
def translate(
    model: Transformer,
    tokenizer: BPETokenizer,
    sentences: Sequence[str],
    beam_size: int = 1,
    length_penalty: float = 0.6,
    batch_size: int = 128,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    progress: bool = False,
) -> list[str]:
    """Translate German ``sentences`` into detokenized English text (greedy when ``beam_size == 1``).

    Sentences are translated in batches of equal source length (no padding, and the same length
    limit for every row, so batching does not change any translation) and returned in the order
    given. Each translation is cut at ``max_len_a * source_tokens + max_len_b`` tokens.
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of str, not a single str (wrap it in a list)")
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    ids = tokenizer.encode_batch(list(sentences))
    limit = model.config.max_len
    ids = [row[: limit - 1] or [tokenizer.unk_id] for row in ids]  # the positional table's length
    # Batches of sentences of one source length: no padding, and the same length limit for every
    # row, so each sentence gets exactly the translation it would get alone.
    by_length: dict[int, list[int]] = {}
    for i, row in enumerate(ids):
        by_length.setdefault(len(row), []).append(i)
    chunks = [
        group[start : start + batch_size]
        for _, group in sorted(by_length.items())
        for start in range(0, len(group), batch_size)
    ]
    out: list[str] = [""] * len(ids)
    try:
        for chunk in tqdm(chunks, desc="translating", unit="batch", file=sys.stderr, disable=_no_progress(progress)):
            src = torch.tensor([ids[i] for i in chunk], dtype=torch.long, device=device)  # (B, S), no padding
            width = src.size(1)
            max_len = min(int(max_len_a * width + max_len_b), limit)
            if beam_size == 1:
                hyp = greedy_decode(model, src, max_len, tokenizer.bos_id, tokenizer.eos_id)  # (B, <= max_len)
            else:
                hyp = beam_search(
                    model, src, beam_size, max_len, tokenizer.bos_id, tokenizer.eos_id, length_penalty=length_penalty
                )  # (B, <= max_len)
            for row, text in zip(chunk, tokenizer.decode_batch(hyp.tolist()), strict=True):
                out[row] = text
    finally:
        model.train(was_training)
    return out


@dataclass(frozen=True)
class TranslationEvaluation:
    """What :func:`~.evaluate_translation` returns: the translations and their sacreBLEU scores.

    Attributes:
        sources, references: the German sentences and their English reference translations.
        greedy, beam: the detokenized translations by greedy search and by beam search.
        bleu_greedy, bleu_beam: their corpus :class:`~.BleuScore`.
        beam_size, length_penalty: the beam search settings used.
        greedy_seconds, beam_seconds: wall time of each decoding pass.
        threads: CPU threads PyTorch used while decoding.
    """

    sources: list[str]
    references: list[str]
    greedy: list[str]
    beam: list[str]
    bleu_greedy: BleuScore
    bleu_beam: BleuScore
    beam_size: int
    length_penalty: float
    greedy_seconds: float
    beam_seconds: float
    threads: int

    @property
    def signature(self) -> str:
        """The sacreBLEU signature of both scores, which they share (how they were computed)."""
        return self.bleu_greedy.signature

    def examples(self, count: int = 3) -> list[dict[str, str]]:
        """The first ``count`` sentences: ``source``, ``reference``, ``greedy`` and ``beam``."""
        rows = zip(self.sources, self.references, self.greedy, self.beam, strict=True)
        return [{"source": s, "reference": r, "greedy": g, "beam": b} for s, r, g, b in list(rows)[:count]]

    def summary(self, examples: int = 3) -> dict[str, Any]:
        """The JSON-serialisable scores: BLEU (rounded), signature, brevity penalties, timings, examples."""
        return {
            "bleu": round(self.bleu_greedy.score, 2),
            "bleu_beam": round(self.bleu_beam.score, 2),
            "sacrebleu_signature": self.signature,
            "test_pairs": len(self.sources),
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty,
            "brevity_penalty": round(self.bleu_greedy.brevity_penalty, 3),
            "brevity_penalty_beam": round(self.bleu_beam.brevity_penalty, 3),
            "decode_seconds_greedy": round(self.greedy_seconds, 1),
            "decode_seconds_beam": round(self.beam_seconds, 1),
            "examples": self.examples(examples),
        }


def evaluate_translation(
    run: TranslationRun,
    pairs: Sequence[tuple[str, str]] | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> TranslationEvaluation:
    """Step 4 of the pipeline: translate with greedy and beam search and score both with sacreBLEU.

    Args:
        run: what :func:`~.train_translation` returned.
        pairs: ``(german, english)`` pairs to translate (default: ``run.test_pairs``, the
            profile's slice of ``test_2016_flickr``).
        beam_size, length_penalty: beam search settings (default: the profile's).
        progress: progress bars on stderr.
        threads: CPU threads for PyTorch while decoding (default: ``run.threads``); the previous
            setting is restored afterwards.
    """
    if not isinstance(run, TranslationRun):
        raise TypeError(f"run must be a TranslationRun (what train_translation returns), got {type(run).__name__}")
    pairs = run.test_pairs if pairs is None else list(pairs)
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise TypeError(f"pairs[{i}] must be a (german, english) pair of str, got {pair!r}")
    if not pairs:
        raise ValueError("pairs is empty: evaluate_translation needs at least one (german, english) pair")
    prof = run.profile
    beam_size = prof.beam_size if beam_size is None else beam_size
    length_penalty = prof.length_penalty if length_penalty is None else length_penalty
    check_positive_int("beam_size", beam_size)
    if threads is not None:
        check_positive_int("threads", threads)
    sources = [de for de, _ in pairs]
    references = [en for _, en in pairs]
    decode = dict(batch_size=prof.decode_batch_size, max_len_a=prof.max_len_a, max_len_b=prof.max_len_b)
    with torch_threads(threads if threads is not None else run.threads) as used_threads:
        start = time.perf_counter()
        greedy = translate(run.model, run.tokenizer, sources, beam_size=1, progress=progress, **decode)
        greedy_seconds = time.perf_counter() - start
        start = time.perf_counter()
        beam = translate(run.model, run.tokenizer, sources, beam_size, length_penalty, progress=progress, **decode)
        beam_seconds = time.perf_counter() - start
    return TranslationEvaluation(
        sources=sources,
        references=references,
        greedy=greedy,
        beam=beam,
        bleu_greedy=corpus_bleu(greedy, references),
        bleu_beam=corpus_bleu(beam, references),
        beam_size=beam_size,
        length_penalty=length_penalty,
        greedy_seconds=greedy_seconds,
        beam_seconds=beam_seconds,
        threads=used_threads,
    )
