"""The package's layers (architecture.md): each folder imports only the layers below it, and stays readable.

Read from the source with ``ast``, without importing anything: every ``import`` and ``from ... import``
of every module of ``transformer_lib`` (those under ``if TYPE_CHECKING:`` included) is resolved to the
top-level part of the package it names, and that part's layer must be lower than the importing
module's own (or be the same part). The book's harness, ``transformer_book``, stands beside the library:
no module of ``transformer_lib`` imports it, and importing ``transformer_lib`` does not load it. The
package also has no function over 100 lines, no module over 500, and no ``unittest`` (the teaching
harness patches nothing).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lib"
HARNESS = "transformer_book"

# The layers, lowest first (architecture.md draws them). A part may import parts of a lower layer.
LAYERS: dict[str, int] = {
    "validation": 0,
    "files": 0,
    "runtime": 0,
    "eval_mode": 0,
    "nn": 1,
    "config": 2,
    "data": 3,
    "model": 4,
    "checkpoint": 5,
    "training": 6,
    "decoding": 6,
    "export": 6,
    "tasks": 7,
    "cli": 8,
    "__main__": 9,
}
MODULES = sorted(PACKAGE.rglob("*.py"))


def _part(module: Path) -> str:
    """The top-level part of the package a module belongs to (``nn``, ``model``, ``cli``, ...)."""
    relative = module.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def _imported_parts_of(source: str, package: tuple[str, ...]) -> set[str]:
    """The parts of ``transformer_lib`` that ``source`` imports, for a module in ``package`` (below the top)."""
    parts: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from ..x import y: climb level - 1 packages from the module's own
                base = list(package[: len(package) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "transformer_lib":
                target = node.module.split(".")[1:]
            else:
                continue
            parts |= {target[0]} if target else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            parts |= {a.name.split(".")[1] for a in node.names if a.name.startswith("transformer_lib.")}
    return parts


def _imported_parts(module: Path) -> set[str]:
    package = module.relative_to(PACKAGE).parent.parts  # the package the module sits in, below transformer_lib
    return _imported_parts_of(module.read_text(encoding="utf-8"), package)


def _violations(own: str, imported: set[str]) -> list[str]:
    """The imported parts that sit in ``own``'s layer or above."""
    return sorted(p for p in imported - {own} if LAYERS[p] >= LAYERS[own])


def test_every_part_of_the_package_has_a_layer() -> None:
    assert {_part(m) for m in MODULES} - {"__init__"} == set(LAYERS)


@pytest.mark.parametrize("module", MODULES, ids=[str(m.relative_to(PACKAGE)) for m in MODULES])
def test_a_module_imports_only_lower_layers(module: Path) -> None:
    own, imported = _part(module), _imported_parts(module)
    if own == "__init__":  # the package's front door re-exports the layers: it sits above them all
        return
    above = _violations(own, imported)
    assert not above, f"{module.relative_to(PACKAGE)} (layer {LAYERS[own]}) imports {above} from its layer or above"


def test_the_rule_catches_upward_imports() -> None:
    """The check itself: a building block in nn/ that imported the training loop is caught."""
    source = "from ..training import train\nfrom . import masks\nfrom transformer_lib.model import Transformer\n"
    imported = _imported_parts_of(source, ("nn",))
    assert imported == {"training", "nn", "model"}
    assert _violations("nn", imported) == ["model", "training"]
    assert _violations("tasks", {"training", "nn", "model"}) == []


def _imports_harness(source: str) -> bool:
    """Whether ``source`` imports ``transformer_book`` (``import`` or ``from ... import``, at any depth)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.split(".")[0] == HARNESS for name in names):
            return True
    return False


def test_the_harness_check_sees_every_form_of_import() -> None:
    assert _imports_harness("import transformer_book")
    assert _imports_harness("def f():\n    from transformer_book.checks import CheckFailed\n")
    assert _imports_harness("import transformer_book.reference as ref")
    assert not _imports_harness("from transformer_lib.model import Transformer\nimport transformer_books_fake")


def test_no_module_of_the_library_imports_the_book_harness() -> None:
    offenders = [str(m.relative_to(PACKAGE)) for m in MODULES if _imports_harness(m.read_text(encoding="utf-8"))]
    assert offenders == []


def test_importing_the_library_does_not_load_the_book_harness() -> None:
    """Everything the package's front door and its command line import, in a fresh interpreter."""
    probe = (
        "import sys, transformer_lib, transformer_lib.cli, transformer_lib.tasks.translation\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == {HARNESS!r}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_functions_and_modules_stay_short() -> None:
    long_functions, long_modules = [], []
    for module in MODULES:
        source = module.read_text(encoding="utf-8")
        if len(source.splitlines()) > 500:
            long_modules.append(str(module.relative_to(PACKAGE)))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                long_functions.append(f"{module.relative_to(PACKAGE)}:{node.name}")
    assert long_functions == [] and long_modules == []


def test_the_package_patches_nothing() -> None:
    users = [str(m.relative_to(PACKAGE)) for m in MODULES if "unittest" in m.read_text(encoding="utf-8")]
    assert users == []
