"""The built book in the dark theme (``html[data-theme="dark"]``), in headless Chromium, offline.

A caption that says "the darker the cell, the more weight" must not read backwards on a dark page,
and a figure must not turn faint on it. So, with the theme's own switch set to dark:

- the maps of the live boxes, chapter 3's ``{attention-explorer}`` and chapter 11's translator, are
  drawn on their own white card as the page shows it (the computed fill, which a stylesheet could
  change, not the attribute), in the same colours as in the light theme; each cell is darker the
  more weight it has (its luminance never rises with the weight); the labels are dark on the card,
  and the caption says so and reads on the page's background in both themes;
- every Plotly figure of the book is drawn on an opaque paper, its own card, so that its colour
  scales and its texts read as in the light theme (``tests/test_browser.py`` measures the texts'
  contrast in both themes);
- every matplotlib figure stored in a chapter is an opaque white card too.

Shares the site server, the browser and the offline routing of ``tests/test_browser.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from browser_layout import contrast
from test_browser import ROOT, SITE, _open, browser, site_url  # noqa: F401 (fixtures)
from test_browser_explorer import DARK
from test_browser_translator import _translate, _wait_until_loaded

# The colours a reader sees of a box's map: the card's, each cell's with its weight (cells a mask
# hides are grey and left out), a label's, and the caption's with the colour behind it.
MAP_COLOURS = """box => {
  const style = el => getComputedStyle(el);
  const behind = node => { for (; node; node = node.parentElement) {
      const c = style(node).backgroundColor;
      if (!/rgba\\(.*, 0\\)|transparent/.test(c)) return c; }
    return style(document.body).backgroundColor; };
  const caption = box.querySelector('figcaption');
  return {theme: document.documentElement.dataset.theme,
          page: behind(box),
          card: style(box.querySelector('svg rect.map-card')).fill,
          cells: [...box.querySelectorAll('svg rect.map-cell:not(.masked)')]
                   .map(r => [Number(r.dataset.weight), style(r).fill]),
          label: style(box.querySelector('svg text.map-label')).fill,
          caption: [caption.textContent, style(caption).color, behind(caption)]};
}"""
BLACK = "rgb(0, 0, 0)"
SCROLL = "el => el.scrollIntoView({block: 'start'})"  # no waiting for a loading box to settle


def _luminance(colour: str) -> float:
    """Relative luminance (WCAG 2) of ``rgb(r, g, b)``: 0 black, 1 white."""
    return (contrast(colour, BLACK) - 1) / 20


def map_problems(box: Any) -> list[str]:
    """What a reader would misread in the box's map on the dark page (empty: nothing)."""
    seen = box.evaluate(MAP_COLOURS)
    box.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
    light = box.evaluate(MAP_COLOURS)
    problems = []
    drawn = ("card", "cells", "label")
    if [seen[k] for k in drawn] != [light[k] for k in drawn]:
        problems.append("the map's colours differ between the dark theme and the light one")
    _, colour, behind = light["caption"]
    if contrast(colour, behind) < 4.5:
        problems.append(f"in the light theme the caption {colour} is faint on {behind}")
    if seen["theme"] != "dark" or _luminance(seen["page"]) > 0.1:
        problems.append(f"the page is not dark: theme {seen['theme']!r}, background {seen['page']}")
    if _luminance(seen["card"]) < 0.95:
        problems.append(f"the map's card is {seen['card']}: 'the darker, the more' fails")
    cells = sorted(seen["cells"], key=lambda cell: cell[0])
    if len(cells) < 4:
        problems.append(f"the map has {len(cells)} cells")
        return problems
    for (w0, c0), (w1, c1) in zip(cells, cells[1:], strict=False):
        if w1 > w0 and _luminance(c1) > _luminance(c0):
            problems.append(f"a cell of weight {w1:.3f} ({c1}) is lighter than one of {w0:.3f}")
            break
    if contrast(seen["label"], seen["card"]) < 7:
        problems.append(f"the labels {seen['label']} are faint on the card {seen['card']}")
    text, colour, behind = seen["caption"]
    if contrast(colour, behind) < 4.5:
        problems.append(f"the caption {colour} is faint on {behind}: {text[:60]!r}")
    if "darker" not in text:
        problems.append(f"the caption no longer says which cells weigh more: {text[:80]!r}")
    return problems


EXPLORER_SETTLED = """() => ['done', 'error'].includes(
  document.querySelector('div.attention-explorer').dataset.state)"""


