"""The ONNX export (issue 28): both graphs run in ONNX Runtime and agree with the PyTorch model.

A small model (random weights, dropout on, so that a graph exported in training mode would differ)
with a real BPE tokenizer, trained on Multi30k's first training pairs when ``MULTI30K_DIR`` is set
and on a few built-in sentences otherwise, is exported; the graphs translate real German sentences
of different lengths in one padded batch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

from transformer_book.browser_model import onnx_greedy
from transformer_lib import (
    greedy_decode,
    make_batch,
    save_checkpoint,
)
from transformer_lib.eval_mode import eval_mode
from transformer_tasks import export_onnx
from transformer_tasks.cli import main
from transformer_tasks.translation.data import checkpoint_metadata

# tiny models: one PyTorch thread (a second only fights over a busy CPU)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

ATOL = 1e-4  # float32 logits of ONNX Runtime against PyTorch's (measured: at most 4e-6)


@pytest.fixture(scope="module")
def exported(
    tmp_path_factory: pytest.TempPathFactory, copy_trained: tuple[Any, ...]
) -> dict[str, Any]:
    """The exported files, the model (still in training mode) and a padded batch of real
    sentences."""
    model, tokenizer, sentences = copy_trained
    ids = tokenizer.encode_batch(sentences)
    paths = export_onnx(model, tokenizer, tmp_path_factory.mktemp("onnx"))
    batch = make_batch(ids, ids[::-1], tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    sessions = {name: ort.InferenceSession(str(paths[name])) for name in ("encoder", "decoder")}
    return {
        "model": model,
        "tokenizer": tokenizer,
        "paths": paths,
        "batch": batch,
        "sessions": sessions,
    }


def _save(exported: dict[str, Any], folder: Path) -> Path:
    """The model saved as ``train-translation --save`` saves it."""
    metadata = checkpoint_metadata(exported["tokenizer"], {})
    return save_checkpoint(exported["model"], folder / "model.safetensors", **metadata)


def test_export_writes_the_two_graphs_and_the_tokenizer_and_leaves_the_model_as_it_was(
    exported: dict[str, Any],
) -> None:
    paths, model, tokenizer = exported["paths"], exported["model"], exported["tokenizer"]
    assert {p.name for p in paths["encoder"].parent.iterdir()} == {
        "encoder.onnx",
        "decoder.onnx",
        "tokenizer.json",
    }
    assert json.loads(paths["tokenizer"].read_text()) == json.loads(tokenizer.to_json_str())
    assert model.training and next(model.parameters()).dtype == torch.float32
    names = {name: [i.name for i in s.get_inputs()] for name, s in exported["sessions"].items()}
    assert names == {"encoder": ["src"], "decoder": ["tgt", "memory", "src"]}


def test_onnx_logits_equal_pytorch_logits_on_a_padded_batch(exported: dict[str, Any]) -> None:
    batch, sessions, model = exported["batch"], exported["sessions"], exported["model"]
    src, tgt = batch.src, batch.tgt_in
    assert (src == 0).any() and (tgt == 0).any() and src.size(1) != tgt.size(1), (
        "padding, two lengths"
    )
    memory = sessions["encoder"].run(None, {"src": src.numpy()})[0]
    logits = sessions["decoder"].run(
        None, {"tgt": tgt.numpy(), "memory": memory, "src": src.numpy()}
    )[0]
    with eval_mode(model):
        expected_memory, expected = model.encode(src), model(src, tgt)
    np.testing.assert_allclose(memory, expected_memory.numpy(), rtol=0, atol=ATOL)
    real = (tgt != 0).numpy()  # padded query positions are never read
    np.testing.assert_allclose(logits[real], expected.numpy()[real], rtol=0, atol=ATOL)


def test_greedy_decoding_through_onnx_gives_the_tokens_of_greedy_decode(
    exported: dict[str, Any],
) -> None:
    src, tokenizer, model = exported["batch"].src, exported["tokenizer"], exported["model"]
    finished = greedy_decode(model, src, 40, tokenizer.bos_id, tokenizer.eos_id) == tokenizer.eos_id
    assert 1 < finished.any(dim=1).sum() and finished.int().argmax(dim=1).unique().numel() > 1, (
        "ends differ"
    )
    for rows in (src, src[3:4]):  # the padded batch, and one sentence alone
        expected = greedy_decode(model, rows, 40, tokenizer.bos_id, tokenizer.eos_id)
        got = onnx_greedy(
            exported["sessions"],
            rows.numpy(),
            40,
            tokenizer.bos_id,
            tokenizer.eos_id,
            tokenizer.pad_id,
        )
        assert got.tolist() == expected.tolist()


def test_export_onnx_command_exports_a_saved_checkpoint(
    exported: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = _save(exported, tmp_path)
    assert (
        main(["export-onnx", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "web")]) == 0
    )
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert printed == {
        name: str(tmp_path / "web" / f"{name}.{ext}")
        for name, ext in (("encoder", "onnx"), ("decoder", "onnx"), ("tokenizer", "json"))
    }
    same = [
        Path(printed[n]).read_bytes() == exported["paths"][n].read_bytes()
        for n in ("tokenizer", "decoder")
    ]
    assert same == [True, True], "the same model gives the same files"


def test_export_onnx_command_refuses_a_missing_checkpoint_and_a_file_as_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "export-onnx",
                "--checkpoint",
                str(tmp_path / "none.safetensors"),
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["export-onnx", "--checkpoint", "x", "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "expected a folder" in err


def test_export_onnx_command_says_how_to_install_a_missing_exporter(
    exported: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checkpoint = _save(exported, tmp_path)

    def no_onnxscript(*args: Any, **kwargs: Any) -> None:
        raise ModuleNotFoundError("No module named 'onnxscript'")

    monkeypatch.setattr(torch.onnx, "export", no_onnxscript)
    assert (
        main(["export-onnx", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "web")]) == 2
    )
    err = capsys.readouterr().err
    assert "No module named 'onnxscript'" in err and "transformer-lib[export]" in err
    assert not (tmp_path / "web").exists()
