"""The boxes that run the trained model in the page (loaded from _config.yml).

Two directives for a notebook's markdown cell. Chapter 11's "Translate in your browser" box::

    ```{translator}
    ```

and the live attention box of chapters 3-5, which opens on one map (``encoder``, ``decoder`` or
``cross``; the reader can switch), for the running example, at the layer and head where its
relation shows most (in the encoder, where *spielen* reads *Hunde*), and says which::

    ```{attention-explorer}
    :view: encoder
    ```

Each becomes an empty ``<div>`` that a script of ``_book_static/`` fills (``translator.js``,
``attention_explorer.js``), both through ``trained_model.js``, which loads the model once per page
from ``_static/translator/`` and two npm packages from ``_static/vendor/``.

When the HTML build finishes, this extension copies into the site the model's files (package data
of ``transformer_book``, ``transformer_book/translator/``, made by
``scripts/build_browser_model.py``; Python reads the same files through
``transformer_book.trained``) and, from ``node_modules/``, the few files of the pinned npm packages
of ``package.json`` (``onnxruntime-web``, ``@huggingface/tokenizers``) that the page needs, which
``scripts/setup_browser.sh`` installs: the site runs the model offline, and the browser tests check
the very files readers load. Without them the build still succeeds, says so, and the boxes tell the
reader which file is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOGGER = logging.getLogger(__name__)
# (package folder in node_modules, files in it); each package's licence goes along.
VENDOR = {
    "onnxruntime-web": [
        "dist/ort.wasm.min.mjs",
        "dist/ort-wasm-simd-threaded.mjs",
        "dist/ort-wasm-simd-threaded.wasm",
    ],
    "@huggingface/tokenizers": ["dist/tokenizers.min.mjs"],
}
MODEL = Path("transformer_book") / "translator"  # relative to the book's root
MODEL_FILES = ("encoder.onnx", "decoder.onnx", "weights.bin", "tokenizer.json", "config.json")
VIEWS = ("encoder", "decoder", "cross")


def box_html(static: str, kind: str, attributes: str = "", script: str = "translator.js") -> str:
    """A box's HTML: the style sheet, the empty container, the shared loader and the box's script.

    ``static``: the path from the page to ``_static/``; ``kind``: the container's class.
    """
    return (
        f'<link rel="stylesheet" href="{static}translator.css">\n'
        f'<div class="{kind}" data-state="waiting"{attributes}><p>This box runs a trained '
        "model in the page: it needs JavaScript.</p></div>\n"
        f'<script src="{static}trained_model.js"></script>\n'
        f'<script src="{static}{script}"></script>\n'
    )


def explorer_html(static: str, view: str) -> str:
    """The ``{attention-explorer}`` box opening on ``view`` (one of :data:`VIEWS`)."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    return box_html(static, "attention-explorer", f' data-view="{view}"', "attention_explorer.js")


class _BoxDirective(SphinxDirective):
    has_content = False

    def static(self) -> str:
        """The path from this page to ``_static/``."""
        return "../" * self.env.docname.count("/") + "_static/"


class TranslatorDirective(_BoxDirective):
    """Chapter 11's translator box."""

    def run(self) -> list[nodes.Node]:
        """One raw HTML node."""
        return [nodes.raw("", box_html(self.static(), "translator"), format="html")]


class AttentionExplorerDirective(_BoxDirective):
    """The live attention box; ``:view:`` is the map it opens on (default ``encoder``)."""

    option_spec = {"view": lambda value: directives.choice(value, VIEWS)}

    def run(self) -> list[nodes.Node]:
        """One raw HTML node."""
        html = explorer_html(self.static(), self.options.get("view", "encoder"))
        return [nodes.raw("", html, format="html")]


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _copy_files(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root, static = Path(app.srcdir), Path(app.outdir) / "_static"
    absent = [name for name in MODEL_FILES if not (root / MODEL / name).is_file()]
    if absent:
        how = "scripts/build_browser_model.py makes them; the boxes will say so"
        LOGGER.info("translator: %s lacks %s (%s)", MODEL, absent, how)
    for name in MODEL_FILES:
        if name not in absent:
            _copy(root / MODEL / name, static / "translator" / name)
    modules = root / "node_modules"
    needed = [f"{package}/{file}" for package, files in VENDOR.items() for file in files]
    missing = [path for path in needed if not (modules / path).is_file()]
    if missing:
        how = "run scripts/setup_browser.sh; the boxes will say so"
        LOGGER.info("translator: node_modules/ lacks %s (%s)", missing, how)
        return
    for package, files in VENDOR.items():
        for file in [*files, "LICENSE"]:
            source = modules / package / file
            if source.is_file():
                name = (
                    Path(file).name if file != "LICENSE" else f"LICENSE.{package.replace('/', '-')}"
                )
                _copy(source, static / "vendor" / name)


def setup(app: Any) -> dict[str, Any]:
    """Register the two directives and the copying of the model's and the runtime's files."""
    app.add_directive("translator", TranslatorDirective)
    app.add_directive("attention-explorer", AttentionExplorerDirective)
    app.connect("build-finished", _copy_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
