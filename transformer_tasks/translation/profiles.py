"""A translation run as one configuration tree; the ``smoke``, ``cpu`` and ``gpu`` profiles are
instances of it.
"""

from __future__ import annotations

import os
import types
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import torch

from transformer_lib.config import TransformerConfig
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.runtime import pick_device
from transformer_lib.training import TrainConfig
from transformer_lib.validation import check_non_negative, check_positive_int

VOCABULARY_FIELDS = ("src_vocab_size", "tgt_vocab_size")  # set by data.vocab_size, not on their own
# Set from another field: the checkpoints the loop keeps are those that average_last averages.
DERIVED_FIELDS = {"train.keep_last": "average_last"}


@dataclass(frozen=True)
class DataConfig:
    """What a translation run reads.

    Attributes:
        train_limit, test_limit: use the first this many training / test pairs (``None``: all).
        vocab_size: size of the joint BPE vocabulary learnt on the training pairs.
        max_tokens: padded tokens per side of each batch (per process under ``torchrun``).
    """

    train_limit: int | None = None
    test_limit: int | None = None
    vocab_size: int = 8000
    max_tokens: int = 4000

    def __post_init__(self) -> None:
        for name in ("train_limit", "test_limit"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        check_positive_int("vocab_size", self.vocab_size)
        check_positive_int("max_tokens", self.max_tokens)


@dataclass(frozen=True)
class DecodeConfig:
    """How a translation run decodes: the one home of the decoding settings.

    Attributes:
        beam_size: beams per sentence when scoring with beam search (1: greedy).
        length_penalty: GNMT's ``alpha`` (0.6 in the Transformer paper, section 6.1).
        max_len_a, max_len_b: a translation is cut at ``max_len_a * source_tokens + max_len_b``
            tokens (:meth:`max_length`).
        batch_size: sentences translated at once.
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 128

    def __post_init__(self) -> None:
        for name in ("beam_size", "batch_size"):
            check_positive_int(name, getattr(self, name))
        for name in ("length_penalty", "max_len_a", "max_len_b"):
            check_non_negative(name, getattr(self, name))

    def max_length(self, source_length: int, limit: int) -> int:
        """The most tokens a translation of ``source_length`` source tokens may take, ``<bos>``
        and ``<eos>`` included: ``max_len_a * source_length + max_len_b``, at most ``limit`` (the
        model's ``max_len``).
        """
        return min(int(self.max_len_a * source_length + self.max_len_b), limit)


SECTIONS = {
    "model": TransformerConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
    "data": DataConfig,
}
"""The sections of a :class:`TranslationConfig`, and the type of each."""


@dataclass(frozen=True)
class TranslationConfig:
    """Everything one translation run is told: the ``model``, ``train``, ``decode`` and ``data``
    sections.

    The model's vocabulary sizes are ``data.vocab_size`` here (checked; :func:`apply_overrides` sets
    them together), and the learnt tokenizer's size when the model is built (:meth:`model_config`;
    a small corpus can give fewer tokens than asked).

    Attributes:
        average_last: the run ends with the weights of lowest validation loss among the last ones,
            the averages of the last 2 to ``average_last`` evaluations' weights, and the best
            evaluation's.
        num_threads: CPU threads for PyTorch during the run (``None``: PyTorch's default). One
            thread suits tiny models, and never crawls when other programs compete for the cores.
    """

    name: str
    model: TransformerConfig
    train: TrainConfig
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    data: DataConfig = field(default_factory=DataConfig)
    average_last: int = 1
    num_threads: int | None = None

    def __post_init__(self) -> None:
        for name, kind in SECTIONS.items():
            if not isinstance(getattr(self, name), kind):
                got = type(getattr(self, name)).__name__
                raise TypeError(f"{name} must be a {kind.__name__}, got {got}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty str, got {self.name!r}")
        check_positive_int("average_last", self.average_last)
        if self.num_threads is not None:
            check_positive_int("num_threads", self.num_threads)
        if self.model.pad_id != BPETokenizer.pad_id:
            raise ValueError(
                f"model.pad_id must be the tokenizer's pad id {BPETokenizer.pad_id}, got "
                f"{self.model.pad_id}"
            )
        vocab = self.data.vocab_size
        if (self.model.src_vocab_size, self.model.tgt_vocab_size) != (vocab, vocab):
            raise ValueError(
                f"model.src_vocab_size and model.tgt_vocab_size must be data.vocab_size={vocab}, "
                f"got {self.model.src_vocab_size} and {self.model.tgt_vocab_size}"
            )

    def model_config(self, vocab_size: int) -> TransformerConfig:
        """The model for a joint vocabulary of ``vocab_size`` ids."""
        return replace(self.model, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)


def _model(vocab_size: int, **widths: Any) -> TransformerConfig:
    """A translator: one matrix for both embeddings and the output layer, the tokenizer's padding
    id.
    """
    return TransformerConfig(
        src_vocab_size=vocab_size,
        tgt_vocab_size=vocab_size,
        norm_first=True,
        tie_embeddings=True,
        share_embeddings=True,
        pad_id=BPETokenizer.pad_id,
        max_len=512,
        **widths,
    )


# 2 CPU cores: 2,467 optimizer steps of 3,000-token batches, the tokens of the 1,850 steps of 4,000
# that 2 cores of an AMD EPYC made in 30 minutes of bfloat16 training
# (results/translation-cpu-30min-seed0-chapter.json). A step budget, not a time budget: the same
# model comes out on every machine, only the time differs. The schedule was chosen on the validation
# split (results/translation-sweep.json: 400-step runs, linear decay to zero beat the Noam schedule;
# peak 2e-3). Smaller batches, more of them, and a longer warm-up (400 steps) and averaging up to
# the last 12 evaluations' weights lowered the validation loss of the kept weights from 1.6995 to
# 1.6823 (seed 0: results/translation-cpu-recipe.json). The beam size and the length penalty are the
# best row of a sweep on the validation split (results/decoding-sweep-cpu.json), never the test
# split.
_CPU = TranslationConfig(
    name="cpu",
    model=_model(
        8000,
        d_model=256,
        num_heads=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        d_ff=1024,
        dropout=0.1,
    ),
    train=TrainConfig(
        max_steps=2467,
        lr=2e-3,
        warmup_steps=400,
        schedule="linear",
        amp="auto",
        eval_every=100,
    ),
    decode=DecodeConfig(beam_size=8, length_penalty=2.0),
    data=DataConfig(vocab_size=8000, max_tokens=3000),
    average_last=12,
)
TRANSLATION_PROFILES: dict[str, TranslationConfig] = {
    # The tests: a slice of the data and a tiny model; proves the pipeline runs end to end in
    # seconds.
    "smoke": TranslationConfig(
        name="smoke",
        model=_model(
            1000,
            d_model=64,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            d_ff=128,
            dropout=0.1,
        ),
        train=TrainConfig(
            max_steps=60, time_budget_s=30.0, lr=3e-3, warmup_steps=20, eval_every=20
        ),
        decode=DecodeConfig(beam_size=4, length_penalty=0.6),
        data=DataConfig(train_limit=3000, test_limit=100, vocab_size=1000, max_tokens=1500),
        average_last=2,
        num_threads=1,
    ),
    "cpu": _CPU,
    # Colab's free T4 (16 GB, float16 tensor cores): the base model's widths, about 40 epochs, and a
    # 13-minute cap so that training, validation and decoding fit in 15 minutes. amp="auto" picks
    # float16 with a gradient scaler on a T4, bfloat16 on Ampere and later.
    "gpu": replace(
        _CPU,
        name="gpu",
        model=_model(
            8000,
            d_model=512,
            num_heads=8,
            num_encoder_layers=6,
            num_decoder_layers=6,
            d_ff=2048,
            dropout=0.3,
        ),
        train=replace(
            _CPU.train,
            max_steps=2400,
            time_budget_s=13 * 60.0,
            lr=1e-3,
            warmup_steps=300,
            eval_every=240,
        ),
        decode=DecodeConfig(beam_size=5, length_penalty=1.0, batch_size=500),
        data=replace(_CPU.data, max_tokens=8000),
        average_last=4,
    ),
}


def translation_profile(
    name: str, max_steps: int | None = None, time_budget_s: float | None = None
) -> TranslationConfig:
    """The profile called ``name``; a budget given (steps or seconds, not both) replaces all its
    limits, so that a step budget gives a result independent of the machine's speed.
    """
    if name not in TRANSLATION_PROFILES:
        raise ValueError(f"profile={name!r} is not one of {list(TRANSLATION_PROFILES)}")
    return apply_overrides(TRANSLATION_PROFILES[name], budget_settings(max_steps, time_budget_s))


def budget_settings(max_steps: int | None = None, time_budget_s: float | None = None) -> list[str]:
    """The settings that replace a profile's limits by a budget of steps or of seconds (``[]`` for
    neither), for :func:`apply_overrides`.
    """
    if max_steps is not None and time_budget_s is not None:
        raise ValueError(
            "give max_steps (a step budget) or time_budget_s (a time budget), not both"
        )
    if max_steps is None and time_budget_s is None:
        return []
    return [
        f"train.max_steps={max_steps}",
        "train.max_epochs=None",
        f"train.time_budget_s={time_budget_s}",
    ]


PROFILE_ENV_VAR = "TRANSFORMER_PROFILE"


def default_profile(device: torch.device | None = None) -> str:
    """The training profile for this run: ``"gpu"`` on a CUDA device, else ``"cpu"``.

    The ``TRANSFORMER_PROFILE`` environment variable, when set, overrides the choice: ``make test``
    sets it to ``"smoke"`` so that the chapters and the command line train for seconds, not minutes.
    """
    forced = os.environ.get(PROFILE_ENV_VAR)
    if forced:
        if forced not in TRANSLATION_PROFILES:
            raise ValueError(
                f"{PROFILE_ENV_VAR}={forced!r} is not one of {list(TRANSLATION_PROFILES)}"
            )
        return forced
    device = device if device is not None else pick_device()
    return "gpu" if device.type == "cuda" else "cpu"


def settable_fields(config: TranslationConfig) -> list[str]:
    """Every dotted name :func:`apply_overrides` accepts, section by section."""
    top = [f.name for f in fields(config) if f.name not in SECTIONS]
    nested = [f"{s}.{f.name}" for s in SECTIONS for f in fields(getattr(config, s))]
    own = [name for name in nested if name.removeprefix("model.") not in VOCABULARY_FIELDS]
    return top + [name for name in own if name not in DERIVED_FIELDS]


def apply_overrides(config: TranslationConfig, settings: Sequence[str]) -> TranslationConfig:
    """``config`` with each ``"SECTION.FIELD=VALUE"`` (``"FIELD=VALUE"`` at the top) applied, a
    later one winning, parsed by the field's type (:func:`parse_value`); a ``ValueError`` names a
    bad one.

    Each section is checked once, with all its new values: settings that only make sense together
    (a shorter ``train.max_steps`` with a shorter ``train.warmup_steps``) may come in any order.
    """
    changes: dict[str, dict[str, Any]] = {}  # section ("" for the top) -> field -> value
    given: dict[str, list[str]] = {}  # section -> the settings that changed it, for errors
    for setting in settings:
        path, sep, text = (part.strip() for part in setting.partition("="))
        if not sep or not path:
            raise ValueError(
                f"setting {setting!r} must look like SECTION.FIELD=VALUE, e.g. train.lr=2e-3"
            )
        section, _, name = path.rpartition(".")
        if section and section not in SECTIONS:
            raise ValueError(
                f"setting {setting!r}: unknown section {section!r}; the sections are "
                f"{list(SECTIONS)}"
            )
        if path in DERIVED_FIELDS:
            raise ValueError(
                f"setting {setting!r}: {path} follows {DERIVED_FIELDS[path]}; set that"
            )
        if path not in settable_fields(config):
            where = f"section {section!r}" if section else "a translation config"
            known = [
                p.partition(".")[2] or p
                for p in settable_fields(config)
                if p.rpartition(".")[0] == section
            ]
            raise ValueError(
                f"setting {setting!r}: {where} has no field {name!r}; it has {', '.join(known)}"
            )
        owner = getattr(config, section) if section else config
        changes.setdefault(section, {})[name] = parse_value(
            path, text, get_type_hints(type(owner))[name]
        )
        given.setdefault(section, []).append(setting)
    sections: dict[str, Any] = {}
    for section in [s for s in changes if s]:  # each section checks its new values as when built
        try:
            sections[section] = replace(getattr(config, section), **changes[section])
        except (TypeError, ValueError) as error:
            raise type(error)(f"setting {', '.join(map(repr, given[section]))}: {error}") from None
    if "vocab_size" in changes.get("data", {}):  # the model's vocabulary is the tokenizer's
        vocab = sections["data"].vocab_size
        model = sections.get("model", config.model)
        sections["model"] = replace(model, src_vocab_size=vocab, tgt_vocab_size=vocab)
    try:
        return replace(config, **sections, **changes.get("", {}))
    except (TypeError, ValueError) as error:
        every = [setting for section in given for setting in given[section]]
        raise type(error)(f"setting {', '.join(map(repr, every))}: {error}") from None


def parse_value(path: str, text: str, kind: Any) -> Any:
    """``text`` as a value of the annotated type ``kind``: ``int``, ``float``, ``str``, ``bool``
    (true/false), a ``Literal``'s choices, ``None`` for an optional field, ``a,b`` for a pair
    (``path`` names it in errors).
    """
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        if text not in args:
            raise ValueError(f"{path}={text!r} is not one of {list(args)}")
        return text
    if origin in (Union, types.UnionType):  # X | None
        optional = next(a for a in args if a is not type(None))
        return None if text in ("None", "none", "null") else parse_value(path, text, optional)
    if origin is tuple:
        parts = text.split(",")
        if len(parts) != len(args):
            raise ValueError(f"{path}={text!r} must be {len(args)} comma-separated values")
        return tuple(
            parse_value(path, part.strip(), a) for part, a in zip(parts, args, strict=True)
        )
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{path}={text!r} is not a bool (true or false)")
        return text.lower() == "true"
    try:
        return kind(text)  # int, float or str
    except ValueError:
        raise ValueError(
            f"{path}={text!r} is not {'an int' if kind is int else 'a float'}"
        ) from None
