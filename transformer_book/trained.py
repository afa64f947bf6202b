"""The trained translation model that chapters 3-5 and 11 show, read from the package's own files.

The files in ``transformer_book/translator/`` (made by ``scripts/build_browser_model.py`` from a
checkpoint of chapter 11's recipe) are those the book's web pages run with ONNX Runtime Web; here
ONNX Runtime runs them in Python, so a chapter's numbers are the page's::

    from transformer_book.trained import load_trained

    trained = load_trained()
    trained.translate("Zwei Hunde spielen im Gras.")      # greedy, as the page translates
    maps = trained.attention("Zwei Hunde spielen im Gras.", "Two dogs play in the grass.")
    maps.cross[-1].mean(dim=0)                            # last layer, mean of the heads: (T, S)

Needs ``onnxruntime`` (in the ``book`` extra).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lib.data.tokenizer import BPETokenizer

from .browser_model import load_sessions, onnx_translate, prepare_input, source_ids, token_label

__all__ = ["FILES", "AttentionMaps", "TrainedModel", "load_trained"]

FILES = Path(__file__).resolve().parent / "translator"


@dataclass(frozen=True)
class AttentionMaps:
    """Every layer's and head's attention of one sentence pair.

    Attributes:
        source: the German tokens, word-start marker removed (``["Zwei", "Hunde", ...]``).
        target: the decoder's inputs, ``["<bos>", "Two", ...]``: row ``t`` of ``decoder`` and
            ``cross`` is the query of ``target[t]``, the model predicting the next English token.
        encoder: encoder self-attention, ``(layers, heads, S, S)``.
        decoder: masked decoder self-attention, ``(layers, heads, T, T)``, upper triangle 0.
        cross: cross-attention, ``(layers, heads, T, S)``: target rows, source columns.
    """

    source: list[str]
    target: list[str]
    encoder: Tensor
    decoder: Tensor
    cross: Tensor


class TrainedModel:
    """ONNX Runtime sessions on the model's files, with the page's rules for input and decoding.

    Attributes:
        config: ``config.json`` (special ids, length limits, decoding settings, ``trained``).
        info: what the model is: ``config["trained"]`` (profile, seed, steps, BLEU, commands).
        tokenizer: the model's :class:`~transformer_lib.data.tokenizer.BPETokenizer`.
    """

    def __init__(self, folder: str | os.PathLike[str] = FILES) -> None:
        folder = Path(folder)
        missing = [
            name for name in ("config.json", "tokenizer.json") if not (folder / name).is_file()
        ]
        if missing:
            raise FileNotFoundError(
                f"{folder} lacks {missing}: make them with scripts/build_browser_model.py"
            )
        self.folder = folder
        self.config: dict[str, Any] = json.loads(
            (folder / "config.json").read_text(encoding="utf-8")
        )
        self.info: dict[str, Any] = self.config.get("trained", {})
        text = (folder / "tokenizer.json").read_text(encoding="utf-8")
        self.tokenizer = BPETokenizer.from_json_str(text)
        try:
            self.sessions = load_sessions(folder)
        except ImportError as error:
            raise ImportError(
                f"{error}: the trained model runs on ONNX Runtime: pip install onnxruntime"
            ) from None

    def source_ids(self, german: str) -> list[int]:
        """The encoder's ids for ``german``, as the page makes them: the text stripped and cut to
        ``max_chars`` characters, its tokens cut to ``max_len - 1``.
        """
        text = prepare_input(self.tokenizer, _text(german, "german"), self.config)[0]
        return source_ids(self.tokenizer, text, self.config["max_len"])

    def translate_ids(self, german: str) -> list[int]:
        """Greedy ids of the English translation, ``<bos>`` first, ``<eos>`` last (unless cut)."""
        c = self.config
        text = prepare_input(self.tokenizer, _text(german, "german"), c)[0]
        cut = (c["max_len_a"], c["max_len_b"], c["max_len"])
        return onnx_translate(self.sessions, self.tokenizer, [text], *cut)[0]

    def translate(self, german: str) -> str:
        """The greedy translation of ``german``, exactly as the page writes it."""
        return self.tokenizer.decode(self.translate_ids(german))

    def labels(self, ids: list[int]) -> list[str]:
        """The maps' labels of ``ids``: tokens without the word-start marker (``"<bos>"`` stays)."""
        return [token_label(self.tokenizer.tokenizer.id_to_token(i)) for i in ids]

    def attention(self, german: str, english: str | None = None) -> AttentionMaps:
        """Every layer's and head's attention of the pair of sentences.

        ``english=None``: the model's own greedy translation. The decoder reads ``<bos>`` and the
        English tokens (at most ``max_len`` in all), once.
        """
        src_ids = self.source_ids(german)
        if english is None:
            tgt_ids = [i for i in self.translate_ids(german) if i != self.config["eos_id"]]
        else:
            english_ids = self.tokenizer.encode(_text(english, "english", empty=True).strip())
            tgt_ids = [self.config["bos_id"], *english_ids][: self.config["max_len"]]
        return self.maps(src_ids, tgt_ids)

    def maps(self, src_ids: list[int], tgt_ids: list[int]) -> AttentionMaps:
        """Every layer's and head's attention of given ids, as the page computes it.

        The encoder reads ``src_ids``, the decoder ``tgt_ids`` (``<bos>`` first), once.
        """
        src = np.array([src_ids], dtype=np.int64)
        tgt = np.array([tgt_ids], dtype=np.int64)
        memory, encoder = self.sessions["encoder"].run(["memory", "self_attention"], {"src": src})
        feed = {"tgt": tgt, "memory": memory, "src": src}
        decoder, cross = self.sessions["decoder"].run(["self_attention", "cross_attention"], feed)
        tensors = (
            torch.from_numpy(m[0]) for m in (encoder, decoder, cross)
        )  # batch of one dropped
        return AttentionMaps(self.labels(src_ids), self.labels(tgt_ids), *tensors)

    def __repr__(self) -> str:
        steps, bleu = self.info.get("steps"), self.info.get("bleu")
        return f"TrainedModel({str(self.folder)!r}, steps={steps}, bleu={bleu})"


def _text(value: Any, name: str, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not empty and not value.strip():
        raise ValueError(f"{name} must hold some text, got {value!r}")
    return value


@functools.cache
def load_trained(folder: str | os.PathLike[str] | None = None) -> TrainedModel:
    """The trained model (cached: one per folder); ``folder=None``: the files of the package."""
    return TrainedModel(FILES if folder is None else folder)
