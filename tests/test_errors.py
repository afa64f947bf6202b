"""Bad arguments fail early with a ValueError/TypeError whose message names the argument."""

from __future__ import annotations

import json
import re
import sys
from typing import get_args

import pytest
import torch
from safetensors.torch import save_file, save_model

from transformer_lib import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerSpec,
    MultiHeadAttention,
    PositionalEncoding,
    Transformer,
    TransformerConfig,
    beam_search,
    causal_mask,
    greedy_decode,
    load_checkpoint,
    save_checkpoint,
    scaled_dot_product_attention,
    sequence_log_prob,
    sinusoidal_table,
)
from transformer_lib.checkpoint import FORMAT
from transformer_lib.nn.feedforward import ACTIVATIONS, Activation
from transformer_lib.nn.norms import NORMS, NormName
from transformer_lib.nn.positional import POSITIONALS, Positional
from transformer_lib.validation import check_token_ids


def test_d_model_not_divisible_by_heads() -> None:
    # the tutorial's default (source error 7): 512 / 6 heads would silently give 85-wide heads
    with pytest.raises(ValueError, match="d_model=512 is not divisible by num_heads=6"):
        MultiHeadAttention(512, 6)
    with pytest.raises(ValueError, match="d_model=512 is not divisible by num_heads=6"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=512, num_heads=6)


def test_odd_d_model() -> None:
    with pytest.raises(ValueError, match="d_model=7 must be even"):
        sinusoidal_table(10, 7)
    with pytest.raises(ValueError, match="d_model=7 must be even"):
        PositionalEncoding(7)
    with pytest.raises(ValueError, match="d_model=9 must be even"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=9, num_heads=3)


def test_sequence_longer_than_max_len(tiny_model) -> None:
    model = tiny_model(max_len=8)
    ok = torch.ones(1, 8, dtype=torch.long)
    model(ok, ok)  # exactly max_len is fine
    too_long = torch.ones(1, 9, dtype=torch.long)
    with pytest.raises(ValueError, match=r"length 9 exceeds max_len=8"):
        model(too_long, ok)
    with pytest.raises(ValueError, match=r"length 9 exceeds max_len=8"):
        model(ok, too_long)


def test_float_token_ids(tiny_model) -> None:
    model = tiny_model()
    ids = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(TypeError, match=r"src must hold integer token ids.*float"):
        model(ids.float(), ids)
    with pytest.raises(TypeError, match=r"tgt must hold integer token ids.*float"):
        model(ids, ids.double())
    with pytest.raises(TypeError, match=r"src must be a torch.Tensor of token ids"):
        model([[1, 2]], ids)
    with pytest.raises(RuntimeError, match=r"indices.*Long, Int"):  # a block alone: PyTorch's
        model.src_embed(ids.float())


def test_token_ids_out_of_range(tiny_model) -> None:
    """The entry points that take ids check their range, once per call; the forward pass reads no
    values."""
    model = tiny_model()  # src_vocab_size=11, tgt_vocab_size=13
    ids = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src has ids in \[1, 11\].*vocab_size=11"):
        greedy_decode(model, torch.tensor([[1, 11]]), max_len=5, bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match=r"src has ids in \[-1, 3\].*vocab_size=11"):
        beam_search(model, torch.tensor([[3, -1]]), beam_size=2, max_len=5, bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match=r"tokens has ids in \[1, 13\].*vocab_size=13"):
        sequence_log_prob(model, ids[:1], torch.tensor([[1, 13]]), eos_id=2)
    with pytest.raises(ValueError, match=r"tgt has ids in \[-1, 1\].*\(valid ids are 0..12\)"):
        check_token_ids("tgt", torch.tensor([[1, -1], [1, 1]]), 13)
    with pytest.raises(IndexError):  # inside the model, PyTorch's own error (on the CPU)
        model(torch.tensor([[1, 11]]), ids[:1])
    with pytest.raises(ValueError, match=r"src must be a \(B, T\) tensor of token ids"):
        model(torch.ones(4, dtype=torch.long), ids)


