r"""Make the trained model's files (chapters 3-5 and 11, the pages' boxes), and score them.

    python scripts/build_browser_model.py --checkpoint runs/translation_cpu.safetensors \
        --train-command "OMP_NUM_THREADS=1 make execute NB=chapters/11_translation.ipynb"

From one checkpoint (a ``train-translation --save`` file), remakes everything: the files of
``transformer_book/translator/`` (package data: ``transformer_book.trained`` reads them in Python,
the site build copies them for the pages) with
:func:`transformer_book.browser_model.build_browser_model` (int8 weights, float32 arithmetic, one
shared weights file, every layer's and head's attention as outputs), and
``results/browser-model.json``, which chapter 11 reads. ``config.json``'s ``"trained"`` entry
says what the model is (its run's profile, seed, steps and BLEU) and records ``--train-command``
and this command, so the files say how to remake them.

It then decodes Multi30k's test_2016_flickr with ONNX Runtime as the page does, one sentence at a
time: greedy and beam search with the int8 files, greedy with the library's float32 export of the
same checkpoint (``export_onnx``: the size before int8 and before the shared table is stored once);
and it compares the attention maps of the example sentences: float32 files with the maps'
outputs against PyTorch's, the int8 files' against those. Minutes on a laptop.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime

from transformer_book.browser_model import (
    build_browser_model,
    hint_words,
    load_sessions,
    onnx_beam,
    onnx_translate,
    pytorch_maps,
    source_ids,
)
from transformer_book.trained import FILES, TrainedModel
from transformer_lib import Transformer
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_tasks import corpus_bleu, export_onnx, load_split
from transformer_tasks.translation import checkpoint_decoding, load_translation_checkpoint
from transformer_tasks.translation.results import write_translation_results

ROOT = Path(__file__).resolve().parents[1]
# Sentences the page offers to click: the book's running example (a training caption), then test
# captions.
EXAMPLES = [
    "Zwei Hunde spielen im Gras.",
    "Ein Kind planscht im Wasser.",
    "Der braune Hund steht auf dem Sandstrand.",
    "Eine Familie spaziert durch einen Park.",
    "Die Frau im blauen Shirt hält ein Baby.",
]
# What the results record of the training run (the checkpoint's own summary has more).
TRAINED_KEYS = (
    "profile",
    "seed",
    "steps",
    "bleu",
    "bleu_beam",
    "beam_size",
    "length_penalty",
    "params",
)


def _score(
    folder: Path,
    tokenizer: BPETokenizer,
    test: list[tuple[str, str]],
    config: dict[str, Any],
    beam: bool,
) -> dict[str, Any]:
    """Greedy (and beam) BLEU of ``folder``'s files, each sentence decoded alone, as the page."""
    sessions = load_sessions(folder)
    sources, references = [de for de, _ in test], [en for _, en in test]
    start = time.perf_counter()
    limits = (config["max_len_a"], config["max_len_b"], config["max_len"])
    greedy = onnx_translate(sessions, tokenizer, sources, *limits)
    seconds = round(time.perf_counter() - start, 1)
    bleu = corpus_bleu(tokenizer.decode_batch(greedy), references).score
    scored = {"bleu": round(bleu, 2), "decode_seconds": seconds}
    if beam:
        start = time.perf_counter()
        hypotheses = []
        for sentence in sources:
            src = np.array([source_ids(tokenizer, sentence, config["max_len"])], dtype=np.int64)
            max_len = min(int(limits[0] * src.shape[1] + limits[1]), limits[2])
            ends = (config["bos_id"], config["eos_id"], config["length_penalty"], config["pad_id"])
            hypotheses.append(onnx_beam(sessions, src, config["beam_size"], max_len, *ends))
        scored["bleu_beam"] = round(
            corpus_bleu(tokenizer.decode_batch(hypotheses), references).score, 2
        )
        scored["decode_seconds_beam"] = round(time.perf_counter() - start, 1)
    return scored


