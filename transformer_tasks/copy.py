"""The copy task (复制任务): train a Transformer to copy random sequences, until every held-out one
is exact.

The source is a random sequence of 10 symbols drawn from 10 (with repetition); the target is the
same sequence. To copy every held-out sequence exactly a model must find, for output position
``t``, the source position ``t`` (cross-attention driven by the positional encoding) and stop after
the last one. It trains in seconds on a CPU: the book's first end-to-end check.

Token ids: 0 = pad, 1 = bos, 2 = eos, 3 .. 12 = the ten symbols. Decoder rows are ``bos s_1 ..
s_10`` in and ``s_1 .. s_10 eos`` out. The held-out set is 1,000 sequences drawn with a fixed seed;
training batches come from other seeds (with ``10**10`` possible sequences a collision is unlikely).
The task's measure is exact match under greedy decoding.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lib.checkpoint import save_checkpoint
from transformer_lib.config import TransformerConfig
from transformer_lib.data.batching import Batch, epoch_seed
from transformer_lib.decoding import greedy_decode
from transformer_lib.model import Transformer
from transformer_lib.runtime import pick_device, set_seed
from transformer_lib.training import TrainConfig, TrainResult, train
from transformer_lib.training.distributed import is_main_process
from transformer_lib.validation import check_positive_int

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_SYMBOL = 3
NUM_SYMBOLS = 10
SEQ_LEN = 10
VOCAB_SIZE = FIRST_SYMBOL + NUM_SYMBOLS
HELD_OUT_SEED = 20170612
"""The seed of the held-out set, one set for every run (the day the Transformer paper appeared)."""


def random_sequences(n: int, generator: torch.Generator, seq_len: int = SEQ_LEN) -> Tensor:
    """``n`` random sequences of symbol ids in ``[FIRST_SYMBOL, VOCAB_SIZE)``.

    Shape:
        output: ``(n, seq_len)`` long.
    """
    check_positive_int("n", n)
    check_positive_int("seq_len", seq_len)
    return torch.randint(FIRST_SYMBOL, VOCAB_SIZE, (n, seq_len), generator=generator)


def copy_batch(sequences: Tensor) -> Batch:
    """The training batch that teaches the model to copy ``sequences``: ``bos s`` in, ``s eos`` out.

    Shape:
        sequences: ``(B, L)`` symbol ids; output: ``src (B, L)``, ``tgt_in``/``tgt_out`` ``(B, L +
        1)``.
    """
    if not isinstance(sequences, Tensor) or sequences.dim() != 2 or sequences.dtype != torch.long:
        raise ValueError(
            f"sequences must be a (B, L) long tensor, got {getattr(sequences, 'shape', sequences)}"
        )
    tgt_in = F.pad(sequences, (1, 0), value=BOS_ID)  # (B, L + 1): bos in front
    tgt_out = F.pad(sequences, (0, 1), value=EOS_ID)  # (B, L + 1): eos at the end
    return Batch(src=sequences, tgt_in=tgt_in, tgt_out=tgt_out, pad_id=PAD_ID)


def copy_batches(batch_size: int, seed: int, num_batches: int) -> Iterator[Batch]:
    """``num_batches`` random copy batches, the same ones for the same ``seed``."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("num_batches", num_batches)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(num_batches):
        yield copy_batch(random_sequences(batch_size, generator))


def held_out_sequences(n: int = 1000, seed: int = HELD_OUT_SEED) -> Tensor:
    """The fixed held-out set: ``n`` sequences drawn with ``seed``.

    Shape:
        output: ``(n, SEQ_LEN)``.
    """
    return random_sequences(n, torch.Generator().manual_seed(seed))


def copy_targets(sequences: Tensor) -> Tensor:
    """The perfect decoder output for ``sequences``: ``bos s_1 .. s_L eos``.

    Shape:
        sequences: ``(B, L)``; output: ``(B, L + 2)``.
    """
    return F.pad(F.pad(sequences, (1, 0), value=BOS_ID), (0, 1), value=EOS_ID)  # (B, L + 2)


def copy_exact_match(
    model: Transformer, sequences: Tensor, batch_size: int = 1000, use_cache: bool = True
) -> float:
    """Fraction of ``sequences`` that greedy decoding copies exactly, ``bos s_1 .. s_L eos`` with
    every token right.
    """
    check_positive_int("batch_size", batch_size)
    device = next(model.parameters()).device
    sequences = sequences.to(device)
    correct = 0
    for start in range(0, sequences.size(0), batch_size):
        chunk = sequences[start : start + batch_size]  # (b, L)
        expected = copy_targets(chunk)  # (b, L + 2)
        out = greedy_decode(model, chunk, expected.size(1), BOS_ID, EOS_ID, use_cache=use_cache)
        assert isinstance(out, Tensor)
        if out.size(1) < expected.size(1):  # every row stopped early, so none can be right
            continue
        correct += int((out == expected).all(dim=1).sum())
    return correct / sequences.size(0)


