"""Should label smoothing give the ``<pad>`` class a share? Two runs of one recipe, compared.

PyTorch's ``F.cross_entropy(label_smoothing=eps)`` spreads ``eps`` over all ``V`` classes, so every
target position asks for a probability of about ``eps / V`` on ``<pad>``, a token the model never
has to write. The library's ``TrainConfig(label_smoothing_pad=False)`` gives ``<pad>`` nothing
instead, spreading ``eps`` over the other classes (like The Annotated Transformer for ``<pad>``,
though not for the true class: ``sequence_loss``'s docstring gives both). This script reads two
runs of the same recipe and seed, one each way (``train-translation --save``'s checkpoints and
``--results`` files), and optionally a run with a share and another seed, the yardstick for the
difference; it reports for each: the test BLEU, the validation loss of the kept weights, and what
the trained model does with ``<pad>`` on the validation split (teacher-forced, evaluation mode):
its mean and largest probability, and how often it is among the 8 most likely tokens (8 is the
profile's beam).

    MULTI30K_DIR=... .venv/bin/python benchmarks/label_smoothing_pad.py \\
        --share runs/translation_cpu.safetensors results/translation-cpu.json \\
        --no-share runs/p0.safetensors runs/p0.json \\
        --second-seed runs/s1.safetensors results/translation-cpu-seed1.json --results FILE

Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from transformer_lib import token_batches
from transformer_lib.files import atomic_write
from transformer_tasks import load_multi30k
from transformer_tasks.cli import load_translation_checkpoint
from transformer_tasks.records import describe_machine
from transformer_tasks.translation import encode_pairs

TOP_K = 8  # the cpu profile's beam size


def pad_probability(checkpoint: Path, max_tokens: int = 3000) -> dict[str, float]:
    """What a trained model gives ``<pad>`` at the validation split's target positions."""
    model, tokenizer, _ = load_translation_checkpoint(checkpoint)
    model.eval()
    pairs = encode_pairs(tokenizer, load_multi30k()["val"])
    ends = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    probabilities, in_top_k = [], 0
    with torch.no_grad():
        for batch in token_batches(pairs, max_tokens, *ends, shuffle=False):
            logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            real = batch.tgt_out != tokenizer.pad_id  # (B, T): the positions a loss reads
            pad = logits.float().softmax(dim=-1)[..., tokenizer.pad_id]  # (B, T)
            probabilities.append(pad[real])
            top = logits.topk(TOP_K, dim=-1).indices[real]  # (positions, TOP_K)
            in_top_k += int((top == tokenizer.pad_id).any(dim=-1).sum())
    p = torch.cat(probabilities)
    return {
        "positions": p.numel(),
        "vocab_size": logits.size(-1),
        "pad_probability_mean": p.mean().item(),
        "pad_probability_max": p.max().item(),
        f"pad_in_top_{TOP_K}": in_top_k,
    }


def run_summary(checkpoint: Path, results: Path) -> dict[str, Any]:
    """A run's scores from its results file, and its model's ``<pad>`` probability."""
    r = json.loads(results.read_text(encoding="utf-8"))["results"]
    return {
        "results_file": results.as_posix(),
        "seed": r["seed"],
        "steps": r["steps"],
        "bleu": r["bleu"],
        "bleu_beam": r["bleu_beam"],
        "kept_val_loss": r["checkpoint_candidates"][r["checkpoint_choice"]],
        **pad_probability(checkpoint),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--share", nargs=2, type=Path, required=True, metavar=("CKPT", "JSON"))
    parser.add_argument("--no-share", nargs=2, type=Path, required=True, metavar=("CKPT", "JSON"))
    parser.add_argument(
        "--second-seed",
        nargs=2,
        type=Path,
        metavar=("CKPT", "JSON"),
        help="a run with a share and another seed: how far the seed alone moves the scores",
    )
    parser.add_argument("--results", type=Path, help="also write the JSON result here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {
        "benchmark": "label_smoothing_pad",
        "pad_gets_a_share": run_summary(*args.share),
        "pad_gets_no_share": run_summary(*args.no_share),
        "machine": describe_machine(torch.device("cpu")),
    }
    if args.second_seed is not None:
        result["pad_gets_a_share_second_seed"] = run_summary(*args.second_seed)
    text = json.dumps(result, indent=2) + "\n"
    if args.results is not None:
        atomic_write(args.results, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    print(text, end="")


if __name__ == "__main__":
    main()