def _map_differences(model: Transformer, int8: Path, float32: Path) -> dict[str, float]:
    """The largest differences of attention weights on :data:`EXAMPLES` (English: int8's greedy)."""
    quantised, exact = TrainedModel(int8), TrainedModel(float32)
    largest = {"float32_vs_pytorch": 0.0, "int8_vs_float32": 0.0}
    for sentence in EXAMPLES:
        english = quantised.translate(sentence)
        maps = {
            "int8": quantised.attention(sentence, english),
            "float32": exact.attention(sentence, english),
        }
        src, tgt = quantised.source_ids(sentence), [quantised.config["bos_id"]]
        tgt += quantised.tokenizer.encode(english)
        torch_maps = pytorch_maps(model, src, tgt)
        for kind in ("encoder", "decoder", "cross"):
            got = {name: getattr(m, kind) for name, m in maps.items()}
            pairs = {
                "float32_vs_pytorch": (got["float32"], torch_maps[kind]),
                "int8_vs_float32": (got["int8"], got["float32"]),
            }
            for name, (a, b) in pairs.items():
                largest[name] = max(largest[name], float((a - b).abs().max()))
    return {name: float(f"{value:.2g}") for name, value in largest.items()}


def main() -> None:
    """Build the files into --out, score them and the float32 export, write --results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a train-translation --save file")
    parser.add_argument(
        "--train-command", help="the command that trained --checkpoint, recorded in config.json"
    )
    parser.add_argument(
        "--data-dir", help="Multi30k's folder (default: $MULTI30K_DIR, else the cache)"
    )
    parser.add_argument(
        "--out", default=str(FILES), help="the model's folder (default: the package's)"
    )
    parser.add_argument("--results", default=str(ROOT / "results" / "browser-model.json"))
    args = parser.parse_args()
    model, tokenizer, metadata = load_translation_checkpoint(args.checkpoint)
    decode = checkpoint_decoding(metadata, args.checkpoint)  # the training run's settings
    run = metadata.get("results", {})
    build = "python scripts/build_browser_model.py " + shlex.join(sys.argv[1:])
    trained = {key: run.get(key) for key in TRAINED_KEYS} | {
        "checkpoint": Path(args.checkpoint).name
    }
    trained["commands"] = {"train": args.train_command, "build": build}
    settings = {
        "max_len_a": decode.max_len_a,
        "max_len_b": decode.max_len_b,
        "beam_size": decode.beam_size,
        "length_penalty": decode.length_penalty,
        "examples": EXAMPLES,
        "hint_words": hint_words(load_split("train", args.data_dir)),
        "trained": trained,
    }
    out = Path(args.out)
    sizes = build_browser_model(model, tokenizer, out, settings)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    test = load_split("test_2016_flickr", args.data_dir)
    with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as exact:
        export_onnx(model, tokenizer, plain)  # the library's export: float32, the table twice
        float32 = _score(Path(plain), tokenizer, test, config, beam=False)
        float32["bytes"] = sum(p.stat().st_size for p in Path(plain).iterdir())
        build_browser_model(model, tokenizer, exact, settings, quantise=False)  # with the maps
        maps = _map_differences(model, out, Path(exact))
    int8 = _score(out, tokenizer, test, config, beam=True) | {"bytes": sum(sizes.values())}
    for scored in (float32, int8):
        scored["mb"] = round(scored["bytes"] / 1e6, 2)
    # the page loads ONNX Runtime Web's WebAssembly too
    wasm = ROOT / "node_modules" / "onnxruntime-web" / "dist" / "ort-wasm-simd-threaded.wasm"
    runtime = {"wasm_mb": round(wasm.stat().st_size / 1e6, 2)} if wasm.is_file() else {}
    runtime["onnxruntime"] = onnxruntime.__version__
    result = {
        "task": "browser-model",
        "checkpoint": Path(args.checkpoint).name,
        "params": model.num_parameters(),
        "trained": run,
        "commands": trained["commands"],
        "files": sizes,
        "int8": int8,
        "float32": float32,
        "attention_max_difference": maps,
        "test_sentences": len(test),
        "quantisation": "weight-only int8, one scale per matrix; float32 arithmetic",
        "decoding": "ONNX Runtime, one thread, one sentence at a time",
        "runtime": runtime,
    }
    print(json.dumps(result, indent=1))
    write_translation_results(args.results, result)


if __name__ == "__main__":
    main()
