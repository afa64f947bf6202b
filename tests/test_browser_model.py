"""The trained model's files (transformer_book.browser_model) and their reader (.trained).

On a small model: exported without quantisation, the graphs' outputs equal PyTorch's logits and
every layer's and head's attention, and :func:`onnx_translate` gives
:func:`~transformer_tasks.translate`'s greedy tokens. Quantised (the files the site ships), the
weights are int8, each tensor is stored once in ``weights.bin``, every matrix product with a weight
is int8, and the maps stay close to the float32 ones. :class:`~.trained.TrainedModel`
reads such a folder as the chapters read the package's; the committed files are checked last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch

from transformer_book.browser_model import (
    SITE_FILES,
    WEIGHTS,
    build_browser_model,
    export_graphs,
    hint_words,
    load_sessions,
    onnx_beam,
    onnx_translate,
    prepare_input,
    pytorch_maps,
    session_options,
    token_label,
)
from transformer_book.trained import FILES, TrainedModel, load_trained
from transformer_lib import beam_search
from transformer_lib.eval_mode import eval_mode
from transformer_tasks import DecodeConfig, translate

# tiny models: one PyTorch thread (a second only fights over a busy CPU)
pytestmark = [pytest.mark.book, pytest.mark.usefixtures("one_thread")]

LIMITS = {"max_len_a": 1.5, "max_len_b": 10}
HINTS = {"de": ["ein", "eine", "mit", "und"], "en": ["a", "the", "with", "and"]}
KINDS = ("encoder", "decoder", "cross")
INT8_ATOL = 0.05  # int8 weights move an attention weight by a few hundredths (measured up to 0.02)


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, copy_trained: tuple[Any, ...]
) -> dict[str, Any]:
    # one table for the embeddings and the output layer, as chapter 11's model
    model, tokenizer, sentences = copy_trained
    folders = {kind: tmp_path_factory.mktemp(kind) for kind in ("int8", "float32")}
    settings = LIMITS | {"examples": sentences[:2], "hint_words": HINTS, "trained": {"steps": 200}}
    graphs = tmp_path_factory.mktemp("graphs")
    export_graphs(model, graphs)  # one export (the slow part) for both builds
    sizes = {
        kind: build_browser_model(
            model, tokenizer, folder, settings, quantise=kind == "int8", graphs=graphs
        )
        for kind, folder in folders.items()
    }
    return {
        "model": model,
        "tokenizer": tokenizer,
        "sentences": sentences,
        "folders": folders,
        "sizes": sizes,
        "trained": {kind: TrainedModel(folder) for kind, folder in folders.items()},
    }


def test_the_site_files_are_written_with_the_ids_and_limits(built: dict[str, Any]) -> None:
    folder, tokenizer = built["folders"]["int8"], built["tokenizer"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(SITE_FILES)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    ids = {"pad_id": 0, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    limits = {"unk_id": tokenizer.unk_id, "max_len": 128, "max_chars": 200, **LIMITS}
    rest = {"examples": built["sentences"][:2], "hint_words": HINTS, "trained": {"steps": 200}}
    assert config == ids | limits | rest
    assert built["sizes"]["int8"] == {name: (folder / name).stat().st_size for name in SITE_FILES}


def _graphs(folder: Path) -> list[onnx.ModelProto]:
    return [
        onnx.load(str(folder / f"{name}.onnx"), load_external_data=False)
        for name in ("encoder", "decoder")
    ]


def _place(tensor: onnx.TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in tensor.external_data}


def test_each_weight_is_stored_once_and_int8_is_about_a_quarter_of_float32(
    built: dict[str, Any],
) -> None:
    graphs = _graphs(built["folders"]["int8"])
    stored = [[_place(t) for t in g.graph.initializer if t.external_data] for g in graphs]
    assert all(place["location"] == WEIGHTS for places in stored for place in places)
    encoder, decoder = ({place["offset"] for place in places} for places in stored)
    assert encoder & decoder, "the embedding table, used by both graphs, is stored once"
    vocab = built["tokenizer"].vocab_size
    tables = {_place(t)["offset"] for g in graphs for t in g.graph.initializer if vocab in t.dims}
    assert len(tables) == 1, (
        "the lookups read the output layer's matrix: one (V, d_model) table in all"
    )
    int8 = [t for g in graphs for t in g.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(int8) >= 10, "the matrices and the embedding are int8"
    ratio = built["sizes"]["int8"][WEIGHTS] / built["sizes"]["float32"][WEIGHTS]
    assert 0.2 < ratio < 0.35, ratio


def test_every_weight_matrix_is_int8_and_onnx_runtime_folds_it_back_at_load(
    built: dict[str, Any], tmp_path: Path
) -> None:
    """Weight-only: each matrix (the positional table aside) is int8 and read through a
    DequantizeLinear, which ONNX Runtime turns into a float32 constant when it loads the graph."""
    import onnxruntime as ort

    folder = built["folders"]["int8"]
    for name, model in zip(("encoder", "decoder"), _graphs(folder), strict=True):
        graph = model.graph
        matrices = [t for t in graph.initializer if len(t.dims) >= 2 and np.prod(t.dims) >= 1024]
        assert {t.name for t in matrices if t.data_type != onnx.TensorProto.INT8} == {
            "model.positional.pe"
        }
        dequantised = {n.input[0] for n in graph.node if n.op_type == "DequantizeLinear"}
        assert {t.name for t in matrices if t.data_type == onnx.TensorProto.INT8} <= dequantised
        options = session_options()
        options.optimized_model_filepath = str(tmp_path / f"{name}.onnx")
        ort.InferenceSession(str(folder / f"{name}.onnx"), options)
        loaded = onnx.load(str(tmp_path / f"{name}.onnx"), load_external_data=False).graph
        assert not [n for n in loaded.node if n.op_type == "DequantizeLinear"], name


def test_float_graphs_give_pytorchs_logits_and_every_attention_map(built: dict[str, Any]) -> None:
    model, tokenizer, sessions = (
        built["model"],
        built["tokenizer"],
        load_sessions(built["folders"]["float32"]),
    )
    src = torch.tensor([tokenizer.encode(built["sentences"][0])])
    tgt = torch.tensor([[tokenizer.bos_id, *tokenizer.encode(built["sentences"][1])]])
    memory, encoder = sessions["encoder"].run(None, {"src": src.numpy()})
    feed = {"tgt": tgt.numpy(), "memory": memory, "src": src.numpy()}
    logits, decoder, cross = sessions["decoder"].run(None, feed)
    with eval_mode(model), torch.no_grad():
        expected = model(src, tgt)
    np.testing.assert_allclose(logits, expected.numpy(), rtol=0, atol=1e-4)
    maps = pytorch_maps(model, src[0].tolist(), tgt[0].tolist())
    layers, heads, (s, t) = 2, 4, (src.size(1), tgt.size(1))
    shapes = {
        "encoder": (layers, heads, s, s),
        "decoder": (layers, heads, t, t),
        "cross": (layers, heads, t, s),
    }
    for kind, got in zip(KINDS, (encoder, decoder, cross), strict=True):
        assert got.shape == (1, *shapes[kind]), kind
        np.testing.assert_allclose(got[0], maps[kind].numpy(), rtol=0, atol=1e-5, err_msg=kind)


def test_onnx_translate_gives_the_greedy_tokens_of_translate(built: dict[str, Any]) -> None:
    model, tokenizer, sentences = built["model"], built["tokenizer"], built["sentences"]
    limits = (LIMITS["max_len_a"], LIMITS["max_len_b"], model.config.max_len)
    for kind in ("float32", "int8"):
        ids = onnx_translate(load_sessions(built["folders"][kind]), tokenizer, sentences, *limits)
        assert all(row[0] == tokenizer.bos_id for row in ids)
        assert tokenizer.decode_batch(ids) == translate(
            model, tokenizer, sentences, DecodeConfig(beam_size=1, **LIMITS)
        ), kind


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 2.0])
def test_onnx_beam_gives_the_tokens_of_beam_search(
    built: dict[str, Any], length_penalty: float
) -> None:
    model, tokenizer, sessions = (
        built["model"],
        built["tokenizer"],
        load_sessions(built["folders"]["float32"]),
    )
    ends = (tokenizer.bos_id, tokenizer.eos_id, length_penalty)
    for sentence in built["sentences"]:
        src = torch.tensor([tokenizer.encode(sentence)])
        for beam_size, max_len in ((4, 40), (3, 5)):  # the second cuts most hypotheses at max_len
            expected = beam_search(model, src, beam_size, max_len, *ends)
            got = onnx_beam(sessions, src.numpy(), beam_size, max_len, *ends)
            assert got == [t for t in expected[0].tolist() if t != tokenizer.pad_id], (
                sentence,
                beam_size,
            )


def test_build_refuses_what_it_cannot_export(tmp_path: Path, built: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="model must be a transformer_lib.Transformer"):
        build_browser_model(torch.nn.Linear(2, 2), built["tokenizer"], tmp_path, LIMITS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tokenizer must be a BPETokenizer"):
        build_browser_model(built["model"], "bpe", tmp_path, LIMITS)  # type: ignore[arg-type]


# --- what the boxes make of typed text ----------------------------------------------------------


def test_hint_words_are_each_languages_most_frequent_less_the_shared_ones() -> None:
    pairs = [("Ein Hund in Rot.", "A dog in red.")] * 3 + [("Ein Ball", "A ball")]
    words = hint_words(pairs, count=3)  # the top 3: ein, hund, in; a, dog, in
    assert words == {"de": ["ein", "hund"], "en": ["a", "dog"]}  # "in" is on both lists


def test_prepare_input_notes_empty_cut_unknown_and_english_text(built: dict[str, Any]) -> None:
    tokenizer, config = built["tokenizer"], built["trained"]["int8"].config
    german = built["sentences"][0]
    assert prepare_input(tokenizer, "  \t", config) == ("", [], ["empty"])
    text, ids, hints = prepare_input(tokenizer, f"  {german} ", config)
    assert (text, ids, hints) == (german, tokenizer.encode(german), [])
    long = "Ein Hund. " * 30
    text, _, hints = prepare_input(tokenizer, long, config)
    assert len(text) == 200 and text == long.strip()[:200] and hints == ["cut"]
    assert prepare_input(tokenizer, "😀🐶", config)[2] == ["unknown"]
    # no letter at all: digits, signs and emoji the tokenizer knows hold no German word either
    for typed in ("12345", "😀😀", "2 + 2 = 4", "!!!"):
        assert prepare_input(tokenizer, typed, config)[2] == ["unknown"], typed
    assert prepare_input(tokenizer, f"3 {german}", config)[2] == [], "letters, words"
    assert prepare_input(tokenizer, "A man and a dog with the ball.", config)[2] == ["english"]
    assert prepare_input(tokenizer, "Ein Mann mit einem Hund und a ball.", config)[2] == []


def test_token_labels_drop_the_word_start_marker() -> None:
    assert [token_label(t) for t in ("▁Hunde", "scht", "▁", "<bos>", ".")] == [
        "Hunde",
        "scht",
        "␣",
        "<bos>",
        ".",
    ]


# --- transformer_book.trained ---------------------------------------------------------------------


def test_trained_translates_as_onnx_translate_and_pytorch(built: dict[str, Any]) -> None:
    model, tokenizer, sentences = built["model"], built["tokenizer"], built["sentences"]
    expected = translate(model, tokenizer, sentences, DecodeConfig(beam_size=1, **LIMITS))
    for kind, trained in built["trained"].items():
        assert [trained.translate(s) for s in sentences] == expected, kind
        sessions = load_sessions(built["folders"][kind])
        ids = onnx_translate(sessions, tokenizer, sentences, *LIMITS.values(), model.config.max_len)
        assert [trained.translate_ids(s) for s in sentences] == ids


def test_trained_attention_equals_pytorchs_maps(built: dict[str, Any]) -> None:
    model, tokenizer = built["model"], built["tokenizer"]
    german, english = built["sentences"][2], "Ein Mann fährt Fahrrad."
    exact, quantised = (
        built["trained"][kind].attention(german, english) for kind in ("float32", "int8")
    )
    tokens = tokenizer.tokenizer.encode(german, add_special_tokens=False).tokens
    assert exact.source == [t.removeprefix("▁") for t in tokens] and "▁" not in "".join(
        exact.source
    )
    assert exact.target[0] == "<bos>" and len(exact.target) == 1 + len(tokenizer.encode(english))
    expected = pytorch_maps(
        model, tokenizer.encode(german), [tokenizer.bos_id, *tokenizer.encode(english)]
    )
    for kind in KINDS:
        for maps, atol in ((exact, 1e-5), (quantised, INT8_ATOL)):
            got = getattr(maps, kind)
            assert isinstance(got, torch.Tensor) and got.shape == expected[kind].shape
            torch.testing.assert_close(got, expected[kind], rtol=0, atol=atol)
            torch.testing.assert_close(got.sum(-1), torch.ones(got.shape[:-1]), rtol=0, atol=1e-5)
    assert (quantised.decoder.triu(diagonal=1) == 0).all() and (
        exact.decoder.triu(diagonal=1) == 0
    ).all()
    assert not torch.equal(quantised.cross, exact.cross), "the int8 maps are the int8 model's"


def test_trained_attention_reads_the_models_own_translation_by_default(
    built: dict[str, Any],
) -> None:
    trained, german = built["trained"]["int8"], built["sentences"][0]
    own = trained.attention(german)
    ids = trained.translate_ids(german)
    assert own.target == trained.labels([i for i in ids if i != trained.config["eos_id"]])
    english = trained.translate(german)
    same = trained.attention(german, english)
    if trained.tokenizer.encode(english) == ids[1:-1]:  # the text gives back the same tokens
        assert torch.equal(own.cross, same.cross)
    assert trained.info == {"steps": 200}


def test_trained_refuses_bad_input_and_a_folder_without_files(
    built: dict[str, Any], tmp_path: Path
) -> None:
    trained = built["trained"]["int8"]
    with pytest.raises(ValueError, match="german must hold some text"):
        trained.attention("  ")
    with pytest.raises(TypeError, match="german must be a str"):
        trained.translate(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="english must be a str"):
        trained.attention("Ein Hund.", 3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="build_browser_model.py"):
        TrainedModel(tmp_path)


def test_the_packages_trained_model_loads_and_shows_the_running_example() -> None:
    """The committed files (package data): what the chapters load."""
    trained = load_trained()
    assert trained is load_trained(), "cached"
    assert trained.folder == FILES and {"profile", "seed", "steps", "bleu", "commands"} <= set(
        trained.info
    )
    maps = trained.attention("Zwei Hunde spielen im Gras.", "Two dogs play in the grass.")
    assert maps.source == ["Zwei", "Hunde", "spielen", "im", "Gras", "."]
    assert maps.target == ["<bos>", "Two", "dogs", "play", "in", "the", "grass", "."]
    layers, heads = maps.encoder.shape[:2]
    assert maps.cross.shape == (layers, heads, 8, 6) and maps.decoder.shape == (layers, heads, 8, 8)
    assert (maps.decoder.triu(diagonal=1) == 0).all()
    assert trained.translate("Zwei Hunde spielen im Gras.").strip()


def test_python_pins_the_onnx_runtime_version_that_the_page_runs() -> None:
    """One ONNX Runtime on both sides: requirements.txt's onnxruntime, package.json's -web."""
    root = Path(__file__).resolve().parents[1]
    pins = dict(
        line.split("==")
        for line in (root / "requirements.txt").read_text().splitlines()
        if "==" in line
    )
    web = json.loads((root / "package.json").read_text())["devDependencies"]["onnxruntime-web"]
    assert pins["onnxruntime"] == web


def test_a_weight_concatenated_and_transposed_in_the_graph_is_stored_once_as_int8(
    tmp_path: Path,
) -> None:
    """``x @ Concat(W1, W2).T``, as the exporter writes a large fused projection: int8 weights, and
    after loading no Concat, Transpose or DequantizeLinear left to run, only the product."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from transformer_book.browser_model import _quantise

    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((64, 256)).astype(np.float32) for _ in range(2))
    nodes = [
        helper.make_node("Concat", ["w1", "w2"], ["cat"], axis=0),
        helper.make_node("Transpose", ["cat"], ["cat_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "cat_t"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 128])
    weights = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    graph = helper.make_graph(nodes, "g", [x], [y], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path / "graph.onnx"
    onnx.save(model, str(path))
    _quantise(path)
    stored = onnx.load(str(path)).graph
    assert sorted(t.data_type for t in stored.initializer if t.name.endswith("_int8")) == [3, 3]
    options = session_options()
    options.optimized_model_filepath = str(tmp_path / "loaded.onnx")
    session = ort.InferenceSession(str(path), options)
    loaded = onnx.load(str(tmp_path / "loaded.onnx")).graph
    assert [n.op_type for n in loaded.node] == ["MatMul"]
    inputs = {"x": rng.standard_normal((3, 256)).astype(np.float32)}
    expected = inputs["x"] @ np.concatenate([w1, w2]).T
    error = np.abs(session.run(None, inputs)[0] - expected).max()
    assert 0 < error < 0.02 * np.abs(expected).max(), "int8 weights' error, a small one"
