"""The translation profiles as configurations: each builds its model and trains, on the CPU, before any reader's run.

The ``gpu`` profile is meant for a GPU (Colab's T4), which the tests do not have: building its model
and taking 3 optimizer steps with its own training configuration on the CPU, with tiny batches,
catches a configuration error here instead of on a reader's GPU.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer_lib import Transformer
from transformer_lib.data.batching import make_batch
from transformer_lib.runtime import amp_for_device
from transformer_lib.tasks.translation import TRANSLATION_PROFILES, translation_profile
from transformer_lib.training import train

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB = 64


def tiny_batches(epoch: int) -> list:
    """Three batches of two short sentences in epoch 0, none afterwards (training stops after 3 steps)."""
    if epoch > 0:
        return []
    gen = torch.Generator().manual_seed(epoch)
    return [
        make_batch(
            [torch.randint(4, VOCAB, (5,), generator=gen).tolist() for _ in range(2)],
            [torch.randint(4, VOCAB, (6,), generator=gen).tolist() for _ in range(2)],
            pad_id=0,
            bos_id=1,
            eos_id=2,
        )
        for _ in range(3)
    ]


@pytest.mark.parametrize("name", list(TRANSLATION_PROFILES))
def test_every_profile_builds_its_model_and_takes_three_steps_on_the_cpu(name: str) -> None:
    profile = translation_profile(name)
    torch.manual_seed(0)
    model = Transformer(profile.model_config(VOCAB))
    result = train(model, tiny_batches, profile.train_config(seed=0, progress=False), "cpu")
    assert result.steps == 3 and result.stop_reason == "data_exhausted"
    assert all(math.isfinite(h["loss"]) for h in result.history)
    assert result.amp in ("none", "bf16")  # a CPU never gets fp16


def test_the_gpu_profile_is_sized_for_a_t4() -> None:
    gpu = translation_profile("gpu")
    assert gpu.amp == "auto" and amp_for_device("cuda", cuda_capability=(7, 5)) == "fp16"  # T4: float16
    assert gpu.time_budget_s is not None and gpu.time_budget_s <= 13 * 60  # + validation and decoding < 15 min
    assert gpu.schedule == "linear" and gpu.max_steps is not None
    params = Transformer(gpu.model_config(gpu.vocab_size)).num_parameters()
    # float32 weights, gradients and Adam's two moments: 16 bytes per parameter, far below a T4's 16 GB
    assert 16 * params < 2**30
