"""A local Sphinx extension with one fix the book's toolchain needs (loaded from _config.yml).

Sphinx 7.4 registers a body-only script (``app.add_js_file(None, body=...)``) that an extension adds
after the HTML builder started twice: once as filename ``None`` (straight into the builder) and once
as ``""`` (copied from the registry when writing starts). sphinx-thebe adds ``const THEBE_JS_URL =
...`` that way, so every page ran it twice and the browser reported "Identifier 'THEBE_JS_URL' has
already been declared". This extension drops the repeats from each page's script list before the
page is rendered.
"""

from __future__ import annotations

from typing import Any


def _dedupe_scripts(
    app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    unique = []
    for script in scripts:
        filename = getattr(script, "filename", script) or ""
        attributes = tuple(
            sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())
        )
        key = (filename, attributes)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # the builder's own list: it restores it before the next page


def setup(app: Any) -> dict[str, Any]:
    """Register the fix (a late handler, after other extensions added their scripts)."""
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
