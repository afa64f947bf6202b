"""Building blocks against PyTorch's own modules (weights copied, dropout 0) and against their
formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import randomize_
from torch import nn
from torch.func import functional_call
from torch.testing import assert_close

from transformer_book.checks import check_positions_distinct, check_values_in_range
from transformer_book.reference import torch_state_dict
from transformer_lib import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerNorm,
    LayerSpec,
    MultiHeadAttention,
    PositionalEncoding,
    RMSNorm,
    TokenEmbedding,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
)
from transformer_lib.nn.attention import guarded_attention

F64 = torch.float64
D_MODEL, HEADS, D_FF = 16, 4, 32
SIZES = {"d_model": D_MODEL, "num_heads": HEADS, "d_ff": D_FF, "dropout": 0.0}


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def leaf(*shape: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_()


def twin(x: torch.Tensor) -> torch.Tensor:
    """An independent leaf with the same values (to collect a second set of gradients)."""
    return x.detach().clone().requires_grad_()


def key_padding(lengths: list[int], total: int) -> torch.Tensor:
    """(B, S) bool, True = real token (our meaning)."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


# ---------------------------------------------------------------------------------------------
# scaled dot-product attention (the reference function)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("use_mask", [False, True])
def test_sdpa_matches_torch_functional(use_mask: bool) -> None:
    torch.manual_seed(0)
    q, k, v = leaf(2, 3, 4, 8), leaf(2, 3, 6, 8), leaf(2, 3, 6, 5)
    q2, k2, v2 = twin(q), twin(k), twin(v)
    mask = None
    if use_mask:
        mask = torch.rand(2, 1, 4, 6) > 0.4
        mask[..., 0] = True  # every query row keeps at least one key (F.sdpa gives NaN otherwise)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask)
    assert_close(out, ref)
    scores = q.detach() @ k.detach().transpose(-2, -1) / math.sqrt(8)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        assert (weights[~mask.expand_as(weights)] == 0).all()
    assert_close(weights, scores.softmax(-1))
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    for ours, theirs in ((q, q2), (k, k2), (v, v2)):
        assert_close(ours.grad, theirs.grad)


# ---------------------------------------------------------------------------------------------
# multi-head attention vs nn.MultiheadAttention
# ---------------------------------------------------------------------------------------------
def make_mha_pair(dtype: torch.dtype = F64) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    ours = randomize_(MultiHeadAttention(D_MODEL, HEADS).to(dtype))
    theirs = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, dtype=dtype)
    theirs.load_state_dict(torch_state_dict(ours))
    return ours, theirs


def fused_qkv_grad(mha: MultiHeadAttention) -> torch.Tensor:
    return torch.cat([mha.q_proj.weight.grad, mha.k_proj.weight.grad, mha.v_proj.weight.grad])


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_projects_queries_keys_and_values_with_three_linear_calls(need_weights: bool) -> None:
    """One forward calls ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` once each: three
    products for Q, K and V, not one of the concatenated weights (chapter 12, the README's
    ``qkv_projection`` row)."""
    mha = MultiHeadAttention(D_MODEL, HEADS)
    calls: list[str] = []
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        getattr(mha, name).register_forward_hook(lambda *_, name=name: calls.append(name))
    x = torch.randn(2, 5, D_MODEL)
    mha(x, x, x, causal_mask(5), need_weights=need_weights)
    assert calls == ["q_proj", "k_proj", "v_proj", "out_proj"]


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_self_attention_causal_matches_torch(need_weights: bool) -> None:
    ours, theirs = make_mha_pair()
    x = leaf(3, 5, D_MODEL)
    x2 = twin(x)
    mask = causal_mask(5)
    out, weights = ours(x, x, x, mask, need_weights=need_weights)
    ref, ref_weights = theirs(
        x2, x2, x2, attn_mask=~mask, need_weights=True, average_attn_weights=False
    )
    assert_close(out, ref)
    if need_weights:
        assert_close(weights, ref_weights)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(x.grad, x2.grad)
    assert_close(fused_qkv_grad(ours), theirs.in_proj_weight.grad)
    assert_close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("call", ["memory", "separate"])
