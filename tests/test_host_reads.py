"""A forward pass and a cached decoding step read no tensor value back to the host.

On a GPU, every read of a tensor's value by Python (``t.item()``, ``bool(t)``, ``int(t)``,
``t.tolist()``, ``t.cpu()``, ...) makes the host wait until every kernel queued before it has run:
the GPU then idles while Python prepares the next kernels. The model's value checks (ids inside the
vocabulary) therefore live at the boundary (:func:`~transformer_lib.greedy_decode`, the data
pipeline, the command line), once per call, and these tests count the reads inside
``model(src, tgt)`` and inside one cached decoding step: zero each.

The count hooks the Python methods that read values, and, below them, PyTorch's one operator that
copies a single value to the host (``aten._local_scalar_dense``: ``item``, ``bool``, ``int`` and
``float`` all end there, also when C++ code calls them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_lib import Transformer, padding_mask

pytestmark = pytest.mark.usefixtures("one_thread")

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy")
"""The ``torch.Tensor`` methods that hand a tensor's values to Python or to the host's memory."""


class _ScalarReads(TorchDispatchMode):
    """Counts ``aten._local_scalar_dense``, the operator behind every one-value read."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.counts["aten._local_scalar_dense"] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def count_host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Count, by name, every read of a tensor value inside the ``with`` block."""
    counts: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        for name in READS:
            original = getattr(torch.Tensor, name)

            def counted(
                self: torch.Tensor,
                *args: Any,
                _name: str = name,
                _original: Any = original,
                **kw: Any,
            ) -> Any:
                counts[_name] += 1
                return _original(self, *args, **kw)

            patch.setattr(torch.Tensor, name, counted)
        with _ScalarReads(counts):
            yield counts


def test_the_counter_sees_every_kind_of_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without this, a counter that missed a kind of read would pass every test below."""
    t = torch.tensor([3])
    with count_host_reads(monkeypatch) as counts:
        t.item(), t.tolist(), bool(t), int(t), float(t), [0, 1, 2, 3][t], t.cpu(), t.numpy()
    assert {name: counts[name] for name in READS} == dict.fromkeys(READS, 1)
    assert counts["aten._local_scalar_dense"] >= 4  # item, bool, int, float (and __index__)


def _batch(config: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded batch (row 1 is shorter on both sides), so that the masks matter."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(1, config.src_vocab_size, (2, 7), generator=gen)  # (B, S)
    tgt = torch.randint(1, config.tgt_vocab_size, (2, 5), generator=gen)  # (B, T)
    src[1, 5:] = config.pad_id
    tgt[1, 3:] = config.pad_id
    return src, tgt


VARIANTS = [
    {},
    {"norm_first": True, "norm": "rmsnorm", "activation": "swiglu"},
    {"positional": "rope", "num_kv_heads": 1},
    {"positional": "learned", "share_embeddings": True, "tgt_vocab_size": 11},
]


@pytest.mark.parametrize(
    "overrides", VARIANTS, ids=["paper", "preln-rms-swiglu", "rope-gqa", "learned-shared"]
)
def test_a_forward_pass_reads_nothing_back(
    tiny_model: Callable[..., Transformer],
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, Any],
) -> None:
    """``model(src, tgt)`` with the masks built from the padding, in eval and in train mode, and its
    backward."""
    model = tiny_model(**overrides)
    src, tgt = _batch(model.config)
    with count_host_reads(monkeypatch) as counts:
        model(src, tgt)
        model.train()
        model(src, tgt).sum().backward()
    assert sum(counts.values()) == 0, f"host reads in a forward pass: {dict(counts)}"


@pytest.mark.parametrize(
    "overrides", VARIANTS, ids=["paper", "preln-rms-swiglu", "rope-gqa", "learned-shared"]
)
def test_a_cached_decoding_step_reads_nothing_back(
    tiny_model: Callable[..., Transformer],
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, Any],
) -> None:
    """The first step (which fills the cross-attention cache) and a later one, as ``greedy_decode``
    calls them."""
    model = tiny_model(**overrides)
    src, tgt = _batch(model.config)
    src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    with torch.no_grad():
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        cache = model.new_cache()
        for step in range(3):
            with count_host_reads(monkeypatch) as counts:
                model.decode(tgt[:, step : step + 1], memory, src_mask, cache=cache)  # (B, 1, V)
            assert sum(counts.values()) == 0, (
                f"host reads in cached decoding step {step}: {dict(counts)}"
            )
    assert cache[0][0].length == 3  # the steps did run against the cache


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_neither_synchronises(tiny_config: Callable[..., Any]) -> None:
    """CUDA's own check: ``set_sync_debug_mode("error")`` raises at any operation that waits for the
    device."""
    torch.manual_seed(0)
    model = Transformer(tiny_config()).cuda().eval()
    src, tgt = (t.cuda() for t in _batch(model.config))
    src_mask = padding_mask(src, model.config.pad_id)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.no_grad():
            model(src, tgt)
            memory, cache = model.encode(src, src_mask), model.new_cache()
            for step in range(3):
                model.decode(tgt[:, step : step + 1], memory, src_mask, cache=cache)
    finally:
        torch.cuda.set_sync_debug_mode("default")
