"""Behaviour checks (行为检查): reusable tests of what a piece of a Transformer must do.

Each ``check_*`` function runs a piece of code, measures one property that every correct
implementation has, and raises :class:`~.CheckFailed` (an ``AssertionError``) with a message that
says what failed and by how much. On success it returns ``None`` or a small measured value.

The checks take **callables** (a function, a module, a lambda around a model) rather than
library classes, so the same check applies to a deliberately wrong toy implementation and to
``transformer_lib`` alike: the library's tests use them, and the errata chapter applies each one
to a wrong version (it fails) and to the library (it passes). This module sits at the level of
the building blocks: it imports only PyTorch.

A check proves a property only for the inputs it is given; they are chosen small and generic
(random values, all positions, several scales), so that a defect of the kind the check looks for
shows up on them.

The checks of the building blocks are in :mod:`.blocks`, those of layers, outputs and the training
recipe in :mod:`.layers`; every one is importable from here (``checks.check_causal``).
"""

from .blocks import (
    CheckFailed,
    check_attention_scale,
    check_buffer_follows_module,
    check_causal,
    check_cross_attention_lengths,
    check_depends_on_input,
    check_heads_concatenate_to_d_model,
    check_mask_fp16_safe,
    check_padding_invariant,
    check_position_wise,
    check_positions_distinct,
    check_values_in_range,
    check_variable_is_noop,
    max_abs_diff,
)
from .layers import (
    check_cost_exponent,
    check_fails_clearly,
    check_finite_label_smoothing_loss,
    check_layer_norm_matches_torch,
    check_lr_per_optimizer_step,
    check_norm_placement,
    check_outputs_are_logits,
    check_settings,
    check_vocab_ignores_split,
    count_flops,
)

__all__ = [
    "CheckFailed",
    "check_attention_scale",
    "check_buffer_follows_module",
    "check_causal",
    "check_cost_exponent",
    "check_cross_attention_lengths",
    "check_depends_on_input",
    "check_fails_clearly",
    "check_finite_label_smoothing_loss",
    "check_heads_concatenate_to_d_model",
    "check_layer_norm_matches_torch",
    "check_lr_per_optimizer_step",
    "check_mask_fp16_safe",
    "check_norm_placement",
    "check_outputs_are_logits",
    "check_padding_invariant",
    "check_position_wise",
    "check_positions_distinct",
    "check_settings",
    "check_values_in_range",
    "check_variable_is_noop",
    "check_vocab_ignores_split",
    "count_flops",
    "max_abs_diff",
]
