"""The book's configuration and the notebooks' conventions, checked without running anything.

Jupyter Book 1 ignores some settings silently when they sit at the wrong level, and nbval only
compares outputs that were saved, so these checks catch what a green build would not.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import plotly
import pytest
import yaml

from transformer_book.browser_model import SITE_FILES

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
REPOSITORY = CONFIG["repository"]["url"]
BRANCH = CONFIG["repository"]["branch"]

# The first code cell of every chapter (chapter conventions, item 2): on Colab it installs the
# package with the `book` extra from the repository and branch that _config.yml names (the same
# ones the launch buttons open); tests/test_colab.py runs this cell in an emulated Colab.
COLAB_CELL = f"""\
# On Google Colab, install the book's package and what the chapters import (elsewhere
# `make book` did).
import sys

if "google.colab" in sys.modules:
    import subprocess

    url, branch = "{REPOSITORY}", "{BRANCH}"
    package = f"transformer-lib[book] @ git+{{url}}@{{branch}}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)"""

# nbval compares a cell's output unless the cell carries this tag (a tag, not a comment: no test
# plumbing in the code a reader copies).
IGNORE_OUTPUT = "nbval-ignore-output"
# What a plotting cell shows when it does not end with plt.show(): the repr of the last artist.
FIGURE_REPR = re.compile(r"^(<Figure size|\[?<matplotlib\.|Text\(|\[Text\()")


