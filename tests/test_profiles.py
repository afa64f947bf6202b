"""The translation profiles as configurations: each builds its model and trains, on the CPU, before
any reader's run.

The ``gpu`` profile is meant for a GPU (Colab's T4), which the tests do not have: building its model
and taking 3 optimizer steps with its own training configuration on the CPU, with tiny batches,
catches a configuration error here instead of on a reader's GPU. Then the configuration tree itself:
:func:`~.apply_overrides` sets any field by its dotted name, and refuses a wrong one clearly.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from transformer_lib import Transformer
from transformer_lib.data.batching import make_batch
from transformer_lib.runtime import amp_for_device
from transformer_lib.training import train
from transformer_tasks.translation import (
    TRANSLATION_PROFILES,
    TranslationConfig,
    apply_overrides,
    translation_profile,
)
from transformer_tasks.translation.profiles import settable_fields

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB = 64


def tiny_batches(epoch: int) -> list:
    """Three batches of two short sentences in epoch 0, none afterwards (training stops after 3
    steps)."""
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
    result = train(model, tiny_batches, replace(profile.train, progress=False), "cpu")
    assert result.steps == 3 and result.stop_reason == "data_exhausted"
    assert all(math.isfinite(h["loss"]) for h in result.history)
    assert result.amp in ("none", "bf16")  # a CPU never gets fp16


def test_the_gpu_profile_is_sized_for_a_t4() -> None:
    gpu = translation_profile("gpu")
    # T4: float16
    assert gpu.train.amp == "auto" and amp_for_device("cuda", cuda_capability=(7, 5)) == "fp16"
    # + validation, decoding < 15 min
    assert gpu.train.time_budget_s is not None and gpu.train.time_budget_s <= 13 * 60
    assert gpu.train.schedule == "linear" and gpu.train.max_steps is not None
    params = Transformer(gpu.model).num_parameters()
    # float32 weights, gradients and Adam's two moments: 16 bytes per parameter, far below a T4's 16
    # GB
    assert 16 * params < 2**30


def test_the_profiles_keep_the_values_of_the_stored_runs() -> None:
    """Chapter 11's stored run and results/*.json were measured with these values."""
    cpu = TRANSLATION_PROFILES["cpu"]
    model = (
        cpu.model.d_model,
        cpu.model.num_heads,
        cpu.model.num_encoder_layers,
        cpu.model.d_ff,
        cpu.model.dropout,
    )
    assert (
        model == (256, 4, 3, 1024, 0.1) and cpu.model.src_vocab_size == cpu.data.vocab_size == 8000
    )
    train = (
        cpu.train.lr,
        cpu.train.warmup_steps,
        cpu.train.max_steps,
        cpu.train.time_budget_s,
        cpu.train.schedule,
    )
    assert train == (2e-3, 400, 2467, None, "linear") and cpu.train.amp == "auto"
    assert (
        cpu.decode.beam_size,
        cpu.decode.length_penalty,
        cpu.decode.max_len_a,
        cpu.decode.max_len_b,
    ) == (
        8,
        2.0,
        1.5,
        10,
    )
    assert (cpu.data.max_tokens, cpu.average_last, cpu.num_threads) == (3000, 12, None)
    smoke = TRANSLATION_PROFILES["smoke"]
    assert (
        smoke.data.train_limit,
        smoke.data.vocab_size,
        smoke.decode.length_penalty,
        smoke.num_threads,
    ) == (
        3000,
        1000,
        0.6,
        1,
    )


