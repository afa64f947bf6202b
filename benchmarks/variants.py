r"""Transformer variants compared under one budget: the copy task and the translation ``smoke`` or
``cpu`` profile.

Every variant is the task's own model with a few :class:`~transformer_lib.config.TransformerConfig`
fields changed (see :func:`variants`); everything else is identical: the data, the seeds, the
optimizer, the schedule, the evaluation and the budget. ``swiglu`` and ``modern`` use a SwiGLU
hidden width of 2/3 of ``d_ff`` (85 for 128), which keeps the parameter count of the ReLU network.

* **Copy task** (``transformer_tasks.copy.run_copy_task``, default settings: Pre-LN model of
  d_model 64, 1+1 layers, 4 heads, d_ff 128; batch 64, peak lr 3e-3; greedy decoding of the 1,000
  held-out sequences every 50 steps; at most 3,000 steps). Per variant and seed: whether 100%
  exact match was reached, after how many optimizer steps, and the seconds spent in training steps
  (evaluation excluded). Steps are reproducible for a seed on a given CPU with the same number of
  threads (a different summation order is enough to change them); seconds depend on the machine's
  load.
* **Translation, ``smoke`` profile** (``transformer_tasks.translation``: 3,000 training pairs, a
  1,000-token BPE vocabulary, d_model 64, 2+2 layers, Pre-LN; 200 test sentences). The budget is
  150 optimizer steps (:data:`SMOKE_COMPARISON`: longer than the tests' smoke runs); the profile's
  time cap is lifted so that machine load cannot cut one variant shorter than another. Per variant:
  sacreBLEU (greedy and beam) on the 200 test sentences, validation loss, seconds of training steps,
  parameters. The smoke profile's BLEU is small (a pipeline check, not a trained translator):
  differences of a point or two are noise.

Usage::

    # full: copy seeds 0 1, smoke translation seed 0
    .venv/bin/python benchmarks/variants.py
    # tiny budgets, translation for 2 variants (the tests)
    .venv/bin/python benchmarks/variants.py --quick
    .venv/bin/python benchmarks/variants.py --copy-seeds 0 1 2 3 4 --translation-seeds 0 1 \
        --variants baseline rope

* **Translation, ``cpu`` profile** (chapter 11's translator: all 29,000 training pairs, an
  8,000-token BPE vocabulary, d_model 256, 3+3 layers, Pre-LN; the 1,000 sentences of
  test_2016_flickr). One run costs 20 to 25 minutes on one core of a 2-core AMD EPYC, too long for
  a notebook, so each is run on its own under a step budget (``--translation-steps``), and
  ``--append-to`` collects the results. The committed runs
  (``benchmarks/results/variants_translation_cpu.json``, which chapter 15 reads back) took 900
  steps of the profile's earlier recipe: 4,000-token batches, 300 warm-up steps to a peak of 2e-3,
  the last 3 evaluations averaged, 4 beams with alpha 1.0, bfloat16 autocast on the AMD EPYC. The
  ``--set`` flags below give that recipe today (each run in the file records its own command);
  without them a run trains today's profile, which is another recipe. Every variant runs with seeds
  0 and 1; the two seeds of the baseline are the yardstick. Two processes of one thread each, one
  per seed, on a 2-core machine::

    for seed in 0 1; do
      for v in baseline post-ln rope modern; do
        .venv/bin/python benchmarks/variants.py --variants $v --copy-seeds --noise-seeds \
          --threads 1 --translation-profile cpu --translation-steps 900 --translation-seeds $seed \
          --set data.max_tokens=4000 --set train.warmup_steps=300 --set average_last=3 \
          --set decode.beam_size=4 --set decode.length_penalty=1.0 --set train.amp=bf16 \
          --append-to seed$seed.json
      done &
    done; wait
    .venv/bin/python - <<'EOF'   # the two files, in the order variant, seed, as the results file
    import json
    order = ["baseline", "post-ln", "rope", "modern"]
    runs = [r for s in (0, 1) for r in json.load(open(f"seed{s}.json"))["runs"]]
    runs.sort(key=lambda r: (order.index(r["translation"][0]["variant"]),
                             r["translation_seeds"][0]))
    out = open("benchmarks/results/variants_translation_cpu.json", "w")
    json.dump({"benchmark": "variants", "runs": runs}, out, indent=1)
    EOF

``noise`` in the output repeats the baseline with the ``--noise-seeds`` (default 2 and 3): the
spread of its numbers over seeds is the yardstick for the differences between variants. The full run
takes 8 to 14 minutes on 2 CPU cores with one thread (520 s on an Intel Xeon for chapter 15's stored
run, 826 s on an AMD EPYC); ``--quick`` about 20 seconds, and its numbers mean nothing.

Progress goes to stderr; the last line of stdout is one JSON object with every result.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from _common import cpu_name, info, load_average

from transformer_lib.files import atomic_write
from transformer_tasks.copy import copy_model_config, run_copy_task
from transformer_tasks.translation import (
    TranslationConfig,
    apply_overrides,
    evaluate_translation,
    train_translation,
    translation_profile,
)

COPY_D_FF = 128  # copy_model_config's d_ff
TRANSLATION_D_FF = {"smoke": 128, "cpu": 1024}  # each translation profile's d_ff
# On the smoke profile the comparison trains longer and scores more sentences than the tests' smoke
# runs.
SMOKE_COMPARISON = [
    "train.max_steps=150",
    "data.test_limit=200",
    "train.warmup_steps=50",
    "train.eval_every=50",
]
# --quick: a few steps on a slice; checks the pipeline runs, the numbers mean nothing.
QUICK = ["data.train_limit=200", "data.test_limit=10", "data.vocab_size=250", "train.max_steps=4"]
QUICK += ["train.eval_every=None", "decode.beam_size=2"]


def swiglu_width(d_ff: int) -> int:
    """SwiGLU hidden width with about the parameters of a ReLU feed-forward of width ``d_ff`` (2/3
    of it)."""
    return round(2 * d_ff / 3)


def variants(d_ff: int) -> dict[str, dict[str, Any]]:
    """Name -> TransformerConfig fields changed from the task's model (which is Pre-LN, LayerNorm,
    sinusoidal, ReLU)."""
    return {
        "baseline": {},
        "post-ln": {"norm_first": False},
        "learned-pos": {"positional": "learned"},
        "rope": {"positional": "rope"},
        "rmsnorm": {"norm": "rmsnorm"},
        "gelu": {"activation": "gelu"},
        "swiglu": {"activation": "swiglu", "d_ff": swiglu_width(d_ff)},
        "gqa-kv2": {"num_kv_heads": 2},
        "mqa-kv1": {"num_kv_heads": 1},
        "modern": {
            "norm_first": True,
            "norm": "rmsnorm",
            "positional": "rope",
            "activation": "swiglu",
            "d_ff": swiglu_width(d_ff),
        },
    }


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_copy(
    name: str, overrides: dict[str, Any], seeds: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    runs = []
    for seed in seeds:
        result = run_copy_task(
            device=args.device,
            seed=seed,
            max_steps=args.copy_max_steps,
            eval_every=args.copy_eval_every,
            held_out=args.copy_held_out,
            model_config=copy_model_config(**overrides),
            progress=False,
        )
        runs.append(
            {
                "seed": seed,
                "reached": result["reached"],
                "exact_match": result["exact_match"],
                "steps": result["steps"],
                "train_seconds": round(result["train_seconds"], 2),
                "params": result["params"],
                "history": [
                    [h["step"], round(h["exact_match"], 4)] for h in result["eval_history"]
                ],
            }
        )
        info(
            f"copy {name:12s} seed {seed}: {result['exact_match']:.1%} after {result['steps']} "
            f"steps, {result['train_seconds']:.1f} s"
        )
    reached = [r for r in runs if r["reached"]]
    return {
        "variant": name,
        "overrides": overrides,
        "params": runs[0]["params"],
        "reached": f"{len(reached)}/{len(runs)}",
        "median_steps_to_100": median([r["steps"] for r in reached]),
        "median_seconds_to_100": median([r["train_seconds"] for r in reached]),
        "runs": runs,
    }


def translation_config(overrides: dict[str, Any], args: argparse.Namespace) -> TranslationConfig:
    """The variant's translation run: the profile, the variant's model fields, the comparison's
    budget, then ``--set`` (as ``train-translation --set`` takes them), applied last."""
    settings = [
        "train.time_budget_s=None",
        "train.progress=false",
        *(f"model.{k}={v}" for k, v in overrides.items()),
    ]
    settings += SMOKE_COMPARISON if args.translation_profile == "smoke" else []
    settings += (
        [f"train.max_steps={args.translation_steps}"] if args.translation_steps is not None else []
    )
    settings += QUICK if args.quick else []
    return apply_overrides(translation_profile(args.translation_profile), settings + args.set)


def run_translation_variant(
    name: str, overrides: dict[str, Any], seeds: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    profile = translation_config(overrides, args)
    runs = []
    for seed in seeds:
        start = time.perf_counter()
        run = train_translation(
            args.data_dir, apply_overrides(profile, [f"train.seed={seed}"]), device=args.device
        )
        evaluation = evaluate_translation(run, progress=False)
        runs.append(
            {
                "seed": seed,
                "bleu": round(evaluation.bleu_greedy.score, 2),
                "bleu_beam": round(evaluation.bleu_beam.score, 2),
                "val_loss": round(run.val_loss, 4),
                "steps": run.steps,
                "train_seconds": round(run.train_seconds, 2),
                "wall_seconds": round(time.perf_counter() - start, 2),
                "params": run.model.num_parameters(),
                "stop_reason": run.stop_reason,
            }
        )
        info(
            f"translation {name:12s} seed {seed}: BLEU {runs[-1]['bleu']:.2f} / beam "
            f"{runs[-1]['bleu_beam']:.2f}, "
            f"val loss {runs[-1]['val_loss']:.3f}, {runs[-1]['train_seconds']:.1f} s of training"
        )
    return {
        "variant": name,
        "overrides": overrides,
        "params": runs[0]["params"],
        "mean_bleu": round(statistics.fmean(r["bleu"] for r in runs), 2),
        "mean_bleu_beam": round(statistics.fmean(r["bleu_beam"] for r in runs), 2),
        "mean_val_loss": round(statistics.fmean(r["val_loss"] for r in runs), 4),
        "median_train_seconds": median([r["train_seconds"] for r in runs]),
        "runs": runs,
    }


def baseline_spread(
    result: dict[str, Any],
    noise_seeds: list[int],
    copy_seeds: list[int],
    translation_seeds: list[int],
    args,
) -> dict[str, Any]:
    """The baseline with more seeds: how much one seed's number moves when only the seed changes."""
    extra = [s for s in noise_seeds if s not in copy_seeds]
    done = [row["runs"] for row in result["copy"] if row["variant"] == "baseline"]
    copy_runs = (done[0] if done else []) + (
        run_copy("baseline", {}, extra, args)["runs"] if extra else []
    )
    extra = [s for s in noise_seeds if s not in translation_seeds]
    done = [row["runs"] for row in result["translation"] if row["variant"] == "baseline"]
    translation_runs = (done[0] if done else []) + (
        run_translation_variant("baseline", {}, extra, args)["runs"] if extra else []
    )
    return {
        "copy_seeds": [r["seed"] for r in copy_runs],
        "copy_steps": [r["steps"] if r["reached"] else None for r in copy_runs],
        "translation_seeds": [r["seed"] for r in translation_runs],
        "translation_bleu": [r["bleu"] for r in translation_runs],
        "translation_bleu_beam": [r["bleu_beam"] for r in translation_runs],
        "translation_val_loss": [r["val_loss"] for r in translation_runs],
    }