def test_mha_cross_attention_with_key_padding_matches_torch(need_weights: bool, call: str) -> None:
    ours, theirs = make_mha_pair()
    t_q, t_k = 4, 7  # source and target lengths differ
    query = leaf(3, t_q, D_MODEL)
    key = leaf(3, t_k, D_MODEL)
    value = key if call == "memory" else leaf(3, t_k, D_MODEL)
    query2, key2 = twin(query), twin(key)
    value2 = key2 if call == "memory" else twin(value)
    keep = key_padding([7, 5, 2], t_k)  # True = real key
    out, weights = ours(query, key, value, padding_mask(keep.long(), 0), need_weights=need_weights)
    # PyTorch's key_padding_mask means the opposite: True = padding, ignore it.
    ref, ref_weights = theirs(
        query2, key2, value2, key_padding_mask=~keep, average_attn_weights=False
    )
    assert_close(out, ref)
    if need_weights:
        assert_close(weights, ref_weights)
        assert (weights.masked_select(~keep[:, None, None, :]) == 0).all()
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(query.grad, query2.grad)
    assert_close(key.grad, key2.grad)
    assert_close(value.grad, value2.grad)
    # gradients reach padded keys only through nothing: they must be exactly zero
    assert (key.grad[~keep] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_mha_fused_path_equals_reference_path(dtype: torch.dtype) -> None:
    ours, _ = make_mha_pair(dtype)
    x = leaf(2, 6, D_MODEL, dtype=dtype)
    memory = leaf(2, 9, D_MODEL, dtype=dtype)
    keep = key_padding([9, 4], 9)
    results = []
    for need_weights in (False, True):
        xs, ms = twin(x), twin(memory)
        self_out, self_w = ours(xs, xs, xs, causal_mask(6), need_weights=need_weights)
        cross_out, cross_w = ours(
            self_out, ms, ms, padding_mask(keep.long(), 0), need_weights=need_weights
        )
        assert (self_w is None) == (not need_weights) and (cross_w is None) == (not need_weights)
        cross_out.backward(torch.ones_like(cross_out))
        results.append((cross_out.detach(), xs.grad, ms.grad))
    for fused, reference in zip(*results, strict=True):
        assert_close(fused, reference)


# ---------------------------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------------------------
# The norms are PyTorch's fused F.layer_norm and F.rms_norm: what the library adds, and so what
# can be wrong, is the wiring (eps and where it sits, the weight and bias, the normalised
# dimension). At a scale of 1e-3 the variance is about eps, so a wrong eps shows.
def test_layer_norm_matches_torch_and_the_formula() -> None:
    torch.manual_seed(0)
    ours = randomize_(LayerNorm(D_MODEL).double())
    theirs = nn.LayerNorm(D_MODEL, dtype=F64)
    theirs.load_state_dict(ours.state_dict())
    x = (torch.randn(3, 5, D_MODEL, dtype=F64) * 1e-3 + 2e-3).requires_grad_()
    x2 = twin(x)
    out, ref = ours(x), theirs(x2)
    assert_close(out, ref)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    written_out = (x - mean) / torch.sqrt(var + 1e-5) * ours.weight + ours.bias
    assert_close(out, written_out)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(x.grad, x2.grad)
    assert_close(ours.weight.grad, theirs.weight.grad)
    assert_close(ours.bias.grad, theirs.bias.grad)


def test_rms_norm_matches_torch() -> None:
    torch.manual_seed(0)
    ours = randomize_(RMSNorm(D_MODEL).double())
    theirs = nn.RMSNorm(D_MODEL, eps=1e-6, dtype=F64)
    theirs.load_state_dict(ours.state_dict())
    x = (torch.randn(3, 5, D_MODEL, dtype=F64) * 1e-3 + 1e-3).requires_grad_()
    x2 = twin(x)
    out, ref = ours(x), theirs(x2)
    assert_close(out, ref)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(x.grad, x2.grad)
    assert_close(ours.weight.grad, theirs.weight.grad)


# ---------------------------------------------------------------------------------------------
# encoder / decoder layers and stacks vs nn.TransformerEncoderLayer / DecoderLayer
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    ours = randomize_(
        EncoderLayer(LayerSpec(**SIZES, norm_first=norm_first, activation=activation)).double()
    )
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, 0.0, activation, batch_first=True, norm_first=norm_first, dtype=F64
    )
    theirs.load_state_dict(torch_state_dict(ours))
    x = leaf(3, 6, D_MODEL)
    x2 = twin(x)
    keep = key_padding([6, 4, 1], 6)
    out = ours(x, padding_mask(keep.long(), 0))
    ref = theirs(x2, src_key_padding_mask=~keep)
    assert_close(out, ref)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(x.grad, x2.grad)
    assert_close(ours.ff.linear1.weight.grad, theirs.linear1.weight.grad)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    ours = randomize_(
        DecoderLayer(LayerSpec(**SIZES, norm_first=norm_first, activation=activation)).double()
    )
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, HEADS, D_FF, 0.0, activation, batch_first=True, norm_first=norm_first, dtype=F64
    )
    theirs.load_state_dict(torch_state_dict(ours))
    x, memory = leaf(3, 5, D_MODEL), leaf(3, 8, D_MODEL)
    x2, memory2 = twin(x), twin(memory)
    keep = key_padding([8, 6, 3], 8)
    out = ours(x, memory, causal_mask(5), padding_mask(keep.long(), 0))
    ref = theirs(x2, memory2, tgt_mask=~causal_mask(5), memory_key_padding_mask=~keep)
    assert_close(out, ref)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref.backward(grad)
    assert_close(x.grad, x2.grad)
    assert_close(memory.grad, memory2.grad)
    assert_close(ours.cross_attn.out_proj.weight.grad, theirs.multihead_attn.out_proj.weight.grad)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_torch(norm_first: bool) -> None:
    torch.manual_seed(0)
    encoder = randomize_(Encoder(LayerSpec(**SIZES, norm_first=norm_first), 2).double(), seed=1)
    decoder = randomize_(Decoder(LayerSpec(**SIZES, norm_first=norm_first), 2).double(), seed=2)
    final_norm = (lambda: nn.LayerNorm(D_MODEL, dtype=F64)) if norm_first else (lambda: None)
    enc_layer = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, 0.0, batch_first=True, norm_first=norm_first
    )
    dec_layer = nn.TransformerDecoderLayer(
        D_MODEL, HEADS, D_FF, 0.0, batch_first=True, norm_first=norm_first
    )
    torch_encoder = nn.TransformerEncoder(
        enc_layer, 2, norm=final_norm(), enable_nested_tensor=False
    ).double()
    torch_decoder = nn.TransformerDecoder(dec_layer, 2, norm=final_norm()).double()
    torch_encoder.load_state_dict(torch_state_dict(encoder))
    torch_decoder.load_state_dict(torch_state_dict(decoder))
    src, tgt = leaf(2, 7, D_MODEL), leaf(2, 4, D_MODEL)
    src2, tgt2 = twin(src), twin(tgt)
    keep = key_padding([7, 3], 7)
    src_mask = padding_mask(keep.long(), 0)
    out = decoder(tgt, encoder(src, src_mask), causal_mask(4), src_mask)
    memory2 = torch_encoder(src2, src_key_padding_mask=~keep)
    ref = torch_decoder(tgt2, memory2, tgt_mask=~causal_mask(4), memory_key_padding_mask=~keep)
    assert_close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    assert_close(src.grad, src2.grad)
    assert_close(tgt.grad, tgt2.grad)


