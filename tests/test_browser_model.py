"""The files of chapter 11's browser translator (transformer_book.browser_model), on a small model.

Exported without quantisation, the decoder's two outputs equal PyTorch's logits and its recorded
cross-attention, and :func:`onnx_translate` gives :func:`~transformer_tasks.translate`'s greedy
tokens. Quantised (the files the site ships), the weights are int8, each tensor is stored once in
``weights.bin``, and the greedy tokens stay those of the float32 graphs on sentences the model
knows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from test_export import copy_model

from transformer_book.attention_maps import record_attention
from transformer_book.browser_model import (
    SITE_FILES,
    WEIGHTS,
    build_browser_model,
    load_sessions,
    onnx_beam,
    onnx_translate,
)
from transformer_lib import beam_search
from transformer_lib.eval_mode import eval_mode
from transformer_tasks import translate

LIMITS = {"max_len_a": 1.5, "max_len_b": 10}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # one table, as chapter 11's
    model, tokenizer, sentences = copy_model(d_model=64, steps=200, share_embeddings=True)
    folders = {kind: tmp_path_factory.mktemp(kind) for kind in ("int8", "float32")}
    sizes = {
        kind: build_browser_model(
            model, tokenizer, folder, LIMITS | {"examples": sentences[:2]}, quantise=kind == "int8"
        )
        for kind, folder in folders.items()
    }
    return {
        "model": model,
        "tokenizer": tokenizer,
        "sentences": sentences,
        "folders": folders,
        "sizes": sizes,
    }


def test_the_site_files_are_written_with_the_ids_and_limits(built: dict[str, Any]) -> None:
    folder, tokenizer = built["folders"]["int8"], built["tokenizer"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(SITE_FILES)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config == {
        "pad_id": 0,
        "bos_id": tokenizer.bos_id,
        "eos_id": tokenizer.eos_id,
        "unk_id": tokenizer.unk_id,
        "max_len": 128,
        **LIMITS,
        "examples": built["sentences"][:2],
    }
    assert built["sizes"]["int8"] == {name: (folder / name).stat().st_size for name in SITE_FILES}


def test_each_weight_is_stored_once_and_int8_is_about_a_quarter_of_float32(
    built: dict[str, Any],
) -> None:
    folder = built["folders"]["int8"]
    graphs = [
        onnx.load(str(folder / f"{name}.onnx"), load_external_data=False)
        for name in ("encoder", "decoder")
    ]
    stored = [
        [
            dict((e.key, e.value) for e in t.external_data)
            for t in g.graph.initializer
            if t.external_data
        ]
        for g in graphs
    ]
    assert all(place["location"] == WEIGHTS for places in stored for place in places)
    encoder, decoder = ({place["offset"] for place in places} for places in stored)
    assert encoder & decoder, "the embedding table, used by both graphs, is stored once"
    vocab = built["tokenizer"].vocab_size
    tables = {
        dict((e.key, e.value) for e in t.external_data)["offset"]
        for g in graphs
        for t in g.graph.initializer
        if vocab in t.dims
    }
    assert len(tables) == 1, (
        "the lookups read the output layer's matrix: one (V, d_model) table in all"
    )
    int8 = [t for g in graphs for t in g.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(int8) >= 10, "the matrices and the embedding are int8"
    ratio = built["sizes"]["int8"][WEIGHTS] / built["sizes"]["float32"][WEIGHTS]
    assert 0.2 < ratio < 0.35, ratio


def test_float_graphs_give_pytorchs_logits_and_cross_attention(built: dict[str, Any]) -> None:
    model, tokenizer, sessions = (
        built["model"],
        built["tokenizer"],
        load_sessions(built["folders"]["float32"]),
    )
    src = torch.tensor([tokenizer.encode(built["sentences"][0])])
    tgt = torch.tensor([[tokenizer.bos_id, *tokenizer.encode(built["sentences"][1])]])
    memory = sessions["encoder"].run(None, {"src": src.numpy()})[0]
    logits, attention = sessions["decoder"].run(
        None, {"tgt": tgt.numpy(), "memory": memory, "src": src.numpy()}
    )
    with eval_mode(model), torch.no_grad(), record_attention(model) as maps:
        expected = model(src, tgt)
    last = maps["decoder.layers.1.cross_attn"].mean(dim=1)  # (1, T, S)
    np.testing.assert_allclose(logits, expected.numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(attention, last.numpy(), rtol=0, atol=1e-5)


def test_onnx_translate_gives_the_greedy_tokens_of_translate(built: dict[str, Any]) -> None:
    model, tokenizer, sentences = built["model"], built["tokenizer"], built["sentences"]
    limits = (LIMITS["max_len_a"], LIMITS["max_len_b"], model.config.max_len)
    for kind in ("float32", "int8"):
        ids = onnx_translate(load_sessions(built["folders"][kind]), tokenizer, sentences, *limits)
        assert all(row[0] == tokenizer.bos_id for row in ids)
        assert tokenizer.decode_batch(ids) == translate(model, tokenizer, sentences, **LIMITS), kind


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 2.0])
def test_onnx_beam_gives_the_tokens_of_beam_search(
    built: dict[str, Any], length_penalty: float
) -> None:
    model, tokenizer, sessions = (
        built["model"],
        built["tokenizer"],
        load_sessions(built["folders"]["float32"]),
    )
    for sentence in built["sentences"]:
        src = torch.tensor([tokenizer.encode(sentence)])
        for beam_size, max_len in ((4, 40), (3, 5)):  # the second cuts most hypotheses at max_len
            expected = beam_search(
                model, src, beam_size, max_len, tokenizer.bos_id, tokenizer.eos_id, length_penalty
            )
            got = onnx_beam(
                sessions,
                src.numpy(),
                beam_size,
                max_len,
                tokenizer.bos_id,
                tokenizer.eos_id,
                length_penalty,
            )
            assert got == [t for t in expected[0].tolist() if t != tokenizer.pad_id], (
                sentence,
                beam_size,
            )


def test_build_refuses_what_it_cannot_export(tmp_path: Path, built: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="model must be a transformer_lib.Transformer"):
        build_browser_model(torch.nn.Linear(2, 2), built["tokenizer"], tmp_path, LIMITS)  # type: ignore[arg-type]
