"""The packages' layers (architecture.md): each part imports only the layers below it, and stays
readable.

Read from the source with ``ast``, without importing anything: every ``import`` and ``from ...
import`` of every module (those under ``if TYPE_CHECKING:`` included) is resolved to the top-level
part of its package that it names, and that part's layer must be lower than the importing module's
own (or be the same part). Three packages stand side by side: ``transformer_lib``, the library;
``transformer_tasks``, the application built on it; ``transformer_book``, the book's harness. The
library imports neither of the others, and importing it loads neither; the application imports the
library and not the harness. The packages also have no function over 100 lines, no module over 500,
and no ``unittest`` (the teaching harness patches nothing).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY, APP, HARNESS = "transformer_lib", "transformer_tasks", "transformer_book"

# The layers of each package, lowest first (architecture.md draws them). A part may import parts of
# a lower layer of its own package.
LAYERS: dict[str, dict[str, int]] = {
    LIBRARY: {
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
        "__main__": 7,
    },
    APP: {
        "multi30k": 0,
        "bleu": 0,
        "records": 0,
        "copy": 1,
        "export": 1,
        "translation": 1,
        "cli": 2,
        "__main__": 3,
    },
}
# The packages each one may import, besides itself.
MAY_IMPORT = {LIBRARY: set(), APP: {LIBRARY}}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _part(module: Path, package: str) -> str:
    """The top-level part of the package a module belongs to (``nn``, ``model``, ``cli``, ...)."""
    return module.relative_to(ROOT / package).parts[0].removesuffix(".py")


def _imports_of(source: str, package: str, folder: tuple[str, ...]) -> set[tuple[str, str]]:
    """``(package, part)`` of every import of one of the book's packages in ``source``, for a module
    that sits in ``folder`` (its path below ``package``; ``part`` is empty for the package itself).
    """
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from ..x import y: climb level - 1 packages from the module's own
                base = [package, *folder[: len(folder) - (node.level - 1)]]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module:
                target = node.module.split(".")
            else:
                continue
            if len(target) > 1:
                found.add((target[0], target[1]))
            else:  # from package import a, b: a and b are its parts (or names of its front door)
                found |= {(target[0], alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name.split(".")
                found.add((target[0], target[1] if len(target) > 1 else ""))
    return {(p, part) for p, part in found if p in (LIBRARY, APP, HARNESS)}


def _imported(module: Path, package: str) -> set[tuple[str, str]]:
    folder = module.relative_to(ROOT / package).parent.parts
    return _imports_of(module.read_text(encoding="utf-8"), package, folder)


def _violations(package: str, own: str, imported: set[tuple[str, str]]) -> list[str]:
    """The imports that reach a package it may not import, or a part of its own package in its layer
    or above."""
    layers = LAYERS[package]
    bad = []
    for other, part in sorted(imported):
        if other == package:
            if part != own and part in layers and layers[part] >= layers[own]:
                bad.append(f"{other}.{part}")
        elif other not in MAY_IMPORT[package]:
            bad.append(f"{other}.{part}" if part else other)
    return bad


@pytest.mark.parametrize("package", [LIBRARY, APP])
def test_every_part_of_a_package_has_a_layer(package: str) -> None:
    assert {_part(m, package) for m in _modules(package)} - {"__init__"} == set(LAYERS[package])


CASES = [(package, m) for package in (LIBRARY, APP) for m in _modules(package)]


@pytest.mark.parametrize(
    ("package", "module"), CASES, ids=[f"{p}/{m.relative_to(ROOT / p)}" for p, m in CASES]
)
def test_a_module_imports_only_lower_layers(package: str, module: Path) -> None:
    own = _part(module, package)
    if own == "__init__":  # a package's front door re-exports its layers: it sits above them all
        own = max(LAYERS[package], key=LAYERS[package].get)
    bad = _violations(package, own, _imported(module, package))
    assert not bad, f"{module.relative_to(ROOT)} (layer {LAYERS[package][own]}) imports {bad}"


def test_the_rule_catches_upward_imports_and_the_application() -> None:
    """The check itself: a building block in nn/ that imported the training loop, or the app, is
    caught."""
    source = (
        "from ..training import train\nfrom . import masks\nfrom transformer_lib.model import "
        "Transformer\n"
        "from transformer_tasks.translation import translate\nimport transformer_book.reference\n"
    )
    imported = _imports_of(source, LIBRARY, ("nn",))
    assert imported == {
        (LIBRARY, "training"),
        (LIBRARY, "nn"),
        (LIBRARY, "model"),
        (APP, "translation"),
        (HARNESS, "reference"),
    }
    expected = ["transformer_book.reference", "transformer_lib.model", "transformer_lib.training"]
    assert _violations(LIBRARY, "nn", imported) == [*expected, "transformer_tasks.translation"]
    app_imports = {(LIBRARY, "training"), (APP, "multi30k"), (APP, "cli")}
    assert _violations(APP, "translation", app_imports) == ["transformer_tasks.cli"]


@pytest.mark.slow  # a new Python process
def test_importing_the_library_loads_neither_the_application_nor_the_harness() -> None:
    """The library's front door in a fresh interpreter; and the application's, which loads no
    harness."""
    probe = (
        "import sys, transformer_lib, transformer_lib.training, transformer_lib.decoding\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'transformer_tasks', "
        "'transformer_book'}))\n"
        "import transformer_tasks, transformer_tasks.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'transformer_book'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["[]", "[]"]


@pytest.mark.parametrize("package", [LIBRARY, APP])
def test_modules_stay_short(package: str) -> None:
    """No module over 500 lines (a function's length is tests/test_code_shape.py's)."""
    long_modules = [
        str(module.relative_to(ROOT))
        for module in _modules(package)
        if len(module.read_text(encoding="utf-8").splitlines()) > 500
    ]
    assert long_modules == []


@pytest.mark.parametrize("package", [LIBRARY, APP])
def test_the_packages_patch_nothing(package: str) -> None:
    users = [
        str(m.relative_to(ROOT))
        for m in _modules(package)
        if "unittest" in m.read_text(encoding="utf-8")
    ]
    assert users == []
