"""The trained model of chapters 3-5 and 11, as the files the book's pages and chapters load.

:func:`build_browser_model` turns a ``train-translation --save`` checkpoint into one folder:

* ``encoder.onnx`` and ``decoder.onnx``: the graphs. Besides ``memory`` and ``logits`` they return
  every layer's and head's attention: the encoder's self-attention, the decoder's masked
  self-attention and its cross-attention (the pictures of chapters 3-5, the maps of the live
  boxes). Their weight matrices are stored as int8, one scale per matrix (weight-only
  quantisation, 仅权重量化): ONNX Runtime turns them back into float32 once, when it loads them, and
  computes in float32, so the page and Python compute the same numbers up to float rounding;
* ``weights.bin``: the weights of both graphs, each stored once (the embedding table, shared by the
  encoder, the decoder and the output layer, would otherwise be stored three times); the graphs
  point into it as ONNX "external data", which ONNX Runtime reads in Python and in the browser;
* ``tokenizer.json`` and ``config.json`` (special ids, length limits, example sentences, the words
  of the input hint, and what the model is: its training run and the commands that remake it).

The rest decodes with ONNX Runtime sessions exactly as the page does, one sentence at a time:
:func:`onnx_translate` and :func:`onnx_greedy` (each step runs the decoder over the prefix, no
key/value cache), :func:`onnx_beam` for the page's beam search, and :func:`prepare_input` makes of
typed text what the page makes of it. Needs ``pip install "transformer-lib[export]"``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lib import Transformer
from transformer_lib.data.tokenizer import META, BPETokenizer
from transformer_lib.eval_mode import eval_mode
from transformer_lib.files import atomic_write
from transformer_lib.nn.masks import padding_mask
from transformer_tasks.translation.profiles import DecodeConfig

from .attention_maps import AttentionRecorder, record_attention

__all__ = [
    "build_browser_model",
    "export_graphs",
    "hint_words",
    "prepare_input",
    "session_options",
    "pytorch_maps",
    "load_sessions",
    "onnx_beam",
    "onnx_beam_hypotheses",
    "onnx_greedy",
    "onnx_translate",
    "source_ids",
    "token_label",
]

WEIGHTS = "weights.bin"
GRAPHS = ("encoder", "decoder")
SITE_FILES = ("encoder.onnx", "decoder.onnx", WEIGHTS, "tokenizer.json", "config.json")
ENCODER_INPUTS, ENCODER_OUTPUTS = ["src"], ["memory", "self_attention"]
DECODER_INPUTS = ["tgt", "memory", "src"]
DECODER_OUTPUTS = ["logits", "self_attention", "cross_attention"]
MAX_CHARS = 200  # the boxes translate this many characters: each step re-reads the whole prefix
HINT_WORDS = 100  # how many of each language's most frequent caption words the input hint knows


def _stacked(maps: AttentionRecorder, names: list[str]) -> Tensor:
    """The recorded maps of ``names``, one per layer.

    Shape: L maps ``(B, H, T, S)`` -> ``(B, L, H, T, S)``.
    """
    return torch.stack([maps[name] for name in names], dim=1)


def _attention_names(model: Transformer) -> dict[str, list[str]]:
    """The attention modules of each kind, one per layer: ``encoder``, ``decoder``, ``cross``."""
    layers = [f"decoder.layers.{i}" for i in range(len(model.decoder.layers))]
    return {
        "encoder": [f"encoder.layers.{i}.self_attn" for i in range(len(model.encoder.layers))],
        "decoder": [f"{layer}.self_attn" for layer in layers],
        "cross": [f"{layer}.cross_attn" for layer in layers],
    }


class _EncoderWithAttention(nn.Module):
    """Shape: src ``(B, S)`` -> memory ``(B, S, d)``, self_attention ``(B, L, H, S, S)``."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.names = _attention_names(model)

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        with record_attention(self.model) as maps:  # the hooks run while torch.export traces
            memory = self.model.encode(src)  # the padding mask from config.pad_id
        return memory, _stacked(maps, self.names["encoder"])


