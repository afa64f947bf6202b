"""Every internal link of the built site resolves: the file exists and so does the #anchor.

Sphinx's nitpicky build (``make test`` builds with ``-W -n``) already fails on a cross-reference
it cannot resolve; this test checks what Sphinx does not: the links that end up in
``_build/html`` (markdown links between pages, links into notebooks, the theme's navigation,
images, scripts, stylesheets). No network: links with a scheme (``https:``, ``mailto:``...) are
not followed.

Needs a built site (``make book``; ``make test`` builds it before the unit tests). Without one the
test is skipped, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
LINK_ATTRIBUTES = {
    "a": "href",
    "link": "href",
    "img": "src",
    "script": "src",
    "iframe": "src",
    "source": "src",
}


class _Page(HTMLParser):
    """The anchors (``id`` and ``<a name>``) a page defines and the links it makes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if values.get(key):
                self.anchors.add(values[key] or "")
        target = values.get(LINK_ATTRIBUTES.get(tag, ""))
        if target:
            self.links.append(target)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def site_pages(site: Path) -> list[Path]:
    """The pages of ``site``: its ``.html`` files outside ``_static/`` (which holds theme
    templates)."""
    return [
        path
        for path in sorted(site.rglob("*.html"))
        if "_static" not in path.relative_to(site).parts
    ]


def broken_links(site: Path) -> list[str]:
    """``"page.html -> target (reason)"`` for every internal link of ``site`` that does not
    resolve."""
    pages = {path: _parse(path) for path in site_pages(site)}
    problems = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:  # https:, mailto:, data:, //cdn...: not followed
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if parts.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)} -> {link}"
            if not target.is_relative_to(site.resolve()):
                problems.append(f"{where} (points outside the site)")
            elif not target.is_file():
                problems.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                anchors = pages[target].anchors if target in pages else _parse(target).anchors
                if unquote(parts.fragment) not in anchors:
                    problems.append(f"{where} (no anchor #{parts.fragment})")
    return problems


def test_checker_finds_a_missing_page_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/a.html#here">ok</a> <a href="sub/a.html#gone">x</a>'
        ' <a href="b.html">x</a> <a href="https://example.org/">outside</a> <img src="sub/">',
        encoding="utf-8",
    )
    (tmp_path / "sub" / "a.html").write_text(
        '<h1 id="here">A</h1><a href="../index.html">up</a>', encoding="utf-8"
    )
    (tmp_path / "_static").mkdir()
    template = "<a href=\"{{ pathto('x') }}\">not a page</a>"
    (tmp_path / "_static" / "template.html").write_text(template, encoding="utf-8")
    assert broken_links(tmp_path) == [
        "index.html -> sub/a.html#gone (no anchor #gone)",
        "index.html -> b.html (no such file)",
        "index.html -> sub/ (no such file)",
    ]


def test_every_internal_link_of_the_built_site_resolves(unavailable) -> None:
    if not (SITE / "index.html").is_file():
        unavailable(f"the site is not built ({SITE}); run `make book`")
    pages = site_pages(SITE)
    assert len(pages) >= 13, f"only {len(pages)} pages in {SITE}"
    problems = broken_links(SITE)
    assert not problems, f"{len(problems)} broken internal links:\n  " + "\n  ".join(problems[:50])
