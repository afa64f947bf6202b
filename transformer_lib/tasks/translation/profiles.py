"""How big a translation model is and how long it trains: the ``smoke``, ``cpu`` and ``gpu`` profiles."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...config import TransformerConfig
from ...data.tokenizer import BPETokenizer
from ...training import TrainConfig
from ...validation import check_positive_int


@dataclass(frozen=True)
class TranslationProfile:
    """Model size, training schedule and evaluation settings of one translation run.

    Attributes:
        name: ``"smoke"``, ``"cpu"`` or ``"gpu"``.
        train_limit: use the first ``train_limit`` training pairs (``None``: all 29,000).
        test_limit: translate the first ``test_limit`` test pairs (``None``: all 1,000).
        vocab_size: size of the joint BPE vocabulary.
        d_model, num_heads, num_encoder_layers, num_decoder_layers, d_ff, dropout, norm_first:
            the :class:`~.TransformerConfig` fields of the model.
        label_smoothing, lr, warmup_steps, schedule, amp: the :class:`~.TrainConfig`
            fields of the same names (``amp="auto"``: what pays on the device).
        max_tokens: padded tokens per side of each batch.
        max_steps, max_epochs: stop after this many optimizer steps / passes over the data.
        time_budget_s: stop once training steps have taken this many seconds (``None``: no limit);
            validation and decoding do not count. A ``"linear"`` schedule reaches zero at the end of
            this budget or of ``max_steps``, whichever comes first.
        eval_every: measure the validation loss (and keep a snapshot) every this many steps
            (``None``: every epoch).
        average_last: average the weights of the last this many snapshots (1: no averaging).
        beam_size, length_penalty: beam search settings.
        max_len_a, max_len_b: translations are cut at ``max_len_a * source_length + max_len_b`` tokens.
        decode_batch_size: sentences translated at once.
        num_threads: CPU threads for PyTorch during the run (``None``: PyTorch's default). One
            thread suits tiny models, and never slows to a crawl when other programs compete for
            the cores (several threads then wait for each other).
        model_overrides: more :class:`~.TransformerConfig` fields, applied over
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
    schedule: str = "noam"
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
        """The :class:`~.TrainConfig` of this profile."""
        return TrainConfig(
            max_steps=self.max_steps,
            max_epochs=self.max_epochs,
            time_budget_s=self.time_budget_s,
            lr=self.lr,
            warmup_steps=self.warmup_steps,
            schedule=self.schedule,
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
    # 2 CPU cores: 900 optimizer steps, or 30 minutes of training steps if that comes first. The
    # schedule was chosen on the validation split (results/translation-sweep.json: 400-step runs,
    # linear decay to zero beat the Noam schedule; peak 2e-3 after 300 warmup steps was best).
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
        lr=2e-3,
        warmup_steps=300,
        max_steps=900,
        max_epochs=None,
        time_budget_s=30 * 60.0,
        eval_every=100,
        average_last=3,
        beam_size=4,
        length_penalty=1.0,
        amp="auto",
        schedule="linear",
    ),
    # One GPU, sized for Colab's free T4 (16 GB, float16 tensor cores, no fast bfloat16): the base model's
    # widths with 6 + 6 layers, 2,400 steps of about 8,000 tokens per side (about 40 epochs), a linear
    # decay to the last step, and a 13-minute cap so that training, validation and decoding fit in 15
    # minutes. amp="auto" picks float16 with a gradient scaler on a T4, bfloat16 on Ampere and later.
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
        lr=1e-3,
        warmup_steps=300,
        max_steps=2400,
        max_epochs=None,
        time_budget_s=13 * 60.0,
        eval_every=240,
        average_last=4,
        beam_size=5,
        length_penalty=1.0,
        decode_batch_size=500,
        amp="auto",
        schedule="linear",
    ),
}


def translation_profile(
    name: str, max_steps: int | None = None, time_budget_s: float | None = None
) -> TranslationProfile:
    """The profile called ``name`` (``"smoke"``, ``"cpu"`` or ``"gpu"``).

    With ``max_steps`` the run trains for exactly that many optimizer steps (a step budget): the
    profile's time budget and epoch limit are lifted, so the result does not depend on the
    machine's speed. With ``time_budget_s`` it trains for that many seconds of training steps (a
    time budget): the step and epoch limits are lifted, and a linear schedule ends at the budget.
    """
    if name not in TRANSLATION_PROFILES:
        raise ValueError(f"profile={name!r} is not one of {list(TRANSLATION_PROFILES)}")
    profile = TRANSLATION_PROFILES[name]
    if max_steps is not None and time_budget_s is not None:
        raise ValueError("give max_steps (a step budget) or time_budget_s (a time budget), not both")
    if max_steps is not None:
        check_positive_int("max_steps", max_steps)
        return replace(profile, max_steps=max_steps, max_epochs=None, time_budget_s=None)
    if time_budget_s is not None:
        if isinstance(time_budget_s, bool) or not isinstance(time_budget_s, (int, float)) or not time_budget_s > 0:
            raise ValueError(f"time_budget_s must be a positive number of seconds, got {time_budget_s!r}")
        return replace(profile, max_steps=None, max_epochs=None, time_budget_s=float(time_budget_s))
    return profile
