"""Make the model files of chapter 11's "Translate in your browser" box, and score them.

    python scripts/build_browser_model.py --checkpoint runs/translation_cpu.safetensors

Exports the checkpoint (a ``train-translation --save`` file; chapter 11 saves its run as this one)
into ``_book_static/translator/`` with :func:`transformer_book.browser_model.build_browser_model`
(int8 weights, one shared weights file), then decodes Multi30k's test_2016_flickr with ONNX Runtime,
greedy, as the page does: once with the int8 files, once with the float32 export of the same
checkpoint. Writes the sizes, both BLEU scores and the size of ONNX Runtime Web's WebAssembly (the
page loads it too) to ``results/browser-model.json``, which chapter 11 reads. Minutes on a
laptop. The files are committed; the publishing workflow builds the site from them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from transformer_book.browser_model import build_browser_model, load_sessions, onnx_translate
from transformer_tasks import corpus_bleu, export_onnx, load_split
from transformer_tasks.cli import checkpoint_decoding, load_translation_checkpoint
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


def _bleu(folder: Path, tokenizer, sources, references, limits) -> dict[str, float]:
    start = time.perf_counter()
    ids = onnx_translate(load_sessions(folder), tokenizer, sources, **limits)
    score = corpus_bleu(tokenizer.decode_batch(ids), references)
    return {"bleu": round(score.score, 2), "decode_seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    """Build the files into --out, score them and the float32 export, write --results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a train-translation --save file")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Multi30k's folder (default: $MULTI30K_DIR, else the cache)",
    )
    parser.add_argument(
        "--out", default=str(ROOT / "_book_static" / "translator"), help="the site's model folder"
    )
    parser.add_argument("--results", default=str(ROOT / "results" / "browser-model.json"))
    args = parser.parse_args()
    model, tokenizer, metadata = load_translation_checkpoint(args.checkpoint)
    decode = checkpoint_decoding(metadata, args.checkpoint)  # the training run's settings
    limits = {"max_len_a": decode.max_len_a, "max_len_b": decode.max_len_b}
    beam = {"beam_size": decode.beam_size, "length_penalty": decode.length_penalty}
    sizes = build_browser_model(model, tokenizer, args.out, limits | beam | {"examples": EXAMPLES})
    test = load_split("test_2016_flickr", args.data_dir)
    sources, references = [de for de, _ in test], [en for _, en in test]
    limits["limit"] = model.config.max_len
    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(model, tokenizer, tmp)
        float32 = _bleu(Path(tmp), tokenizer, sources, references, limits)
        float32["bytes"] = sum(p.stat().st_size for p in Path(tmp).iterdir())
    int8 = _bleu(Path(args.out), tokenizer, sources, references, limits) | {
        "bytes": sum(sizes.values())
    }
    for scored in (float32, int8):
        scored["mb"] = round(scored["bytes"] / 1e6, 2)
    # the page loads it too
    wasm = ROOT / "node_modules" / "onnxruntime-web" / "dist" / "ort-wasm-simd-threaded.wasm"
    runtime = {"wasm_mb": round(wasm.stat().st_size / 1e6, 2)} if wasm.is_file() else {}
    result = {
        "task": "browser-model",
        "checkpoint": Path(args.checkpoint).name,
        "params": model.num_parameters(),
        "trained": metadata.get("results", {}),
        "files": sizes,
        "int8": int8,
        "float32": float32,
        "test_sentences": len(sources),
        "decoding": "greedy, ONNX Runtime, one thread",
        "runtime": runtime,
    }
    print(json.dumps(result, indent=1))
    write_translation_results(args.results, result)


if __name__ == "__main__":
    main()
