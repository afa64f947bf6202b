"""Step 4 of the translation pipeline (translate the test set, score it with sacreBLEU), and the
whole pipeline.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from sacrebleu.metrics.bleu import BLEUScore
from torch import Tensor
from tqdm.auto import tqdm

from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.decoding import beam_search, greedy_decode
from transformer_lib.eval_mode import eval_mode
from transformer_lib.model import Transformer
from transformer_lib.runtime import torch_threads
from transformer_lib.validation import check_positive_int

from ..bleu import bleu_signature, corpus_bleu
from .profiles import DecodeConfig
from .train import TranslationRun

GREEDY = DecodeConfig(beam_size=1)
"""The decoding settings of :func:`translate` when none are given: greedy, the other defaults."""


def _chunks(ids: list[list[int]], batch_size: int) -> list[list[int]]:
    """Indices of ``ids`` in batches of one source length, at most ``batch_size`` each."""
    by_length: dict[int, list[int]] = {}
    for i, row in enumerate(ids):
        by_length.setdefault(len(row), []).append(i)
    chunks = []
    for length in sorted(by_length):
        group = by_length[length]
        chunks += [group[k : k + batch_size] for k in range(0, len(group), batch_size)]
    return chunks


def translate(
    model: Transformer,
    tokenizer: BPETokenizer,
    sentences: Sequence[str],
    decode: DecodeConfig = GREEDY,
    progress: bool = False,
) -> list[str]:
    """Translate German ``sentences`` into detokenized English text, as ``decode`` says: greedy
    when its ``beam_size`` is 1, else beam search with its ``length_penalty``.

    Each translation is cut at ``max_len_a * source_tokens + max_len_b`` tokens, ``batch_size``
    sentences are translated at once. ``progress``: a bar on stderr (tqdm's ``TQDM_DISABLE`` also
    hides it).
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of str, not a single str (wrap it in a list)")
    if not isinstance(decode, DecodeConfig):
        raise TypeError(f"decode must be a DecodeConfig, got {type(decode).__name__}")
    device = next(model.parameters()).device
    limit = model.config.max_len
    encoded = tokenizer.encode_batch(list(sentences))
    ids = [row[: limit - 1] or [tokenizer.unk_id] for row in encoded]
    out = [""] * len(ids)
    hide = {} if progress else {"disable": True}  # when shown, tqdm reads TQDM_DISABLE itself
    # Batches of sentences of one source length: no padding, and the same length limit for every
    # row, so each sentence gets exactly the translation it would get alone.
    chunks = _chunks(ids, decode.batch_size)
    with eval_mode(model):
        for chunk in tqdm(chunks, desc="translating", unit="batch", file=sys.stderr, **hide):
            src = torch.tensor([ids[i] for i in chunk], dtype=torch.long, device=device)  # (B, S)
            hyp = _decode(model, tokenizer, src, decode)  # (B, <= max_len)
            for row, text in zip(chunk, tokenizer.decode_batch(hyp.tolist()), strict=True):
                out[row] = text
    return out


