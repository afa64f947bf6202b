"""The model behind chapter 11's "Translate in your browser" box: exported, made small, and checked.

:func:`build_browser_model` turns a ``train-translation --save`` checkpoint into the files the page
loads, in one folder:

* ``encoder.onnx`` and ``decoder.onnx``: the graphs, their weights quantised to int8 by ONNX
  Runtime's dynamic quantisation (动态量化); the decoder also returns the last layer's
  cross-attention, averaged over the heads, for the page's attention map;
* ``weights.bin``: the weights of both graphs, each stored once (the embedding table, shared by the
  encoder and the decoder, would otherwise be stored twice); the graphs point into it as ONNX
  "external data", which ONNX Runtime reads in Python and in the browser alike;
* ``tokenizer.json`` and ``config.json`` (special ids, length limits, example sentences).

:func:`onnx_translate` decodes with ONNX Runtime sessions exactly as the page does (greedy, each
step running the decoder over the prefix, no key/value cache), to score the files with BLEU and to
check the page against; :func:`onnx_beam` does the same for the page's beam search. Needs
``pip install "transformer-lib[export]"``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lib import Transformer
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.eval_mode import eval_mode
from transformer_lib.files import atomic_write
from transformer_lib.nn.masks import padding_mask
from transformer_tasks.export import export_onnx

from .attention_maps import record_attention

__all__ = ["build_browser_model", "load_sessions", "onnx_beam", "onnx_greedy", "onnx_translate"]

WEIGHTS = "weights.bin"
GRAPHS = ("encoder", "decoder")
SITE_FILES = ("encoder.onnx", "decoder.onnx", WEIGHTS, "tokenizer.json", "config.json")


class _DecoderWithAttention(nn.Module):
    """Shape: tgt ``(B, T)``, memory ``(B, S, d)``, src ``(B, S)`` -> logits ``(B, T, V)``,
    attention ``(B, T, S)``.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.last = f"decoder.layers.{len(model.decoder.layers) - 1}.cross_attn"

    def forward(self, tgt: Tensor, memory: Tensor, src: Tensor) -> tuple[Tensor, Tensor]:
        with record_attention(self.model) as maps:  # the hooks run while torch.export traces
            logits = self.model.decode(tgt, memory, padding_mask(src, self.model.config.pad_id))
        return logits, maps[self.last].mean(dim=1)  # (B, H, T, S) -> (B, T, S)


def _export_decoder(model: Transformer, path: Path) -> None:
    """``decoder.onnx`` with the attention output (the library's export has logits only)."""
    length = {
        n: torch.export.Dim(n, max=model.config.max_len) for n in ("batch", "src_len", "tgt_len")
    }
    src = torch.full((2, 3), model.config.pad_id + 4, dtype=torch.long)
    batch_src, batch_tgt = (
        {0: length["batch"], 1: length["src_len"]},
        {0: length["batch"], 1: length["tgt_len"]},
    )
    with eval_mode(model), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on its own internals
        memory = model.encode(src)
        program = torch.onnx.export(
            _DecoderWithAttention(model).eval(),
            (src[:, :2], memory, src),
            dynamo=True,
            dynamic_shapes=(batch_tgt, batch_src, batch_src),
            opset_version=18,
            input_names=["tgt", "memory", "src"],
            output_names=["logits", "attention"],
            verbose=False,
        )
    program.save(str(path), external_data=False)


def _quantise(folder: Path) -> None:
    """int8 weights for every matrix product and the embedding lookups, in place (scales per
    tensor).
    """
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    for name in GRAPHS:
        path = folder / f"{name}.onnx"
        # shape inference, folded constants
        quant_pre_process(str(path), str(path), skip_symbolic_shape=True)
        quantize_dynamic(
            path, path, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"]
        )


