"""Tune the ``cpu`` translation recipe on the VALIDATION split: short runs, one setting changed at a time.

Each invocation trains chapter 11's model (the ``cpu`` profile: all 29,000 training pairs, a joint
BPE vocabulary, d_model 256, 3 + 3 layers) for a fixed number of optimizer steps, with some profile
fields changed (``--set field=value``), and scores it on the validation split (``val``, 1,014
pairs): the validation loss, and sacreBLEU of greedy and beam decoding. The test split is never
read, so nothing here can tune on it. The row is appended to a results file, atomically:

    .venv/bin/python benchmarks/translation_sweep.py --name baseline --steps 400 \
        --append-to results/translation-sweep.json
    .venv/bin/python benchmarks/translation_sweep.py --name lr2e-3 --steps 400 --set lr=0.002 \
        --append-to results/translation-sweep.json

``--decoding`` instead scores decoding settings (beam width, length penalty) on the validation split
with one trained model, which it trains first (or loads with ``--checkpoint``).

The last line of stdout is the JSON row (or rows). Not run by the tests.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from transformer_lib.files import atomic_write
from transformer_lib.runtime import describe_machine, source_commit
from transformer_lib.tasks.translation import (
    TranslationProfile,
    evaluate_translation,
    train_translation,
    translation_profile,
)

FIELDS = {f.name for f in fields(TranslationProfile)}


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["lr=0.002", "schedule=linear"]`` -> ``{"lr": 0.002, "schedule": "linear"}`` (profile fields only)."""
    out: dict[str, Any] = {}
    for item in items:
        name, _, text = item.partition("=")
        if name not in FIELDS or not text:
            raise SystemExit(f"--set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(FIELDS)}")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[name] = text  # a string such as linear
    return out


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    stored = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"sweep": "translation", "rows": []}
    if stored.get("sweep") != "translation" or not isinstance(stored.get("rows"), list):
        raise SystemExit(f"--append-to {path}: not a translation sweep file")
    stored["rows"].extend(rows)
    text = json.dumps(stored, indent=1) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def profile_for(args: argparse.Namespace) -> TranslationProfile:
    profile = translation_profile("cpu", max_steps=args.steps)
    return replace(profile, **parse_sets(args.set), test_limit=None)


def score(run: Any, beam: int, alpha: float) -> dict[str, float]:
    """BLEU of greedy and beam decoding on the validation split."""
    evaluation = evaluate_translation(run, pairs=run.val_pairs, beam_size=beam, length_penalty=alpha, progress=False)
    return {"val_bleu": round(evaluation.bleu_greedy.score, 2), "val_bleu_beam": round(evaluation.bleu_beam.score, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--steps", type=int, required=True, help="optimizer steps (a step budget, no time budget)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a profile field")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--decoding", action="store_true", help="score beam widths and length penalties")
    parser.add_argument("--append-to", type=Path, default=None)
    args = parser.parse_args()
    profile = profile_for(args)
    start = time.perf_counter()
    run = train_translation(None, profile, device="cpu", seed=args.seed, progress=False, threads=args.threads)
    base = {
        "name": args.name,
        "overrides": parse_sets(args.set),
        "steps": run.steps,
        "seed": args.seed,
        "val_loss": round(run.val_loss, 4),
        "averaged_checkpoints": run.averaged_checkpoints,
        "train_seconds": round(run.train_seconds, 1),
        "seconds_per_step": round(run.train_seconds / max(run.steps, 1), 3),
        "tokens_per_s": round(run.tokens_per_s, 1),
        "threads": run.threads,
        "machine": describe_machine(),
        "commit": source_commit(Path(__file__).parent),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    grid = [(1, 1.0), (4, 0.6), (4, 1.0), (5, 1.0), (8, 1.0), (4, 1.4)] if args.decoding else [(profile.beam_size, 1.0)]
    rows = []
    for beam, alpha in grid:
        scores = score(run, beam, alpha)
        rows.append({**base, "beam_size": beam, "length_penalty": alpha, **scores})
        print(f"{args.name}: beam {beam}, alpha {alpha}: {scores}", file=sys.stderr)
    for row in rows:
        row["wall_seconds"] = round(time.perf_counter() - start, 1)
    if args.append_to is not None:
        append_rows(args.append_to, rows)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