def test_mask_that_cannot_broadcast(tiny_model) -> None:
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"mask has shape \(3, 5, 5\)"):
        scaled_dot_product_attention(x, x, x, torch.ones(3, 5, 5, dtype=torch.bool))
    model = tiny_model()
    ids = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src_mask has shape \(2, 1, 1, 5\)"):
        model(ids, ids, src_mask=torch.ones(2, 1, 1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"tgt_mask has shape \(3, 3\)"):
        model(ids, ids, tgt_mask=causal_mask(3))
    with pytest.raises(ValueError, match=r"src_mask has shape \(2, 4\)"):
        memory = model.encode(ids)
        model.decode(torch.ones(2, 2, dtype=torch.long), memory, src_mask=ids > 0)


def test_a_padding_mask_without_its_broadcast_dimensions_is_refused(tiny_model) -> None:
    """The one mistake that would pass silently: a ``(B, S)`` padding mask broadcasts over
    ``(B, H, T, S)`` as if it were ``(T, S)`` whenever ``B`` equals ``T``. The model refuses it
    where it enters."""
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0]])  # B = 2, S = 4
    with pytest.raises(ValueError, match=r"src_mask has shape \(2, 4\)"):
        model(src, torch.ones(2, 2, dtype=torch.long), src_mask=src != 0)  # T = 2 = B


def test_non_bool_mask(tiny_model) -> None:
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor.*int64"):
        scaled_dot_product_attention(x, x, x, torch.ones(5, 5, dtype=torch.long))
    ids = torch.ones(2, 4, dtype=torch.long)
    additive = torch.zeros(4, 4).masked_fill(~causal_mask(4), float("-inf"))
    with pytest.raises(TypeError, match=r"tgt_mask must be a bool tensor.*float32"):
        tiny_model()(ids, ids, tgt_mask=additive)


def test_a_forward_pass_checks_its_inputs_once_where_they_enter() -> None:
    """``model(src, tgt)`` checks the ids, the masks and the lengths at the model's entry and
    nowhere below: on a 6 + 6 model, 9 calls into the argument checks (50 when every attention
    checked its inputs again), whatever the depth."""
    calls: list[str] = []

    def profile(frame, event, arg) -> None:  # noqa: ANN001
        code = frame.f_code
        if event == "call" and "transformer_lib" in code.co_filename:
            if code.co_name.startswith(("check_", "_check")):
                calls.append(code.co_name)

    counts = {}
    for layers in (1, 6):
        config = TransformerConfig(
            src_vocab_size=20,
            tgt_vocab_size=20,
            d_model=16,
            num_heads=2,
            d_ff=32,
            num_encoder_layers=layers,
            num_decoder_layers=layers,
        )
        model = Transformer(config).eval()
        src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
        calls.clear()
        sys.setprofile(profile)
        try:
            model(src, tgt)
        finally:
            sys.setprofile(None)
        counts[layers] = len(calls)
    assert counts == {1: 9, 6: 9}, counts