class _DecoderWithAttention(_EncoderWithAttention):
    """The decoder over the whole prefix (no cache), with every layer's and head's attention.

    Shape: tgt ``(B, T)``, memory ``(B, S, d)``, src ``(B, S)`` -> logits ``(B, T, V)``,
    self_attention ``(B, L, H, T, T)``, cross_attention ``(B, L, H, T, S)``.
    """

    def forward(self, tgt: Tensor, memory: Tensor, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # type: ignore[override]
        with record_attention(self.model) as maps:
            logits = self.model.decode(tgt, memory, padding_mask(src, self.model.config.pad_id))
        return logits, _stacked(maps, self.names["decoder"]), _stacked(maps, self.names["cross"])


def _export(
    module: nn.Module,
    args: tuple[Tensor, ...],
    names: tuple[list[str], list[str]],
    shapes: tuple[dict[int, Any], ...],
    path: Path,
) -> None:
    """One graph, weights inside, opset 18, through PyTorch's ``torch.export``-based exporter."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on its own internals
        program = torch.onnx.export(
            module.eval(),
            args,
            dynamo=True,
            dynamic_shapes=shapes,
            input_names=names[0],
            output_names=names[1],
            opset_version=18,
            verbose=False,
        )
    program.save(str(path), external_data=False)


def export_graphs(model: Transformer, folder: Path) -> None:
    """``encoder.onnx`` and ``decoder.onnx``, float32, with the attention outputs.

    The batch and both lengths are dynamic (lengths up to ``config.max_len``, the positional
    table's).
    """
    model = copy.deepcopy(model).float().cpu()  # the caller's model untouched
    dims = {
        name: torch.export.Dim(name, max=model.config.max_len) for name in ("batch", "src", "tgt")
    }
    source, target = {0: dims["batch"], 1: dims["src"]}, {0: dims["batch"], 1: dims["tgt"]}
    src = torch.full((2, 3), model.config.pad_id + 4, dtype=torch.long)  # a tracing example
    with eval_mode(model):
        memory = model.encode(src)
        encoder = _EncoderWithAttention(model)
        _export(
            encoder, (src,), (ENCODER_INPUTS, ENCODER_OUTPUTS), (source,), folder / "encoder.onnx"
        )
        decoder = _DecoderWithAttention(model)
        args = (src[:, :2], memory, src)  # tgt shorter than src: the two lengths stay apart
        shapes = (target, source, source)
        _export(decoder, args, (DECODER_INPUTS, DECODER_OUTPUTS), shapes, folder / "decoder.onnx")


def _quantise(path: Path, keep: tuple[str, ...] = ("positional",)) -> None:
    """Store each weight matrix as int8 with one scale, in place: ``W = scale * W_int8``.

    Every float initializer with two or more dimensions and 1,024 elements or more (but those whose
    name contains a word of ``keep``: the positional table) becomes an int8 tensor, its scale
    ``max |W| / 127`` and a ``DequantizeLinear`` node that turns it back into float32 where the
    graph reads it. Weight-only: the matrix products still multiply float32 by float32. ONNX Runtime
    computes the dequantised weights once, when it loads the graph (:func:`load_sessions` asks it
    to; the page too), so the files take int8's bytes and the arithmetic is float32's, in the page
    and in Python alike. (Dynamic quantisation, which also turns each product's input into int8,
    lets the page and Python part: a value that lies on a rounding boundary in one runtime's float
    arithmetic and not in the other's becomes a different integer.)
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    nodes = []
    for tensor in list(graph.initializer):
        weight = numpy_helper.to_array(tensor)
        small = weight.ndim < 2 or weight.size < 1024 or weight.dtype != np.float32
        if small or any(word in tensor.name for word in keep):
            continue
        scale = np.float32(np.abs(weight).max() / 127) or np.float32(1)
        stored = np.clip(np.round(weight / scale), -127, 127).astype(np.int8)
        names = [f"{tensor.name}_int8", f"{tensor.name}_scale", f"{tensor.name}_zero_point"]
        graph.initializer.remove(tensor)
        for name, value in zip(names, (stored, np.array(scale), np.array(0, np.int8)), strict=True):
            graph.initializer.append(numpy_helper.from_array(value, name))
        nodes.append(helper.make_node("DequantizeLinear", names, [tensor.name]))  # W, as before
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + rest)  # the weights first: the other nodes read them by their names
    onnx.save(model, str(path))


def _share_weights(folder: Path, min_bytes: int = 1024) -> None:
    """Move each initializer of ``min_bytes`` or more into ``weights.bin``, each distinct once.

    Drops each node's metadata too: the exporter's notes on where it came from.
    """
    import onnx
    from onnx.external_data_helper import set_external_data

    blobs: dict[str, tuple[int, bytes]] = {}  # sha256 -> (offset, bytes)
    models = {name: onnx.load(str(folder / f"{name}.onnx")) for name in GRAPHS}
    for model in models.values():
        for (
            node
        ) in model.graph.node:  # the exporter's notes (stack traces); some versions keep them
            del node.metadata_props[:]
            node.doc_string = ""
        for tensor in model.graph.initializer:
            data = tensor.raw_data
            if len(data) < min_bytes:
                continue
            end = sum(len(b) for _, b in blobs.values())  # where a new tensor would go
            offset = blobs.setdefault(hashlib.sha256(data).hexdigest(), (end, data))[0]
            set_external_data(tensor, WEIGHTS, offset=offset, length=len(data))
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
    weights = b"".join(b for _, b in blobs.values())
    atomic_write(folder / WEIGHTS, lambda tmp: tmp.write_bytes(weights))
    for name, model in models.items():
        data = model.SerializeToString()
        atomic_write(folder / f"{name}.onnx", lambda tmp, data=data: tmp.write_bytes(data))


def build_browser_model(
    model: Transformer,
    tokenizer: BPETokenizer,
    folder: str | os.PathLike[str],
    settings: dict[str, Any],
    quantise: bool = True,
    graphs: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """Write the files of ``SITE_FILES`` into ``folder``; returns each file's size in bytes.

    ``settings``: what ``config.json`` carries besides the special ids and ``max_len``, e.g.
    ``max_len_a``, ``max_len_b``, ``beam_size``, ``length_penalty``, ``examples`` (German
    sentences the page offers to click), ``hint_words`` and ``trained``. ``quantise=False`` keeps
    float32 weights (to compare with). ``graphs``: a folder where :func:`export_graphs` wrote this
    model's two graphs, so that the int8 and float32 files come from one export (the slow part);
    ``None`` exports them now.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib.Transformer, got {type(model).__name__}")
    if not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a BPETokenizer, got {type(tokenizer).__name__}")
    folder = Path(folder)
    parent = folder.parent if folder.parent.is_dir() else None
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        work = Path(tmp)
        if graphs is None:
            export_graphs(model, work)
        else:
            for name in GRAPHS:
                shutil.copyfile(Path(graphs) / f"{name}.onnx", work / f"{name}.onnx")
        (work / "tokenizer.json").write_text(tokenizer.to_json_str(), encoding="utf-8")
        for name in GRAPHS if quantise else ():
            _quantise(work / f"{name}.onnx")
        _share_weights(work)  # the tied table, one int8 tensor in both graphs, stored once
        ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
        limits = {
            "unk_id": tokenizer.unk_id,
            "max_len": model.config.max_len,
            "max_chars": MAX_CHARS,
        }
        text = json.dumps(ids | limits | settings, indent=1, ensure_ascii=False) + "\n"
        (work / "config.json").write_text(text, encoding="utf-8")
        folder.mkdir(parents=True, exist_ok=True)
        for name in SITE_FILES:
            data = (work / name).read_bytes()
            atomic_write(folder / name, lambda out, data=data: out.write_bytes(data))
    return {name: (folder / name).stat().st_size for name in SITE_FILES}


def session_options() -> Any:
    """ONNX Runtime's options for the graphs: one thread, int8 weights dequantised at load time."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # like the page; and the same sums in the same order every run
    # fold the DequantizeLinear of each stored weight into a float32 constant when the graph loads
    # (ONNX Runtime keeps them otherwise, and would dequantise every weight at every run); the page
    # asks the same
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    return options


def load_sessions(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """ONNX Runtime sessions of the two graphs in ``folder``, with :func:`session_options`."""
    import onnxruntime as ort

    options = session_options()
    return {
        name: ort.InferenceSession(str(Path(folder) / f"{name}.onnx"), options) for name in GRAPHS
    }


def source_ids(tokenizer: BPETokenizer, sentence: str, limit: int) -> list[int]:
    """The ids the page feeds the encoder: at most ``limit - 1`` tokens, ``[<unk>]`` for none."""
    return tokenizer.encode(sentence)[: limit - 1] or [tokenizer.unk_id]


def token_label(token: str) -> str:
    """A token as the maps label it: the word-start marker dropped (``"▁Hunde"`` -> ``"Hunde"``);
    a lone marker (a space before an unknown character) shows as ``"␣"``.
    """
    return token.removeprefix(META) or "␣"


def onnx_greedy(
    sessions: dict[str, Any],
    src: np.ndarray,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
) -> np.ndarray:
    """Greedy decoding, the decoder run over the prefix at each step.

    As :func:`~transformer_lib.decoding.greedy_decode`: ``<pad>`` is never chosen, a finished row is
    padded. Shape: ``(B, S)`` -> ``(B, <= max_len)``.
    """
    memory = sessions["encoder"].run(["memory"], {"src": src})[0]
    tokens = np.full((src.shape[0], 1), bos_id, dtype=np.int64)
    done = np.zeros(src.shape[0], dtype=bool)
    for _ in range(max_len - 1):
        feed = {"tgt": tokens, "memory": memory, "src": src}
        logits = sessions["decoder"].run(["logits"], feed)[0][:, -1]
        logits[:, pad_id] = -np.inf
        best = np.where(done, pad_id, logits.argmax(-1))
        tokens = np.concatenate([tokens, best[:, None]], axis=1)
        done |= best == eos_id
        if done.all():
            break
    return tokens


def onnx_translate(
    sessions: dict[str, Any],
    tokenizer: BPETokenizer,
    sentences: Sequence[str],
    max_len_a: float,
    max_len_b: int,
    limit: int,
) -> list[list[int]]:
    """Greedy token ids (``<bos>`` first, ``<eos>`` last unless cut) of each German sentence,
    decoded alone, as the page decodes it.
    """
    out = []
    for sentence in sentences:
        ids = source_ids(tokenizer, sentence, limit)
        max_len = DecodeConfig(max_len_a=max_len_a, max_len_b=max_len_b).max_length(len(ids), limit)
        src = np.array([ids], dtype=np.int64)
        row = onnx_greedy(
            sessions, src, max_len, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
        )
        out.append(row[0].tolist())
    return out


def onnx_beam_hypotheses(
    sessions: dict[str, Any],
    src: np.ndarray,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float,
    pad_id: int = 0,
) -> list[tuple[float, list[int]]]:
    """Every hypothesis the page's beam search finishes, ``(score, ids)`` in the order found.

    :func:`~transformer_lib.decoding.beam_search`'s rules: each step extends every live beam by
    every token and examines the ``2 * beam_size`` best extensions in order; an ``eos`` among the
    first ``beam_size`` finishes a hypothesis, scored ``log P / ((5 + len) / 6) ** length_penalty``;
    the first ``beam_size`` others live on. Scores are summed in float64, as in JavaScript.
    Shape: src ``(1, S)``; each ids list starts with ``<bos>``.
    """
    memory = sessions["encoder"].run(["memory"], {"src": src})[0]  # (1, S, d)
    beams, scores, finished = [[bos_id]], np.zeros(1), []
    for step in range(1, max_len):
        n = len(beams)
        tgt = np.array(beams, dtype=np.int64)
        feed = {"tgt": tgt, "memory": memory.repeat(n, 0), "src": src.repeat(n, 0)}
        logits = sessions["decoder"].run(["logits"], feed)[0][:, -1].astype(np.float64)  # (n, V)
        logits[:, pad_id] = -np.inf
        top = logits.max(axis=1, keepdims=True)
        # log-softmax summed in order (cumsum), as the page's loop sums it
        log_probs = logits - top - np.log(np.exp(logits - top).cumsum(axis=1)[:, -1:])
        candidates = (scores[:, None] + log_probs).ravel()  # (n * V,)
        # the best 2k, ties to the lower index
        order = np.lexsort((np.arange(candidates.size), -candidates))[: 2 * beam_size].tolist()
        live = []
        for rank, index in enumerate(order):
            beam, token = divmod(index, logits.shape[1])
            if token == eos_id and rank < beam_size and len(finished) < beam_size:
                score = candidates[index] / ((5 + step) / 6) ** length_penalty
                finished.append((float(score), beams[beam] + [eos_id]))
            elif token != eos_id and len(live) < beam_size:
                live.append((beams[beam] + [token], candidates[index]))
        if len(finished) >= beam_size:
            return finished
        beams, scores = [b for b, _ in live], np.array([s for _, s in live])
    # cut at max_len: the live beams compete as they are
    for beam, score in zip(beams, scores, strict=True):
        finished.append((float(score / ((5 + len(beam) - 1) / 6) ** length_penalty), beam))
    return finished


def onnx_beam(
    sessions: dict[str, Any],
    src: np.ndarray,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float,
    pad_id: int = 0,
) -> list[int]:
    """Beam search for one sentence as the page runs it: the best of :func:`onnx_beam_hypotheses`
    (the first of equal scores). Shape: src ``(1, S)`` -> ids, ``<bos>`` first.
    """
    args = (beam_size, max_len, bos_id, eos_id, length_penalty, pad_id)
    hypotheses = onnx_beam_hypotheses(sessions, src, *args)
    return max(hypotheses, key=lambda hypothesis: hypothesis[0])[1]


WORD = re.compile(r"[^\W\d_]+")  # runs of letters; JavaScript's /\p{L}+/gu in the page


def hint_words(pairs: Iterable[tuple[str, str]], count: int = HINT_WORDS) -> dict[str, list[str]]:
    """The words the input hint counts: each language's ``count`` most frequent (lower-case) words
    of the ``(german, english)`` pairs, less those on both lists (``"in"``, ``"an"``...).
    """
    counts: dict[str, Counter[str]] = {"de": Counter(), "en": Counter()}
    for german, english in pairs:
        counts["de"].update(WORD.findall(german.lower()))
        counts["en"].update(WORD.findall(english.lower()))
    top = {lang: [w for w, _ in counter.most_common(count)] for lang, counter in counts.items()}
    both = set(top["de"]) & set(top["en"])
    return {lang: [w for w in words if w not in both] for lang, words in top.items()}


def prepare_input(
    tokenizer: BPETokenizer, typed: str, config: dict[str, Any]
) -> tuple[str, list[int], list[str]]:
    r"""What the page's boxes make of typed text: ``(text, ids, hints)``.

    ``text``: ``typed`` stripped and cut to ``config["max_chars"]`` characters; ``ids``: its tokens;
    ``hints``: the box's notes on it, by name: ``"empty"``; ``"cut"``; ``"unknown"`` when it has no
    letter at all (digits, signs or emoji only, ``"12345"`` say; a letter as ``str.isalpha`` and
    the page's ``\p{L}`` have it), or when at least half its tokens (a lone word-start marker not
    counted) are ``<unk>``; ``"english"`` when more of its words are on the English list of
    ``config["hint_words"]`` than on the German one. The last is a rule of thumb, and the box says
    so (``results/browser-agreement.json`` holds how often it fires on the test set's German
    sentences and on their English references).
    """
    stripped = typed.strip()
    text = stripped[: config["max_chars"]]
    if not text:
        return text, [], ["empty"]
    hints = ["cut"] if len(stripped) > config["max_chars"] else []
    ids = tokenizer.encode(text)
    counted = [i for i in ids if tokenizer.tokenizer.id_to_token(i) != META]
    unknown = bool(counted) and 2 * sum(i == config["unk_id"] for i in counted) >= len(counted)
    if unknown or not any(ch.isalpha() for ch in text):
        hints.append("unknown")
    words = WORD.findall(text.lower())
    votes = {
        lang: sum(w in set(config["hint_words"][lang]) for w in words) for lang in ("de", "en")
    }
    if votes["en"] > votes["de"]:
        hints.append("english")
    return text, ids, hints


def pytorch_maps(model: Transformer, src: Sequence[int], tgt: Sequence[int]) -> dict[str, Tensor]:
    """PyTorch's attention maps of one pair, as the graphs return them (to compare with).

    Shape: ``{"encoder": (L, H, S, S), "decoder": (L, H, T, T), "cross": (L, H, T, S)}``.
    """
    with eval_mode(model), torch.no_grad(), record_attention(model) as maps:
        model(torch.tensor([list(src)]), torch.tensor([list(tgt)]))
    return {
        kind: _stacked(maps, names)[0].float() for kind, names in _attention_names(model).items()
    }
