"""The markers that ``make test-fast`` selects by (``-m "not book and not slow"``) are where they
belong: a test that starts a process is ``slow``, a test of the built site is ``book``.

Read from the source (``ast``), so a new test that starts a process without its marker fails here
instead of slowing the quick loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROCESS_CALLS = {"run", "Popen", "check_output", "check_call"}  # subprocess.*


def marks(decorators: list[ast.expr]) -> set[str]:
    """The names ``x`` of the ``pytest.mark.x`` in a decorator list or a ``pytestmark`` value."""
    found = set()
    for node in decorators:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute):
                if sub.value.attr == "mark":
                    found.add(sub.attr)
    return found


def module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return marks([node.value])
    return set()


def starts_a_process(function: ast.AST) -> bool:
    """Whether the function calls ``subprocess.run`` (or another way to start one) itself."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "subprocess":
                if node.func.attr in PROCESS_CALLS:
                    return True
    return False


MODULES = sorted(p for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_test_that_starts_a_process_is_marked_slow(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    marked = module_marks(tree)
    if marked & {"slow", "book", "colab"}:
        return  # the whole module is left out of the quick loop
    unmarked = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test")
        and starts_a_process(node)
        and not marks(node.decorator_list) & {"slow", "book"}
    ]
    assert unmarked == [], f"{path.name}: mark these @pytest.mark.slow: {unmarked}"


def test_the_browser_and_chapter_tests_are_marked_book() -> None:
    """A module that opens the built site (``browser_layout``, Playwright) or tests a chapter's
    concept code (``test_concepts_*``) is marked ``book``."""
    unmarked = []
    for path in MODULES:
        text = path.read_text(encoding="utf-8")
        browser = "import browser_layout" in text or "from playwright" in text
        if browser or path.stem.startswith("test_concepts_"):
            if not module_marks(ast.parse(text)) & {"book", "colab"}:
                unmarked.append(path.name)
    assert unmarked == []


def test_the_check_finds_a_process_started_without_its_marker() -> None:
    source = "import subprocess\n\ndef test_x():\n    subprocess.run(['true'])\n"
    function = ast.parse(source).body[1]
    assert starts_a_process(function) and not marks(function.decorator_list)
    marked = ast.parse("@pytest.mark.slow\ndef test_x():\n    pass\n").body[0]
    assert marks(marked.decorator_list) == {"slow"}