def _decode(
    model: Transformer, tokenizer: BPETokenizer, src: Tensor, decode: DecodeConfig
) -> Tensor:
    max_len = decode.max_length(src.size(1), model.config.max_len)
    ends = {"bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    if decode.beam_size == 1:
        return greedy_decode(model, src, max_len, **ends)
    return beam_search(
        model, src, decode.beam_size, max_len, **ends, length_penalty=decode.length_penalty
    )


@dataclass(frozen=True)
class TranslationEvaluation:
    """What :func:`~.evaluate_translation` returns: the translations and their sacreBLEU scores.

    Attributes:
        sources, references: the German sentences and their English reference translations.
        greedy, beam: the detokenized translations by greedy search and by beam search.
        threads: CPU threads PyTorch used while decoding.
    """

    sources: list[str]
    references: list[str]
    greedy: list[str]
    beam: list[str]
    bleu_greedy: BLEUScore
    bleu_beam: BLEUScore
    beam_size: int
    length_penalty: float
    greedy_seconds: float
    beam_seconds: float
    threads: int

    @property
    def signature(self) -> str:
        """The sacreBLEU signature of both scores (how they were computed)."""
        return bleu_signature()

    def examples(self, count: int = 3) -> list[dict[str, str]]:
        """The first ``count`` sentences: ``source``, ``reference``, ``greedy`` and ``beam``."""
        rows = zip(self.sources, self.references, self.greedy, self.beam, strict=True)
        return [
            {"source": s, "reference": r, "greedy": g, "beam": b}
            for s, r, g, b in list(rows)[:count]
        ]

    def summary(self, examples: int = 3) -> dict[str, Any]:
        """The JSON-serialisable scores: BLEU (rounded), signature, brevity penalties, timings,
        examples.
        """
        return {
            "bleu": round(self.bleu_greedy.score, 2),
            "bleu_beam": round(self.bleu_beam.score, 2),
            "sacrebleu_signature": self.signature,
            "test_pairs": len(self.sources),
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty,
            "brevity_penalty": round(self.bleu_greedy.bp, 3),
            "brevity_penalty_beam": round(self.bleu_beam.bp, 3),
            "decode_seconds_greedy": round(self.greedy_seconds, 1),
            "decode_seconds_beam": round(self.beam_seconds, 1),
            "examples": self.examples(examples),
        }


@dataclass(frozen=True)
class DecodingSweep:
    """What :func:`sweep_decoding` measured: BLEU on the given pairs for every setting, and the
    best.

    Attributes:
        rows: one dict per setting: ``beam_size``, ``length_penalty``, ``bleu``,
            ``brevity_penalty``, ``seconds`` (greedy search, ``beam_size`` 1, is one row: the
            length penalty plays no part).
        best: the row of highest BLEU among the beam-search rows (the first of equals: the smaller
            beam, then the smaller penalty, so a tie picks the cheaper setting).
    """

    rows: list[dict[str, Any]]
    best: dict[str, Any]


def sweep_decoding(
    model: Transformer,
    tokenizer: BPETokenizer,
    pairs: Sequence[tuple[str, str]],
    beam_sizes: Sequence[int],
    length_penalties: Sequence[float],
    decode: DecodeConfig | None = None,
) -> DecodingSweep:
    """Score every beam size with every length penalty on ``pairs`` (the validation split: never
    the test split, whose score must not choose its own settings); ``decode`` gives the length
    limits.
    """
    decode = decode or DecodeConfig()
    if not pairs:
        raise ValueError("pairs is empty: sweep_decoding needs (german, english) pairs to score")
    for size in beam_sizes:
        check_positive_int("beam_sizes", size)
    sources = [de for de, _ in pairs]
    references = [en for _, en in pairs]
    settings = [(1, decode.length_penalty)]
    settings += [
        (size, penalty) for size in sorted(set(beam_sizes)) for penalty in length_penalties
    ]
    rows = []
    for beam_size, penalty in settings:
        start = time.perf_counter()
        setting = replace(decode, beam_size=beam_size, length_penalty=penalty)
        outputs = translate(model, tokenizer, sources, setting)
        score = corpus_bleu(outputs, references)
        rows.append(
            {
                "beam_size": beam_size,
                "length_penalty": penalty if beam_size > 1 else None,
                "bleu": round(score.score, 2),
                "brevity_penalty": round(score.bp, 3),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    beams = [row for row in rows if row["beam_size"] > 1] or rows
    best = max(beams, key=lambda row: row["bleu"])  # max keeps the first of equals
    return DecodingSweep(rows=rows, best=best)


def evaluate_translation(
    run: TranslationRun,
    pairs: Sequence[tuple[str, str]] | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> TranslationEvaluation:
    """Translate ``pairs`` (default: ``run.test_pairs``) greedily and with beam search; score both
    with sacreBLEU.

    ``beam_size`` and ``length_penalty`` default to the profile's ``decode`` section, ``threads``
    (PyTorch's CPU threads while decoding, restored afterwards) to ``run.threads``.
    """
    if not isinstance(run, TranslationRun):
        raise TypeError(
            "run must be a TranslationRun (what train_translation returns), got "
            f"{type(run).__name__}"
        )
    pairs = run.test_pairs if pairs is None else _checked_pairs(pairs)
    beams = run.profile.decode
    if beam_size is not None:
        beams = replace(beams, beam_size=beam_size)
    if length_penalty is not None:
        beams = replace(beams, length_penalty=length_penalty)
    threads = run.threads if threads is None else check_positive_int("threads", threads)
    sources = [de for de, _ in pairs]
    references = [en for _, en in pairs]
    with torch_threads(threads) as used:
        start = time.perf_counter()
        greedy = translate(run.model, run.tokenizer, sources, replace(beams, beam_size=1), progress)
        middle = time.perf_counter()
        beam = translate(run.model, run.tokenizer, sources, beams, progress)
        end = time.perf_counter()
    return TranslationEvaluation(
        sources=sources,
        references=references,
        greedy=greedy,
        beam=beam,
        bleu_greedy=corpus_bleu(greedy, references),
        bleu_beam=corpus_bleu(beam, references),
        beam_size=beams.beam_size,
        length_penalty=beams.length_penalty,
        greedy_seconds=middle - start,
        beam_seconds=end - middle,
        threads=used,
    )


def _checked_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(t, str) for t in pair)
        ):
            raise TypeError(f"pairs[{i}] must be a (german, english) pair of str, got {pair!r}")
    if not pairs:
        raise ValueError(
            "pairs is empty: evaluate_translation needs at least one (german, english) pair"
        )
    return pairs
