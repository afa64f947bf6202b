"""The code's shape: functions that fit on a screen, small constructors, plain formatting.

Read from the source (``ast``), so that a function that grows past the limit fails here with its
name and length, not in a reviewer's head. There is no cap on the packages' line counts: a cap on
lines invites packing code into fewer of them. The formatting is ruff's, with no exceptions (``make
lint``; no formatting marker that turns ruff off anywhere, checked below).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("transformer_lib", "transformer_tasks")
PYTHON_DIRS = (*PACKAGES, "transformer_book", "tests", "benchmarks", "scripts", "_ext")
MAX_FUNCTION_LINES = 50  # docstring not counted
# A function that is one idea read top to bottom, where splitting it would hide the idea: the
# training loop (chapter 9) shows the step, logging, evaluation, stopping and saving in one place.
READ_TOP_TO_BOTTOM = {"transformer_lib/training/loop.py train": 130}
MAX_INIT_PARAMETERS = 8  # self not counted

Function = ast.FunctionDef | ast.AsyncFunctionDef


def sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def functions(tree: ast.Module) -> Iterator[tuple[str, Function]]:
    """Every function and method (nested ones too), named ``Class.method`` or ``outer.inner``."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, Function]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def length_without_docstring(function: Function) -> int:
    """Lines from the ``def`` line to the last line of the body, less the docstring's lines."""
    lines = function.end_lineno - function.lineno + 1
    first = function.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        lines -= first.end_lineno - first.lineno + 1
    return lines


def all_functions() -> Iterator[tuple[str, Function]]:
    for path in sources():
        where = path.relative_to(ROOT).as_posix()
        for name, function in functions(ast.parse(path.read_text(encoding="utf-8"))):
            yield f"{where}:{function.lineno} {name}", function


def test_the_walk_sees_methods_and_nested_functions_and_skips_docstrings() -> None:
    source = (
        'class A:\n    def f(self):\n        """Doc\n\n        string."""\n'
        "        def g():\n            pass\n"
    )
    tree = ast.parse(source)
    found = dict(functions(tree))
    assert set(found) == {"A.f", "A.f.g"}
    assert (
        length_without_docstring(found["A.f"]) == 6 - 3
        and length_without_docstring(found["A.f.g"]) == 2
    )


def test_no_function_is_over_50_lines() -> None:
    long = []
    for name, f in all_functions():
        where, _, qualified = name.partition(" ")
        limit = READ_TOP_TO_BOTTOM.get(f"{where.split(':')[0]} {qualified}", MAX_FUNCTION_LINES)
        if (n := length_without_docstring(f)) > limit:
            long.append((name, n))
    assert not long, f"over {MAX_FUNCTION_LINES} lines (docstring not counted): " + "; ".join(
        f"{name} ({n})" for name, n in long
    )


def test_no_constructor_takes_more_than_8_parameters() -> None:
    big = []
    for name, f in all_functions():
        if f.name == "__init__":
            a = f.args
            count = (
                len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - 1 + (a.vararg is not None)
            )
            count += a.kwarg is not None
            if count > MAX_INIT_PARAMETERS:
                big.append(f"{name} ({count})")
    assert not big, (
        f"constructors over {MAX_INIT_PARAMETERS} parameters (self not counted): " + "; ".join(big)
    )


def test_no_formatting_exceptions() -> None:
    """ruff formats all the code: no region of any Python file is left to be packed by hand."""
    marker = "# fmt: " + "skip", "# fmt: " + "off"  # split, so that this file does not hold them
    paths = [ROOT / "conftest.py", *(p for d in PYTHON_DIRS for p in (ROOT / d).rglob("*.py"))]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if any(m in line for m in marker)
    ]
    assert found == []