def _explorer_drawn(page: Any, box: Any) -> None:
    """Chapter 3's box draws its map of the running example once the model has loaded."""
    page.wait_for_function(EXPLORER_SETTLED, timeout=120_000)
    assert box.evaluate("el => el.dataset.state") == "done", box.inner_text()


def _translator_drawn(page: Any, box: Any) -> None:
    """Chapter 11's box draws its map once it has translated a sentence."""
    assert _wait_until_loaded(page) == "ready", box.inner_text()
    _translate(page, "Zwei Hunde spielen im Gras.")


# {page: (the box, what makes it draw its map)}
BOXES = {
    "chapters/03_attention_and_masks": ("div.attention-explorer", _explorer_drawn),
    "chapters/11_translation": ("div.translator", _translator_drawn),
}


@pytest.mark.parametrize("path", list(BOXES))
def test_the_live_boxs_map_reads_in_the_dark_theme(
    browser: Any,  # noqa: F811 (the fixture)
    site_url: str,  # noqa: F811
    path: str,
) -> None:
    selector, draw = BOXES[path]
    page, log = _open(browser, site_url, path + ".html", init_script=DARK)
    try:
        box = page.locator(selector).first
        box.evaluate(SCROLL)
        draw(page, box)
        problems = map_problems(box) + log.problems()
    finally:
        page.context.close()
    assert not problems, problems


PLOTLY_PAGES = sorted(
    page.relative_to(SITE).as_posix()
    for page in SITE.glob("**/*.html")
    if "plotly-graph-div" in page.read_text(encoding="utf-8", errors="ignore")
)
# Each Plotly figure's paper as the page shows it (Plotly paints it as the background of its first
# SVG) and as its layout asks for it.
DRAWN = ".plotly-graph-div.js-plotly-plot .main-svg"
PAPERS = """() => [...document.querySelectorAll('.plotly-graph-div.js-plotly-plot')].map(div => ({
  id: div.id, shown: getComputedStyle(div.querySelector('.main-svg')).backgroundColor,
  layout: div._fullLayout.paper_bgcolor}))"""


NO_SITE = [pytest.param(None, marks=pytest.mark.skip(reason="no built site: run `make book`"))]


@pytest.mark.parametrize("path", PLOTLY_PAGES or NO_SITE)
def test_every_plotly_figure_is_drawn_on_its_own_card_in_the_dark_theme(
    browser: Any,  # noqa: F811
    site_url: str,  # noqa: F811
    path: str,
) -> None:
    page, log = _open(browser, site_url, path, init_script=DARK)
    try:
        stored = page.locator(".plotly-graph-div").count()
        page.wait_for_function(f"() => document.querySelectorAll('{DRAWN}').length >= {stored}")
        theme = page.evaluate("document.documentElement.dataset.theme")
        papers = page.evaluate(PAPERS)
        problems = log.problems()
    finally:
        page.context.close()
    assert theme == "dark"
    assert papers, f"{path}: no Plotly figure drawn"
    for paper in papers:
        alpha = re.findall(r"[\d.]+", paper["shown"])[3:]  # rgba(r, g, b, a); rgb(...) is opaque
        if (alpha and float(alpha[0]) < 1) or _luminance(paper["shown"]) < 0.9:
            problems.append(
                f"figure #{paper['id']}: its paper is {paper['shown']} (layout {paper['layout']}), "
                "not an opaque light card: its colours would sit on the dark page"
            )
    assert not problems, f"{path}:\n  " + "\n  ".join(problems)


# A matplotlib SVG's first patch is the figure's background.
BACKGROUND = re.compile(r'<g id="patch_1">\s*<path [^>]*?style="fill:\s*(#[0-9a-f]{6})')
WHITE = "#ffffff"


def _figure_backgrounds() -> list[tuple[str, int, str | None]]:
    """(chapter, cell, fill of the figure's background patch) of every SVG stored in a chapter."""
    found = []
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
            for output in cell.get("outputs", []):
                svg = output.get("data", {}).get("image/svg+xml")
                if svg is not None:
                    svg = "".join(svg)
                    match = BACKGROUND.search(svg)
                    found.append((notebook.stem, index, match.group(1) if match else None))
    return found


def test_every_stored_matplotlib_figure_is_an_opaque_white_card() -> None:
    figures = _figure_backgrounds()
    assert len(figures) >= 20, f"only {len(figures)} SVG figures stored in the chapters"
    wrong = [f"{name} cell {i}: background {fill}" for name, i, fill in figures if fill != WHITE]
    assert not wrong, "figures that lie transparent on the dark page:\n  " + "\n  ".join(wrong)
