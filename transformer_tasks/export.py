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


class _EncoderGraph(nn.Module):
    """Shape: src ``(B, S)`` int64 ids -> memory ``(B, S, d_model)``; the padding mask is built
    inside, from ``config.pad_id``.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> Tensor:
        return self.model.encode(src)


class _DecoderGraph(nn.Module):
    """The decoder over the whole prefix, no cache. Shape: tgt ``(B, T)``, memory ``(B, S,
    d_model)``, src ``(B, S)`` -> logits ``(B, T, V)``; the masks are built inside.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, tgt: Tensor, memory: Tensor, src: Tensor) -> Tensor:
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
    folder = Path(folder)
    model = copy.deepcopy(model).float().cpu()  # the caller's model stays as it was
    # The bounds only guide the tracing: the graphs take any batch, and lengths up to the positional
    # table.
    batch = torch.export.Dim("batch", max=model.config.max_len)
    src_len = torch.export.Dim("src_len", max=model.config.max_len)
    tgt_len = torch.export.Dim("tgt_len", max=model.config.max_len)
    src = torch.full((2, 3), model.config.pad_id + 4, dtype=torch.long)  # a tracing example
    with eval_mode(model):
        memory = model.encode(src)
        encoder = _export(
            folder / "encoder.onnx",
            _EncoderGraph(model),
            args=(src,),
            inputs=["src"],
            outputs=["memory"],
            shapes=({0: batch, 1: src_len},),
        )
        decoder = _export(
            folder / "decoder.onnx",
            _DecoderGraph(model),
            args=(src[:, :2], memory, src),  # a target shorter than the source
            inputs=["tgt", "memory", "src"],
            outputs=["logits"],
            shapes=({0: batch, 1: tgt_len}, {0: batch, 1: src_len}, {0: batch, 1: src_len}),
        )
    text = tokenizer.to_json_str()  # HF ``tokenizers``' own format, which its JavaScript port reads
    tokenizer_path = atomic_write(
        folder / "tokenizer.json", lambda tmp: tmp.write_text(text, encoding="utf-8")
    )
    return {"encoder": encoder, "decoder": decoder, "tokenizer": tokenizer_path}


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