# ---------------------------------------------------------------------------------------------
# token embedding and positional encoding
# ---------------------------------------------------------------------------------------------
def test_token_embedding_is_scaled_one_hot_product() -> None:
    torch.manual_seed(0)
    emb = TokenEmbedding(10, 16, padding_idx=0)
    tokens = torch.tensor([[1, 0, 9], [3, 3, 0]])
    out = emb(tokens)
    weight = emb.embedding.weight
    assert_close(out, F.one_hot(tokens, 10).float() @ weight * 4.0)  # sqrt(16) = 4
    assert (out[tokens == 0] == 0).all()  # the padding vector is zero...
    out.sum().backward()
    assert (weight.grad[0] == 0).all() and (weight.grad[3] == 8.0).all()  # ...and learns nothing


def test_sinusoidal_table_matches_paper_formula() -> None:
    max_len, d_model = 60, 20
    table = sinusoidal_table(max_len, d_model)
    expected = torch.zeros(max_len, d_model, dtype=F64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / (10000.0 ** (2 * i / d_model))
            expected[pos, 2 * i] = math.sin(angle)
            expected[pos, 2 * i + 1] = math.cos(angle)
    assert_close(table.double(), expected, rtol=0, atol=1e-6)
    # inside [-1, 1] and reaching both ends: not [0, 1]
    check_values_in_range(table, -1.0, 1.0, tol=1e-2)
    # every position gets its own vector
    assert check_positions_distinct(table, min_distance=1e-2) > 1e-2


def test_positional_encoding_adds_table_with_offset() -> None:
    pe = PositionalEncoding(8, dropout=0.0, max_len=20)
    x = torch.randn(2, 5, 8)
    assert_close(pe(x), x + sinusoidal_table(20, 8)[:5])
    assert_close(pe(x, offset=3), x + sinusoidal_table(20, 8)[3:8])


# ---------------------------------------------------------------------------------------------
# gradcheck in float64
# ---------------------------------------------------------------------------------------------
def test_gradcheck_sdpa_with_mask() -> None:
    torch.manual_seed(0)
    q, k, v = leaf(2, 2, 3, 4), leaf(2, 2, 5, 4), leaf(2, 2, 5, 3)
    mask = torch.rand(2, 1, 3, 5) > 0.5
    mask[0, 0, 0] = True
    mask[1, 0, 1] = False  # a fully masked row too
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask), (q, k, v)
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_gradcheck_multihead_attention(need_weights: bool) -> None:
    torch.manual_seed(0)
    mha = randomize_(MultiHeadAttention(4, 2).double())
    x, memory = leaf(2, 3, 4), leaf(2, 5, 4)
    mask = padding_mask(key_padding([5, 2], 5).long(), 0)

    def self_then_cross(x: torch.Tensor, memory: torch.Tensor, w_q: torch.Tensor) -> torch.Tensor:
        params = {"q_proj.weight": w_q}
        h = functional_call(mha, params, (x, x, x, causal_mask(3)), {"need_weights": need_weights})[
            0
        ]
        return functional_call(
            mha, params, (h, memory, memory, mask), {"need_weights": need_weights}
        )[0]

    w_q = mha.q_proj.weight.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(self_then_cross, (x, memory, w_q))


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradcheck_encoder_layer(norm_first: bool) -> None:
    torch.manual_seed(0)
    layer = randomize_(
        EncoderLayer(
            LayerSpec(d_model=4, num_heads=2, d_ff=8, dropout=0.0, norm_first=norm_first)
        ).double()
    )
    x = leaf(2, 3, 4)
    mask = padding_mask(torch.tensor([[1, 1, 1], [1, 1, 0]]), 0)
    assert torch.autograd.gradcheck(lambda x: layer(x, mask), (x,))