def copy_model_config(**overrides: Any) -> TransformerConfig:
    """The model the library trains on the copy task (see :class:`~.CopyTaskSettings` for why); tied
    embeddings.
    """
    sizes = dict(
        src_vocab_size=VOCAB_SIZE,
        tgt_vocab_size=VOCAB_SIZE,
        d_model=64,
        num_heads=4,
        d_ff=128,
        max_len=64,
    )
    rest = dict(
        num_encoder_layers=1, num_decoder_layers=1, dropout=0.0, norm_first=True, pad_id=PAD_ID
    )
    return TransformerConfig(**{**sizes, **rest, **overrides})


@dataclass(frozen=True)
class CopyTaskSettings:
    """Training settings of :func:`~.run_copy_task`.

    The copy task has no noise to regularise against, so dropout and label smoothing are off
    (label smoothing would also keep the loss from reaching 0). Pre-LN trains stably at a higher
    peak learning rate with a short warm-up. Tuned for the time to 100% on a 2-core CPU
    (``benchmarks/copy_task.py``). ``batch_size`` and ``grad_accum`` are per process.
    """

    batch_size: int = 64
    grad_accum: int = 1
    lr: float = 3e-3
    warmup_steps: int = 100
    max_steps: int = 3000
    eval_every: int = 50
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum", "max_steps", "eval_every"):
            check_positive_int(name, getattr(self, name))


def run_copy_task(
    device: str | torch.device = "cpu",
    seed: int = 0,
    max_steps: int | None = None,
    eval_every: int | None = None,
    held_out: int = 1000,
    settings: CopyTaskSettings | None = None,
    model_config: TransformerConfig | None = None,
    progress: bool = True,
    save_path: str | None = None,
) -> dict[str, Any]:
    """Train a Transformer to copy until greedy decoding copies every held-out sequence, or
    ``max_steps``.

    Every ``eval_every`` optimizer steps the model greedily decodes the ``held_out`` fixed sequences
    (:func:`~.held_out_sequences`); training stops at the first evaluation with 100% exact match.
    ``device`` may be ``"auto"``. With ``save_path``, rank 0 saves the model
    (:func:`~.save_checkpoint`).

    Returns a JSON-serialisable dict: ``exact_match`` (at the last evaluation), ``reached`` (100%),
    ``train_seconds`` (training steps only), ``wall_seconds`` (everything), the settings and model
    configuration used, and ``global_batch_size`` (sequences per optimizer step, all processes).
    Under ``torchrun`` every rank runs this function: the ranks draw the same stream of batches and
    :func:`~.train` gives each one its share.
    """
    wall_start = time.perf_counter()
    given = {"max_steps": max_steps, "eval_every": eval_every}
    settings = replace(
        settings or CopyTaskSettings(), **{k: v for k, v in given.items() if v is not None}
    )
    check_positive_int("held_out", held_out)
    device = pick_device(device) if isinstance(device, str) else torch.device(device)
    set_seed(seed)
    config = model_config or copy_model_config()
    model = Transformer(config).to(device)
    sequences = held_out_sequences(held_out).to(device)

    def data(epoch: int) -> Iterator[Batch]:
        return copy_batches(settings.batch_size, seed=epoch_seed(seed, epoch), num_batches=1000)

    def evaluate(m: Transformer) -> dict[str, float]:
        return {"exact_match": copy_exact_match(m, sequences)}

    result = train(model, data, _train_config(settings, seed, progress), device, evaluate=evaluate)
    exact = result.last_eval.get("exact_match", 0.0)
    if save_path is not None and is_main_process():
        ids = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}
        save_checkpoint(model, save_path, task="copy", **ids, steps=result.steps, exact_match=exact)
    return _summary(model, result, settings, seed, device, time.perf_counter() - wall_start)


def _summary(
    model: Transformer,
    result: TrainResult,
    settings: CopyTaskSettings,
    seed: int,
    device: torch.device,
    wall_seconds: float,
) -> dict[str, Any]:
    """What :func:`run_copy_task` returns (JSON-serialisable)."""
    exact = result.last_eval.get("exact_match", 0.0)
    return {
        "task": "copy",
        "exact_match": exact,
        "reached": exact == 1.0,
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        "wall_seconds": wall_seconds,
        "device": str(device),
        "params": model.num_parameters(),
        "seed": seed,
        "threads": torch.get_num_threads(),
        "world_size": result.world_size,
        "global_batch_size": settings.batch_size * settings.grad_accum * result.world_size,
        "settings": asdict(settings),
        "model": model.config.to_dict(),
        "eval_history": result.eval_history,
    }


def _train_config(settings: CopyTaskSettings, seed: int, progress: bool) -> TrainConfig:
    """Train until the first evaluation where every held-out sequence is copied exactly."""
    return TrainConfig(
        max_steps=settings.max_steps,
        lr=settings.lr,
        warmup_steps=settings.warmup_steps,
        label_smoothing=settings.label_smoothing,
        grad_accum=settings.grad_accum,
        eval_every=settings.eval_every,
        monitor="exact_match",
        mode="max",
        target=1.0,
        seed=seed,
        progress=progress,
    )
