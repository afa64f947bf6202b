"""The ``{translator}`` directive: chapter 11's "Translate in your browser" box (loaded from
_config.yml).

In a notebook's markdown cell::

    ```{translator}
    ```

becomes an empty ``<div class="translator">`` that ``_book_static/translator.js`` fills: it loads
the exported model from ``_static/translator/`` (committed under ``_book_static/translator/``, made
by ``scripts/build_browser_model.py``) and two npm packages from ``_static/vendor/``.

The packages are the pinned ones of ``package.json`` (``onnxruntime-web``,
``@huggingface/tokenizers``), which ``scripts/setup_browser.sh`` installs into ``node_modules/``;
when the HTML build finishes, this extension copies the few files the page needs from there into the
site, so the site translates offline and the test checks the very files readers load. Without
``node_modules/`` the build still succeeds, says so, and the box tells the reader its files are
missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
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


class TranslatorDirective(SphinxDirective):
    """The box's empty container, and the page's script and style sheet (paths relative to the
    page).
    """

    has_content = False

    def run(self) -> list[nodes.Node]:
        """One raw HTML node: the style sheet, the container, the script."""
        static = "../" * self.env.docname.count("/") + "_static/"
        html = (
            f'<link rel="stylesheet" href="{static}translator.css">\n'
            '<div class="translator" data-state="loading"><p>Translate in your browser: this box '
            "needs "
            "JavaScript.</p></div>\n"
            f'<script src="{static}translator.js"></script>\n'
        )
        return [nodes.raw("", html, format="html")]


def _copy_vendor_files(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    modules, target = Path(app.srcdir) / "node_modules", Path(app.outdir) / "_static" / "vendor"
    missing = [
        f"{package}/{file}"
        for package, files in VENDOR.items()
        for file in files
        if not (modules / package / file).is_file()
    ]
    if missing:
        LOGGER.info(
            "translator: node_modules/ lacks %s (run scripts/setup_browser.sh); "
            "the box will say so",
            missing,
        )
        return
    target.mkdir(parents=True, exist_ok=True)
    for package, files in VENDOR.items():
        for file in [*files, "LICENSE"]:
            source = modules / package / file
            if source.is_file():
                name = (
                    Path(file).name if file != "LICENSE" else f"LICENSE.{package.replace('/', '-')}"
                )
                shutil.copyfile(source, target / name)


def setup(app: Any) -> dict[str, Any]:
    """Register the directive and the copying of the vendor files."""
    app.add_directive("translator", TranslatorDirective)
    app.connect("build-finished", _copy_vendor_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