# ---------------------------------------------------------------------------------------------
# fully masked query rows: finite, zero, in low precision too
# ---------------------------------------------------------------------------------------------
def low_precision_dtypes() -> list[torch.dtype]:
    dtypes = [torch.float32, torch.bfloat16]
    try:
        a = torch.randn(2, 3, 4, dtype=torch.float16)
        F.scaled_dot_product_attention(a, a, a).sum().item()
        (a @ a.transpose(-1, -2)).softmax(-1)
        dtypes.append(torch.float16)
    except RuntimeError:  # pragma: no cover - depends on the CPU build
        pass
    return dtypes


def masked_row_mask(t_q: int, t_k: int) -> torch.Tensor:
    mask = torch.ones(2, 1, t_q, t_k, dtype=torch.bool)
    mask[0, 0, 1] = False  # batch 0, query 1 sees nothing
    mask[1, 0, :, 3:] = False  # ordinary padding elsewhere
    return mask


@pytest.mark.parametrize("dtype", low_precision_dtypes())
def test_fully_masked_row_reference_function(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    q, k, v = (leaf(2, 2, 4, 8, dtype=dtype) for _ in range(3))
    mask = masked_row_mask(4, 4)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[0, :, 1] == 0).all() and (weights[0, :, 1] == 0).all()
    assert (weights[1, :, :, 3:] == 0).all()
    assert_close(weights[1].sum(-1).float(), torch.ones(2, 4), atol=1e-2, rtol=0)
    (out.float() * torch.randn(out.shape)).sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("dtype", low_precision_dtypes())