def test_set_reaches_every_section_parsing_by_the_fields_types() -> None:
    cpu = TRANSLATION_PROFILES["cpu"]
    changed = apply_overrides(
        cpu,
        [
            "train.lr=1e-3",
            "train.grad_accum=2",
            "train.clip_norm=1",
            "train.adam_betas=0.9, 0.99",
            "train.mode=min",
            "train.time_budget_s=None",
            "model.positional=rope",
            "model.norm_first=false",
            "model.num_kv_heads=2",
            "decode.beam_size=6",
            "data.vocab_size=500",
            "average_last=1",
        ],
    )
    assert (changed.train.lr, changed.train.grad_accum, changed.train.clip_norm) == (1e-3, 2, 1.0)
    assert (
        changed.train.adam_betas == (0.9, 0.99)
        and changed.train.mode == "min"
        and changed.train.time_budget_s is None
    )
    assert (changed.model.positional, changed.model.norm_first, changed.model.num_kv_heads) == (
        "rope",
        False,
        2,
    )
    assert changed.decode.beam_size == 6 and changed.average_last == 1
    assert (
        changed.data.vocab_size
        == changed.model.src_vocab_size
        == changed.model.tgt_vocab_size
        == 500
    )
    assert apply_overrides(cpu, []) == cpu and cpu.train.lr == 2e-3, (
        "the profile itself is left as it was"
    )
    # Every field of every section can be reached, except the vocabulary sizes (set by
    # data.vocab_size) and train.keep_last (by average_last).
    assert len(
        settable_fields(cpu)
    ) == 3 + 16 + 20 + 5 + 4 and "model.src_vocab_size" not in settable_fields(cpu)
    # train.keep_last follows average_last: the checkpoints kept are those averaged
    assert "train.keep_last" not in settable_fields(cpu)
    with pytest.raises(ValueError, match="train.keep_last follows average_last; set that"):
        apply_overrides(cpu, ["train.keep_last=3"])


@pytest.mark.parametrize(
    ("setting", "error", "message"),
    [
        (
            "train.lrate=1",
            ValueError,
            "section 'train' has no field 'lrate'; it has max_steps, max_epochs",
        ),
        (
            "optim.lr=1",
            ValueError,
            "unknown section 'optim'; the sections are ['model', 'train', 'decode', 'data']",
        ),
        (
            "threads=2",
            ValueError,
            "a translation config has no field 'threads'; it has name, average_last",
        ),
        ("model.src_vocab_size=10", ValueError, "has no field 'src_vocab_size'"),
        ("train.lr", ValueError, "must look like SECTION.FIELD=VALUE"),
        ("train.lr=fast", ValueError, "train.lr='fast' is not a float"),
        ("train.grad_accum=1.5", ValueError, "train.grad_accum='1.5' is not an int"),
        (
            "train.schedule=cosine",
            ValueError,
            "train.schedule='cosine' is not one of ['noam', 'linear']",
        ),
        ("model.norm_first=yes", ValueError, "model.norm_first='yes' is not a bool"),
        ("train.adam_betas=0.9", ValueError, "must be 2 comma-separated values"),
        ("train.lr=-1", ValueError, "setting 'train.lr=-1': lr must be a positive float"),
        ("model.num_heads=3", ValueError, "setting 'model.num_heads=3'"),
        # linear needs a step or time budget
        ("train.max_steps=None", ValueError, "setting 'train.max_steps=None'"),
    ],
)
def test_a_wrong_setting_is_refused_naming_it(
    setting: str, error: type[Exception], message: str
) -> None:
    # no time budget: train.max_steps=None leaves no budget
    cpu = translation_profile("cpu", max_steps=900)
    with pytest.raises(error) as raised:
        apply_overrides(cpu, [setting])
    assert message in str(raised.value)


def test_a_config_checks_its_sections() -> None:
    cpu = TRANSLATION_PROFILES["cpu"]
    with pytest.raises(TypeError, match="train must be a TrainConfig"):
        replace(cpu, train={"lr": 1e-3})
    with pytest.raises(ValueError, match="average_last"):
        replace(cpu, average_last=0)
    with pytest.raises(ValueError, match="model.pad_id must be the tokenizer's pad id"):
        replace(cpu, model=replace(cpu.model, pad_id=3))
    assert isinstance(cpu, TranslationConfig) and cpu.model_config(64).tgt_vocab_size == 64
