"""Every decimal number in a chapter's prose was printed by a run, not typed from memory.

A chapter states a measured result with its number; that number must come from the chapter's own
stored outputs, from its code (a setting such as a dropout of 0.1), or from a committed result file
the chapter names (``results/...json``). The test reads each decimal number of the prose of every
chapter (main path and "Going deeper") and looks for it, to the decimals the prose shows, in
those sources. What a sentence works out from printed numbers (a difference, a ratio) is listed in
``DERIVED`` with the numbers it comes from, and the test does the arithmetic.

Inline and display maths, code spans, link targets, citations and section numbers ("section
3.2.1", "[14.7]") are not measurements and are left out.
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
DECIMAL = re.compile(r"(?<![\w.,$\\^{/-])(\d{1,3}(?:,\d{3})+|\d+)\.(\d+)(?![\w.]*\d)")
ANY_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
RESULT_FILE = re.compile(r"(?:benchmarks/)?results/[\w.-]+\.json")

# Numbers a chapter's prose works out from numbers it printed or named: shown -> (operation, a, b),
# where
# a and b are themselves printed, in a named file, or derived here.
DERIVED: dict[str, dict[str, tuple[str, str, str]]] = {
    "08_encoder_decoder_model": {
        # the library's initial weights against PyTorch's defaults: printed standard deviations
        "1.7": ("ratio", "0.0442", "0.0255"),  # attention projections
        "1.1": ("ratio", "0.0280", "0.0255"),  # FFN linear1
        "2.2": ("ratio", "0.0280", "0.0128"),  # FFN linear2
    },
    "11_translation": {
        # seed spreads: the earlier recipe (Noam), the chosen one (chapter 15's baseline), the step
        # budget
        "1.58": ("diff", "32.00", "33.58"),
        "0.48": ("diff", "34.57", "35.05"),
        "0.0134": ("diff", "2.0957", "2.0823"),
        "0.05": ("diff", "36.53", "36.58"),
        "0.26": ("diff", "37.68", "37.94"),
        "0.0066": ("diff", "1.8905", "1.8839"),
        "0.02": ("diff", "36.56", "36.58"),
        "0.22": ("diff", "37.72", "37.94"),
        "0.0060": ("diff", "1.8899", "1.8839"),
        "0.0297": ("diff", "2.1302", "2.1005"),  # chapter 15's Post-LN, seeds 0 and 1
        "37.83": ("mean", "37.72", "37.94"),
        # the chapter's 30-minute run against the earlier one, and against 900 steps
        "0.64": ("diff", "39.04", "39.68"),
        "0.01": ("diff", "38.44", "38.43"),
        "1.9": ("diff", "38.44", "36.56"),
        "1.3": ("diff", "39.04", "37.72"),
        # the new recipe against the earlier one, seed for seed
        "4.56": ("diff", "36.56", "32.00"),
        "3.00": ("diff", "36.58", "33.58"),
        "3.15": ("diff", "37.72", "34.57"),
        "2.89": ("diff", "37.94", "35.05"),
        # the sweep's steps (results/translation-sweep.json), and each against the seed spread
        "3.70": ("diff", "26.5", "22.8"),
        "0.3796": ("diff", "2.9815", "2.6019"),
        "0.1149": ("diff", "2.6019", "2.487"),
        "0.0454": ("diff", "2.6019", "2.5565"),
        "0.11": ("diff", "25.57", "25.46"),
        "3.39": ("diff", "19.79", "16.4"),
        "4.07": ("diff", "22.8", "18.73"),
        "0.0338": ("diff", "2.9815", "2.9477"),
        "7.7": ("ratio", "3.70", "0.48"),
        "8.5": ("ratio", "4.07", "0.48"),
        "8.6": ("ratio", "0.1149", "0.0134"),
        "0.07": ("ratio", "0.11", "1.58"),
        # the full runs at peaks 2e-3 and 3e-3 (results/translation-cpu-recipe.json)
        "0.0075": ("diff", "1.6995", "1.692"),
    },
    "15_variants": {
        # the smoke profile's validation losses against the baseline's seeds (4.3228 to 4.3927): its
        # spread, RoPE and modern below its best seed, Post-LN above its worst
        "0.07": ("diff", "4.3927", "4.3228"),
        "0.12": ("diff", "4.3228", "4.204"),
        "0.02": ("diff", "4.411", "4.3927"),
        # the cpu profile: the baseline's seed spread, and each variant against both baseline seeds
        "0.05": ("diff", "36.58", "36.53"),
        "0.26": ("diff", "37.94", "37.68"),
        "0.08": ("diff", "1.8839", "1.8026"),
        "0.21": ("diff", "2.1005", "1.8905"),
        "0.25": ("diff", "2.1302", "1.8839"),
        "1.58": ("diff", "33.58", "32.00"),  # the earlier recipe's two baseline seeds
    },
}


def _prose(markdown: str) -> str:
    """The prose of a markdown cell with what is not a measurement taken out."""
    text = re.sub(r"```.*?```|\$\$.*?\$\$|:::.*?\n|`[^`]*`", " ", markdown, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"\{cite:?\w*\}`[^`]*`", " ", text)
    text = re.sub(r"\[[\d.]+\]", " ", text)  # links such as [14.7]
    text = re.sub(
        r"(?i)\b(sections?|table|version|torch|python|equation|figure)\s+[\d.]+", " ", text
    )
    return text


def _chapter(path: Path) -> tuple[str, str, list[float]]:
    """A chapter's prose, the text of its code and outputs, and the numbers of the result files it
    names."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    printed = []
    for cell in (c for c in cells if c["cell_type"] == "code"):
        printed.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            printed.append("".join(output.get("text", "")))
            printed.append("".join(output.get("data", {}).get("text/plain", "")))
    named = []
    for name in sorted(set(RESULT_FILE.findall(markdown))):
        candidates = [ROOT / name, ROOT / "benchmarks" / name]
        file = next((f for f in candidates if f.is_file()), None)
        assert file is not None, f"{path.name} names {name}, which is not in the repository"
        named += _json_numbers(json.loads(file.read_text(encoding="utf-8")))
    return _prose(markdown), "\n".join(printed), named


