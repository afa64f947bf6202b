"""Step 4 of the translation pipeline (translate the test set, score it with sacreBLEU), and the whole pipeline."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics.bleu import BLEUScore
from tqdm.auto import tqdm

from ...data.tokenizer import BPETokenizer
from ...decoding import DecodeConfig, beam_search, greedy_decode
from ...eval_mode import eval_mode
from ...model import Transformer
from ...runtime import torch_threads
from ...training.distributed import is_main_process
from ...validation import check_positive_int
from ..bleu import bleu_signature, corpus_bleu
from .profiles import TranslationConfig
from .results import save_translation, translation_summary
from .train import TranslationRun, train_translation


def translate(
    model: Transformer,
    tokenizer: BPETokenizer,
    sentences: Sequence[str],
    beam_size: int = 1,
    length_penalty: float = DecodeConfig.length_penalty,
    batch_size: int = DecodeConfig.batch_size,
    max_len_a: float = DecodeConfig.max_len_a,
    max_len_b: int = DecodeConfig.max_len_b,
    progress: bool = False,
) -> list[str]:
    """Translate German ``sentences`` into detokenized English text (greedy when ``beam_size == 1``).

    Each translation is cut at ``max_len_a * source_tokens + max_len_b`` tokens; the defaults are
    :class:`~.DecodeConfig`'s. ``progress``: a bar on stderr (tqdm's ``TQDM_DISABLE`` also hides it).
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of str, not a single str (wrap it in a list)")
    check_positive_int("beam_size", beam_size)
    device, limit = next(model.parameters()).device, model.config.max_len
    ids = [row[: limit - 1] or [tokenizer.unk_id] for row in tokenizer.encode_batch(list(sentences))]
    # Batches of sentences of one source length: no padding, and the same length limit for every
    # row, so each sentence gets exactly the translation it would get alone.
    groups = [list(g) for _, g in groupby(sorted(range(len(ids)), key=lambda i: len(ids[i])), lambda i: len(ids[i]))]
    chunks = [group[k : k + batch_size] for group in groups for k in range(0, len(group), batch_size)]
    out, ends = [""] * len(ids), (tokenizer.bos_id, tokenizer.eos_id)
    hide = {} if progress else {"disable": True}  # when shown, tqdm reads TQDM_DISABLE itself
    with eval_mode(model):
        for chunk in tqdm(chunks, desc="translating", unit="batch", file=sys.stderr, **hide):
            src = torch.tensor([ids[i] for i in chunk], dtype=torch.long, device=device)  # (B, S), no padding
            max_len = min(int(max_len_a * src.size(1) + max_len_b), limit)
            if beam_size == 1:
                hyp = greedy_decode(model, src, max_len, *ends)  # (B, <= max_len)
            else:
                hyp = beam_search(model, src, beam_size, max_len, *ends, length_penalty=length_penalty)
            for row, text in zip(chunk, tokenizer.decode_batch(hyp.tolist()), strict=True):
                out[row] = text
    return out


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
        return [{"source": s, "reference": r, "greedy": g, "beam": b} for s, r, g, b in list(rows)[:count]]

    def summary(self, examples: int = 3) -> dict[str, Any]:
        """The JSON-serialisable scores: BLEU (rounded), signature, brevity penalties, timings, examples."""
        return {
            "bleu": round(self.bleu_greedy.score, 2), "bleu_beam": round(self.bleu_beam.score, 2),
            "sacrebleu_signature": self.signature, "test_pairs": len(self.sources), "beam_size": self.beam_size,
            "length_penalty": self.length_penalty, "brevity_penalty": round(self.bleu_greedy.bp, 3),
            "brevity_penalty_beam": round(self.bleu_beam.bp, 3), "decode_seconds_greedy": round(self.greedy_seconds, 1),
            "decode_seconds_beam": round(self.beam_seconds, 1), "examples": self.examples(examples),
        }  # fmt: skip


