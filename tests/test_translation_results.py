"""Chapter 11's stored run, its results file and its prose tell the same story.

``results/translation-cpu.json`` is written by chapter 11's stored run of the ``cpu`` profile. Its scores
must be the ones the chapter's stored outputs print, and the ones the chapter's prose states; and the
file must say where, when and from which code they were measured.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "translation-cpu.json"
SEED_1 = ROOT / "results" / "translation-cpu-900-seed1.json"  # the same 900 steps from the command line
THIRTY_MINUTES = ROOT / "results" / "translation-cpu-30min-seed0.json"  # --time-budget 1800, no step limit
CHAPTER = ROOT / "chapters" / "11_translation.ipynb"


def _record() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def _chapter() -> tuple[str, str]:
    """The chapter's markdown and the text of its stored outputs."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    outputs = "\n".join(
        "".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    return markdown, outputs


def test_the_results_file_says_what_was_measured_where_and_when() -> None:
    record = _record()
    results = record["results"]
    assert results["profile"] == "cpu" and results["task"] == "translation"
    for key in ("bleu", "bleu_beam", "sacrebleu_signature", "steps", "train_seconds", "tokens_per_s", "params",
                "seed", "amp", "stop_reason"):
        assert key in results, key
    assert record["machine"]["cpu"] and record["machine"]["torch"]
    assert record["date"].startswith("20") and record["commit"]


def test_chapter_11_prints_and_states_the_scores_of_the_results_file() -> None:
    results = _record()["results"]
    markdown, outputs = _chapter()
    greedy, beam = f"{results['bleu']:.2f}", f"{results['bleu_beam']:.2f}"
    assert f"greedy   BLEU {greedy}" in outputs and f"BLEU {beam}" in outputs, "the stored outputs print other scores"
    assert f"stopped after {results['steps']} steps" in outputs
    assert greedy in markdown and beam in markdown, "the chapter's prose does not state the scores of its run"


def test_chapter_11_states_the_second_seed_of_the_same_budget() -> None:
    first = _record()["results"]
    second = json.loads(SEED_1.read_text(encoding="utf-8"))["results"]
    assert (second["profile"], second["seed"], second["steps"]) == ("cpu", 1, first["steps"])
    markdown, _ = _chapter()
    assert f"{second['bleu']:.2f} / {second['bleu_beam']:.2f}" in markdown
    mean = (first["bleu"] + second["bleu"]) / 2, (first["bleu_beam"] + second["bleu_beam"]) / 2
    assert f"{mean[0]:.2f} / {mean[1]:.2f}" in markdown, "the chapter's mean of the two seeds"


def test_chapter_11_states_the_30_minute_run() -> None:
    record = json.loads(THIRTY_MINUTES.read_text(encoding="utf-8"))["results"]
    assert record["stop_reason"] == "time_budget" and record["config"]["time_budget_s"] == 1800.0
    assert record["config"]["max_steps"] is None and record["seed"] == 0
    markdown, _ = _chapter()
    assert f"{record['bleu']:.2f} / {record['bleu_beam']:.2f}" in markdown
    assert f"{record['steps']:,} steps" in markdown
