"""Concept pictures (概念图): the one figure each chapter opens with, drawn from code.

Each module of this package draws the idea of one chapter, before any code: the lookup table, the
waves of the positional encoding, the steps of attention, and so on. A module lists what it draws
in a ``FIGURES`` dict (file name -> function returning a matplotlib ``Figure``); ``make figures``
writes every one of them into ``figures/`` as SVG (``scripts/draw_figures.py``), the chapters show
the files, and ``tests/test_diagrams.py`` checks that each stored file is what its function draws.

Where a figure shows numbers, they are computed by the package (the running example of
:mod:`~transformer_book.example`, :func:`~transformer_lib.sinusoidal_table`, ...), never typed.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from matplotlib.figure import Figure

__all__ = ["all_figures"]


def all_figures() -> dict[str, Callable[[], Figure]]:
    """Every concept figure of the package: file name -> the function that draws it."""
    found: dict[str, Callable[[], Figure]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, draw in getattr(module, "FIGURES", {}).items():
            if name in found:
                raise ValueError(f"two concept modules draw a figure named {name!r}")
            found[name] = draw
    return found
