"""Chapter 13's opening picture shows shard_batches' split of an epoch and one step of two
replicas."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from transformer_book.concepts.data_parallel import batch_owners, data_parallel_figure  # noqa: E402
from transformer_lib.training.distributed import shard_batches  # noqa: E402

pytestmark = pytest.mark.book


def test_the_owners_are_shard_batches_split() -> None:
    owners = batch_owners(10, 3)
    for r in range(3):
        mine = [b for b, owner in enumerate(owners) if owner is not None and owner[0] == r]
        assert mine == list(shard_batches(range(10), rank=r, world_size=3))
        assert [owners[b][1] for b in mine] == list(range(1, len(mine) + 1))  # type: ignore[index]
    assert owners[9] is None  # the incomplete last group is left out


def test_the_figure_labels_each_batch_with_the_step_that_uses_it() -> None:
    fig = data_parallel_figure()
    texts = [t.get_text() for t in fig.axes[0].texts]
    batches = [t for t in texts if t.startswith("b") and t[1:].isdigit()]
    steps = [t for t in texts if t.startswith("step ")]
    assert batches == [f"b{i}" for i in range(6)]
    assert steps == [f"step {owner[1]}" for owner in batch_owners(6, 2)]  # type: ignore[index]
    # step 1: b0 on rank 0, b1 on rank 1
    assert any("on b0" in t for t in texts) and any("on b1" in t for t in texts)
    assert any("all-reduce" in t and "/ 2" in t for t in texts)
    plt.close(fig)


def test_the_figure_fits_the_page_and_is_registered() -> None:
    fig = data_parallel_figure()
    assert fig.get_size_inches()[0] <= 8.0
    sizes = [t.get_fontsize() for t in fig.axes[0].texts if t.get_text()]
    assert min(sizes) >= 10.5
    plt.close(fig)
