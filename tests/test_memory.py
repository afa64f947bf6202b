"""transformer_book.memory: peak memory of a computation and the size of a key/value cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_book.memory import kv_cache_formula_bytes, kv_cache_nbytes, peak_memory
from transformer_lib import padding_mask, scaled_dot_product_attention
from transformer_lib.nn.cache import KVCache

pytestmark = pytest.mark.book


def test_peak_memory_counts_what_is_alive_at_once() -> None:
    def allocate() -> torch.Tensor:
        a = torch.ones(250_000)  # 1,000,000 bytes
        b = torch.ones(500_000)  # 2,000,000 bytes: 3,000,000 alive together
        del a
        c = torch.ones(100_000)  # 400,000 bytes: 2,400,000 alive
        return b + c[0]  # another 2,000,000: 4,400,000 alive at the peak

    result, peak = peak_memory(allocate)
    assert result.shape == (500_000,) and float(result[0]) == 2.0
    assert 4_400_000 <= peak < 4_400_000 + 65_536


def test_peak_memory_ignores_tensors_that_existed_before() -> None:
    big = torch.ones(1_000_000)
    _, peak = peak_memory(lambda: big.sum())
    assert peak < 65_536


def test_reference_attention_holds_two_score_matrices_and_the_fused_kernel_none() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 512, 16) for _ in range(3))
    matrix = 2 * 512 * 512 * 4  # bytes of one (B, H, T, T) float32 matrix
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the fused kernel's scratch blocks are per thread
    try:
        with torch.no_grad():
            (ref, _), ref_peak = peak_memory(lambda: scaled_dot_product_attention(q, k, v))
            fused, fused_peak = peak_memory(lambda: F.scaled_dot_product_attention(q, k, v))
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(ref, fused)
    assert 2 * matrix <= ref_peak < 2.2 * matrix  # scaled scores and weights are alive together
    assert fused_peak < matrix / 4


def test_peak_memory_rejects_other_devices_and_non_callables() -> None:
    with pytest.raises(ValueError, match="device"):
        peak_memory(lambda: None, "meta")
    with pytest.raises(TypeError, match="fn"):
        peak_memory(torch.ones(2))  # type: ignore[arg-type]


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_kv_cache_size_after_decoding_matches_the_formula(tiny_model, steps: int) -> None:
    model = tiny_model()  # float64: 8 bytes per element
    config = model.config
    src = torch.randint(1, config.src_vocab_size, (3, 7))
    tgt = torch.randint(1, config.tgt_vocab_size, (3, steps))
    src_mask = padding_mask(src, config.pad_id)
    cache = model.new_cache()
    assert kv_cache_nbytes(cache) == {"self": 0, "cross": 0, "total": 0}
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        for t in range(steps):
            model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache)
    d_k = config.d_model // config.num_heads
    layers, heads = config.num_decoder_layers, config.num_heads
    size = kv_cache_nbytes(cache)
    assert size["self"] == kv_cache_formula_bytes(layers, 3, heads, steps, d_k, torch.float64)
    assert size["cross"] == kv_cache_formula_bytes(layers, 3, heads, 7, d_k, torch.float64)
    assert size["total"] == size["self"] + size["cross"]
    assert size["self"] == 2 * layers * 3 * heads * steps * d_k * 8


def test_kv_cache_formula_values_and_errors() -> None:
    # The paper's base model: 6 decoder layers, 8 heads of 64, 1,000 positions, float32.
    assert kv_cache_formula_bytes(6, 1, 8, 1000, 64) == 24_576_000
    assert kv_cache_formula_bytes(6, 1, 8, 1000, 64, torch.bfloat16) == 12_288_000
    assert kv_cache_formula_bytes(6, 1, 8, 0, 64) == 0
    with pytest.raises(ValueError, match="length"):
        kv_cache_formula_bytes(6, 1, 8, -1, 64)
    with pytest.raises(ValueError, match="num_heads"):
        kv_cache_formula_bytes(6, 1, 0, 10, 64)
    with pytest.raises(TypeError, match="dtype"):
        kv_cache_formula_bytes(6, 1, 8, 10, 64, "float32")  # type: ignore[arg-type]


def test_kv_cache_nbytes_rejects_a_single_cache() -> None:
    with pytest.raises(TypeError, match="pairs"):
        kv_cache_nbytes(KVCache())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"cache\[0\]"):
        kv_cache_nbytes([KVCache()])  # type: ignore[list-item]
