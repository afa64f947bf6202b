"""Chapter 11's stored run, its results files and its prose tell the same story.

``results/translation-cpu.json`` is written by chapter 11's stored run of the ``cpu`` profile as it
is: seed 0 and the profile's step budget. Its scores must be the ones the chapter's stored outputs
print, and the ones the chapter's prose states; and the file must say where, when and from which
code they were measured. The earlier runs of the recipe (30 minutes of training steps, and 900
steps with seeds 0 and 1) are stated in the chapter's Going deeper, from their own files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "translation-cpu.json"  # chapter 11's run: the cpu profile, seed 0
STEP_BUDGET = [ROOT / "results" / f"translation-cpu-900-seed{seed}.json" for seed in (0, 1)]
CHAPTER = ROOT / "chapters" / "11_translation.ipynb"


def _record() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def _chapter() -> tuple[str, str]:
    """The chapter's markdown and the text of its stored outputs."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    outputs = "\n".join(
        "".join(o.get("text", ""))
        for c in cells
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
    )
    return markdown, outputs


def test_the_results_file_says_what_was_measured_where_and_when() -> None:
    record = _record()
    results = record["results"]
    assert results["profile"] == "cpu" and results["task"] == "translation"
    for key in (
        "bleu",
        "bleu_beam",
        "sacrebleu_signature",
        "steps",
        "train_seconds",
        "tokens_per_s",
        "params",
        "seed",
        "amp",
        "stop_reason",
    ):
        assert key in results, key
    assert record["machine"]["cpu"] and record["machine"]["torch"]
    assert record["date"].startswith("20") and record["commit"]


def test_chapter_11_prints_and_states_the_scores_of_the_results_file() -> None:
    results = _record()["results"]
    markdown, outputs = _chapter()
    greedy, beam = f"{results['bleu']:.2f}", f"{results['bleu_beam']:.2f}"
    assert f"greedy   BLEU {greedy}" in outputs and f"BLEU {beam}" in outputs, (
        "the stored outputs print other scores"
    )
    assert f"stopped after {results['steps']} steps" in outputs
    assert greedy in markdown and beam in markdown, (
        "the chapter's prose does not state the scores of its run"
    )


def test_the_chapters_run_is_the_cpu_profile_as_it_is_with_seed_0() -> None:
    from transformer_tasks import translation_profile

    results, profile = _record()["results"], translation_profile("cpu")
    assert results["stop_reason"] == "max_steps" and results["steps"] == profile.train.max_steps
    assert results["config"]["train"]["time_budget_s"] is None and results["seed"] == 0
    decoding = (results["beam_size"], results["length_penalty"])
    assert decoding == (profile.decode.beam_size, profile.decode.length_penalty), (
        "decoded with other settings"
    )
    markdown, _ = _chapter()
    assert (
        f"{results['steps']:,} steps" in markdown
        and f"{results['train_seconds']:,.1f} s" in markdown
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_the_step_budget_runs_are_the_profile_with_900_steps(seed: int) -> None:
    record = json.loads(STEP_BUDGET[seed].read_text(encoding="utf-8"))["results"]
    assert (record["profile"], record["seed"], record["steps"]) == ("cpu", seed, 900)
    assert record["stop_reason"] == "max_steps" and record["config"]["max_steps"] == 900
    markdown, _ = _chapter()
    assert f"{record['bleu']:.2f} / {record['bleu_beam']:.2f}" in markdown


def test_chapter_11_states_the_mean_of_the_two_seeds_of_the_step_budget() -> None:
    first, second = (json.loads(f.read_text(encoding="utf-8"))["results"] for f in STEP_BUDGET)
    mean = (first["bleu"] + second["bleu"]) / 2, (first["bleu_beam"] + second["bleu_beam"]) / 2
    markdown, _ = _chapter()
    assert f"{mean[0]:.2f} / {mean[1]:.2f}" in markdown, "the chapter's mean of the two seeds"


def test_chapter_11_states_the_earlier_30_minute_run_from_the_command_line() -> None:
    """The same time budget run earlier: how much a time-budgeted result moves with the machine's
    speed."""
    path = ROOT / "results" / "translation-cpu-30min-seed0.json"
    record = json.loads(path.read_text(encoding="utf-8"))["results"]
    assert record["stop_reason"] == "time_budget" and record["config"]["time_budget_s"] == 1800.0
    assert record["config"]["max_steps"] is None and record["seed"] == 0
    markdown, _ = _chapter()
    assert f"{record['bleu']:.2f} / {record['bleu_beam']:.2f}" in markdown
    assert f"{record['steps']:,} steps" in markdown