def test_truncated_checkpoint(tiny_model, tmp_path) -> None:
    path = save_checkpoint(tiny_model(), tmp_path / "model.safetensors", epoch=1)
    data = path.read_bytes()
    broken = tmp_path / "broken.safetensors"
    for size in (0, 5, 100, len(data) // 2, len(data) - 1):
        broken.write_bytes(data[:size])
        with pytest.raises(ValueError, match=re.escape(str(broken))):
            load_checkpoint(broken)


def test_file_that_is_not_a_checkpoint(tiny_model, tmp_path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("Ein Mann fährt Fahrrad.\n" * 20)
    with pytest.raises(ValueError, match=re.escape(str(text))):
        load_checkpoint(text)
    # a valid safetensors file, not written by save_checkpoint
    other = tmp_path / "other.safetensors"
    save_file({"weight": torch.zeros(3)}, str(other))
    with pytest.raises(ValueError, match=r"not written by save_checkpoint"):
        load_checkpoint(other)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_checkpoint_weights_that_do_not_match_config(tiny_model, tiny_config, tmp_path) -> None:
    path = tmp_path / "mismatch.safetensors"
    header = {
        "format": FORMAT,
        "config": json.dumps(tiny_config(d_model=32).to_dict()),
        "metadata": "{}",
    }
    save_model(tiny_model(), str(path), metadata=header)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load_checkpoint(path)


def test_config_unknown_fields(tiny_config) -> None:
    values = tiny_config().to_dict()
    with pytest.raises(ValueError, match=r"unknown TransformerConfig fields \['d_modle'\]"):
        TransformerConfig.from_dict({**values, "d_modle": 64})
    assert TransformerConfig.from_dict(values) == tiny_config()


def test_bad_config_values(tiny_config) -> None:
    with pytest.raises(TypeError, match=r"num_heads must be an int"):
        tiny_config(num_heads=2.0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got dropout=1.5"):
        tiny_config(dropout=1.5)
    with pytest.raises(ValueError, match=r"activation='swish'"):
        tiny_config(activation="swish")
    with pytest.raises(
        ValueError, match=r"pad_id=11 is not a valid token id: it must be in \[0, 11\)"
    ):
        tiny_config(pad_id=11)
    with pytest.raises(
        ValueError, match=r"share_embeddings=True needs src_vocab_size == tgt_vocab_size"
    ):
        tiny_config(share_embeddings=True)
    with pytest.raises(TypeError, match=r"config must be a TransformerConfig"):
        Transformer(tiny_config().to_dict())


def test_bad_config_types_and_choices(tiny_config) -> None:
    """Each field is checked by its annotated type; a ``Literal`` field lists its choices in the
    message."""
    with pytest.raises(TypeError, match=r"norm_first must be a bool"):
        tiny_config(norm_first=1)
    with pytest.raises(TypeError, match=r"d_model must be an int, got NoneType"):
        tiny_config(d_model=None)
    with pytest.raises(TypeError, match=r"pad_id must be an int token id"):
        tiny_config(pad_id=0.0)
    with pytest.raises(
        ValueError, match=r"num_kv_heads must be a positive int, got num_kv_heads=0"
    ):
        tiny_config(num_kv_heads=0)
    with pytest.raises(ValueError, match=r"attention_dropout must be in \[0, 1\)"):
        tiny_config(attention_dropout=1.0)
    # The choices a config accepts are exactly those the modules build.
    assert sorted(get_args(Activation)) == sorted(ACTIVATIONS)
    assert list(get_args(NormName)) == list(NORMS)
    assert list(POSITIONALS) == list(get_args(Positional))
    for kind in POSITIONALS:
        POSITIONALS[kind](8)


def test_layers_take_a_layer_spec() -> None:
    """Layers are built from a ``LayerSpec``; the positional style of older versions gets a clear
    error."""
    spec = LayerSpec(d_model=8, num_heads=2, d_ff=16)
    assert [type(m) for m in (EncoderLayer(spec), Decoder(spec, 2).layers[1])] == [
        EncoderLayer,
        DecoderLayer,
    ]
    with pytest.raises(
        TypeError, match=r"spec must be a LayerSpec, e.g. LayerSpec\(d_model=16.*got 8"
    ):
        EncoderLayer(8)
    with pytest.raises(TypeError, match=r"num_layers must be an int, got LayerSpec"):
        Encoder(2, spec)  # the arguments of the older style, in its order
    with pytest.raises(TypeError, match=r"num_layers must be an int"):
        Decoder(spec, 2.0)
    with pytest.raises(TypeError, match=r"takes 1 positional argument"):
        LayerSpec(8, 2, 16)  # by name only, so that a config can start with its vocabularies


def test_a_config_is_the_layer_spec_of_its_model() -> None:
    """The layer settings have one source: a ``TransformerConfig`` is a ``LayerSpec``, checked by
    it, and a layer built from the config is the model's layer."""
    config = TransformerConfig(12, 12, d_model=8, num_heads=2, d_ff=16, norm_first=True)
    assert config.d_ff == 16 and config.norm_first
    with pytest.raises(ValueError, match="d_model=8 is not divisible by num_heads=3"):
        TransformerConfig(12, 12, d_model=8, num_heads=3)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    layer = EncoderLayer(config).eval()
    layer.load_state_dict(model.encoder.layers[0].state_dict())
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(layer(x), model.encoder.layers[0](x))
    assert TransformerConfig(1000, 1000, norm_first=True).src_vocab_size == 1000


def test_multi_head_attention_refuses_keys_and_values_of_other_positions() -> None:
    """Called with two tensors, key ``j`` and value ``j`` must be the same position: PyTorch's fused
    CPU kernel would return a tensor for 6 keys and 5 values. One tensor for both (what the model
    passes) is not checked again."""
    mha = MultiHeadAttention(8, 2)
    x, memory = torch.randn(2, 6, 8), torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"key and value must both have shape \(B=2, T_k"):
        mha(x, x, memory)
    with pytest.raises(ValueError, match=r"got \(1, 5, 8\) and \(1, 5, 8\)"):
        mha(x, memory[:1], memory[:1].clone())  # a batch of 1 would broadcast over 2 queries
    assert mha(x, memory, memory)[0].shape == (2, 6, 8)
