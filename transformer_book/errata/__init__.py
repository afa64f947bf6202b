"""Deliberately WRONG implementations (勘误): the errors of the book's sources, reproduced small.

**Nothing in this module is meant to be used.** Each function or class reproduces, in a few lines
written for this book, one error found in the five source documents the book was written from
(the introduction names them) or in the best-known walk-through of the paper, *The Annotated
Transformer* (Harvard NLP). The errata chapter (``chapters/14_errata.ipynb``) and
``tests/test_errata.py`` run each one through a check of :mod:`transformer_book.checks`: the wrong
version fails the check, the library passes it. Keeping the wrong versions here, in one place, means
that the chapter and the test exercise exactly the same code.

Every name that computes something wrong says so in its docstring, which starts with ``WRONG``.
Two helpers (:func:`~.library_vocabulary`, :func:`~.library_training_setup`) are
correct: they let the same checks run on the library's real pipeline.

The fifteen errors of the source documents are in :mod:`.sources`, the seven traps of *The
Annotated Transformer* in :mod:`.annotated`; every name is importable from here
(``errata.constant_positional_table``). Part of the book's harness: nothing in the library imports
it.
"""

from __future__ import annotations

from .annotated import (
    EncoderLayerTextSaysPostLN,
    LayerNormUnbiasedStd,
    accumulate_stepping_scheduler_per_micro_batch,
    attention_masked_with_minus_1e9,
    library_training_setup,
    library_vocabulary,
    load_split_unverified,
    smoothed_loss_from_probabilities,
    toy_corpus,
    vocabulary_from_all_splits,
)
from .sources import (
    CLAIMED_RNN_STEP_EXPONENT,
    CLAIMED_SINUSOID_RANGE,
    DEVICE,
    PAPER_TRAINING,
    SOURCE_004_TRAINING_CLAIMS,
    BareAttention,
    ConvolutionProjection,
    EncoderLayerBareFeedForward,
    EncoderReplacingInput,
    PerHeadModulesAttention,
    PositionalEncodingOnGlobalDevice,
    SoftmaxOverModelWidth,
    TransformerWithUnsetWidth,
    attention_with_undefined_d_k,
    constant_positional_table,
    cross_attention_key_from_decoder,
    cross_attention_query_from_memory,
    forward_without_masks,
    rnn_flops,
    rnn_step,
    self_attention_hiding_position_t,
    single_frequency_positional_table,
)

# The items of the errata chapter: (key, where the error comes from, what it gets wrong, the check
# that catches it).
# The sources are named as in the book: "source 000" to "source 004" and "Annotated Transformer".
ITEMS: tuple[tuple[str, str, str, str], ...] = (
    (
        "1",
        "source 001",
        "positional encoding is the same vector at every position",
        "check_positions_distinct",
    ),
    (
        "2",
        "source 001",
        "positional encoding replaces the input instead of adding to it",
        "check_depends_on_input",
    ),
    (
        "3",
        "source 001",
        "cross-attention: Q and K from the encoder, V from the decoder",
        "check_cross_attention_lengths",
    ),
    (
        "4",
        "source 000",
        "cross-attention: 'Q and K from the decoder, V from the encoder'",
        "check_cross_attention_lengths",
    ),
    (
        "5",
        "source 001",
        "no masks: the decoder sees the future, padding is attended",
        "check_causal",
    ),
    (
        "6",
        "source 001",
        "decoder ends in softmax(Linear(d_model, d_model))",
        "check_outputs_are_logits",
    ),
    (
        "7",
        "source 001",
        "num_heads=6 with d_model=512: heads concatenate to 510",
        "check_heads_concatenate_to_d_model",
    ),
    ("8", "source 001", "sine and cosine 'cover [0, 1]'", "check_values_in_range"),
    (
        "9",
        "source 004",
        "feed-forward sub-layer without residual connection and norm",
        "check_norm_placement",
    ),
    (
        "10",
        "source 004",
        "the paper 'clipped at 1.0, used 4096-token batches, attention dropout'",
        "check_settings",
    ),
    (
        "11",
        "source 000",
        "positional table built on a global DEVICE, added through autograd.Variable",
        "check_buffer_follows_module",
    ),
    ("12", "source 003", "one RNN step costs O(n) in the hidden size n", "check_cost_exponent"),
    (
        "13",
        "source 004",
        "attention divides by sqrt(d_k), a d_k it never defines",
        "check_attention_scale",
    ),
    ("14", "source 001", "Q, K and V 'features after a convolution'", "check_position_wise"),
    ("15", "source 002", "causal mask that also hides position t from itself", "check_causal"),
    (
        "AT-1",
        "Annotated Transformer",
        "Post-LN in the text, Pre-LN in the code",
        "check_norm_placement",
    ),
    (
        "AT-2",
        "Annotated Transformer",
        "LayerNorm with unbiased std and eps outside the square root",
        "check_layer_norm_matches_torch",
    ),
    (
        "AT-3",
        "Annotated Transformer",
        "label smoothing on log(probabilities) gives inf",
        "check_finite_label_smoothing_loss",
    ),
    (
        "AT-4",
        "Annotated Transformer",
        "masks filled with -1e9 overflow in float16",
        "check_mask_fp16_safe",
    ),
    (
        "AT-5",
        "Annotated Transformer",
        "vocabulary built from train + validation + test",
        "check_vocab_ignores_split",
    ),
    (
        "AT-6",
        "Annotated Transformer",
        "scheduler stepped per micro-batch under gradient accumulation",
        "check_lr_per_optimizer_step",
    ),
    (
        "AT-7",
        "Annotated Transformer",
        "dataset download from a fixed URL, unverified",
        "check_fails_clearly",
    ),
)

__all__ = [
    "BareAttention",
    "CLAIMED_RNN_STEP_EXPONENT",
    "CLAIMED_SINUSOID_RANGE",
    "ConvolutionProjection",
    "DEVICE",
    "EncoderLayerBareFeedForward",
    "EncoderLayerTextSaysPostLN",
    "EncoderReplacingInput",
    "ITEMS",
    "LayerNormUnbiasedStd",
    "PAPER_TRAINING",
    "PerHeadModulesAttention",
    "PositionalEncodingOnGlobalDevice",
    "SOURCE_004_TRAINING_CLAIMS",
    "SoftmaxOverModelWidth",
    "TransformerWithUnsetWidth",
    "accumulate_stepping_scheduler_per_micro_batch",
    "attention_masked_with_minus_1e9",
    "attention_with_undefined_d_k",
    "constant_positional_table",
    "cross_attention_key_from_decoder",
    "cross_attention_query_from_memory",
    "forward_without_masks",
    "library_training_setup",
    "library_vocabulary",
    "load_split_unverified",
    "rnn_flops",
    "rnn_step",
    "self_attention_hiding_position_t",
    "single_frequency_positional_table",
    "smoothed_loss_from_probabilities",
    "toy_corpus",
    "vocabulary_from_all_splits",
]
