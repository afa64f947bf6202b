"""Export a translation model to ONNX, an encoder graph and a decoder graph, with its
``tokenizer.json``.

It uses PyTorch's maintained ``torch.export``-based exporter (``dynamo=True``), not the TorchScript
one: it traces the model's own ``encode`` and ``decode``, masks included, with symbolic batch and
length axes. It imports ``onnx`` and ``onnxscript`` only when it runs:
``pip install "transformer-lib[export]"``.
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.eval_mode import eval_mode
from transformer_lib.files import atomic_write
from transformer_lib.model import Transformer
from transformer_lib.nn.masks import padding_mask


class _Encoder(nn.Module):
    """Shape: src ``(B, S)`` int64 ids -> memory ``(B, S, d_model)``; the padding mask is built
    inside.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> Tensor:
        return self.model.encode(src)  # the padding mask from config.pad_id


class _Decoder(_Encoder):
    """The decoder over the whole prefix, no cache. Shape: tgt ``(B, T)``, memory, src -> logits
    ``(B, T, V)``.
    """

    def forward(self, tgt: Tensor, memory: Tensor, src: Tensor) -> Tensor:  # type: ignore[override]
        # decode builds the target's causal and padding mask itself, as in model(src, tgt)
        return self.model.decode(tgt, memory, padding_mask(src, self.model.config.pad_id))


def export_onnx(
    model: Transformer, tokenizer: BPETokenizer, folder: str | os.PathLike[str]
) -> dict[str, Path]:
    """Write ``encoder.onnx``, ``decoder.onnx`` (float32, weights inside) and ``tokenizer.json``
    into ``folder``.

    ``encoder.onnx``: ``src`` ids ``(B, S)`` -> ``memory`` ``(B, S, d_model)``; ``decoder.onnx``:
    ``tgt`` ``(B, T)``, ``memory``, ``src`` -> ``logits`` ``(B, T, V)``; ``B`` and ``S, T <=
    config.max_len`` are dynamic. Returns ``{"encoder": path, "decoder": path, "tokenizer": path}``.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_lib.Transformer, got {type(model).__name__}")
    if not isinstance(tokenizer, BPETokenizer):
        raise TypeError(f"tokenizer must be a BPETokenizer, got {type(tokenizer).__name__}")
    # caller's untouched
    folder, model, pad_id = Path(folder), copy.deepcopy(model).float().cpu(), model.config.pad_id
    # The bounds only guide the tracing: the graphs take any batch, and lengths up to the positional
    # table.
    batch, src_len, tgt_len = (
        torch.export.Dim(n, max=model.config.max_len) for n in ("batch", "src_len", "tgt_len")
    )
    # a tracing example; tgt differs in length from src
    src = torch.full((2, 3), pad_id + 4, dtype=torch.long)
    with eval_mode(model):
        memory = model.encode(src)
        graphs = {
            "encoder": (_Encoder(model), (src,), ["src"], ["memory"], ({0: batch, 1: src_len},)),
            "decoder": (
                _Decoder(model),
                (src[:, :2], memory, src),
                ["tgt", "memory", "src"],
                ["logits"],
                ({0: batch, 1: tgt_len}, {0: batch, 1: src_len}, {0: batch, 1: src_len}),
            ),
        }
        paths = {name: _export(folder / f"{name}.onnx", *graph) for name, graph in graphs.items()}
    # HF ``tokenizers``' own format, which its JavaScript port reads too
    text = tokenizer.to_json_str()
    paths["tokenizer"] = atomic_write(
        folder / "tokenizer.json", lambda tmp: tmp.write_text(text, encoding="utf-8")
    )
    return paths


def _export(
    path: Path, module: nn.Module, args: tuple, inputs: list[str], outputs: list[str], shapes: tuple
) -> Path:
    # the exporter's notes on its own internals (axis names, deprecations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module.eval(),
            args,
            dynamo=True,
            dynamic_shapes=shapes,
            input_names=inputs,
            output_names=outputs,
            opset_version=18,
            verbose=False,
        )
    # One file with its weights inside, no ``.onnx.data`` beside it: a browser fetches one URL per
    # graph.
    return atomic_write(path, lambda tmp: program.save(tmp, external_data=False), suffix=".onnx")
