"""Variants: learned and rotary positions, RMSNorm, SwiGLU, grouped-query attention.

Each variant is checked against its formula or against a plain module with copied weights, then
every combination of variants goes through the whole-model properties (causality, padding
invariance, cached decoding, checkpoints, parameter counts). The defaults are the paper's model:
the other test files check that it did not change.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import json
import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import randomize_
from safetensors.torch import save_model
from torch import nn
from torch.testing import assert_close

from transformer_lib import (
    DecoderLayer,
    Encoder,
    FeedForward,
    KVCache,
    LayerNorm,
    LayerSpec,
    MultiHeadAttention,
    PositionalEncoding,
    RMSNorm,
    Transformer,
    TransformerConfig,
    causal_mask,
    greedy_decode,
    load_checkpoint,
    padding_mask,
    read_checkpoint_header,
    save_checkpoint,
)
from transformer_lib.checkpoint import FORMAT
from transformer_lib.decoding import beam_search
from transformer_lib.nn.positional import (
    LearnedPositionalEmbedding,
    NoPositionalEncoding,
    RotaryEmbedding,
    rotary_tables,
)
from transformer_tasks.translation import apply_overrides, translation_profile

F64 = torch.float64
PAD, BOS, EOS = 0, 1, 2
SRC_VOCAB, TGT_VOCAB = 11, 13  # the tiny config's (tests/conftest.py)


pytestmark = pytest.mark.usefixtures("one_thread")


def ids(batch: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """Random ids in ``[3, vocab)``: never padding, bos or eos."""
    return torch.randint(3, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def config(tiny_config: Callable[..., TransformerConfig]) -> Callable[..., TransformerConfig]:
    """The tiny config with four heads, so that grouped-query attention has heads to group."""
    return partial(tiny_config, num_heads=4)


def model_of(cfg: TransformerConfig, seed: int = 0, dtype: torch.dtype = F64) -> Transformer:
    torch.manual_seed(seed)
    return randomize_(Transformer(cfg), seed).to(dtype).eval()


# ---------------------------------------------------------------------------------------------
# the configuration: defaults, validation, old checkpoints
# ---------------------------------------------------------------------------------------------
def test_defaults_build_the_paper_model(config) -> None:
    cfg = config()
    assert (cfg.positional, cfg.norm, cfg.activation, cfg.num_kv_heads, cfg.norm_first) == (
        "sinusoidal",
        "layernorm",
        "relu",
        None,
        False,
    )
    model = Transformer(cfg)
    assert type(model.positional) is PositionalEncoding
    norms = [m for m in model.modules() if isinstance(m, (LayerNorm, RMSNorm))]
    assert norms and all(type(m) is LayerNorm for m in norms)
    for m in model.modules():
        if isinstance(m, MultiHeadAttention):
            assert m.rotary is None and m.num_kv_heads == 4 and m.k_proj.out_features == 16
        if isinstance(m, FeedForward):
            assert m.linear3 is None and m.activation is F.relu


def test_new_fields_build_the_same_model_when_given_their_defaults(config) -> None:
    """Spelling out the defaults (num_kv_heads=num_heads included) gives the same weights and
    logits."""
    plain = model_of(config())
    explicit = model_of(
        config(positional="sinusoidal", norm="layernorm", activation="relu", num_kv_heads=4)
    )
    for (name, a), (name2, b) in zip(
        plain.state_dict().items(), explicit.state_dict().items(), strict=True
    ):
        assert name == name2 and torch.equal(a, b)
    src, tgt = ids(2, 5, SRC_VOCAB), ids(2, 4, TGT_VOCAB, seed=1)
    assert torch.equal(plain(src, tgt), explicit(src, tgt))


def test_checkpoint_written_before_the_variant_fields_still_loads(tmp_path, config) -> None:
    model = model_of(config(norm_first=True), dtype=torch.float32)
    old_config = {
        k: v
        for k, v in model.config.to_dict().items()
        if k not in ("positional", "norm", "num_kv_heads")
    }
    path = tmp_path / "old.safetensors"
    header = {
        "format": FORMAT,
        "config": json.dumps(old_config),
        "metadata": json.dumps({"epoch": 3}),
    }
    save_model(model, str(path), metadata=header)
    assert TransformerConfig.from_dict(old_config) == model.config
    loaded, metadata = load_checkpoint(path)
    assert metadata == {"epoch": 3} and loaded.config == model.config
    src, tgt = ids(2, 5, SRC_VOCAB), ids(2, 4, TGT_VOCAB, seed=1)
    assert torch.equal(loaded.eval()(src, tgt), model(src, tgt))


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (
            {"positional": "alibi"},
            ValueError,
            r"positional='alibi' is not one of \['sinusoidal', 'learned', 'rope'\]",
        ),
        (
            {"norm": "batchnorm"},
            ValueError,
            r"norm='batchnorm' is not one of \['layernorm', 'rmsnorm'\]",
        ),
        (
            {"activation": "swish"},
            ValueError,
            r"activation='swish' is not one of \['relu', 'gelu', 'swiglu'\]",
        ),
        ({"num_kv_heads": 3}, ValueError, r"num_kv_heads=3 must divide num_heads=4 .* \[1, 2, 4\]"),
        (
            {"num_kv_heads": 0},
            ValueError,
            r"num_kv_heads must be a positive int, got num_kv_heads=0",
        ),
        ({"num_kv_heads": 2.0}, TypeError, r"num_kv_heads must be an int"),
        (
            {"positional": "rope", "d_model": 12, "num_heads": 4},
            ValueError,
            r"head width .* = 3 must be even",
        ),
        ({"norm_first": "yes"}, TypeError, r"norm_first must be a bool"),
        ({"tie_embeddings": 1}, TypeError, r"tie_embeddings must be a bool"),
        ({"pad_id": 0.0}, TypeError, r"pad_id must be an int"),
    ],
)
def test_bad_variant_fields_raise_clear_errors(
    overrides: dict, error: type, message: str, config
) -> None:
    with pytest.raises(error, match=message):
        config(**overrides)


def test_odd_d_model_is_allowed_without_the_sinusoidal_table(config) -> None:
    with pytest.raises(ValueError, match="d_model=9 must be even"):
        config(d_model=9, num_heads=3)
    assert Transformer(config(d_model=9, num_heads=3, positional="learned")).config.d_model == 9


# ---------------------------------------------------------------------------------------------
# rotary position embedding (RoPE)
# ---------------------------------------------------------------------------------------------
def test_rope_scores_depend_only_on_the_relative_offset() -> None:
    """``<R(m) q, R(n) k>`` is a function of ``n - m``: shifting both positions leaves it
    unchanged."""
    torch.manual_seed(0)
    d_k, length = 8, 32
    rope = RotaryEmbedding(d_k, max_len=length)
    q, k = torch.randn(d_k, dtype=F64), torch.randn(d_k, dtype=F64)
    rq = rope(q.expand(1, 1, length, d_k))[0, 0]  # (T, d_k): q placed at every position
    rk = rope(k.expand(1, 1, length, d_k))[0, 0]  # (T, d_k)
    scores = rq @ rk.T  # scores[m, n] = <R(m) q, R(n) k>
    # constant along every diagonal
    assert_close(scores[1:, 1:], scores[:-1, :-1], rtol=0, atol=1e-12)
    # offset 0: the plain q.k
    assert_close(scores.diagonal(), (q @ k).expand(length), rtol=0, atol=1e-12)
    assert (scores[0, 1:] - scores[0, 0]).abs().max() > 0.1  # ...and it does depend on the offset
    # the same through the offset argument (how the KV cache numbers new positions)
    for m, n, shift in ((3, 7, 11), (20, 5, 6)):
        at = lambda x, p: rope(x.view(1, 1, 1, d_k), offset=p).flatten()  # noqa: E731
        assert_close(at(q, m) @ at(k, n), at(q, m + shift) @ at(k, n + shift), rtol=0, atol=1e-12)


def test_rope_is_a_rotation_per_feature_pair() -> None:
    """Against complex multiplication: pair ``(x_2i, x_2i+1)`` times ``exp(i p w_i)``; norms are
    kept."""
    torch.manual_seed(0)
    d_k, length = 6, 10
    x = torch.randn(2, 3, length, d_k, dtype=F64)
    out = RotaryEmbedding(d_k, max_len=16)(x, offset=4)
    w = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=F64) / d_k)  # (d_k / 2,)
    angle = torch.arange(4, 4 + length, dtype=F64)[:, None] * w  # (T, d_k / 2)
    z = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.polar(torch.ones_like(angle), angle)
    assert_close(out, torch.stack([z.real, z.imag], dim=-1).flatten(-2), rtol=0, atol=1e-12)
    assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=0, atol=1e-12)
    # float32: the stored tables are the float64 ones rounded
    out32 = RotaryEmbedding(d_k, max_len=16)(x.float(), offset=4)
    assert_close(out32, out.float(), rtol=1e-5, atol=1e-5)
    assert_close(out32.norm(dim=-1), x.float().norm(dim=-1), rtol=1e-5, atol=1e-5)
    cos, sin = rotary_tables(16, d_k, F64)
    assert_close(cos**2 + sin**2, torch.ones_like(cos), rtol=0, atol=1e-15)


def test_rope_attention_weights_equal_the_formula() -> None:
    torch.manual_seed(0)
    d_model, heads = 16, 2
    rope = RotaryEmbedding(d_model // heads, max_len=32)
    mha = randomize_(MultiHeadAttention(d_model, heads, rotary=rope)).double()
    x = torch.randn(2, 7, d_model, dtype=F64)
    _, weights = mha(x, x, x, causal_mask(7), need_weights=True)
    q = mha.q_proj(x).view(2, 7, heads, -1).transpose(1, 2)  # (B, H, T, d_k)
    k = mha.k_proj(x).view(2, 7, heads, -1).transpose(1, 2)  # (B, H, T, d_k)
    scores = rope(q) @ rope(k).transpose(-2, -1) / math.sqrt(d_model // heads)
    expected = scores.masked_fill(~causal_mask(7), float("-inf")).softmax(-1)
    assert_close(weights, expected)


def test_rope_goes_to_self_attention_only_and_is_shared(config) -> None:
    model = Transformer(config(positional="rope", max_len=32))
    assert type(model.positional) is NoPositionalEncoding
    self_attn = [layer.self_attn for layer in [*model.encoder.layers, *model.decoder.layers]]
    assert all(m.rotary is self_attn[0].rotary is not None for m in self_attn)
    assert all(layer.cross_attn.rotary is None for layer in model.decoder.layers)
    x = torch.randn(2, 5, 16)
    assert torch.equal(model.positional.eval()(x, offset=3), x)  # nothing added to the embeddings
    with pytest.raises(ValueError, match="static cache .* rotary"):
        self_attn[0](x, x, x, cache=KVCache(static=True))
    with pytest.raises(ValueError, match="exceeds max_len=32"):
        self_attn[0].rotary(torch.randn(1, 1, 5, 4), offset=30)


# ---------------------------------------------------------------------------------------------
# learned positional embedding
# ---------------------------------------------------------------------------------------------
def test_learned_positions_are_distinct_rows_that_learn() -> None:
    torch.manual_seed(0)
    pe = LearnedPositionalEmbedding(8, dropout=0.0, max_len=12)
    table = pe.embedding.weight
    out = pe(torch.zeros(2, 10, 8))
    assert_close(out, table[:10].expand(2, 10, 8), rtol=0, atol=0)
    assert_close(pe(torch.zeros(1, 3, 8), offset=4)[0], table[4:7], rtol=0, atol=0)
    distances = torch.cdist(table, table) + torch.eye(12) * 1e9
    assert distances.min() > 0.5  # every position has its own vector
    target = torch.randn(2, 10, 8)
    (out * target).sum().backward()
    # gradient reaches each used row
    assert_close(table.grad[:10], target.sum(0), rtol=0, atol=1e-6)
    assert (table.grad[10:] == 0).all()  # ...and only those
    with pytest.raises(ValueError, match="exceeds max_len=12"):
        pe(torch.zeros(1, 5, 8), offset=8)


def test_learned_positions_train_inside_the_model(config) -> None:
    model = model_of(config(positional="learned"), dtype=torch.float32).train()
    assert isinstance(model.positional, LearnedPositionalEmbedding)
    before = model.positional.embedding.weight.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    src, tgt = ids(2, 6, SRC_VOCAB), ids(2, 5, TGT_VOCAB, seed=1)
    F.cross_entropy(model(src, tgt).flatten(0, 1), tgt.flatten()).backward()
    optimizer.step()
    moved = (model.positional.embedding.weight - before).abs().sum(-1)
    assert (moved[:6] > 0).all() and (moved[6:] == 0).all()  # source and target share one table


# ---------------------------------------------------------------------------------------------
# RMSNorm as the layers' norm
# ---------------------------------------------------------------------------------------------
def with_torch_rmsnorm(layer: nn.Module) -> nn.Module:
    """A copy of ``layer`` whose every norm is ``nn.RMSNorm`` with the same weight and eps."""
    twin = copy.deepcopy(layer)
    for name, module in list(twin.named_modules()):
        if isinstance(module, RMSNorm):
            parent = twin.get_submodule(name.rsplit(".", 1)[0]) if "." in name else twin
            theirs = nn.RMSNorm(module.d_model, eps=1e-6, dtype=F64)
            theirs.weight.data.copy_(module.weight.data)
            setattr(parent, name.rsplit(".", 1)[-1], theirs)
    return twin


@pytest.mark.parametrize("norm_first", [False, True])
def test_rmsnorm_option_equals_torch_rmsnorm_inside_layers(norm_first: bool) -> None:
    torch.manual_seed(0)
    spec = LayerSpec(
        d_model=16, num_heads=4, d_ff=32, dropout=0.0, norm_first=norm_first, norm="rmsnorm"
    )
    encoder = randomize_(Encoder(spec, 2).double())
    decoder_layer = randomize_(DecoderLayer(spec).double())
    norms = [
        m
        for m in [*encoder.modules(), *decoder_layer.modules()]
        if isinstance(m, (RMSNorm, LayerNorm))
    ]
    assert all(type(m) is RMSNorm for m in norms) and len(norms) == 2 * 2 + 3 + (
        1 if norm_first else 0
    )
    x, memory = torch.randn(2, 5, 16, dtype=F64), torch.randn(2, 6, 16, dtype=F64)
    keep = padding_mask(torch.tensor([[1] * 6, [1] * 4 + [0] * 2]), 0)
    for ours, theirs, args in (
        (encoder, with_torch_rmsnorm(encoder), (memory, keep)),
        (decoder_layer, with_torch_rmsnorm(decoder_layer), (x, memory, causal_mask(5), keep)),
    ):
        assert not any(isinstance(m, RMSNorm) for m in theirs.modules())
        assert_close(ours(*args), theirs(*args))


# ---------------------------------------------------------------------------------------------
# SwiGLU feed-forward
# ---------------------------------------------------------------------------------------------
def test_swiglu_equals_the_hand_computation() -> None:
    torch.manual_seed(0)
    ff = randomize_(FeedForward(8, 12, dropout=0.0, activation="swiglu")).double()
    x = torch.randn(2, 5, 8, dtype=F64, requires_grad=True)
    w1, b1 = ff.linear1.weight, ff.linear1.bias
    w3, b3 = ff.linear3.weight, ff.linear3.bias
    w2, b2 = ff.linear2.weight, ff.linear2.bias
    expected = (F.silu(x @ w1.T + b1) * (x @ w3.T + b3)) @ w2.T + b2
    assert_close(ff(x), expected, rtol=0, atol=1e-12)
    silu = lambda a: a / (1 + torch.exp(-a))  # noqa: E731  (SiLU = Swish_1 from its formula)
    assert_close(ff(x), (silu(x @ w1.T + b1) * (x @ w3.T + b3)) @ w2.T + b2, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(ff, (x,))
    assert sum(p.numel() for p in ff.parameters()) == 3 * 8 * 12 + 2 * 12 + 8


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_plain_activations_have_no_gate(activation: str) -> None:
    ff = FeedForward(8, 12, activation=activation).double()
    x = torch.randn(3, 8, dtype=F64)
    act = F.relu if activation == "relu" else F.gelu
    assert ff.linear3 is None
    assert_close(ff(x), ff.linear2(act(ff.linear1(x))), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# grouped-query attention
# ---------------------------------------------------------------------------------------------
def test_gqa_with_one_group_per_head_equals_torch_multihead_attention() -> None:
    torch.manual_seed(0)
    ours = randomize_(MultiHeadAttention(16, 4, num_kv_heads=4)).double()
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, dtype=F64)
    theirs.in_proj_weight.data.copy_(
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    )
    theirs.in_proj_bias.data.copy_(
        torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
    )
    theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
    x, memory = torch.randn(2, 5, 16, dtype=F64), torch.randn(2, 7, 16, dtype=F64)
    keep = torch.tensor([[True] * 7, [True] * 3 + [False] * 4])
    for need_weights in (False, True):
        out, _ = ours(x, x, x, causal_mask(5), need_weights=need_weights)
        assert_close(out, theirs(x, x, x, attn_mask=~causal_mask(5))[0])
        out, _ = ours(x, memory, memory, keep[:, None, None, :], need_weights=need_weights)
        assert_close(out, theirs(x, memory, memory, key_padding_mask=~keep)[0])


def repeated_kv_twin(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """Plain multi-head attention whose key/value heads are the GQA heads, each repeated for its
    group."""
    d_model, heads, groups, d_k = gqa.d_model, gqa.num_heads, gqa.groups, gqa.d_k
    mha = MultiHeadAttention(d_model, heads).to(gqa.q_proj.weight.dtype)
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            # (H_kv * d_k, d) -> (H_kv, d_k, d)
            weight = getattr(gqa, name).weight.view(gqa.num_kv_heads, d_k, d_model)
            # (H_kv * d_k,) -> (H_kv, d_k)
            bias = getattr(gqa, name).bias.view(gqa.num_kv_heads, d_k)
            getattr(mha, name).weight.copy_(
                weight.repeat_interleave(groups, dim=0).reshape(heads * d_k, d_model)
            )
            getattr(mha, name).bias.copy_(
                bias.repeat_interleave(groups, dim=0).reshape(heads * d_k)
            )
    return mha


@pytest.mark.parametrize("num_kv_heads", [1, 2])
@pytest.mark.parametrize("rope", [False, True])
def test_gqa_equals_multihead_attention_with_repeated_kv_heads(
    num_kv_heads: int, rope: bool
) -> None:
    torch.manual_seed(0)
    rotary = RotaryEmbedding(4, max_len=16) if rope else None
    gqa = randomize_(MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, rotary=rotary)).double()
    assert gqa.k_proj.weight.shape == (num_kv_heads * 4, 16) and gqa.groups == 4 // num_kv_heads
    mha = repeated_kv_twin(gqa)
    mha.rotary = rotary
    x, memory = torch.randn(2, 5, 16, dtype=F64), torch.randn(2, 7, 16, dtype=F64)
    values = torch.randn(2, 7, 16, dtype=F64)
    keep = padding_mask(torch.tensor([[1] * 7, [1] * 3 + [0] * 4]), 0)
    for args in ((x, x, x, causal_mask(5)), (x, memory, memory, keep), (x, memory, values, None)):
        fused, _ = gqa(*args)
        reference, weights = gqa(*args, need_weights=True)
        expected, expected_weights = mha(*args, need_weights=True)
        assert_close(fused, expected)
        assert_close(reference, expected)
        assert_close(weights, expected_weights)
        assert weights.shape[1] == 4  # weights per query head
    # cached decoding stores only the key/value heads, and equals the full computation
    cache = KVCache()
    steps = [
        gqa(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(5)
    ]
    assert cache.key.shape == (2, num_kv_heads, 5, 4)
    assert_close(torch.cat(steps, dim=1), gqa(x, x, x, causal_mask(5))[0])


def test_gqa_gradcheck_with_rope() -> None:
    torch.manual_seed(0)
    mha = randomize_(
        MultiHeadAttention(8, 4, num_kv_heads=2, rotary=RotaryEmbedding(2, max_len=8))
    ).double()
    x = torch.randn(1, 3, 8, dtype=F64, requires_grad=True)
    for need_weights in (False, True):
        assert torch.autograd.gradcheck(
            lambda t, w=need_weights: mha(t, t, t, causal_mask(3), need_weights=w)[0], (x,)
        )


def test_bad_num_kv_heads_in_the_module() -> None:
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=4"):
        MultiHeadAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="rotary must be a RotaryEmbedding of head width d_k=4"):
        MultiHeadAttention(16, 4, rotary=RotaryEmbedding(8))


# ---------------------------------------------------------------------------------------------
# every variant and every combination, through the whole model
# ---------------------------------------------------------------------------------------------
COMBINATIONS = [
    dict(positional=p, norm=n, norm_first=f, activation=a, num_kv_heads=kv)
    for p, n, f, a, kv in itertools.product(
        ("sinusoidal", "learned", "rope"),
        ("layernorm", "rmsnorm"),
        (False, True),
        ("relu", "gelu", "swiglu"),
        (None, 1),
    )
]


def combo_id(c: dict) -> str:
    kv = "mha" if c["num_kv_heads"] is None else f"kv{c['num_kv_heads']}"
    placement = "pre" if c["norm_first"] else "post"
    return f"{c['positional']}-{c['norm']}-{placement}-{c['activation']}-{kv}"


def expected_parameters(c: TransformerConfig) -> int:
    """Parameters counted from the architecture on paper (tied generator counted once)."""
    d, d_ff = c.d_model, c.d_ff
    kv_width = c.kv_heads * (d // c.num_heads)
    attention = 2 * (d * d + d) + 2 * (d * kv_width + kv_width)  # q and out; k and v
    feed_forward = 2 * d * d_ff + d_ff + d + (d * d_ff + d_ff if c.activation == "swiglu" else 0)
    norm = 2 * d if c.norm == "layernorm" else d
    encoder = c.num_encoder_layers * (attention + feed_forward + 2 * norm)
    decoder = c.num_decoder_layers * (2 * attention + feed_forward + 3 * norm)
    final_norms = 2 * norm if c.norm_first else 0
    embeddings = (c.src_vocab_size + c.tgt_vocab_size) * d
    positions = c.max_len * d if c.positional == "learned" else 0
    return encoder + decoder + final_norms + embeddings + positions


@pytest.mark.parametrize("variant", COMBINATIONS, ids=combo_id)
def test_every_variant_combination_keeps_the_model_properties(
    variant: dict, tmp_path, config
) -> None:
    cfg = config(**variant)
    model = model_of(cfg)
    src, tgt = ids(3, 6, SRC_VOCAB), ids(3, 5, TGT_VOCAB, seed=1)
    src[1, 4:] = PAD
    logits = model(src, tgt)

    # parameters: as counted on paper
    assert model.num_parameters() == expected_parameters(cfg)

    # causality: changing target token t changes no logit before t, and every logit from t on
    for t in range(tgt.size(1)):
        changed = tgt.clone()
        changed[:, t] = (changed[:, t] - 2) % (TGT_VOCAB - 3) + 3
        new = model(src, changed)
        assert_close(new[:, :t], logits[:, :t], rtol=0, atol=1e-12)
        assert (new[:, t:] - logits[:, t:]).abs().amax(dim=-1).min() > 1e-8

    # padding invariance: more source padding changes nothing; the source order matters
    padded = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    assert_close(model(padded, tgt), logits, rtol=0, atol=1e-10)
    assert_close(model(src[1:2, :4], tgt[1:2]), logits[1:2], rtol=0, atol=1e-10)
    assert (model(src.flip(1), tgt) - logits).abs().max() > 1e-6

    # KV cache: step-by-step logits equal the full pass; greedy and beam search give the same tokens
    memory = model.encode(src)
    mask = padding_mask(src, PAD)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache=cache) for t in range(tgt.size(1))]
    assert_close(torch.cat(steps, dim=1), model.decode(tgt, memory, mask), rtol=0, atol=1e-10)
    assert cache[0][0].key.shape[1] == cfg.kv_heads and cache[0][1].key.shape[1] == cfg.kv_heads
    cached = greedy_decode(model, src, 9, BOS, EOS, use_cache=True)
    assert torch.equal(cached, greedy_decode(model, src, 9, BOS, EOS, use_cache=False))
    assert torch.equal(
        beam_search(model, src, 3, 8, BOS, EOS, use_cache=True),
        beam_search(model, src, 3, 8, BOS, EOS, use_cache=False),
    )

    # checkpoint round trip: same config, same weights, same logits
    model32 = model_of(cfg, dtype=torch.float32)
    path = save_checkpoint(model32, tmp_path / "model.safetensors", variant=combo_id(variant))
    torch.manual_seed(123)
    loaded, metadata = load_checkpoint(path)
    assert metadata == {"variant": combo_id(variant)} and loaded.config == cfg
    assert read_checkpoint_header(path)[0] == cfg
    assert torch.equal(loaded.eval()(src, tgt), model32(src, tgt))


# ---------------------------------------------------------------------------------------------
# the translation profiles pass the variant fields on
# ---------------------------------------------------------------------------------------------
def test_translation_variants_are_set_on_the_models_section() -> None:
    smoke = translation_profile("smoke")
    plain = smoke.model_config(100)
    assert (plain.positional, plain.norm, plain.activation, plain.num_kv_heads) == (
        "sinusoidal",
        "layernorm",
        "relu",
        None,
    )
    changed = apply_overrides(
        smoke, ["model.positional=rope", "model.num_kv_heads=2", "model.d_ff=85"]
    )
    config = changed.model_config(100)
    assert config == replace(plain, positional="rope", num_kv_heads=2, d_ff=85)
    json.dumps(asdict(changed))  # the run summary stores the configuration as JSON
    with pytest.raises(ValueError, match="section 'model' has no field 'heads'"):
        apply_overrides(smoke, ["model.heads=2"])
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=4"):
        apply_overrides(smoke, ["model.num_kv_heads=3"])


# ---------------------------------------------------------------------------------------------
# benchmarks/variants.py: results collected across runs (--append-to)
# ---------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/variants.py as a module (it imports its neighbour ``_common``)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("variants")


def test_append_run_creates_appends_and_refuses_other_files(bench, tmp_path) -> None:
    path = tmp_path / "results" / "cpu.json"
    bench.append_run(path, {"variant": "a"})
    bench.append_run(path, {"variant": "b"})
    assert json.loads(path.read_text()) == {
        "benchmark": "variants",
        "runs": [{"variant": "a"}, {"variant": "b"}],
    }
    assert sorted(p.name for p in path.parent.iterdir()) == ["cpu.json"], (
        "no temporary file left behind"
    )
    for text, message in [
        ("{not json", "not a JSON file"),
        ('{"benchmark": "copy_task", "runs": []}', "expected a JSON object"),
        ('{"benchmark": "variants", "runs": {}}', "expected a JSON object"),
        ("[1, 2]", "expected a JSON object"),
    ]:
        other = tmp_path / "other.json"
        other.write_text(text)
        with pytest.raises(ValueError, match=f"--append-to {other}: {message}"):
            bench.append_run(other, {"variant": "c"})
        assert other.read_text() == text, "a file that is not a results file is left untouched"


@pytest.mark.slow  # a new Python process
def test_append_to_a_bad_file_fails_before_training(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"runs": []}')
    script = ROOT / "benchmarks" / "variants.py"
    completed = subprocess.run(
        [sys.executable, str(script), "--quick", "--append-to", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2, completed.stderr
    assert f"--append-to {bad}: expected a JSON object" in completed.stderr
    assert "copy baseline" not in completed.stderr, (
        "nothing may train before the results file is checked"
    )
    assert bad.read_text() == '{"runs": []}'


# ---------------------------------------------------------------------------------------------
# the stored comparison on the cpu translation profile (chapter 15 and the README show it)
# ---------------------------------------------------------------------------------------------
CPU_RESULTS = ROOT / "benchmarks" / "results" / "variants_translation_cpu.json"


def test_stored_cpu_comparison_is_current_shares_one_budget_and_is_quoted(bench) -> None:
    """Each stored run trained its own variant's model, all under one budget on one machine, and the
    README and chapter 15 quote them. A library change that alters a variant's model (its fields or
    its parameter count) fails here, a sign that the 20-minute runs must be repeated."""
    runs = bench.read_results(CPU_RESULTS)["runs"]
    expected = bench.variants(bench.TRANSLATION_D_FF["cpu"])
    profile = translation_profile("cpu")
    readme = (ROOT / "README.md").read_text().splitlines()
    readme_row = next(
        line for line in readme if line.startswith("| variants on translation, 900 steps")
    )
    readme_names = {
        "baseline": "baseline",
        "post-ln": "Post-LN",
        "rope": "RoPE",
        "modern": "modern",
    }
    greedy: dict[str, dict[int, float]] = {}
    chapter = json.loads((ROOT / "chapters" / "15_variants.ipynb").read_text())
    prose = "\n".join(
        "".join(cell["source"]) for cell in chapter["cells"] if cell["cell_type"] == "markdown"
    )
    first = runs[0]["translation"][0]
    assert (first["variant"], first["runs"][0]["seed"]) == ("baseline", 0)
    budgets, done = set(), set()
    for run in runs:
        assert not run["quick"] and run["copy"] == [] and run["noise"] is None
        assert run["translation_profile"] == "cpu" and run["device"] == "cpu"
        (row,) = run["translation"]
        (detail,) = row["runs"]
        name = row["variant"]
        assert row["overrides"] == expected[name], name
        assert (
            detail["steps"] == run["translation_steps"] and detail["stop_reason"] == "max_steps"
        ), name
        model = Transformer(replace(profile.model, **row["overrides"]))
        assert detail["params"] == row["params"] == model.num_parameters(), name
        assert (row["mean_bleu"], row["mean_bleu_beam"]) == (detail["bleu"], detail["bleu_beam"])
        assert 0 < detail["bleu"] < 100 and 0 < detail["bleu_beam"] < 100
        budgets.add(
            (run["translation_steps"], run["threads"], run["torch"], run["cpu"], run["cpu_count"])
        )
        assert (name, detail["seed"]) not in done, f"{name} seed {detail['seed']} is stored twice"
        done.add((name, detail["seed"]))
        greedy.setdefault(name, {})[detail["seed"]] = detail["bleu"]
        # the chapter's reading quotes every stored BLEU
        for number in (detail["bleu"], detail["bleu_beam"]):
            assert f"{number:.2f}" in prose, (
                f"chapter 15 does not quote {name} seed {detail['seed']}: {number:.2f}"
            )
    assert len(budgets) == 1, f"runs under different budgets or machines: {budgets}"
    assert {"baseline", "post-ln", "rope", "modern"} <= {name for name, _ in done}
    for name, label in readme_names.items():  # the README quotes the greedy BLEU of seeds 0 and 1
        assert f"{label} {greedy[name][0]:.2f}, {greedy[name][1]:.2f}" in readme_row, name