def _toc_files() -> list[str]:
    files: list[str] = []

    def walk(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in TOC.get("parts", []):
        walk(part.get("chapters", []))
    walk(TOC.get("chapters", []))
    return files


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def _code_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _last_code_line(source: str) -> str:
    lines = [
        line.strip()
        for line in source.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    return lines[-1] if lines else ""


def _package_versions() -> dict[str, str]:
    return json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["devDependencies"]


# --- _config.yml -------------------------------------------------------------------------------


def test_notebooks_are_not_executed_by_the_build() -> None:
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    assert "execute_notebooks" not in CONFIG, (
        "execute_notebooks must be nested under execute: (ignored at top level)"
    )


def test_build_skips_environment_and_outputs() -> None:
    assert CONFIG["only_build_toc_files"] is True
    assert {".venv/*", "_build/*", "node_modules/*"} <= set(CONFIG["exclude_patterns"])


def test_colab_launch_buttons_point_at_the_repository() -> None:
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["repository"] == {"url": REPOSITORY, "path_to_book": "", "branch": "main"}


def test_copyright_names_both_licences() -> None:
    assert "MIT" in CONFIG["copyright"] and "CC BY 4.0" in CONFIG["copyright"]
    assert (ROOT / "LICENSE").is_file() and (ROOT / "LICENSE-CONTENT").is_file()


def test_sphinx_settings_merge_into_jupyter_books() -> None:
    sphinx = CONFIG.get("sphinx", {})
    if "html_theme_options" in sphinx.get("config", {}):
        # Otherwise the theme options replace the launch and repository buttons.
        assert sphinx.get("recursive_update") is True


def _local_scripts() -> Any:
    """The book's Sphinx extension _ext/local_scripts.py, as a module."""
    spec = importlib.util.spec_from_file_location(
        "local_scripts", ROOT / "_ext" / "local_scripts.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_script_address_names_a_pinned_package_that_the_site_copies() -> None:
    """_config.yml's jsDelivr addresses: package.json's exact versions, files the build copies into
    the site.
    """
    extension, pinned = _local_scripts(), _package_versions()
    config = CONFIG["sphinx"]["config"]
    widgets = config["nb_ipywidgets_js"]
    values = [
        config["mathjax_path"],
        *widgets,
        *(v for attrs in widgets.values() for v in attrs.values()),
    ]
    addresses = [v for v in values if isinstance(v, str) and extension.JSDELIVR.fullmatch(v)]
    assert len(addresses) == 4, addresses  # MathJax, RequireJS, the widget manager and its folder
    for url in addresses:
        package, version, file = extension.JSDELIVR.fullmatch(url).groups()
        assert package in extension.PACKAGES, f"{url}: the build does not copy {package}"
        assert pinned.get(package) == version, (
            f"{url}, but package.json pins {package}@{pinned.get(package)}"
        )
        patterns = extension.PACKAGES[package]
        copied = any(fnmatch(file, p) for p in patterns) or any(
            p.startswith(file) for p in patterns if file
        )
        assert copied, f"{url}: the build copies {patterns} of {package}, not {file!r}"
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", pinned[name]) for name in extension.PACKAGES), (
        "exact versions"
    )
    assert CONFIG["sphinx"]["local_extensions"]["local_scripts"] == "_ext"


def test_stored_plotly_figures_load_the_plotly_js_that_the_site_serves() -> None:
    """The chapters' figures load plotly.js at package.json's version, which is the file the plotly
    package bundles (its sha256 is the integrity hash the figures carry), and so node_modules' copy
    is too.
    """
    from plotly.offline import get_plotlyjs_version

    pinned = _package_versions()["plotly.js-dist-min"]
    assert pinned == get_plotlyjs_version(), (
        "pin the plotly.js version that the plotly package writes figures for"
    )
    tag = re.compile(r'src="https://cdn\.plot\.ly/plotly-([^"]+)\.min\.js" integrity="([^"]+)"')
    tags = set()
    for path in NOTEBOOKS:
        for cell in _code_cells(_load(path)):
            for output in cell.get("outputs", []):
                html = "".join(output.get("data", {}).get("text/html", ""))
                tags |= set(tag.findall(html))
    assert tags and {version for version, _ in tags} == {pinned}, (
        f"figures load plotly.js {tags}, pinned {pinned}"
    )
    bundled = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    digest = "sha256-" + base64.b64encode(hashlib.sha256(bundled).digest()).decode()
    assert {integrity for _, integrity in tags} == {digest}
    copy = ROOT / "node_modules" / "plotly.js-dist-min" / "plotly.min.js"
    if copy.is_file():  # installed by scripts/setup_browser.sh
        assert copy.read_bytes() == bundled


def _install(root: Path, package: str, version: str, files: list[str]) -> None:
    folder = root / "node_modules" / package
    for file in files:
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).write_text(file, encoding="utf-8")
    (folder / "package.json").write_text(json.dumps({"version": version}), encoding="utf-8")


def test_local_scripts_copies_the_pinned_packages_and_points_the_pages_at_them(
    tmp_path: Path,
) -> None:
    extension, pinned = _local_scripts(), _package_versions()
    (tmp_path / "package.json").write_text(
        json.dumps({"devDependencies": pinned}), encoding="utf-8"
    )
    mathjax = [
        "es5/tex-mml-chtml.js",
        "es5/output/chtml/fonts/woff-v2/MathJax_Zero.woff",
        "es5/tex-svg.js",
        "LICENSE",
    ]
    _install(tmp_path, "mathjax", pinned["mathjax"], mathjax)
    _install(
        tmp_path, "plotly.js-dist-min", pinned["plotly.js-dist-min"], ["plotly.min.js", "plotly.js"]
    )
    _install(tmp_path, "requirejs", "0.0.1", ["require.js"])  # not the pinned version: not used
    installed = extension.installed_packages(tmp_path)
    assert installed == {name: pinned[name] for name in ("mathjax", "plotly.js-dist-min")}
    copied = extension.copy_packages(tmp_path, tmp_path / "_static", installed)
    assert sorted(str(path.relative_to(tmp_path / "_static")) for path in copied) == [
        "vendor/mathjax/LICENSE",
        "vendor/mathjax/es5/output/chtml/fonts/woff-v2/MathJax_Zero.woff",
        "vendor/mathjax/es5/tex-mml-chtml.js",
        "vendor/plotly.js-dist-min/plotly.min.js",
    ]
    # the configuration: MathJax from the site, RequireJS (not installed) from its CDN
    require = f"https://cdn.jsdelivr.net/npm/requirejs@{pinned['requirejs']}/require.js"
    mathjax_url = f"https://cdn.jsdelivr.net/npm/mathjax@{pinned['mathjax']}/es5/tex-mml-chtml.js"
    config = SimpleNamespace(
        mathjax_path=mathjax_url, nb_ipywidgets_js={require: {"crossorigin": "anonymous"}}
    )
    extension._point_config_at_copies(SimpleNamespace(srcdir=str(tmp_path)), config)
    assert config.mathjax_path == "vendor/mathjax/es5/tex-mml-chtml.js"
    assert config.nb_ipywidgets_js == {require: {"crossorigin": "anonymous"}}
    # a stored figure's plotly.js tag: the site's copy, without the attributes file:// cannot meet
    tag = (
        '<script charset="utf-8" src="https://cdn.plot.ly/plotly-{}.min.js" integrity="x" '
        'crossorigin="anonymous">'
    )
    body = f"<div>{tag.format(pinned['plotly.js-dist-min'])}</script></div>"
    local = extension.plotly_from_the_site(body, "../_static/p.js", pinned["plotly.js-dist-min"])
    assert local == '<div><script charset="utf-8" src="../_static/p.js"></script></div>'
    other = f"<div>{tag.format('0.1.0')}</script></div>"
    assert (
        extension.plotly_from_the_site(other, "../_static/p.js", pinned["plotly.js-dist-min"])
        == other
    )


def test_the_translator_box_loads_pinned_packages_and_committed_model_files() -> None:
    """Chapter 11's box: the npm packages the build copies are pinned exactly; the model's files are
    committed."""
    spec = importlib.util.spec_from_file_location(
        "translator_extension", ROOT / "_ext" / "translator.py"
    )
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    pinned = _package_versions()
    assert set(extension.VENDOR) <= set(pinned), (
        f"package.json lacks {set(extension.VENDOR) - set(pinned)}"
    )
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", pinned[name]) for name in extension.VENDOR), (
        "exact versions"
    )
    assert CONFIG["sphinx"]["local_extensions"]["translator"] == "_ext"
    folder = (
        ROOT / "transformer_book" / "translator"
    )  # package data; the build copies it into the site
    assert sorted(p.name for p in folder.iterdir()) == sorted(SITE_FILES)
    assert tuple(extension.MODEL_FILES) == SITE_FILES
    assert sum((folder / name).stat().st_size for name in SITE_FILES) <= 10_000_000, (
        "the page loads at most 10 MB"
    )


