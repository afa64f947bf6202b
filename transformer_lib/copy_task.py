"""The copy task (复制任务): the smallest sequence-to-sequence problem that needs attention.

The source is a random sequence of 10 symbols drawn from 10 (with repetition); the target is the
same sequence. A model that copies every held-out sequence exactly has learnt to find, for output
position ``t``, the source position ``t`` (cross-attention driven by the positional encoding) and
to stop after the last one. It trains in seconds on a CPU, so it is the book's first end-to-end
check that the model, the training loop and decoding fit together.

Token ids (vocabulary of 13)::

    0 = pad    1 = bos    2 = eos    3 .. 12 = the ten symbols

Source rows are the 10 symbols (no bos/eos); decoder rows are ``bos s_1 .. s_10`` in and
``s_1 .. s_10 eos`` out, so a perfect greedy decoding is ``bos s_1 .. s_10 eos``.
The held-out set is 1,000 sequences drawn with a fixed seed (:data:`HELD_OUT_SEED`); training
batches come from other seeds. Nothing forces the two apart, but with ``10**10`` possible
sequences a collision is unlikely (about 1 in 10 million per training sequence).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ._checks import check_positive_int
from .batching import Batch
from .checkpoint import save_checkpoint
from .config import TransformerConfig
from .decoding import greedy_decode
from .distributed import is_main_process
from .model import Transformer
from .runtime import pick_device, set_seed
from .training import TrainConfig, train

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_SYMBOL = 3
NUM_SYMBOLS = 10
SEQ_LEN = 10
VOCAB_SIZE = FIRST_SYMBOL + NUM_SYMBOLS
HELD_OUT_SEED = 20170612
"""The seed of the held-out set, the same set for every run (the date the Transformer paper appeared)."""


def random_sequences(n: int, generator: torch.Generator, seq_len: int = SEQ_LEN) -> Tensor:
    """``n`` random sequences of symbol ids in ``[FIRST_SYMBOL, VOCAB_SIZE)``.

    Shape:
        output: ``(n, seq_len)`` long.
    """
    check_positive_int("n", n)
    check_positive_int("seq_len", seq_len)
    return torch.randint(FIRST_SYMBOL, VOCAB_SIZE, (n, seq_len), generator=generator)


def copy_batch(sequences: Tensor) -> Batch:
    """The training batch that teaches the model to copy ``sequences``.

    Shape:
        sequences: ``(B, L)`` symbol ids; output: ``src (B, L)``, ``tgt_in``/``tgt_out`` ``(B, L + 1)``.
    """
    if not isinstance(sequences, Tensor) or sequences.dim() != 2 or sequences.dtype != torch.long:
        raise ValueError(f"sequences must be a (B, L) long tensor, got {getattr(sequences, 'shape', sequences)}")
    batch = sequences.size(0)
    bos = torch.full((batch, 1), BOS_ID, dtype=torch.long)  # (B, 1)
    eos = torch.full((batch, 1), EOS_ID, dtype=torch.long)  # (B, 1)
    return Batch(
        src=sequences,
        tgt_in=torch.cat([bos, sequences], dim=1),  # (B, L + 1)
        tgt_out=torch.cat([sequences, eos], dim=1),  # (B, L + 1)
        pad_id=PAD_ID,
    )


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
    batch = sequences.size(0)
    bos = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=sequences.device)
    eos = torch.full((batch, 1), EOS_ID, dtype=torch.long, device=sequences.device)
    return torch.cat([bos, sequences, eos], dim=1)  # (B, L + 2)


def copy_exact_match(model: Transformer, sequences: Tensor, batch_size: int = 1000, use_cache: bool = True) -> float:
    """Fraction of ``sequences`` that greedy decoding copies exactly (``bos s_1 .. s_L eos``).

    A row counts only if every token, the final ``eos`` included, is right.
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
    """The model the library trains on the copy task (see :class:`CopyTaskSettings` for why)."""
    base = {
        "src_vocab_size": VOCAB_SIZE,
        "tgt_vocab_size": VOCAB_SIZE,
        "d_model": 64,
        "num_heads": 4,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "d_ff": 128,
        "dropout": 0.0,
        "max_len": 64,
        "norm_first": True,
        "tie_embeddings": True,
        "pad_id": PAD_ID,
    }
    base.update(overrides)
    return TransformerConfig(**base)