def _json_numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _json_numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _json_numbers(v)]
    return []


def _rounds_to(value: float, shown: str) -> bool:
    """Whether ``value`` shows as ``shown`` (a difference of 0.065 may be written 0.07: half rounds
    up)."""
    places = len(shown.split(".")[1])
    try:
        half_up = Decimal(f"{value:.10g}").quantize(
            Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP
        )
    except InvalidOperation:  # more digits than Decimal's precision: a huge value, not this one
        return False
    return f"{value:.{places}f}" == shown or str(half_up) == shown


def _sourced(
    shown: str, printed: str, numbers: list[float], derived: dict[str, tuple[str, str, str]]
) -> bool:
    """Whether ``shown`` was printed, is in a named file, or is worked out (as ``DERIVED`` says)
    from such."""
    if shown in printed or any(_rounds_to(abs(x), shown) for x in numbers):
        return True
    if shown not in derived:
        return False
    operation, a, b = derived[shown]
    if not (_sourced(a, printed, numbers, derived) and _sourced(b, printed, numbers, derived)):
        return False
    x, y = float(a), float(b)
    value = {"diff": abs(x - y), "mean": (x + y) / 2, "ratio": x / y}[operation]
    return _rounds_to(value, shown)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_decimal_number_in_the_prose_was_printed_or_is_in_a_named_result_file(
    path: Path,
) -> None:
    prose, printed, named = _chapter(path)
    numbers = [float(m.replace(",", "")) for m in ANY_NUMBER.findall(printed)] + named
    derived = DERIVED.get(path.stem, {})
    missing = []
    for match in DECIMAL.finditer(prose):
        shown = f"{match.group(1).replace(',', '')}.{match.group(2)}"
        if match.group(0) not in printed and not _sourced(shown, printed, numbers, derived):
            missing.append(match.group(0))
    assert not missing, (
        f"{path.name}: numbers in the prose that no output printed: {sorted(set(missing))}"
    )


def test_a_derived_number_that_does_not_follow_from_its_inputs_fails() -> None:
    derived = {"0.50": ("diff", "2.00", "1.40")}  # 0.60, not 0.50
    assert not _sourced("0.50", "2.00 1.40", [], derived)
    assert _sourced("0.60", "2.00 1.40", [], {"0.60": ("diff", "2.00", "1.40")})
    assert not _sourced("0.60", "2.00", [], {"0.60": ("diff", "2.00", "1.40")}), (
        "an input nobody printed"
    )
