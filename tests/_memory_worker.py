"""Worker of tests/test_training_memory.py, run in a fresh process so that its memory is its own.

Usage: ``_memory_worker.py AMP STEPS EVERY``. Trains a small model for STEPS steps in AMP on
batches whose shapes all differ (rows, source and target lengths drawn at random, as length
bucketing gives a real run), and prints a JSON list: the resident memory in MB every EVERY steps.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator

import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.data.batching import Batch, make_batch
from transformer_lib.training import TrainConfig, train


def resident_mb() -> float:
    """The process's resident memory now (Linux: /proc/self/statm), in MB."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def batches(epoch: int) -> Iterator[Batch]:
    draw = random.Random(epoch)
    for _ in range(50):
        rows, src_len, tgt_len = draw.randint(4, 32), draw.randint(3, 40), draw.randint(3, 40)
        src = [[draw.randint(4, 499) for _ in range(src_len)] for _ in range(rows)]
        tgt = [[draw.randint(4, 499) for _ in range(tgt_len)] for _ in range(rows)]
        yield make_batch(src, tgt, pad_id=0, bos_id=1, eos_id=2)


def main(amp: str, steps: int, every: int) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = TransformerConfig(
        src_vocab_size=500,
        tgt_vocab_size=500,
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
    )
    samples: list[float] = []

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        samples.append(round(resident_mb(), 1))  # every `every` steps
        return {}

    settings = TrainConfig(
        max_steps=steps, warmup_steps=1, amp=amp, eval_every=every, progress=False
    )
    train(Transformer(config), batches, settings, evaluate=evaluate)
    print(json.dumps(samples))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
