"""The Noam learning-rate schedule and safetensors checkpoints."""

from __future__ import annotations

import os
import pickle

import pytest
import torch

import transformer_lib.checkpoint as checkpoint_module
from transformer_lib import (
    load_checkpoint,
    noam_rate,
    noam_schedule,
    read_checkpoint_header,
    save_checkpoint,
)


# ---------------------------------------------------------------------------------------------
# noam_schedule
# ---------------------------------------------------------------------------------------------
def paper_rate(step: int, d_model: int, warmup: int, factor: float) -> float:
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def rates_used(
    initial_lr: float, d_model: int, warmup: int, factor: float, steps: int
) -> list[float]:
    """Learning rate each SGD step really applied, read back from the parameter's change (grad =
    1)."""
    param = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=initial_lr)
    scheduler = noam_schedule(optimizer, d_model, warmup, factor)
    used = []
    for _ in range(steps):
        before = param.item()
        param.grad = torch.ones_like(param)
        optimizer.step()
        scheduler.step()
        used.append(before - param.item())
    return used


@pytest.mark.parametrize(("d_model", "warmup", "factor"), [(512, 40, 1.0), (64, 25, 2.0)])
def test_noam_schedule_rate_used_by_optimizer_steps(
    d_model: int, warmup: int, factor: float
) -> None:
    used = rates_used(0.123, d_model, warmup, factor, 10 * warmup)
    for step in (1, 2, warmup, warmup + 1, 10 * warmup):
        expected = paper_rate(step, d_model, warmup, factor)
        assert used[step - 1] == pytest.approx(expected, rel=1e-9), f"step {step}"
        assert noam_rate(step, d_model, warmup, factor) == pytest.approx(expected, rel=1e-12)
    peak = max(range(len(used)), key=used.__getitem__) + 1
    assert peak == warmup  # rises for warmup steps, then decays
    assert used[warmup - 1] == pytest.approx(factor * (d_model * warmup) ** -0.5, rel=1e-9)


def test_noam_schedule_ignores_initial_lr() -> None:
    assert rates_used(1.0, 128, 10, 1.0, 30) == pytest.approx(
        rates_used(1e-5, 128, 10, 1.0, 30), rel=1e-9
    )


def test_noam_schedule_with_adam_param_groups_lr() -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=5.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = noam_schedule(optimizer, 256, 4)
    for step in range(1, 9):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(
            paper_rate(step, 256, 4, 1.0), rel=1e-12
        )
        model(torch.randn(5, 3)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------
METADATA = {
    "epoch": 7,
    "bleu": 27.25,
    "tokenizer": {"type": "BPE", "vocab": {"<pad>": 0, "a": 1}},
    "note": "ü",
}


@pytest.mark.parametrize(
    "ties",
    [
        {"tie_embeddings": True},
        {"tie_embeddings": False},
        {"share_embeddings": True, "src_vocab_size": 13},
    ],
)
def test_checkpoint_roundtrip(tiny_config, tmp_path, ties: dict) -> None:
    torch.manual_seed(0)
    model = checkpoint_module.Transformer(tiny_config(**ties)).eval()
    with torch.no_grad():  # make every weight differ from a fresh model's
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = save_checkpoint(model, tmp_path / "sub" / "model.safetensors", **METADATA)
    assert os.listdir(path.parent) == ["model.safetensors"]  # no temporary file left behind
    torch.manual_seed(1)  # loading must not depend on the random state
    loaded, metadata = load_checkpoint(path)
    loaded.eval()
    assert metadata == METADATA
    assert loaded.config == model.config
    assert read_checkpoint_header(path) == (model.config, METADATA)
    src = torch.randint(1, model.config.src_vocab_size, (2, 6))
    tgt = torch.randint(1, 13, (2, 5))
    assert torch.equal(loaded(src, tgt), model(src, tgt))
    assert loaded.num_parameters() == model.num_parameters()
    tied = model.config.tie_embeddings
    assert (loaded.generator.weight is loaded.tgt_embed.embedding.weight) == tied
    if model.config.share_embeddings:
        assert loaded.src_embed.embedding.weight is loaded.tgt_embed.embedding.weight
    # training the loaded model keeps tied weights tied
    optimizer = torch.optim.SGD(loaded.parameters(), lr=0.1)
    loaded(src, tgt).sum().backward()
    optimizer.step()
    assert torch.equal(loaded.generator.weight, loaded.tgt_embed.embedding.weight) == tied


def test_loading_never_unpickles(tiny_model, tmp_path, monkeypatch) -> None:
    path = save_checkpoint(tiny_model(), tmp_path / "model.safetensors", epoch=1)

    def forbidden(*args, **kwargs):
        raise AssertionError("a checkpoint load must not unpickle")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    model, metadata = load_checkpoint(path)
    assert metadata == {"epoch": 1}
    data = path.read_bytes()
    header_len = int.from_bytes(data[:8], "little")
    # safetensors: a JSON header, then raw tensors
    assert data[8:9] == b"{" and header_len < len(data)
    # no pickle stream
    assert b"\x80\x04\x95" not in data and b"\x80\x02" not in data[: 8 + header_len]


def test_save_is_atomic(tiny_model, tmp_path, monkeypatch) -> None:
    model = tiny_model()
    path = tmp_path / "model.safetensors"
    save_checkpoint(model, path, version=1)
    before = path.read_bytes()

    def crash(model, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module, "save_model", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(model, path, version=2)
    assert path.read_bytes() == before  # the old checkpoint is untouched
    assert os.listdir(tmp_path) == ["model.safetensors"]  # and no temporary file is left
    new_path = tmp_path / "new.safetensors"
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(model, new_path, version=2)
    assert not new_path.exists()
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_atomically_written_files_get_ordinary_permissions(tmp_path) -> None:
    """Not the 0o600 of the temporary file they were written as: others may read a result file."""
    from transformer_lib.files import atomic_write

    old = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "result.json", lambda tmp: tmp.write_text("{}"))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_save_rejects_non_json_metadata(tiny_model, tmp_path) -> None:
    with pytest.raises(TypeError, match="metadata must be JSON-serialisable"):
        save_checkpoint(tiny_model(), tmp_path / "m.safetensors", tensor=torch.zeros(1))
    assert os.listdir(tmp_path) == []
