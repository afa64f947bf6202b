"""The book's Chinese terms render without a CJK font on the reader's machine.

Every chapter gives a new term its Chinese name (词嵌入, 位置编码, ...). The site serves the glyphs
itself: a subset of WenQuanYi Micro Hei (``_book_static/fonts/cjk-subset.woff``, made by
``scripts/make_cjk_font.py``; Apache License 2.0, recorded next to it), which
``_book_static/fonts.css`` adds after the theme's fonts for CJK characters only. Checked here:

- the subset holds a glyph for every CJK character that the built site's pages and the boxes'
  scripts show (a page that gains a new one fails here until the script runs again), and it stays
  small, with its licence beside it;
- in a Chromium that sees no CJK font of the system (a fontconfig configuration that rejects every
  font with a glyph the site uses, set for that browser alone), a Chinese term of the glossary and
  of chapter 1 is drawn with the site's font, one full-width glyph per character, where the same
  characters in the system's fonts alone come out as narrow empty boxes.

Shares the site server and the offline routing of ``tests/test_browser.py``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_browser import CHROMIUM_FLAGS, ROOT, SITE, _open, site_url  # noqa: F401 (fixture)

pytestmark = pytest.mark.book

FONT = ROOT / "_book_static" / "fonts" / "cjk-subset.woff"
LICENCE = ROOT / "_book_static" / "fonts" / "LICENSE-wqy-microhei.txt"
PAGES = ["glossary.html", "chapters/01_embedding.html"]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_cjk_font", ROOT / "scripts" / "make_cjk_font.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_subset_holds_every_cjk_character_the_site_shows() -> None:
    from fontTools.ttLib import TTFont

    script = _script()
    files = script.site_files()
    if not any(f.suffix == ".html" for f in files):
        pytest.skip("no built site: run `make book`")
    used = script.cjk_characters(files)
    held = {chr(code) for code in TTFont(FONT).getBestCmap()}
    missing = sorted(set(used) - held)
    assert len(used) >= 50, f"the site shows only {len(used)} CJK characters: {used}"
    assert not missing, (
        f"{len(missing)} CJK characters of the site lack a glyph in {FONT.name}: "
        f"{''.join(missing)} (run python scripts/make_cjk_font.py)"
    )
    assert FONT.stat().st_size < 100_000, "a subset of the glyphs used, not a whole font"
    licence = LICENCE.read_text(encoding="utf-8")
    assert "Apache License" in licence and "WenQuanYi" in licence


def _cjk_fonts() -> list[str]:
    """The files of every system font with a glyph of a CJK character (fontconfig's list)."""
    files: set[str] = set()
    patterns = [
        ":lang=zh",
        ":lang=ja",
        ":lang=ko",
        ":charset=8bcd",
        ":charset=4f4d",
        ":charset=5d4c",
    ]
    for pattern in patterns:  # 词, 位, 嵌
        listed = subprocess.run(
            ["fc-list", pattern, "file"], capture_output=True, text=True, check=False
        ).stdout
        files.update(line.strip().rstrip(":") for line in listed.splitlines() if line.strip())
    return sorted(files)


@pytest.fixture(scope="module")
def bare_browser(
    tmp_path_factory: pytest.TempPathFactory, unavailable: Callable[[str], None]
) -> Iterator[Any]:
    """Debian's Chromium with every CJK font of the system hidden from it (its own fontconfig
    configuration: the system's, less those files)."""
    executable = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if executable is None or shutil.which("fc-list") is None:
        unavailable(
            "chromium and fontconfig's fc-list are needed: sudo apt-get install -y chromium"
        )
    folder = tmp_path_factory.mktemp("fontconfig")
    rejected = "".join(f"<glob>{file}</glob>" for file in _cjk_fonts())
    config = folder / "fonts.conf"
    config.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<cachedir>{folder / 'cache'}</cachedir>"
        f"<selectfont><rejectfont>{rejected}</rejectfont></selectfont></fontconfig>",
        encoding="utf-8",
    )
    env = {**os.environ, "FONTCONFIG_FILE": str(config)}
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS, env=env
        )
        try:
            yield browser
        finally:
            browser.close()


