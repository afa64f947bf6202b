"""The site serves the scripts of its pages from its own files (a local extension, see _config.yml).

The pages load MathJax (``mathjax_path``), RequireJS and the ipywidgets manager
(``nb_ipywidgets_js``) from the CDN addresses that _config.yml pins, and the stored notebook outputs
load plotly.js from cdn.plot.ly (:mod:`transformer_book.interactive`: the same HTML works in Jupyter
and on Colab). Opened without a network, or behind a firewall that blocks those hosts, the book
would show raw TeX and blank figures. So, for each package of :data:`PACKAGES` that
``node_modules/`` holds at the version ``package.json`` pins (``scripts/setup_browser.sh`` installs
them; ``make book`` runs it), this extension

- points each such address at the site's own copy, ``_static/vendor/<package>/<file>`` (the path it
  has on jsDelivr, so that MathJax finds its fonts and extensions next to its script), without the
  ``crossorigin`` and ``integrity`` attributes, which a page opened from ``file://`` cannot meet;
- copies the files the pages need there, with each package's licence, when the HTML build ends.

An address of another version than the pinned one is an error (a warning, so ``-W`` fails the
build): the site would load one version and the tests check another. Without ``node_modules/`` the
addresses stay those of the CDNs (the build says so), and the site needs a network.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
# npm package: the files of it that the pages load (glob patterns inside the package's folder),
# the script first. MathJax loads its TeX extensions, its menu's accessibility tools and their
# speech rules only when a page or a reader asks for them, so those come along too.
PACKAGES = {
    "mathjax": [
        "es5/tex-mml-chtml.js",
        "es5/output/chtml/fonts/woff-v2/*.woff",
        "es5/input/tex/extensions/**/*.js",
        "es5/a11y/*.js",
        "es5/ui/*.js",
        "es5/sre/**/*",
    ],
    "requirejs": ["require.js"],
    "@jupyter-widgets/html-manager": ["dist/embed-amd.js", "dist/*.woff2", "dist/*.woff"],
    "plotly.js-dist-min": ["plotly.min.js"],
}
VENDOR = "vendor"  # under _static/
# https://cdn.jsdelivr.net/npm/<package>@<version>/<file>, the package maybe scoped (@scope/name).
JSDELIVR = re.compile(r"https://cdn\.jsdelivr\.net/npm/((?:@[^/@]+/)?[^/@]+)@([^/]+)/(.*)")
# The tag plotly.py writes for include_plotlyjs="cdn" (it adds integrity and crossorigin).
PLOTLY_TAG = re.compile(
    r'<script charset="utf-8" src="https://cdn\.plot\.ly/plotly-([^"/]+)\.min\.js"[^>]*>'
)
PLOTLY = "plotly.js-dist-min"


def pinned_versions(root: Path) -> dict[str, str]:
    """``{package: version}`` from ``package.json``'s devDependencies."""
    return json.loads((root / "package.json").read_text(encoding="utf-8"))["devDependencies"]


def installed_packages(root: Path) -> dict[str, str]:
    """``{package: version}``: the packages of :data:`PACKAGES` installed at their pinned version.

    A package counts when ``node_modules/`` holds its first file (the script a page loads).
    """
    pinned, installed = pinned_versions(root), {}
    for package, patterns in PACKAGES.items():
        folder = root / "node_modules" / package
        manifest = folder / "package.json"
        if not manifest.is_file() or not (folder / patterns[0]).is_file():
            continue
        version = json.loads(manifest.read_text(encoding="utf-8"))["version"]
        if version == pinned.get(package):
            installed[package] = version
    return installed


def local_address(value: Any, installed: dict[str, str], where: str = "") -> Any:
    """``value``, or the site's copy (relative to ``_static/``) if it is a jsDelivr address of one.

    Anything else is returned unchanged: other strings, addresses of packages the site lacks, and
    addresses of another version than the installed one (with a warning naming ``where``).
    """
    match = JSDELIVR.fullmatch(value) if isinstance(value, str) else None
    if match is None or match.group(1) not in installed:
        return value
    package, version, file = match.groups()
    if version != installed[package]:
        LOGGER.warning(
            "%s loads %s@%s; package.json pins %s", where, package, version, installed[package]
        )
        return value
    return f"{VENDOR}/{package}/{file}"


def _point_config_at_copies(app: Any, config: Any) -> None:
    installed = installed_packages(Path(app.srcdir))
    app.local_scripts = installed  # read by the handlers below
    missing = sorted(set(PACKAGES) - set(installed))
    if missing:
        LOGGER.info(
            "local_scripts: node_modules/ lacks %s at the pinned versions (run "
            "scripts/setup_browser.sh); the pages load them from their CDNs",
            missing,
        )
    config.mathjax_path = local_address(config.mathjax_path, installed, "mathjax_path")
    scripts = {}
    for url, attributes in config.nb_ipywidgets_js.items():
        where = f"nb_ipywidgets_js[{url!r}]"
        address = local_address(url, installed, where)
        attributes = {
            key: local_address(value, installed, where) for key, value in attributes.items()
        }
        if address != url:  # the site's own file: no CORS request (file:// has no CORS)
            attributes.pop("crossorigin", None)
        scripts[address] = attributes
    config.nb_ipywidgets_js = scripts


def plotly_from_the_site(body: str, address: str, version: str, pagename: str = "") -> str:
    """``body`` with every plotly.js tag of ``version`` loading ``address`` instead of the CDN."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) != version:
            LOGGER.warning(
                "%s: a stored figure loads plotly.js %s, package.json pins %s@%s (re-execute it)",
                pagename,
                match.group(1),
                PLOTLY,
                version,
            )
            return match.group(0)
        return f'<script charset="utf-8" src="{address}">'

    return PLOTLY_TAG.sub(replace, body)


def _page_context(
    app: Any, pagename: str, template: str, context: dict[str, Any], doctree: Any
) -> None:
    version = getattr(app, "local_scripts", {}).get(PLOTLY)
    if version is not None and "cdn.plot.ly" in context.get("body", ""):
        address = context["pathto"](f"_static/{VENDOR}/{PLOTLY}/plotly.min.js", 1)
        context["body"] = plotly_from_the_site(context["body"], address, version, pagename)


def copy_packages(root: Path, static: Path, installed: dict[str, str]) -> list[Path]:
    """Copy each installed package's files and licence to ``static/vendor/<package>/``."""
    copied = []
    for package in installed:
        source = root / "node_modules" / package
        patterns = [*PACKAGES[package], "LICENSE"]
        files = sorted(
            {path for pattern in patterns for path in source.glob(pattern) if path.is_file()}
        )
        for path in files:
            target = static / VENDOR / package / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            copied.append(target)
    return copied


def _copy_after_build(app: Any, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        installed = getattr(app, "local_scripts", {})
        copy_packages(Path(app.srcdir), Path(app.outdir) / "_static", installed)


def setup(app: Any) -> dict[str, Any]:
    """Register the handlers (the configuration's runs before myst-nb reads it)."""
    app.connect("config-inited", _point_config_at_copies)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_after_build)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
