r"""Tune the ``cpu`` translation recipe on the VALIDATION split: short runs, one setting changed
at a time.

Each invocation trains chapter 11's model (the ``cpu`` profile: all 29,000 training pairs, a joint
BPE vocabulary, d_model 256, 3 + 3 layers) for a fixed number of optimizer steps, with some fields
of its configuration changed (``--set train.lr=0.002``, as ``train-translation --set`` takes them:
:func:`~.apply_overrides`), and scores it on the validation split (``val``, 1,014
pairs): the validation loss, and sacreBLEU of greedy and beam decoding. The test split is never
read, so nothing here can tune on it. The row is appended to a results file, atomically:

    .venv/bin/python benchmarks/translation_sweep.py --name baseline --steps 600 \
        --append-to sweep.json
    .venv/bin/python benchmarks/translation_sweep.py --name lr3e-3 --steps 600 \
        --set train.lr=0.003 --append-to sweep.json

Each row of ``results/translation-sweep.json`` records the command that gives it again today: its
runs were made with the profile's earlier recipe (4,000-token batches, float32, an evaluation every
130 steps, 4 beams with alpha 1.0), which the row's ``--set`` flags restore.

``--decoding`` instead scores decoding settings (beam width, length penalty) on the validation split
with the one model it trains. ``--dry-run`` prints the resolved configuration and trains nothing.

The last line of stdout is the JSON row (or rows). Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from transformer_lib.files import atomic_write
from transformer_tasks.records import describe_machine, peak_rss_mb, source_commit
from transformer_tasks.translation import (
    TranslationConfig,
    apply_overrides,
    budget_settings,
    evaluate_translation,
    train_translation,
    translation_profile,
)


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    stored = (
        json.loads(path.read_text(encoding="utf-8"))
        if path.exists()
        else {"sweep": "translation", "rows": []}
    )
    if stored.get("sweep") != "translation" or not isinstance(stored.get("rows"), list):
        raise SystemExit(f"--append-to {path}: not a translation sweep file")
    stored["rows"].extend(rows)
    text = json.dumps(stored, indent=1) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def profile_for(args: argparse.Namespace) -> TranslationConfig:
    """The ``cpu`` profile for ``--steps`` steps, with ``--seed``, ``--threads`` and the ``--set``
    settings."""
    shorthands = [f"train.seed={args.seed}", "train.progress=false", "data.test_limit=None"]
    shorthands += [f"num_threads={args.threads}"] if args.threads is not None else []
    try:
        budget = budget_settings(max_steps=args.steps)
        return apply_overrides(translation_profile("cpu"), budget + shorthands + args.set)
    except (TypeError, ValueError) as error:
        raise SystemExit(f"--set: {error}") from None


def score(run: Any, beam: int, alpha: float) -> dict[str, float]:
    """BLEU of greedy and beam decoding on the validation split."""
    evaluation = evaluate_translation(
        run, pairs=run.val_pairs, beam_size=beam, length_penalty=alpha, progress=False
    )
    return {
        "val_bleu": round(evaluation.bleu_greedy.score, 2),
        "val_bleu_beam": round(evaluation.bleu_beam.score, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument(
        "--steps", type=int, required=True, help="optimizer steps (a step budget, no time budget)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="a field of the configuration",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--decoding", action="store_true", help="score beam widths and length penalties"
    )
    parser.add_argument("--append-to", type=Path, default=None)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resolved configuration and exit"
    )
    args = parser.parse_args()
    profile = profile_for(args)
    if args.dry_run:
        print(json.dumps({"dry_run": True, "config": asdict(profile)}))
        return
    start = time.perf_counter()
    run = train_translation(None, profile, device="cpu")
    base = {
        "name": args.name,
        "overrides": args.set,
        "steps": run.steps,
        "seed": args.seed,
        "val_loss": round(run.val_loss, 4),
        "averaged_checkpoints": run.averaged_checkpoints,
        "train_seconds": round(run.train_seconds, 1),
        "seconds_per_step": round(run.train_seconds / max(run.steps, 1), 3),
        "tokens_per_s": round(run.tokens_per_s, 1),
        "threads": run.threads,
        "machine": describe_machine(),
        "peak_rss_mb": peak_rss_mb(),  # the training's peak (decoding comes after)
        "commit": source_commit(Path(__file__).parent),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    grid = (
        [(1, 1.0), (4, 0.6), (4, 1.0), (5, 1.0), (8, 1.0), (4, 1.4)]
        if args.decoding
        else [(profile.decode.beam_size, 1.0)]
    )
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