def _tie_embedding(folder: Path) -> None:
    """Let the embedding lookups of both graphs read the output layer's int8 matrix, transposed.

    The model ties its embedding table to the output layer, but the exporter stores the output
    layer's matrix transposed, and the quantiser then keeps two int8 copies of the table (2 MB each
    here):
    the output layer's ``(d_model, V)`` and the lookup's ``(V, d_model)``. Here the lookups
    (``Gather`` then ``DequantizeLinear``) take ``Transpose`` of the first, with its scale and zero
    point, and the second goes.
    """
    import onnx

    models = {name: onnx.load(str(folder / f"{name}.onnx")) for name in GRAPHS}
    decoder = models["decoder"].graph
    inits = {t.name: t for t in decoder.initializer}
    logits = next(
        n for n in decoder.node if n.op_type == "MatMulInteger" and n.output[0].startswith("logits")
    )
    # the quantiser's names: X_quantized, X_scale, X_zero_point
    base = logits.input[1].removesuffix("_quantized")
    tied = [inits[f"{base}{suffix}"] for suffix in ("_quantized", "_scale", "_zero_point")]
    table = tied[0].name + "_transposed"
    for name, model in models.items():
        graph = model.graph
        lookups = [
            n
            for n in graph.node
            if n.op_type == "Gather" and n.input[0].endswith("weight_quantized")
        ]
        looked_up = {output for node in lookups for output in node.output}
        for node in lookups:
            node.input[0] = table
        for node in graph.node:
            if node.op_type == "DequantizeLinear" and node.input[0] in looked_up:
                node.input[1], node.input[2] = tied[1].name, tied[2].name
        present = {t.name for t in graph.initializer}
        graph.initializer.extend(copy.deepcopy(t) for t in tied if t.name not in present)
        graph.node.insert(
            0, onnx.helper.make_node("Transpose", [tied[0].name], [table], perm=[1, 0])
        )
        used = {used_name for node in graph.node for used_name in node.input}
        for tensor in [t for t in graph.initializer if t.name not in used]:
            graph.initializer.remove(tensor)  # the lookup's own int8 table, scale and zero point
        onnx.save(model, str(folder / f"{name}.onnx"))


def _share_weights(folder: Path, min_bytes: int = 1024) -> None:
    """Move every initializer of ``min_bytes`` or more into ``weights.bin``, each distinct tensor
    once.
    """
    import onnx
    from onnx.external_data_helper import set_external_data

    blobs: dict[str, tuple[int, bytes]] = {}  # sha256 -> (offset, bytes)
    models = {name: onnx.load(str(folder / f"{name}.onnx")) for name in GRAPHS}
    for model in models.values():
        for tensor in model.graph.initializer:
            data = tensor.raw_data
            if len(data) < min_bytes:
                continue
            end = sum(len(b) for _, b in blobs.values())  # where a new tensor would go
            offset = blobs.setdefault(hashlib.sha256(data).hexdigest(), (end, data))[0]
            set_external_data(tensor, WEIGHTS, offset=offset, length=len(data))
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
    atomic_write(
        folder / WEIGHTS, lambda tmp: tmp.write_bytes(b"".join(b for _, b in blobs.values()))
    )
    for name, model in models.items():
        atomic_write(
            folder / f"{name}.onnx", lambda tmp, m=model: tmp.write_bytes(m.SerializeToString())
        )


def build_browser_model(
    model: Transformer,
    tokenizer: BPETokenizer,
    folder: str | os.PathLike[str],
    settings: dict[str, Any],
    quantise: bool = True,
) -> dict[str, int]:
    """Write the files of ``SITE_FILES`` into ``folder``; returns each file's size in bytes.

    ``settings``: what ``config.json`` carries besides the special ids, e.g. ``max_len_a``,
    ``max_len_b`` and ``examples`` (German sentences the page offers to click). ``quantise=False``
    keeps float32 weights (to compare with).
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib.Transformer, got {type(model).__name__}")
    folder = Path(folder)
    with tempfile.TemporaryDirectory(dir=folder.parent if folder.parent.is_dir() else None) as tmp:
        work = Path(tmp)
        # encoder.onnx and tokenizer.json as the library writes them
        export_onnx(model, tokenizer, work)
        # the caller's untouched
        _export_decoder(copy.deepcopy(model).float().cpu(), work / "decoder.onnx")
        if quantise:
            _quantise(work)
        # one table for all three
        if quantise and model.config.tie_embeddings and model.config.share_embeddings:
            _tie_embedding(work)
        _share_weights(work)
        ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
        config = ids | {"unk_id": tokenizer.unk_id, "max_len": model.config.max_len} | settings
        (work / "config.json").write_text(
            json.dumps(config, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        folder.mkdir(parents=True, exist_ok=True)
        for name in SITE_FILES:
            atomic_write(
                folder / name, lambda out, src=work / name: out.write_bytes(src.read_bytes())
            )
    return {name: (folder / name).stat().st_size for name in SITE_FILES}


def load_sessions(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """ONNX Runtime sessions of ``encoder.onnx`` and ``decoder.onnx`` in ``folder`` (one thread
    each).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # like the page; and the same sums in the same order every run
    return {
        name: ort.InferenceSession(str(Path(folder) / f"{name}.onnx"), options) for name in GRAPHS
    }


