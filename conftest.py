"""pytest's configuration for the whole repository: the unit tests (``tests/``) and the chapters
(nbval).

Multi30k is found the way the package finds it
(:func:`transformer_tasks.multi30k.default_data_dir`): the folder in ``MULTI30K_DIR``, else the user
cache, where a missing file is downloaded and verified. When it can be neither found nor downloaded
(offline, say), every test that needs it and every chapter that declares it needs it (notebook
metadata ``"transformer_book": {"needs": ["multi30k"]}``) is skipped as a whole, with one reason
that says how to get the data. Under CI (``CI`` set) those skips are failures: CI always has the
data.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transformer_tasks import multi30k

MULTI30K_REASON = (
    "Multi30k is not available: set MULTI30K_DIR to a folder holding its six .gz files, or run "
    "once with "
    "a network (they are then downloaded and verified into ~/.cache/transformer_lib/multi30k)"
)
NOTEBOOK_METADATA_KEY = "transformer_book"
# amp="auto" on a CPU times the training step once per machine and keeps the answer in the user's
# cache folder; the tests (and the notebooks they run) keep theirs apart, and the reader's as it is.
os.environ.setdefault("TRANSFORMER_LIB_CACHE", tempfile.mkdtemp(prefix="transformer-lib-cache-"))


def running_under_ci() -> bool:
    """Whether the ``CI`` environment variable is set to something true (GitHub Actions sets
    ``true``).
    """
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def skip_or_fail(reason: str) -> None:
    """Skip the current test; under CI, fail it instead (CI must have everything a test needs)."""
    if running_under_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def unavailable() -> Callable[[str], None]:
    """``unavailable(reason)``: skip the test for a missing tool or file; under CI, fail it
    instead.
    """
    return skip_or_fail


@functools.cache
def multi30k_folder() -> Path | None:
    """The verified Multi30k folder, downloading what is missing; ``None`` when that is impossible.

    A file that is there but corrupted raises :class:`~transformer_tasks.multi30k.ChecksumError`:
    that is a real failure, never a skip.
    """
    folder = multi30k.default_data_dir()
    try:
        multi30k.ensure_files(folder)
    except multi30k.DownloadError:
        return None
    return folder


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The folder holding the six verified Multi30k files (skips the test when there is none)."""
    folder = multi30k_folder()
    if folder is None:
        skip_or_fail(MULTI30K_REASON)
    return folder


@functools.cache
def notebook_needs(path: Path) -> frozenset[str]:
    """What a chapter declares it needs in its metadata (``{"transformer_book": {"needs":
    [...]}}``).
    """
    metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    return frozenset(metadata.get(NOTEBOOK_METADATA_KEY, {}).get("needs", []))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let nbval skip a figure stored as SVG, as it skips one stored as PNG.

    The chapters draw their figures as SVG (``transformer_book.plotting.use_book_figures``), whose
    bytes change with every number plotted; tests/test_browser.py measures the stored figures
    instead.
    """
    for item in items:
        notebook = item.parent
        skip = getattr(notebook, "skip_compare", None)
        if isinstance(skip, tuple) and "image/svg+xml" not in skip:
            notebook.skip_compare = (*skip, "image/svg+xml")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip every cell of a chapter that needs Multi30k before its kernel starts, when the data is
    missing.
    """
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb" and "multi30k" in notebook_needs(path) and multi30k_folder() is None:
        skip_or_fail(MULTI30K_REASON)


# A Plotly figure stores the numbers it draws in its HTML (transformer_book.explorers rounds them
# to 4 significant digits). Another processor, or PyTorch's other vectorised kernels
# (ATEN_CPU_CAPABILITY=default), rounds the sums behind them differently in the last bits, which
# can move a 4th digit. So nbval compares a Plotly output's numbers at this relative tolerance,
# and the rest of its text exactly; every other output as it is.
PLOTLY_RELATIVE_TOLERANCE = 2e-3
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def plotly_html_close(fresh: str, stored: str, rel: float = PLOTLY_RELATIVE_TOLERANCE) -> bool:
    """Whether two HTML texts of a Plotly figure are the same but for their numbers' last digits."""
    if "plotly" not in stored.lower() or _NUMBER.split(fresh) != _NUMBER.split(stored):
        return False
    pairs = zip(_NUMBER.findall(fresh), _NUMBER.findall(stored), strict=True)
    return all(math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-4) for a, b in pairs)


def _with_close_plotly_html_as_stored(fresh: list[Any], stored: list[Any]) -> list[Any]:
    """``fresh`` outputs, each Plotly HTML that is close to the stored one replaced by it."""
    aligned = []
    for new, old in zip(fresh, stored, strict=False):
        html, stored_html = (
            new.get("data", {}).get("text/html"),
            old.get("data", {}).get("text/html"),
        )
        if isinstance(html, str) and isinstance(stored_html, str) and html != stored_html:
            if plotly_html_close(html, stored_html):
                new = copy.deepcopy(new)  # nbval's outputs are NotebookNodes: keep the type
                new["data"]["text/html"] = stored_html
        aligned.append(new)
    return aligned + list(fresh[len(aligned) :])


try:
    from nbval.plugin import IPyNbCell
except ImportError:  # no nbval (an environment without the book's test tools)
    IPyNbCell = None
if IPyNbCell is not None:
    _compare_outputs = IPyNbCell.compare_outputs

    def _compare_at_tolerance(self: Any, test: list[Any], ref: list[Any], *args: Any, **kw: Any):
        return _compare_outputs(
            self, _with_close_plotly_html_as_stored(test, ref), ref, *args, **kw
        )

    IPyNbCell.compare_outputs = _compare_at_tolerance