# --- _toc.yml ----------------------------------------------------------------------------------


def test_toc_lists_every_notebook_once_in_order() -> None:
    files = _toc_files()
    chapters = [f for f in files if f.startswith("chapters/")]
    assert len(files) == len(set(files)), "a page is listed twice in _toc.yml"
    assert chapters == [f"chapters/{nb.stem}" for nb in NOTEBOOKS], (
        "_toc.yml and chapters/*.ipynb differ"
    )
    for entry in [TOC["root"], *files]:
        assert any((ROOT / f"{entry}{suffix}").is_file() for suffix in (".md", ".ipynb")), (
            f"{entry} missing"
        )


def test_there_are_sixteen_chapters() -> None:
    assert [nb.stem[:2] for nb in NOTEBOOKS] == [f"{n:02d}" for n in range(16)]


# --- each notebook -----------------------------------------------------------------------------

notebook = pytest.mark.parametrize("path", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])


@notebook
def test_title_cell_numbers_the_chapter(path: Path) -> None:
    first = _load(path)["cells"][0]
    assert first["cell_type"] == "markdown"
    assert re.match(rf"# {int(path.stem[:2])}\. \S", _source(first)), (
        "first cell must be the title '# N. Title'"
    )


@notebook
def test_first_code_cell_installs_the_package_on_colab(path: Path) -> None:
    first = _code_cells(_load(path))[0]
    assert _source(first).strip() == COLAB_CELL