def onnx_greedy(
    sessions: dict[str, Any],
    src: np.ndarray,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
) -> np.ndarray:
    """Greedy decoding, the decoder run over the prefix at each step. Shape: ``(B, S)`` -> ``(B, <=
    max_len)``.

    As :func:`~transformer_lib.decoding.greedy_decode`: ``<pad>`` is never chosen, a finished row is
    padded.
    """
    memory = sessions["encoder"].run(None, {"src": src})[0]
    tokens = np.full((src.shape[0], 1), bos_id, dtype=np.int64)
    done = np.zeros(src.shape[0], dtype=bool)
    for _ in range(max_len - 1):
        logits = sessions["decoder"].run(["logits"], {"tgt": tokens, "memory": memory, "src": src})[
            0
        ][:, -1]
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
    """Greedy token ids (``<bos>`` first) for each German sentence, decoded alone as the page
    decodes it.

    Sentences of one token length share a batch (no padding, so each gets what it gets alone).
    """
    ids = [
        row[: limit - 1] or [tokenizer.unk_id] for row in tokenizer.encode_batch(list(sentences))
    ]
    out: list[list[int]] = [[] for _ in ids]
    for length in sorted({len(row) for row in ids}):
        rows = [i for i, row in enumerate(ids) if len(row) == length]
        for start in range(0, len(rows), 64):
            chunk = rows[start : start + 64]
            src = np.array([ids[i] for i in chunk], dtype=np.int64)
            max_len = min(int(max_len_a * length + max_len_b), limit)
            hyp = onnx_greedy(
                sessions, src, max_len, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
            )
            for i, row in zip(chunk, hyp.tolist(), strict=True):
                out[i] = row[: row.index(tokenizer.eos_id) + 1] if tokenizer.eos_id in row else row
    return out


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
    """Beam search for one sentence as the page runs it:
    :func:`~transformer_lib.decoding.beam_search`'s rules.

    Each step extends every live beam by every token and examines the ``2 * beam_size`` best
    extensions in
    order: an ``eos`` among the first ``beam_size`` finishes a hypothesis, scored ``log P / ((5 +
    len) / 6) ** length_penalty``; the first ``beam_size`` others live on. Scores are summed in
    float64, as in JavaScript.
    Shape: src ``(1, S)`` -> the best hypothesis's ids, ``<bos>`` first.
    """
    memory = sessions["encoder"].run(None, {"src": src})[0]  # (1, S, d)
    beams, scores, finished = [[bos_id]], np.zeros(1), []
    for step in range(1, max_len):
        n = len(beams)
        feed = {
            "tgt": np.array(beams, dtype=np.int64),
            "memory": memory.repeat(n, 0),
            "src": src.repeat(n, 0),
        }
        logits = sessions["decoder"].run(["logits"], feed)[0][:, -1].astype(np.float64)  # (n, V)
        logits[:, pad_id] = -np.inf
        top = logits.max(axis=1, keepdims=True)
        # log-softmax summed in order (cumsum), as the page's loop sums it
        log_probs = logits - top - np.log(np.exp(logits - top).cumsum(axis=1)[:, -1:])
        candidates = (scores[:, None] + log_probs).ravel()  # (n * V,)
        # ties: lower index
        order = np.lexsort((np.arange(candidates.size), -candidates))[: 2 * beam_size].tolist()
        live = []
        for rank, index in enumerate(order):
            beam, token = divmod(index, logits.shape[1])
            if token == eos_id and rank < beam_size and len(finished) < beam_size:
                finished.append(
                    (candidates[index] / ((5 + step) / 6) ** length_penalty, beams[beam] + [eos_id])
                )
            elif token != eos_id and len(live) < beam_size:
                live.append((beams[beam] + [token], candidates[index]))
        if len(finished) >= beam_size:
            break
        beams, scores = [b for b, _ in live], np.array([s for _, s in live])
    else:  # cut at max_len: the live beams compete as they are
        finished += [
            (s / ((5 + len(b) - 1) / 6) ** length_penalty, b)
            for b, s in zip(beams, scores, strict=True)
        ]
    return max(finished, key=lambda hypothesis: hypothesis[0])[1]