@dataclass(frozen=True)
class CopyTaskSettings:
    """Training settings of :func:`run_copy_task`.

    The copy task has no noise to regularise against, so dropout and label smoothing are off
    (label smoothing would also keep the loss from reaching 0). Pre-LN trains stably at a higher
    peak learning rate with a short warm-up. These values were tuned for the time to 100% on
    the 2-core CPU the book was written on (``benchmarks/copy_task.py`` compares them with a
    plain ``nn.Transformer``).

    ``batch_size`` and ``grad_accum`` are per process: under ``torchrun`` with ``W`` processes an
    optimizer step sees ``W * grad_accum * batch_size`` sequences.
    """

    batch_size: int = 64
    grad_accum: int = 1
    lr: float = 3e-3
    warmup_steps: int = 100
    max_steps: int = 3000
    eval_every: int = 50
    label_smoothing: float = 0.0


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
    """Train a Transformer to copy until greedy decoding copies every held-out sequence, or ``max_steps``.

    Every ``eval_every`` optimizer steps the model greedily decodes the ``held_out`` fixed
    sequences (:func:`held_out_sequences`); training stops at the first evaluation with 100%
    exact match. ``device`` may be ``"auto"``.

    Returns a JSON-serialisable dict: ``exact_match`` (0..1, at the last evaluation), ``steps``,
    ``train_seconds`` (training steps only; evaluation excluded), ``wall_seconds`` (everything,
    model building and evaluation included), ``device``, ``params``, ``seed``, ``reached``
    (whether 100% was reached), ``settings`` and ``model`` (the configuration used), and
    ``eval_history``, ``world_size`` and ``global_batch_size`` (sequences per optimizer step, all
    processes together). With ``save_path``, the trained model is saved there with
    :func:`~transformer_lib.checkpoint.save_checkpoint`.

    Under ``torchrun`` (after :func:`~transformer_lib.distributed.init_distributed`, as
    ``python -m transformer_lib copy`` does), every rank runs this function: the ranks draw the
    same stream of batches and :func:`~transformer_lib.training.train` gives each one its share;
    every rank evaluates the held-out set and only rank 0 saves the model.
    """
    wall_start = time.perf_counter()
    settings = settings or CopyTaskSettings()
    if max_steps is not None:
        settings = replace(settings, max_steps=max_steps)
    if eval_every is not None:
        settings = replace(settings, eval_every=eval_every)
    check_positive_int("max_steps", settings.max_steps)
    check_positive_int("eval_every", settings.eval_every)
    check_positive_int("grad_accum", settings.grad_accum)
    check_positive_int("held_out", held_out)
    device = pick_device(device) if isinstance(device, str) else torch.device(device)
    set_seed(seed)
    config = model_config or copy_model_config()
    model = Transformer(config).to(device)
    sequences = held_out_sequences(held_out).to(device)
    train_config = TrainConfig(
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

    def data(epoch: int) -> Iterator[Batch]:
        return copy_batches(settings.batch_size, seed=seed * 1_000_003 + epoch, num_batches=1000)

    result = train(
        model,
        data,
        train_config,
        device,
        evaluate=lambda m: {"exact_match": copy_exact_match(m, sequences)},
    )
    exact = result.last_eval.get("exact_match", 0.0)
    if save_path is not None and is_main_process():
        save_checkpoint(
            model,
            save_path,
            task="copy",
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            steps=result.steps,
            exact_match=exact,
        )
    return {
        "task": "copy",
        "exact_match": exact,
        "reached": exact == 1.0,
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "device": str(device),
        "params": model.num_parameters(),
        "seed": seed,
        "threads": torch.get_num_threads(),
        "world_size": result.world_size,
        "global_batch_size": settings.batch_size * settings.grad_accum * result.world_size,
        "settings": asdict(settings),
        "model": config.to_dict(),
        "eval_history": result.eval_history,
    }