@notebook
def test_the_colab_cell_is_collapsed_and_no_test_plumbing_is_in_the_code(path: Path) -> None:
    """The reader sees the chapter's code: set-up for Colab behind a toggle, nbval's marks as cell
    tags."""
    cells = _code_cells(_load(path))
    metadata = cells[0].get("metadata", {})
    assert "hide-cell" in metadata.get("tags", []), (
        "the Colab cell must be collapsed (tag hide-cell)"
    )
    assert metadata.get("mystnb", {}).get("code_prompt_show") == "Set-up for Google Colab"
    for cell in cells:
        assert "NBVAL" not in _source(cell), (
            f"use the cell tag {IGNORE_OUTPUT!r}: {_source(cell)[:60]!r}"
        )


@notebook
def test_second_code_cell_picks_the_device_and_seeds(path: Path) -> None:
    source = _source(_code_cells(_load(path))[1])
    assert "pick_device(" in source and "set_seed(" in source


@notebook
def test_kernel_is_python3(path: Path) -> None:
    assert _load(path)["metadata"]["kernelspec"]["name"] == "python3"


@notebook
def test_saved_with_outputs_from_one_top_to_bottom_run(path: Path) -> None:
    """nbval compares only outputs that were saved: every code cell must have run, in order,
    once."""
    cells = [c for c in _code_cells(_load(path)) if _source(c).strip()]
    cells = [c for c in cells if "skip-execution" not in c.get("metadata", {}).get("tags", [])]
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"execution counts {counts}: re-run the whole notebook (make execute, or Restart & Run All)"
    )


@notebook
def test_no_saved_errors(path: Path) -> None:
    for cell in _code_cells(_load(path)):
        errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
        assert not errors, f"cell {_source(cell)[:60]!r} saved an error: {errors[0].get('ename')}"


@notebook
def test_a_chapter_that_reads_multi30k_declares_it(path: Path) -> None:
    """The tests skip a chapter as a whole when the data is missing, from what its metadata
    declares."""
    nb = _load(path)
    code = "\n".join(_source(c) for c in _code_cells(nb))
    # Reading the data set from its default folder (chapter 14 serves its own files, so it does not
    # count).
    reads = bool(re.search(r"load_multi30k\(|multi30k\.load_split\(|variants\.py", code))
    declared = "multi30k" in nb["metadata"].get("transformer_book", {}).get("needs", [])
    assert reads == declared, (
        'declare it in the notebook metadata: "transformer_book": {"needs": ["multi30k"]}'
    )


@notebook
def test_plotting_cells_end_with_plt_show(path: Path) -> None:
    for cell in _code_cells(_load(path)):
        source = _source(cell)
        last = _last_code_line(source)
        assert not last.endswith(";"), (
            f"cell ends with ';' (end it with plt.show()): {source[:80]!r}"
        )
        outputs = cell.get("outputs", [])
        draws = (
            any({"image/png", "image/svg+xml"} & set(o.get("data", {})) for o in outputs)
            and "plt." in source
        )
        if draws:
            assert last == "plt.show()", (
                f"a plotting cell must end with plt.show(): {source[:80]!r}"
            )
        # A figure's own display carries "<Figure size ...>" as text too; only a cell's *result*
        # must not.
        for output in (o for o in outputs if o["output_type"] == "execute_result"):
            text = "".join(output.get("data", {}).get("text/plain", ""))
            assert not FIGURE_REPR.match(text), (
                f"a matplotlib repr was saved ({text[:40]!r}): end with plt.show()"
            )


@notebook
def test_nbval_compares_at_least_half_of_the_printing_cells(path: Path) -> None:
    printing = [
        c
        for c in _code_cells(_load(path))
        if any(
            o["output_type"] == "stream" or "text/plain" in o.get("data", {})
            for o in c.get("outputs", [])
        )
    ]
    compared = [c for c in printing if IGNORE_OUTPUT not in c.get("metadata", {}).get("tags", [])]
    assert 2 * len(compared) >= len(printing), (
        f"only {len(compared)} of {len(printing)} cells that print are compared by nbval"
    )


