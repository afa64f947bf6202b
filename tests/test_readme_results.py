"""Every number of the README's results table comes from the committed file or stored output its row
names.

Each row of the table under ``## Results`` names its source in its *source* column: a JSON file of
``results/`` or ``benchmarks/results/`` (what a benchmark printed), or a chapter whose stored
outputs printed the figures. Every number in the row's *result* cell must occur in that source, to
the decimals the README shows: a figure that no run produced, or that a later run changed, fails
here. The table stays readable (no cell over 40 words), and the headline at the top of the README is
chapter 11's stored run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def results_table() -> tuple[list[str], list[list[str]]]:
    """The README's results table: its header, and its rows as lists of cells (the rule
    excluded)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    return cells[0], cells[2:]


def results_rows() -> list[dict[str, str]]:
    """The rows of the results table, each as {column name: cell}."""
    header, rows = results_table()
    return [dict(zip(header, row, strict=True)) for row in rows]


def numbers_in(value: Any) -> list[float]:
    """Every number in a JSON value: numeric leaves, and numbers written inside strings."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        return [float(m.replace(",", "")) for m in NUMBER.findall(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers_in(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers_in(v)]
    return []


def source_numbers(source: str) -> list[float]:
    """The numbers a source holds: a JSON file's values, or the text a notebook's stored outputs
    printed."""
    path = ROOT / source
    assert path.is_file(), f"the README names {source}, which is not in the repository"
    if path.suffix == ".json":
        return numbers_in(json.loads(path.read_text(encoding="utf-8")))
    notebook = json.loads(path.read_text(encoding="utf-8"))
    texts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts.append("".join(output.get("data", {}).get("text/plain", "")))
    return numbers_in("\n".join(texts))


def shown_in(token: str, numbers: list[float]) -> bool:
    decimals = len(token.split(".")[1]) if "." in token else 0
    value = float(token.replace(",", ""))
    return any(round(x, decimals) == value for x in numbers)


def test_the_results_table_has_rows_and_each_names_its_source():
    rows = results_rows()
    assert len(rows) >= 5
    for row in rows:
        sources = re.findall(r"`([^`]+\.(?:json|ipynb))`", row["source"])
        assert sources, (
            f"row {row['measurement']!r} names no result file or chapter in its source column"
        )


def test_no_cell_of_the_results_table_is_over_40_words():
    header, rows = results_table()
    for row in rows:
        for name, cell in zip(header, row, strict=True):
            assert len(cell.split()) <= 40, (
                f"the {name} cell of {row[0][:40]!r} has {len(cell.split())} words"
            )


@pytest.mark.parametrize("row", results_rows(), ids=lambda row: row["measurement"][:40])
def test_every_number_of_a_result_comes_from_its_source(row):
    sources = re.findall(r"`([^`]+\.(?:json|ipynb))`", row["source"])
    numbers = [x for source in sources for x in source_numbers(source)]
    missing = [token for token in NUMBER.findall(row["result"]) if not shown_in(token, numbers)]
    assert not missing, f"row {row['measurement']!r}: {missing} appear in none of {sources}"


def test_the_headline_is_chapter_11s_stored_run():
    """The first screen of the README states the stored run's scores, read from its result file."""
    results = json.loads((ROOT / "results" / "translation-cpu.json").read_text(encoding="utf-8"))[
        "results"
    ]
    headline = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert (
        f"**{results['bleu']:.2f} BLEU** (greedy) and **{results['bleu_beam']:.2f}** (beam search)"
        in headline
    )
    assert f"after {results['steps']:,} training steps" in headline, (
        "the headline names the run's step budget"
    )
    record = json.loads((ROOT / "results" / "translation-cpu.json").read_text(encoding="utf-8"))
    cpu = "Intel Xeon" if "Xeon" in record["machine"]["cpu"] else record["machine"]["cpu"]
    precision = {"none": "float32", "bf16": "bfloat16"}[results["amp"]]
    threads = "one thread" if results["threads"] == 1 else f"{results['threads']} threads"
    for fact in (f"{results['train_seconds']:,.1f} s of training", cpu, precision, threads):
        assert fact in " ".join(headline.split()), f"the headline's time says where it ran: {fact}"
