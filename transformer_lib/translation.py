"""German-to-English translation on Multi30k, end to end: data, tokenizer, training, decoding, BLEU.

:func:`run_translation` is what ``python -m transformer_lib translate`` runs; it is three reusable
pieces, :func:`train_translation` (steps 1-3, returns a :class:`TranslationRun` with the model, the
tokenizer and the training history), :func:`evaluate_translation` (step 4, returns a
:class:`TranslationEvaluation`) and :func:`translation_summary` (the JSON it prints):

1. load Multi30k (:mod:`~transformer_lib.multi30k`) and learn a joint BPE vocabulary on the
   **training split only** (:mod:`~transformer_lib.tokenizer`);
2. build a :class:`~transformer_lib.model.Transformer` whose source embedding, target embedding
   and output projection are one shared matrix, and train it with
   :func:`~transformer_lib.training.train` on batches of similar-length sentences
   (:func:`~transformer_lib.batching.token_batches`), measuring the validation loss as it goes;
3. average the weights of the last few snapshots (checkpoint averaging, 检查点平均), keeping the
   average only if its validation loss is lower;
4. translate ``test_2016_flickr`` with greedy decoding and with beam search, detokenize, and
   score with sacreBLEU against the raw references (:mod:`~transformer_lib.bleu`).

How big a model and how long to train is a :class:`TranslationProfile`: ``smoke`` (seconds on a
laptop CPU, for the tests: checks that everything runs, its BLEU means nothing), ``cpu`` (the best we
found for 30 minutes of training on 2 CPU cores) and ``gpu`` (one GPU).

Under ``torchrun`` (after :func:`~transformer_lib.distributed.init_distributed`, as
``python -m transformer_lib translate`` does) every rank runs the pipeline: the first process of
each machine downloads the data before the others read it, rank 0 learns the tokenizer and sends
it to the others, :func:`~transformer_lib.training.train` splits each epoch's batches between the
ranks (``max_tokens`` is per process, so a step sees ``world_size`` times as many tokens), and
only rank 0 translates the test set and writes files.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ._checks import check_positive_int
from .batching import Batch, token_batches
from .bleu import BleuScore, corpus_bleu
from .checkpoint import save_checkpoint
from .config import TransformerConfig
from .decoding import beam_search, greedy_decode
from .distributed import (
    all_gather_object,
    broadcast_object,
    is_distributed,
    is_main_process,
    main_process_first,
    world_size,
)
from .model import Transformer
from .multi30k import load_multi30k
from .runtime import default_profile, pick_device, set_seed
from .tokenizer import BPETokenizer, train_translation_tokenizer
from .training import TrainConfig, TrainResult, evaluate_loss, train

TASK = "translation"
SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"
TEST_SPLIT = "test_2016_flickr"


@dataclass(frozen=True)
class TranslationProfile:
    """Model size, training schedule and evaluation settings of one translation run.

    Attributes:
        name: ``"smoke"``, ``"cpu"`` or ``"gpu"``.
        train_limit: use the first ``train_limit`` training pairs (``None``: all 29,000).
        test_limit: translate the first ``test_limit`` test pairs (``None``: all 1,000).
        vocab_size: size of the joint BPE vocabulary.
        d_model, num_heads, num_encoder_layers, num_decoder_layers, d_ff, dropout, norm_first:
            the :class:`~transformer_lib.config.TransformerConfig` fields of the model.
        label_smoothing, lr, warmup_steps, amp: the :class:`~transformer_lib.training.TrainConfig`
            fields of the same names.
        max_tokens: padded tokens per side of each batch.
        max_steps, max_epochs: stop after this many optimizer steps / passes over the data.
        time_budget_s: stop once training steps have taken this many seconds (``None``: no limit);
            validation and decoding do not count.
        eval_every: measure the validation loss (and keep a snapshot) every this many steps
            (``None``: every epoch).
        average_last: average the weights of the last this many snapshots (1: no averaging).
        beam_size, length_penalty: beam search settings.
        max_len_a, max_len_b: translations are cut at ``max_len_a * source_length + max_len_b`` tokens.
        decode_batch_size: sentences translated at once.
        amp: ``"none"`` (float32) or ``"bf16"`` autocast in training.
        num_threads: CPU threads for PyTorch during the run (``None``: PyTorch's default). One
            thread suits tiny models, and never slows to a crawl when other programs compete for
            the cores (several threads then wait for each other).
        model_overrides: more :class:`~transformer_lib.config.TransformerConfig` fields, applied over
            the profile's (e.g. ``{"positional": "rope", "norm": "rmsnorm"}``; ``None``: none). Use
            ``dataclasses.replace(translation_profile("smoke"), model_overrides={...})``.
    """

    name: str
    train_limit: int | None
    test_limit: int | None
    vocab_size: int
    d_model: int
    num_heads: int
    num_encoder_layers: int
    num_decoder_layers: int
    d_ff: int
    dropout: float
    norm_first: bool
    label_smoothing: float
    max_tokens: int
    lr: float
    warmup_steps: int
    max_steps: int | None
    max_epochs: int | None
    time_budget_s: float | None
    eval_every: int | None
    average_last: int
    beam_size: int
    length_penalty: float
    max_len_a: float = 1.5
    max_len_b: int = 10
    decode_batch_size: int = 128
    amp: str = "none"
    num_threads: int | None = None
    model_overrides: dict[str, Any] | None = None

    def model_config(self, vocab_size: int) -> TransformerConfig:
        """The model of this profile for a joint vocabulary of ``vocab_size`` ids (shared embeddings)."""
        config = TransformerConfig(
            src_vocab_size=vocab_size,
            tgt_vocab_size=vocab_size,
            d_model=self.d_model,
            num_heads=self.num_heads,
            num_encoder_layers=self.num_encoder_layers,
            num_decoder_layers=self.num_decoder_layers,
            d_ff=self.d_ff,
            dropout=self.dropout,
            norm_first=self.norm_first,
            tie_embeddings=True,
            share_embeddings=True,
            pad_id=BPETokenizer.pad_id,
            max_len=512,
        )
        if not self.model_overrides:
            return config
        return TransformerConfig.from_dict({**config.to_dict(), **self.model_overrides})  # unknown fields: ValueError

    def train_config(self, seed: int, progress: bool = True) -> TrainConfig:
        """The :class:`~transformer_lib.training.TrainConfig` of this profile."""
        return TrainConfig(
            max_steps=self.max_steps,
            max_epochs=self.max_epochs,
            lr=self.lr,
            warmup_steps=self.warmup_steps,
            label_smoothing=self.label_smoothing,
            amp=self.amp,
            eval_every=self.eval_every,
            seed=seed,
            progress=progress,
        )


TRANSLATION_PROFILES: dict[str, TranslationProfile] = {
    # The tests: a slice of the data and a tiny model; proves the pipeline runs end to end in seconds.
    "smoke": TranslationProfile(
        name="smoke",
        train_limit=3000,
        test_limit=100,
        vocab_size=1000,
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
        dropout=0.1,
        norm_first=True,
        label_smoothing=0.1,
        max_tokens=1500,
        lr=3e-3,
        warmup_steps=20,
        max_steps=60,
        max_epochs=None,
        time_budget_s=30.0,
        eval_every=20,
        average_last=2,
        beam_size=4,
        length_penalty=0.6,
        num_threads=1,
    ),
    # 2 CPU cores, 30 minutes of training.
    "cpu": TranslationProfile(
        name="cpu",
        train_limit=None,
        test_limit=None,
        vocab_size=8000,
        d_model=256,
        num_heads=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        d_ff=1024,
        dropout=0.1,
        norm_first=True,
        label_smoothing=0.1,
        max_tokens=4000,
        lr=1e-3,
        warmup_steps=300,
        max_steps=None,
        max_epochs=40,
        time_budget_s=30 * 60.0,
        eval_every=130,
        average_last=3,
        beam_size=4,
        length_penalty=1.0,
    ),
    # One GPU: a wider, deeper model with more dropout, many more epochs and bfloat16 autocast.
    "gpu": TranslationProfile(
        name="gpu",
        train_limit=None,
        test_limit=None,
        vocab_size=8000,
        d_model=512,
        num_heads=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        d_ff=2048,
        dropout=0.3,
        norm_first=True,
        label_smoothing=0.1,
        max_tokens=8000,
        lr=7e-4,
        warmup_steps=1000,
        max_steps=None,
        max_epochs=60,
        time_budget_s=30 * 60.0,
        eval_every=None,
        average_last=5,
        beam_size=5,
        length_penalty=1.0,
        decode_batch_size=500,
        amp="bf16",
    ),
}


def translation_profile(name: str, max_steps: int | None = None) -> TranslationProfile:
    """The profile called ``name`` (``"smoke"``, ``"cpu"`` or ``"gpu"``).

    With ``max_steps`` the run trains for exactly that many optimizer steps (a step budget): the
    profile's time budget and epoch limit are lifted, so the result does not depend on the
    machine's speed.
    """
    if name not in TRANSLATION_PROFILES:
        raise ValueError(f"profile={name!r} is not one of {list(TRANSLATION_PROFILES)}")
    profile = TRANSLATION_PROFILES[name]
    if max_steps is None:
        return profile
    check_positive_int("max_steps", max_steps)
    return replace(profile, max_steps=max_steps, max_epochs=None, time_budget_s=None)


# ----------------------------------------------------------------------------------------------
# Data as token ids.


def encode_pairs(tokenizer: BPETokenizer, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """Token ids of both sides of every pair: ``[(source_ids, target_ids), ...]`` (no bos/eos yet)."""
    source = tokenizer.encode_batch([de for de, _ in pairs])
    target = tokenizer.encode_batch([en for _, en in pairs])
    return list(zip(source, target, strict=True))


class _TimeBudget:
    """Training batches until a budget of training seconds is spent.

    ``train`` calls this once per epoch; the time counted is wall time since the first call minus
    the time spent in evaluation (which the caller adds to ``paused``), so it tracks the training
    loop's own ``train_seconds``. An epoch started after the budget yields nothing, which ends
    training (``stop_reason == "data_exhausted"``).
    """

    def __init__(self, batches: Callable[[int], list[Batch]], budget_s: float | None) -> None:
        self.batches = batches
        self.budget_s = budget_s
        self.started: float | None = None
        self.paused = 0.0
        self.exhausted = False
        self.tokens = 0  # source + target non-padding tokens handed to training

    def spent(self) -> float:
        return 0.0 if self.started is None else time.perf_counter() - self.started - self.paused

    def __call__(self, epoch: int) -> Iterator[Batch]:
        if self.started is None:
            self.started = time.perf_counter()
        for batch in self.batches(epoch):  # building the batches counts, as it does in train_seconds
            if self.budget_s is not None and self.spent() >= self.budget_s:
                self.exhausted = True
                return
            self.tokens += batch.num_src_tokens + batch.num_tokens
            yield batch


def _average_state_dicts(snapshots: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several ``state_dict`` snapshots of the same model."""
    return {
        name: torch.stack([snap[name].float() for snap in snapshots]).mean(0).to(snapshots[0][name].dtype)
        for name in snapshots[0]
    }


# ----------------------------------------------------------------------------------------------
# Translating.


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


# ----------------------------------------------------------------------------------------------
# Training: data, tokenizer, model, the training loop and checkpoint averaging.


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[int]:
    """Run the body with ``threads`` CPU threads (``None``: leave the setting); restore it afterwards."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


@dataclass
class TranslationRun:
    """What :func:`train_translation` returns: the trained model and everything about its training.

    Attributes:
        model: the trained :class:`~transformer_lib.model.Transformer`, in eval mode: the average
            of the last snapshots if checkpoint averaging helped, else the last weights.
        tokenizer: the joint BPE tokenizer, learnt on ``train_pairs`` only.
        profile: the :class:`TranslationProfile` of the run.
        result: the :class:`~transformer_lib.training.TrainResult` of the training loop (per-step
            ``history``, validation ``eval_history``, ``train_seconds``, ...).
        device: where the model lives.
        seed: the seed of the initial weights, the dropout and the order of the batches.
        threads: CPU threads PyTorch used during the run.
        train_pairs, val_pairs, test_pairs: the ``(german, english)`` pairs of the profile's slice of
            the training split, the whole validation split and the profile's slice of
            ``test_2016_flickr``.
        steps_per_epoch: training batches in one pass over ``train_pairs``.
        tokens: source + target tokens (padding excluded) handed to the training steps.
        stop_reason: ``"time_budget"`` when the profile's time budget ended training, else the
            training loop's ``stop_reason`` (``"max_steps"``, ``"max_epochs"``, ...).
        averaged_checkpoints: snapshots averaged into ``model`` (1: the last weights were kept).
        val_loss_last: validation loss of the last weights.
        val_loss_averaged: validation loss of the average of the last snapshots (``None`` with
            fewer than two snapshots).
        wall_seconds: wall time of :func:`train_translation` (data, tokenizer, training,
            validation and averaging).
        checkpoint: where the model was saved (``None``: not saved).
        world_size: processes that trained together (1 without ``torchrun``).
    """

    model: Transformer
    tokenizer: BPETokenizer
    profile: TranslationProfile
    result: TrainResult
    device: torch.device
    seed: int
    threads: int
    train_pairs: list[tuple[str, str]]
    val_pairs: list[tuple[str, str]]
    test_pairs: list[tuple[str, str]]
    steps_per_epoch: int
    tokens: int
    stop_reason: str
    averaged_checkpoints: int
    val_loss_last: float
    val_loss_averaged: float | None
    wall_seconds: float
    checkpoint: Path | None = None
    world_size: int = 1

    @property
    def history(self) -> list[dict[str, float]]:
        """One dict per optimizer step, with ``step``, ``epoch``, ``loss``, ``lr`` and ``tokens_per_s``."""
        return self.result.history

    @property
    def val_history(self) -> list[dict[str, float]]:
        """One dict per evaluation, with ``step``, ``epoch``, ``val_loss`` and ``val_perplexity``."""
        return self.result.eval_history

    @property
    def steps(self) -> int:
        """Optimizer steps done."""
        return self.result.steps

    @property
    def epochs(self) -> float:
        """Passes over the training data (a fraction when training ended midway through one)."""
        return self.result.steps / self.steps_per_epoch

    @property
    def train_seconds(self) -> float:
        """Seconds spent in training steps (validation and averaging excluded)."""
        return self.result.train_seconds

    @property
    def tokens_per_s(self) -> float:
        """The training throughput, in source + target tokens (padding excluded) per second of training steps."""
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    @property
    def val_loss(self) -> float:
        """Validation loss of the weights kept in ``model``."""
        if self.averaged_checkpoints > 1 and self.val_loss_averaged is not None:
            return self.val_loss_averaged
        return self.val_loss_last

    @property
    def decoding(self) -> dict[str, Any]:
        """The profile's decoding settings, as stored in a saved checkpoint."""
        prof = self.profile
        return {
            "beam_size": prof.beam_size,
            "length_penalty": prof.length_penalty,
            "max_len_a": prof.max_len_a,
            "max_len_b": prof.max_len_b,
        }


def _check_seed_and_threads(seed: int, threads: int | None) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if threads is not None:
        check_positive_int("threads", threads)


def _resolve_profile(profile: str | TranslationProfile | None, device: torch.device) -> TranslationProfile:
    if profile is None:
        profile = default_profile(device)
    if isinstance(profile, TranslationProfile):
        return profile
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a name, a TranslationProfile or None, got {type(profile).__name__}")
    return translation_profile(profile)


def train_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationProfile | None = None,
    device: str | torch.device = "auto",
    seed: int = 0,
    save: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> TranslationRun:
    """Steps 1-3 of the pipeline: data, tokenizer, training and checkpoint averaging.

    Args:
        data_dir: folder with (or for) the Multi30k files; see :mod:`~transformer_lib.multi30k`.
        profile: a profile name, a :class:`TranslationProfile`, or ``None`` for
            :func:`~transformer_lib.runtime.default_profile`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"mps"`` or a ``torch.device``.
        seed: seeds the model's initial weights, dropout and the order of the batches.
        save: write the trained model there with :func:`save_translation` (no test results yet).
        progress: a progress bar on stderr.
        threads: CPU threads for PyTorch during training (default: the profile's ``num_threads``);
            the previous setting is restored afterwards.

    Returns:
        A :class:`TranslationRun`; score it with :func:`evaluate_translation`.
    """
    wall_start = time.perf_counter()
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    prof = _resolve_profile(profile, torch_device)
    _check_seed_and_threads(seed, threads)
    with _torch_threads(threads if threads is not None else prof.num_threads) as used_threads:
        with main_process_first():  # under torchrun: one download per machine, then everyone reads
            data = load_multi30k(data_dir)
        train_pairs = data["train"][: prof.train_limit]
        if is_distributed():  # rank 0 learns the vocabulary; every rank must use exactly the same one
            learnt = train_translation_tokenizer(train_pairs, prof.vocab_size) if is_main_process() else None
            tokenizer = BPETokenizer.from_json_str(
                broadcast_object(learnt.to_json_str() if learnt is not None else None)
            )
        else:
            tokenizer = train_translation_tokenizer(train_pairs, vocab_size=prof.vocab_size)
        train_ids = encode_pairs(tokenizer, train_pairs)
        val_ids = encode_pairs(tokenizer, data["val"])
        special = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
        val_batches = token_batches(val_ids, prof.max_tokens, *special, shuffle=False)

        set_seed(seed)
        model = Transformer(prof.model_config(tokenizer.vocab_size)).to(torch_device)
        budget = _TimeBudget(
            lambda epoch: token_batches(train_ids, prof.max_tokens, *special, shuffle=True, seed=seed * 1000 + epoch),
            prof.time_budget_s,
        )
        world = world_size() if is_distributed() else 1  # processes training together
        steps_per_epoch = max(1, len(budget.batches(0)) // world)  # each rank takes every world-th batch
        snapshots: list[dict[str, torch.Tensor]] = []

        def evaluate(m: Transformer) -> dict[str, float]:
            """Validation loss, and a snapshot of the weights; its time does not count against the budget."""
            start = time.perf_counter()
            metrics = evaluate_loss(m, val_batches, torch_device)
            snapshots.append({k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()})
            del snapshots[: -prof.average_last]
            budget.paused += time.perf_counter() - start
            return {"val_loss": metrics["loss"], "val_perplexity": metrics["perplexity"]}

        result = train(model, budget, prof.train_config(seed, progress), torch_device, evaluate=evaluate)
        # Every rank watches its own clock: if one rank's budget ran out, training ended on all of them.
        exhausted = any(all_gather_object(budget.exhausted))

        # Checkpoint averaging: keep the mean of the last snapshots if it predicts the validation set better.
        val_loss_last = result.eval_history[-1]["val_loss"]
        val_loss_averaged = None
        averaged = False
        if len(snapshots) > 1:
            last_state = {k: v.clone() for k, v in model.state_dict().items()}
            model.load_state_dict(_average_state_dicts(snapshots))
            val_loss_averaged = evaluate_loss(model, val_batches, torch_device)["loss"]
            averaged = val_loss_averaged < val_loss_last
            if not averaged:
                model.load_state_dict(last_state)
        model.eval()

    run = TranslationRun(
        model=model,
        tokenizer=tokenizer,
        profile=prof,
        result=result,
        device=torch_device,
        seed=seed,
        threads=used_threads,
        train_pairs=train_pairs,
        val_pairs=data["val"],
        test_pairs=data[TEST_SPLIT][: prof.test_limit],
        steps_per_epoch=steps_per_epoch,
        tokens=budget.tokens,
        stop_reason="time_budget" if exhausted else result.stop_reason,
        averaged_checkpoints=len(snapshots) if averaged else 1,
        val_loss_last=val_loss_last,
        val_loss_averaged=val_loss_averaged,
        wall_seconds=time.perf_counter() - wall_start,
        world_size=world,
    )
    if save is not None and is_main_process():
        save_translation(run, save)
    return run


# ----------------------------------------------------------------------------------------------
# Evaluation: greedy and beam translations of the test set, scored with sacreBLEU.


@dataclass(frozen=True)
class TranslationEvaluation:
    """What :func:`evaluate_translation` returns: the translations and their sacreBLEU scores.

    Attributes:
        sources, references: the German sentences and their English reference translations.
        greedy, beam: the detokenized translations by greedy search and by beam search.
        bleu_greedy, bleu_beam: their corpus :class:`~transformer_lib.bleu.BleuScore`.
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
        run: what :func:`train_translation` returned.
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
    with _torch_threads(threads if threads is not None else run.threads) as used_threads:
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


# ----------------------------------------------------------------------------------------------
# The summary, the checkpoint and the whole run.


def translation_summary(
    run: TranslationRun, evaluation: TranslationEvaluation | None = None, wall_seconds: float | None = None
) -> dict[str, Any]:
    """The JSON-serialisable results of a run, as ``python -m transformer_lib translate`` prints them.

    Without ``evaluation`` the test-set keys (``bleu``, ``examples``, ...) are left out.
    ``wall_seconds`` defaults to the training's wall time plus the decoding time.
    """
    scores = evaluation.summary() if evaluation is not None else {}
    if wall_seconds is None:
        wall_seconds = run.wall_seconds + (
            evaluation.greedy_seconds + evaluation.beam_seconds if evaluation is not None else 0.0
        )
    summary: dict[str, Any] = {"task": TASK}
    summary.update({k: scores[k] for k in ("bleu", "bleu_beam", "sacrebleu_signature") if k in scores})
    summary.update(
        {
            "train_seconds": round(run.train_seconds, 1),
            "wall_seconds": round(wall_seconds, 1),
            "epochs": round(run.epochs, 2),
            "steps": run.steps,
            "device": str(run.device),
            "params": run.model.num_parameters(),
            "profile": run.profile.name,
            "seed": run.seed,
            "threads": run.threads,
            "world_size": run.world_size,
            "stop_reason": run.stop_reason,
            "tokens_per_s": round(run.tokens_per_s, 1),
            "steps_per_epoch": run.steps_per_epoch,
            "train_pairs": len(run.train_pairs),
            "test_pairs": scores.get("test_pairs", len(run.test_pairs)),
            "vocab_size": run.tokenizer.vocab_size,
            "beam_size": scores.get("beam_size", run.profile.beam_size),
            "length_penalty": scores.get("length_penalty", run.profile.length_penalty),
        }
    )
    summary.update({k: scores[k] for k in ("brevity_penalty", "brevity_penalty_beam") if k in scores})
    summary.update(
        {
            "averaged_checkpoints": run.averaged_checkpoints,
            "val_loss_last": round(run.val_loss_last, 4),
            "val_loss_averaged": None if run.val_loss_averaged is None else round(run.val_loss_averaged, 4),
            "final_train_loss": round(run.result.final_loss, 4),
        }
    )
    summary.update({k: scores[k] for k in ("decode_seconds_greedy", "decode_seconds_beam") if k in scores})
    summary["val_history"] = [
        {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()} for row in run.val_history
    ]
    if "examples" in scores:
        summary["examples"] = scores["examples"]
    summary["config"] = asdict(run.profile)
    return summary


def save_translation(
    run: TranslationRun,
    path: str | Path,
    evaluation: TranslationEvaluation | None = None,
    wall_seconds: float | None = None,
) -> Path:
    """Save the model of ``run`` as ``translate --save`` does; ``translate-text`` can load it.

    The checkpoint's metadata holds ``task="translation"``, the languages, the tokenizer, the
    profile's decoding settings and the :func:`translation_summary` (without its per-evaluation
    history, examples and profile) as ``results``. Sets ``run.checkpoint``; returns the path.
    """
    summary = translation_summary(run, evaluation, wall_seconds)
    written = save_checkpoint(
        run.model,
        path,
        task=TASK,
        source_language=SOURCE_LANGUAGE,
        target_language=TARGET_LANGUAGE,
        tokenizer=run.tokenizer.to_json_str(),
        decoding=run.decoding,
        results={k: v for k, v in summary.items() if k not in ("val_history", "examples", "config")},
    )
    run.checkpoint = written
    return written


def run_translation(
    data_dir: str | Path | None = None,
    profile: str | TranslationProfile | None = None,
    device: str | torch.device = "auto",
    seed: int = 0,
    save: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """Train a German-to-English Transformer on Multi30k and score it on ``test_2016_flickr``.

    :func:`train_translation`, then :func:`evaluate_translation`, then :func:`translation_summary`
    (and :func:`save_translation` when ``save`` is given). The arguments are those of
    :func:`train_translation`.

    Returns:
        A JSON-serialisable dict with ``bleu`` (greedy) and ``bleu_beam`` (sacreBLEU, 0-100),
        ``sacrebleu_signature``, ``train_seconds`` (time in training steps), ``wall_seconds``
        (everything, data and decoding included), ``epochs`` (passes over the training data, a
        fraction when the time budget ends one midway), ``steps``, ``device``, ``params``,
        ``profile``, ``val_history`` (validation loss over training) and more details.

    Under ``torchrun`` every rank trains; only rank 0 translates the test set, saves and returns
    the full summary (the other ranks return the summary without test scores).
    """
    wall_start = time.perf_counter()
    run = train_translation(data_dir, profile, device, seed, progress=progress, threads=threads)
    if not is_main_process():
        return translation_summary(run)
    evaluation = evaluate_translation(run, progress=progress)
    wall_seconds = time.perf_counter() - wall_start
    summary = translation_summary(run, evaluation, wall_seconds)
    if save is not None:
        save_translation(run, save, evaluation, wall_seconds)
        summary["checkpoint"] = str(save)
    return summary
