r"""Choose the decoding settings of a translation recipe on the validation split, never the test
split.

    python scripts/sweep_decoding.py --checkpoint runs/translation_cpu.safetensors \
        --beam-sizes 2 4 6 8 --length-penalties 0.6 1.0 1.4 2.0 \
        --results results/decoding-sweep-cpu.json

Loads a ``train-translation --save`` checkpoint, translates Multi30k's validation split greedily and
with every beam size and length penalty given
(:func:`~transformer_tasks.translation.sweep_decoding`), and writes every setting's BLEU and brevity
penalty, and the best beam-search setting, to ``--results``. The profile's ``decode`` section then
takes the best setting; the test split is scored once, with it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from transformer_lib.runtime import torch_threads
from transformer_tasks import load_split
from transformer_tasks.translation import (
    checkpoint_decoding,
    load_translation_checkpoint,
    sweep_decoding,
    write_translation_results,
)


def main() -> None:
    """Sweep, print a table, write --results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a train-translation --save file")
    parser.add_argument(
        "--data-dir", default=None, help="Multi30k's folder (default: $MULTI30K_DIR)"
    )
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=[2, 4, 6, 8])
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.6, 1.0, 1.4, 2.0])
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: PyTorch's)"
    )
    parser.add_argument("--results", required=True, help="the JSON file to write")
    args = parser.parse_args()
    model, tokenizer, metadata = load_translation_checkpoint(args.checkpoint)
    decode = checkpoint_decoding(metadata, args.checkpoint)  # the length limits of the run
    pairs = load_split("val", args.data_dir)
    with torch_threads(args.threads) as threads:
        sweep = sweep_decoding(
            model, tokenizer, pairs, args.beam_sizes, args.length_penalties, decode
        )
    for row in sweep.rows:
        penalty = "-" if row["length_penalty"] is None else f"{row['length_penalty']:.1f}"
        print(
            f"beam {row['beam_size']:>2}  alpha {penalty:>4}  BLEU {row['bleu']:6.2f}  "
            f"BP {row['brevity_penalty']:.3f}  {row['seconds']:6.1f} s"
        )
    print("best:", sweep.best)
    summary = {
        "split": "val",
        "pairs": len(pairs),
        "checkpoint": Path(args.checkpoint).name,
        "trained": {k: metadata.get("results", {}).get(k) for k in ("profile", "seed", "steps")},
        "threads": threads,
        "rows": sweep.rows,
        "best": sweep.best,
    }
    write_translation_results(args.results, summary)


if __name__ == "__main__":
    main()
