"""The bibliography and the citations agree: every cited key exists, every entry is cited or listed
as not yet."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "references.bib"
MARKDOWN_FILES = ("intro.md", "architecture.md", "api.md")
REQUIRED_FIELDS = ("title", "author", "year")

# Entries of references.bib that no page cites yet (none: every entry is cited). Adding an entry
# that nothing
# cites means either citing it or adding it here; the test below asserts equality, so it fails on a
# new uncited
# entry and on a stale allowance alike.
NOT_YET_CITED: frozenset[str] = frozenset()

# `{cite}`, `{cite:p}`, `{cite:t}` and the other sphinxcontrib-bibtex cite roles; the keys are
# comma-separated.
CITE_ROLE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]*)`")
FENCED_BLOCK = re.compile(r"^(```|~~~).*?^\1", flags=re.DOTALL | re.MULTILINE)
# `@type{key,` at the start of a line; @comment, @string and @preamble are not entries.
ENTRY_START = re.compile(r"^[ \t]*@([A-Za-z]+)[ \t]*\{[ \t]*([^,\s]+)[ \t]*,", flags=re.MULTILINE)
NOT_ENTRIES = {"comment", "string", "preamble"}


def bib_keys(text: str) -> list[str]:
    """The entry keys of a BibTeX text, in order, duplicates kept."""
    return [key for kind, key in ENTRY_START.findall(text) if kind.lower() not in NOT_ENTRIES]


def cited_keys(markdown: str) -> list[str]:
    """The keys of every cite role in a piece of MyST markdown (fenced code blocks are skipped)."""
    keys = []
    for group in CITE_ROLE.findall(FENCED_BLOCK.sub("", markdown)):
        keys.extend(key.strip() for key in group.split(",") if key.strip())
    return keys


def citations(documents: dict[str, str]) -> dict[str, list[str]]:
    """For each cited key, the places (names of `documents`) that cite it."""
    places: dict[str, list[str]] = {}
    for place, markdown in documents.items():
        for key in cited_keys(markdown):
            places.setdefault(key, [])
            if place not in places[key]:
                places[key].append(place)
    return places


def missing_citations(documents: dict[str, str], known: set[str]) -> dict[str, list[str]]:
    """The cited keys that are not in `known`, each with the places that cite it."""
    return {key: where for key, where in citations(documents).items() if key not in known}


def book_documents() -> dict[str, str]:
    """The markdown of the book: the top-level pages and every markdown cell of the chapters."""
    documents = {}
    for name in MARKDOWN_FILES:
        path = ROOT / name
        if path.exists():
            documents[name] = path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        for index, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] == "markdown":
                source = cell["source"]
                text = source if isinstance(source, str) else "".join(source)
                documents[f"chapters/{path.name} cell {index}"] = text
    return documents


@pytest.fixture(scope="module")
def bib_text() -> str:
    return BIB.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def known_keys(bib_text: str) -> set[str]:
    return set(bib_keys(bib_text))


def test_every_cited_key_is_in_the_bibliography(known_keys: set[str]) -> None:
    missing = missing_citations(book_documents(), known_keys)
    report = "; ".join(
        f"{key} (cited in {', '.join(where)})" for key, where in sorted(missing.items())
    )
    assert not missing, f"cited but not in references.bib: {report}"


def test_no_duplicate_keys(bib_text: str) -> None:
    # BibTeX compares keys without regard to case.
    counts = Counter(key.lower() for key in bib_keys(bib_text))
    duplicates = sorted(key for key, count in counts.items() if count > 1)
    assert not duplicates, f"keys defined more than once in references.bib: {duplicates}"


def test_every_entry_has_title_author_and_year(bib_text: str) -> None:
    pybtex_database = pytest.importorskip("pybtex.database")
    # Parse with pybtex, as the book build does; a syntax error fails here.
    data = pybtex_database.parse_string(bib_text, "bibtex")
    assert set(data.entries) == set(bib_keys(bib_text)), (
        "pybtex and the key pattern of this test disagree"
    )
    incomplete = {}
    for key, entry in data.entries.items():
        present = {name.lower() for name in entry.fields} | {role.lower() for role in entry.persons}
        absent = [name for name in REQUIRED_FIELDS if name not in present]
        if absent:
            incomplete[key] = absent
    assert not incomplete, f"entries without a required field: {incomplete}"


def test_every_entry_is_cited_or_listed_as_not_yet_cited(known_keys: set[str]) -> None:
    uncited = known_keys - set(citations(book_documents()))
    new_uncited = sorted(uncited - NOT_YET_CITED)
    now_cited = sorted(NOT_YET_CITED - uncited)
    assert uncited == NOT_YET_CITED, (
        f"entries cited nowhere (cite them, or add them to NOT_YET_CITED): {new_uncited}; "
        "keys in NOT_YET_CITED that are now cited or no longer in references.bib (remove them): "
        f"{now_cited}"
    )


def test_the_parser_reports_an_unknown_key() -> None:
    markdown = (
        "Known {cite}`vaswani2017attention`, two at once {cite:p}`vaswani2017attention, "
        "nobody2099made`,\n"
        "textual {cite:t}`ghost2001`.\n\n```python\n# {cite}`inside_a_code_block`\n```\n"
    )
    assert cited_keys(markdown) == [
        "vaswani2017attention",
        "vaswani2017attention",
        "nobody2099made",
        "ghost2001",
    ]
    missing = missing_citations({"synthetic.md": markdown}, {"vaswani2017attention"})
    assert missing == {"nobody2099made": ["synthetic.md"], "ghost2001": ["synthetic.md"]}


def test_the_key_pattern_reads_entries_and_skips_comments() -> None:
    text = (
        "% @misc{commented,\n@String{venue = {X}}\n@Article{a2020,\n  title={A}}\n"
        "  @misc{ b2021 ,\n title={B}}\n"
    )
    assert bib_keys(text) == ["a2020", "b2021"]