# Marks the page's first elements whose own text holds CJK characters, and adds two probes: the
# term in the page's font, and the same in the system's sans-serif font alone (the control).
PROBES = """term => {
  const cjk = /[\\u3000-\\u303f\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff\\uff00-\\uffef]/u;
  const own = el => [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('');
  const found = [...document.querySelectorAll('.bd-article *')]
    .filter(el => cjk.test(own(el)) && el.getClientRects().length > 0).slice(0, 5);
  found.forEach((el, i) => { el.dataset.cjkProbe = String(i); });
  const article = document.querySelector('.bd-article');
  for (const [id, family] of [['cjk-page', ''], ['cjk-system', 'sans-serif']]) {
    const span = document.createElement('span');
    span.id = id; span.textContent = term; span.style.fontFamily = family;
    article.prepend(span);
  }
  return found.map(el => ({text: own(el), cjk: [...own(el)].filter(c => cjk.test(c)).length,
                           size: parseFloat(getComputedStyle(el).fontSize)}));
}"""
TERM = "词嵌入"  # word embedding, chapter 1's first term


def _fonts(cdp: Any, root: int, selector: str) -> list[dict[str, Any]]:
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    return cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


@pytest.mark.parametrize("path", PAGES)
def test_a_chinese_term_is_drawn_with_the_sites_glyphs_without_a_system_cjk_font(
    bare_browser: Any,
    site_url: str,  # noqa: F811 (the fixture)
    path: str,
) -> None:
    page, log = _open(bare_browser, site_url, path)
    try:
        terms = page.evaluate(PROBES, TERM)
        page.evaluate("() => document.fonts.ready")
        widths = page.evaluate(
            """() => ['cjk-page', 'cjk-system'].map(id => document.getElementById(id))
                 .map(el => [el.getBoundingClientRect().width,
                             parseFloat(getComputedStyle(el).fontSize)])"""
        )
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        fonts = {
            "page": _fonts(cdp, root, "#cjk-page"),
            "system": _fonts(cdp, root, "#cjk-system"),
            "terms": [_fonts(cdp, root, f'[data-cjk-probe="{i}"]') for i in range(len(terms))],
        }
        shot = page.locator('[data-cjk-probe="0"]')
        shot.evaluate("el => el.scrollIntoView({block: 'center'})")
        page.screenshot(path=str(ROOT / "_build" / "screenshots" / "cjk-no-system-font.png"))
        problems = log.problems()
    finally:
        page.context.close()
    (page_width, size), (system_width, _) = widths
    assert not any(f["glyphCount"] and not f["isCustomFont"] for f in fonts["page"]), fonts
    assert page_width >= 0.9 * len(TERM) * size, f"{TERM} drawn {page_width} px wide at {size} px"
    # the control: this browser has no CJK glyph of its own (narrow empty boxes from a Latin font)
    assert not any(f["isCustomFont"] for f in fonts["system"]), fonts["system"]
    assert system_width < 0.75 * len(TERM) * size, (
        f"the system's fonts drew {TERM} {system_width} px wide: a CJK font is not hidden"
    )
    assert terms, f"{path}: no Chinese term found"
    for term, used in zip(terms, fonts["terms"], strict=True):
        custom = sum(f["glyphCount"] for f in used if f["isCustomFont"])
        assert custom >= term["cjk"], f"{term['text']!r}: {used}"
    assert not problems, problems


def test_the_font_is_served_with_the_site() -> None:
    if not (SITE / "index.html").is_file():
        pytest.skip("no built site: run `make book`")
    served = SITE / "_static" / "fonts" / FONT.name
    assert served.is_file() and served.read_bytes() == FONT.read_bytes()
    assert (SITE / "_static" / "fonts" / LICENCE.name).is_file()
    css = (SITE / "_static" / "fonts.css").read_text(encoding="utf-8")
    assert f"fonts/{FONT.name}" in css and "unicode-range" in css
    assert 'href="_static/fonts.css' in (SITE / "intro.html").read_text(encoding="utf-8")