@dataclass(frozen=True)
class DecodingSweep:
    """What :func:`sweep_decoding` measured: BLEU on the given pairs for every setting, and the best.

    Attributes:
        rows: one dict per setting: ``beam_size``, ``length_penalty``, ``bleu``, ``brevity_penalty``,
            ``seconds`` (greedy search, ``beam_size`` 1, is one row: the length penalty plays no part).
        best: the row of highest BLEU among the beam-search rows (the first of equals: the smaller beam,
            then the smaller penalty, so a tie picks the cheaper setting).
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
    """Score every beam size with every length penalty on ``pairs`` (the validation split: never the
    test split, whose score must not choose its own settings); ``decode`` gives the length limits.
    """
    decode = decode or DecodeConfig()
    if not pairs:
        raise ValueError("pairs is empty: sweep_decoding needs (german, english) pairs to score")
    for size in beam_sizes:
        check_positive_int("beam_sizes", size)
    sources = [de for de, _ in pairs]
    references = [en for _, en in pairs]
    limits = {"max_len_a": decode.max_len_a, "max_len_b": decode.max_len_b, "batch_size": decode.batch_size}
    settings = [(1, decode.length_penalty)]
    settings += [(size, penalty) for size in sorted(set(beam_sizes)) for penalty in length_penalties]
    rows = []
    for beam_size, penalty in settings:
        start = time.perf_counter()
        outputs = translate(model, tokenizer, sources, beam_size, penalty, **limits)
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
    return DecodingSweep(rows, best)


def evaluate_translation(
    run: TranslationRun,
    pairs: Sequence[tuple[str, str]] | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> TranslationEvaluation:
    """Translate ``pairs`` (default: ``run.test_pairs``) greedily and with beam search; score both with sacreBLEU.

    ``beam_size`` and ``length_penalty`` default to the profile's ``decode`` section, ``threads``
    (PyTorch's CPU threads while decoding, restored afterwards) to ``run.threads``.
    """
    if not isinstance(run, TranslationRun):
        raise TypeError(f"run must be a TranslationRun (what train_translation returns), got {type(run).__name__}")
    pairs = run.test_pairs if pairs is None else list(pairs)
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise TypeError(f"pairs[{i}] must be a (german, english) pair of str, got {pair!r}")
    if not pairs:
        raise ValueError("pairs is empty: evaluate_translation needs at least one (german, english) pair")
    settings = run.profile.decode
    beam_size = settings.beam_size if beam_size is None else check_positive_int("beam_size", beam_size)
    length_penalty = settings.length_penalty if length_penalty is None else length_penalty
    threads = run.threads if threads is None else check_positive_int("threads", threads)
    sources, references = [de for de, _ in pairs], [en for _, en in pairs]
    decode = dict(length_penalty=length_penalty, batch_size=settings.batch_size, max_len_a=settings.max_len_a,
                  max_len_b=settings.max_len_b, progress=progress)  # fmt: skip
    outputs, seconds = [], []
    with torch_threads(threads) as used:
        for beam in (1, beam_size):  # greedy, then beam search
            start = time.perf_counter()
            outputs.append(translate(run.model, run.tokenizer, sources, beam, **decode))
            seconds.append(time.perf_counter() - start)
    scores = [corpus_bleu(hypotheses, references) for hypotheses in outputs]
    return TranslationEvaluation(sources, references, *outputs, *scores, beam_size, length_penalty, *seconds, used)


def run_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationConfig | None = None,
    device: str | torch.device = "auto",
    save: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """:func:`~.train_translation` (whose arguments these are), :func:`~.evaluate_translation` and
    :func:`~.save_translation`; return :func:`~.translation_summary` (without test scores on ranks > 0).
    """
    wall_start = time.perf_counter()
    run = train_translation(data_dir, profile, device, save=None, resume=resume)
    if not is_main_process():
        return translation_summary(run)
    evaluation = evaluate_translation(run, progress=run.profile.train.progress)
    wall_seconds = time.perf_counter() - wall_start
    summary = translation_summary(run, evaluation, wall_seconds)
    if save is not None:
        save_translation(run, save, evaluation, wall_seconds)
        summary["checkpoint"] = str(save)
    return summary