def test_landing_page_links_every_chapter() -> None:
    intro = (ROOT / "intro.md").read_text(encoding="utf-8")
    for nb in NOTEBOOKS:
        assert f"](chapters/{nb.name})" in intro, f"intro.md has no link to chapters/{nb.name}"


def test_landing_page_shows_the_colab_cell_the_notebooks_run() -> None:
    """The "run it on Colab" instructions quote the very first code cell of every chapter."""
    intro = (ROOT / "intro.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", intro, flags=re.DOTALL)
    assert COLAB_CELL in [block.strip() for block in blocks], (
        "intro.md does not show the notebooks' Colab cell"
    )


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("screenshot.png", (1280, 900)),
        ("chapter05-answers.png", (1280, 900)),
        ("chapter11-phone.png", (390, 844)),
    ],
)
def test_readme_shows_screenshots_taken_by_the_browser_test(
    name: str, size: tuple[int, int]
) -> None:
    """The landing page at a desktop's size, a chapter with its answers opened, and a chapter at a
    phone's width."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"(docs/{name})" in readme
    png = (ROOT / "docs" / name).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == size, (
        f"docs/{name}: copy the browser test's screenshot from _build/screenshots/"
    )


def _headings(nb: dict[str, Any]) -> list[str]:
    """The chapter's ## headings, in order."""
    return [
        line[3:].strip()
        for cell in nb["cells"]
        if cell["cell_type"] == "markdown"
        for line in _source(cell).splitlines()
        if line.startswith("## ")
    ]


@notebook
def test_the_main_path_ends_with_a_summary_the_quiz_and_exercises_then_going_deeper(
    path: Path,
) -> None:
    """Every chapter closes the same way; what only a curious reader needs comes after, under "Going
    deeper"."""
    headings = _headings(_load(path))
    close = ["Summary", "Check yourself", "Exercises"]
    assert all(h in headings for h in close), (
        f"{path.name}: the close needs {close}, found {headings}"
    )
    where = [headings.index(h) for h in close]
    assert where == sorted(where) and where[2] - where[0] == 2, (
        f"{path.name}: {close} in this order, together"
    )
    later = headings[where[2] + 1 :]
    assert all("Going deeper" in h for h in later), (
        f"{path.name}: after the exercises only Going deeper: {later}"
    )


CHAPTERS_WITH_A_PICTURE_FIRST = [nb for nb in NOTEBOOKS if 1 <= int(nb.stem[:2]) <= 11]


@pytest.mark.parametrize(
    "path", CHAPTERS_WITH_A_PICTURE_FIRST, ids=[nb.stem for nb in CHAPTERS_WITH_A_PICTURE_FIRST]
)
def test_the_idea_comes_with_a_picture_before_the_first_code_cell(path: Path) -> None:
    """Chapters 1-11 show their concept picture, drawn by the package into figures/, before any
    code."""
    cells = _load(path)["cells"]
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    opening = "\n".join(_source(c) for c in cells[:first_code])
    pictures = re.findall(r"```\{figure\} \.\./figures/([\w.-]+\.svg)", opening)
    assert pictures, f"{path.name}: no figure before the first code cell"
    for name in pictures:
        assert (ROOT / "figures" / name).is_file(), (
            f"{path.name} shows figures/{name}, which does not exist"
        )


def test_nbval_compares_a_plotly_figures_numbers_at_a_tolerance_and_its_text_exactly():
    """conftest.py lets a Plotly output's 4th significant digit move (another processor's
    rounding) and nothing else."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stored = (
        '<div id="x"></div><script>Plotly.newPlot("x", [{"z": [[0.2732, 1.433e-05]]}])</script>'
    )
    close = module.plotly_html_close
    assert close(stored.replace("0.2732", "0.2733"), stored)
    assert close(stored.replace("1.433e-05", "1.434e-05"), stored)
    assert not close(stored.replace("0.2732", "0.2832"), stored)
    assert not close(stored.replace('"z"', '"y"'), stored)
    assert not close("<p>0.2733</p>", "<p>0.2732</p>"), "only Plotly figures"
