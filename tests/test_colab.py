"""The Colab path: the chapters' install cell, run in a fresh environment that has only what Colab
preinstalls.

Google Colab comes with torch, matplotlib, ipywidgets, plotly and a Jupyter kernel, but not this
book's package or its other dependencies. This test builds such an environment (a new virtual
environment with exactly those five, at the versions of ``requirements.txt``), runs the chapters'
first code cell in it the way Colab does (``google.colab`` importable, so the cell installs
``transformer-lib[book]``), with one change: the repository URL points at this clone and the branch
at its current commit. Then it executes a few chapters in that environment's kernel, from an empty
folder, with the smoke profile, and checks that the packages they imported (``transformer_lib`` and
the book's harness ``transformer_book``, both in the wheel) are the installed ones.

It takes a few minutes (it installs torch into the new environment) and needs PyPI for the
package's own dependencies, so ``make test`` leaves it out (marker ``colab``); ``make test-colab``
and the workflow run it. What it installs is the last commit: commit your changes first.
"""

from __future__ import annotations

import json
import re
import subprocess
import venv
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.colab

ROOT = Path(__file__).resolve().parents[1]
PREINSTALLED = ("torch", "matplotlib", "ipywidgets", "plotly", "ipykernel")
# Chapters that import every plotting library the extra provides, and train (the copy task).
CHAPTERS = ("02_positional_encoding", "08_encoder_decoder_model", "10_copy_task")
URL_LINE = re.compile(r'url, branch = "([^"]+)", "([^"]+)"')


def _pins() -> list[str]:
    """The requirements.txt pins of what Colab preinstalls (the pip cache usually has them)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if version:
            pins[name.strip().lower()] = f"{name.strip()}=={version.strip()}"
    return [pins[name] for name in PREINSTALLED]


def _install_cell() -> str:
    nb = nbformat.read(ROOT / "chapters" / f"{CHAPTERS[0]}.ipynb", as_version=4)
    return next(cell.source for cell in nb.cells if cell.cell_type == "code")


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, (
        f"{command[:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="module")
def colab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh environment with Colab's preinstalled packages, after the install cell ran in it."""
    root = tmp_path_factory.mktemp("colab")
    env_dir = root / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # Colab's pip is recent; the one venv bundles may be too old for a git+file:// URL with no host.
    _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    _run([str(python), "-m", "pip", "install", "-q", *_pins()])

    commit = _run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).stdout.strip()
    cell = _install_cell()
    assert URL_LINE.search(cell), "the install cell must name the repository and branch on one line"
    cell = URL_LINE.sub(f'url, branch = "file://{ROOT}", "{commit}"', cell)
    fake_colab = (
        "import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab')\n"
    )
    _run([str(python), "-c", fake_colab + cell], cwd=root, timeout=900)

    kernels = root / "jupyter" / "kernels" / "colab"
    kernels.mkdir(parents=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "language": "python",
    }
    (kernels / "kernel.json").write_text(
        json.dumps({**spec, "display_name": "emulated Colab"}), encoding="utf-8"
    )
    empty = root / "content"
    empty.mkdir()
    return {"python": python, "jupyter_path": root / "jupyter", "workdir": empty}


def test_the_install_cell_installs_the_package_and_its_book_extra(colab: dict[str, Path]) -> None:
    # The wheel ships both packages: the library and the book's harness that the chapters import.
    probe = (
        "import transformer_lib, transformer_book; "
        "print(transformer_lib.__file__, transformer_book.__file__)"
    )
    where = _run([str(colab["python"]), "-c", probe], cwd=colab["workdir"]).stdout.split()
    assert len(where) == 2
    for package in where:
        assert Path(package).is_relative_to(colab["python"].parents[1]), (
            f"{package} must come from the install"
        )
    # its own dependencies, which Colab lacks
    for name in ("tokenizers", "sacrebleu", "safetensors", "tqdm"):
        _run([str(colab["python"]), "-c", f"import {name}"])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_runs_on_the_emulated_colab(
    colab: dict[str, Path], chapter: str, monkeypatch
) -> None:
    monkeypatch.setenv("JUPYTER_PATH", str(colab["jupyter_path"]))
    monkeypatch.setenv("TRANSFORMER_PROFILE", "smoke")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    # One more cell at the end: which Python ran the chapter, and where its two packages came from.
    probe = (
        "import sys, transformer_book, transformer_lib\nprint(sys.executable)\n"
        "print(transformer_lib.__file__)\nprint(transformer_book.__file__)"
    )
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    client = NotebookClient(
        nb,
        kernel_name="colab",
        timeout=600,
        resources={"metadata": {"path": str(colab["workdir"])}},
    )
    client.execute()  # raises CellExecutionError, with the failing cell, on any error
    executable, *packages = nb.cells[-1].outputs[0]["text"].split()
    assert Path(executable) == colab["python"]
    assert len(packages) == 2
    assert all(Path(package).is_relative_to(colab["python"].parents[1]) for package in packages)