def test_fully_masked_row_multihead(dtype: torch.dtype, need_weights: bool) -> None:
    torch.manual_seed(0)
    mha = randomize_(MultiHeadAttention(D_MODEL, HEADS).to(dtype))
    x, memory = leaf(2, 4, D_MODEL, dtype=dtype), leaf(2, 5, D_MODEL, dtype=dtype)
    out, _ = mha(x, memory, memory, masked_row_mask(4, 5), need_weights=need_weights)
    assert torch.isfinite(out).all()
    # the row's attention output is zero, so only the output projection's bias remains
    assert_close(out[0, 1], mha.out_proj.bias.detach())
    (out.float() * torch.randn(out.shape)).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(memory.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())
    assert (x.grad[0, 1] == 0).all()  # the masked query received no gradient through attention


def test_fully_masked_row_fused_equals_reference_path() -> None:
    torch.manual_seed(0)
    mha = randomize_(MultiHeadAttention(D_MODEL, HEADS))
    x, memory = torch.randn(2, 4, D_MODEL), torch.randn(2, 5, D_MODEL)
    fused, _ = mha(x, memory, memory, masked_row_mask(4, 5))
    reference, _ = mha(x, memory, memory, masked_row_mask(4, 5), need_weights=True)
    assert_close(fused, reference)


@pytest.mark.parametrize("dtype", low_precision_dtypes())
def test_torch_sdpa_zeroes_fully_masked_rows_on_cpu(dtype: torch.dtype) -> None:
    # What chapter 12 shows on the CPU. The library does not rely on it: MultiHeadAttention's fast
    # path goes through guarded_attention on every device (next tests).
    torch.manual_seed(0)
    q, k, v = (leaf(2, 2, 4, 8, dtype=dtype) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=masked_row_mask(4, 4))
    assert (out[0, :, 1] == 0).all() and torch.isfinite(out).all()
    (out.float() * torch.randn(out.shape)).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_guarded_attention_zeroes_the_row_even_where_the_kernel_gives_nan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fused kernel that returns NaN for a fully masked row (as some GPU kernels may) stands in
    for PyTorch's: ``guarded_attention``, and so ``MultiHeadAttention``'s fast path, still gives the
    row zeros (chapter 12: on every device, not only where PyTorch's kernel does it)."""
    fused = F.scaled_dot_product_attention

    def nan_on_empty_rows(query, key, value, attn_mask=None, **kwargs):
        out = fused(query, key, value, attn_mask=attn_mask, **kwargs)
        if attn_mask is None:
            return out
        empty = ~attn_mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        return out.masked_fill(empty, float("nan"))

    monkeypatch.setattr(F, "scaled_dot_product_attention", nan_on_empty_rows)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8) for _ in range(3))
    mask = masked_row_mask(4, 4)
    assert nan_on_empty_rows(q, k, v, attn_mask=mask)[0, :, 1].isnan().all()  # the stand-in
    out = guarded_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and (out[0, :, 1] == 0).all()
    mha = randomize_(MultiHeadAttention(D_MODEL, HEADS))
    x, memory = torch.randn(2, 4, D_MODEL), torch.randn(2, 5, D_MODEL)
    fast, _ = mha(x, memory, memory, masked_row_mask(4, 5))
    assert torch.isfinite(fast).all()
    assert_close(fast[0, 1], mha.out_proj.bias.detach())


@pytest.mark.parametrize("dtype", low_precision_dtypes())
def test_guarded_attention(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    q, k, v = (leaf(2, 2, 4, 8, dtype=dtype) for _ in range(3))
    mask = masked_row_mask(4, 4)
    out = guarded_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and (out[0, :, 1] == 0).all()
    reference, _ = scaled_dot_product_attention(
        q.detach().double(), k.detach().double(), v.detach().double(), mask
    )
    tol = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 3e-3}[dtype]
    assert_close(out.detach().double(), reference, rtol=tol, atol=tol)
    (out.float() * torch.randn(out.shape)).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert (q.grad[0, :, 1] == 0).all()