def read_results(path: Path) -> dict[str, Any]:
    """The results file at ``path`` (``{"benchmark": "variants", "runs": [...]}``); an empty one if
    there is none."""
    if not path.exists():
        return {"benchmark": "variants", "runs": []}
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"--append-to {path}: not a JSON file ({error})") from error
    valid = (
        isinstance(stored, dict)
        and stored.get("benchmark") == "variants"
        and isinstance(stored.get("runs"), list)
    )
    if not valid:
        raise ValueError(
            f'--append-to {path}: expected a JSON object {{"benchmark": "variants", "runs": [...]}}'
        )
    return stored


def append_run(path: Path, result: dict[str, Any]) -> None:
    """Add one invocation's ``result`` to the results file ``path``, creating it if missing.

    The file is rewritten atomically (``transformer_lib.files.atomic_write``), so an interrupted run
    never leaves it half-written; a file that is not such a results file raises ``ValueError`` and
    is left untouched.
    """
    stored = read_results(path)
    stored["runs"].append(result)
    text = json.dumps(stored, indent=1) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny budgets, for the tests (numbers mean nothing)"
    )
    parser.add_argument(
        "--copy-seeds", type=int, nargs="*", default=None, help="default: 0 1 (quick: 0)"
    )
    parser.add_argument(
        "--translation-seeds", type=int, nargs="*", default=None, help="default: 0; none: skip"
    )
    parser.add_argument(
        "--noise-seeds",
        type=int,
        nargs="*",
        default=None,
        help="more seeds for the baseline alone, to measure seed-to-seed spread (default: 2 3; "
        "quick: none)",
    )
    parser.add_argument(
        "--variants", nargs="*", default=None, help=f"default: all of {list(variants(128))}"
    )
    parser.add_argument(
        "--translation-profile",
        choices=sorted(TRANSLATION_D_FF),
        default="smoke",
        help="translation profile (default smoke; cpu needs --translation-steps)",
    )
    parser.add_argument(
        "--translation-steps",
        type=int,
        default=None,
        help="optimizer steps per translation run, replacing the profile's time budget (default: "
        "150 on smoke)",
    )
    parser.add_argument(
        "--append-to",
        type=Path,
        default=None,
        help="also add this run's result to a results JSON file (created if missing, written "
        "atomically)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="CPU threads (default 1: steadier on a busy CPU)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="a field of the translation configuration, applied after the variant's (repeatable)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print each variant's resolved configuration as JSON and exit without training",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--data-dir", default=None, help="Multi30k folder (default: $MULTI30K_DIR or the cache)"
    )
    args = parser.parse_args()
    if args.translation_steps is not None and args.translation_steps < 1:
        parser.error(
            "--translation-steps must be a positive number of optimizer steps, got "
            f"{args.translation_steps}"
        )
    if args.translation_profile == "cpu" and args.translation_steps is None:
        parser.error(
            "--translation-profile cpu needs --translation-steps "
            "(the committed runs took 900 steps)"
        )
    if args.append_to is not None:  # a bad results file fails now, not after hours of training
        try:
            read_results(args.append_to)
        except ValueError as error:
            parser.error(str(error))
    started = time.perf_counter()
    copy_seeds = args.copy_seeds if args.copy_seeds is not None else ([0] if args.quick else [0, 1])
    translation_seeds = args.translation_seeds if args.translation_seeds is not None else [0]
    noise_seeds = (
        args.noise_seeds if args.noise_seeds is not None else ([] if args.quick else [2, 3])
    )
    args.copy_max_steps = 30 if args.quick else 3000
    args.copy_eval_every = 30 if args.quick else 50
    args.copy_held_out = 50 if args.quick else 1000
    names = args.variants or list(variants(COPY_D_FF))
    unknown = sorted(set(names) - set(variants(COPY_D_FF)))
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(variants(COPY_D_FF))}")
    # --quick translates with the first and the last variant only (each translation run costs
    # seconds of set-up)
    translation_names = [names[0], names[-1]] if args.quick and len(names) > 1 else names
    translation_variants = variants(TRANSLATION_D_FF[args.translation_profile])
    try:  # a bad --set fails now, not after the copy runs
        configs = {n: translation_config(translation_variants[n], args) for n in translation_names}
    except (TypeError, ValueError) as error:
        parser.error(f"--set: {error}")
    if args.dry_run:
        copy_models = {n: copy_model_config(**variants(COPY_D_FF)[n]).to_dict() for n in names}
        resolved = {n: asdict(c) for n, c in configs.items()} if translation_seeds else {}
        seeds = {"copy": copy_seeds, "translation": translation_seeds, "noise": noise_seeds}
        print(
            json.dumps(
                {
                    "dry_run": True,
                    "threads": args.threads,
                    "seeds": seeds,
                    "copy": copy_models,
                    "translation": resolved,
                }
            )
        )
        return
    torch.set_num_threads(args.threads)

    result: dict[str, Any] = {
        "benchmark": "variants",
        "command": shlex.join(["benchmarks/variants.py", *sys.argv[1:]]),
        "quick": args.quick,
        "device": args.device,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "copy_seeds": copy_seeds,
        "translation_seeds": translation_seeds,
        "translation_profile": args.translation_profile,
        "translation_steps": args.translation_steps,
        "noise_seeds": noise_seeds,
        "copy_budget": {
            "max_steps": args.copy_max_steps,
            "eval_every": args.copy_eval_every,
            "held_out": args.copy_held_out,
        },
        "load_average_start": load_average(),
    }
    copy_variants = variants(COPY_D_FF)
    result["copy"] = (
        [run_copy(name, copy_variants[name], copy_seeds, args) for name in names]
        if copy_seeds
        else []
    )
    result["translation"] = (
        [
            run_translation_variant(name, translation_variants[name], translation_seeds, args)
            for name in translation_names
        ]
        if translation_seeds
        else []
    )
    result["noise"] = (
        baseline_spread(result, noise_seeds, copy_seeds, translation_seeds, args)
        if noise_seeds
        else None
    )
    result["load_average_end"] = load_average()
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    if args.append_to is not None:
        append_run(args.append_to, result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
