"""The built book in the dark theme (``html[data-theme="dark"]``), in headless Chromium, offline.

Dark mode covers the figures a script draws, so that none stays a white card on the dark page. With
the theme's own switch set to dark:

- the maps of the live boxes, chapter 3's ``{attention-explorer}`` and chapter 11's translator, are
  drawn on a dark card as the page shows it (the computed fill, which a stylesheet could change,
  not the attribute): each cell is brighter the more weight it has (its luminance never falls as
  the weight rises), the labels are light on the card, and the caption says "the brighter the cell,
  the more weight"; switched to the light theme, the box draws the map again on a white card,
  darker the more weight, and its caption says so;
- every Plotly figure of the book is drawn on an opaque dark paper, its lines stand out from the
  plotting area (a black one turns light), its buttons' labels read on their faces, and back in
  the light theme the paper is white again (``tests/test_browser.py``
  measures the figures' texts against their paper in both themes);
- every matplotlib figure stored in a chapter stays an opaque white card: an image, drawn once.

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

pytestmark = pytest.mark.book

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


def _shading_problems(seen: dict[str, Any], theme: str) -> list[str]:
    """What a reader would misread in a map drawn in ``theme`` (as :data:`MAP_COLOURS` saw it)."""
    problems = []
    dark = theme == "dark"
    if seen["theme"] != theme:
        return [f"the page shows the {seen['theme']!r} theme, not {theme!r}"]
    card = _luminance(seen["card"])
    if (dark and card > 0.1) or (not dark and card < 0.95):
        problems.append(f"{theme} theme: the map's card is {seen['card']}")
    cells = sorted(seen["cells"], key=lambda cell: cell[0])
    if len(cells) < 4:
        return [*problems, f"{theme} theme: the map has {len(cells)} cells"]
    for (w0, c0), (w1, c1) in zip(cells, cells[1:], strict=False):
        brighter = _luminance(c1) > _luminance(c0)
        if w1 > w0 and _luminance(c1) != _luminance(c0) and brighter != dark:
            problems.append(
                f"{theme} theme: a cell of weight {w1:.3f} ({c1}) against {w0:.3f} ({c0})"
            )
            break
    if contrast(seen["label"], seen["card"]) < 7:
        problems.append(f"{theme} theme: the labels {seen['label']} are faint on {seen['card']}")
    text, colour, behind = seen["caption"]
    if contrast(colour, behind) < 4.5:
        problems.append(f"{theme} theme: the caption {colour} is faint on {behind}")
    says = (
        "the brighter the cell, the more weight" if dark else "the darker the cell, the more weight"
    )
    if says not in text:
        problems.append(f"{theme} theme: the caption does not say {says!r}: {text[:100]!r}")
    return problems


def map_problems(box: Any) -> list[str]:
    """What a reader would misread in the box's map on the dark page, and once the reader switches
    to the light theme (the box draws it again)."""
    seen = box.evaluate(MAP_COLOURS)
    page_dark = _luminance(seen["page"]) < 0.1
    problems = [] if page_dark else [f"the page's background {seen['page']} is not dark"]
    problems += _shading_problems(seen, "dark")
    box.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
    problems += _shading_problems(box.evaluate(MAP_COLOURS), "light")
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
# SVG) and as its layout asks for it, and each of its buttons' label with the button's face.
DRAWN = ".plotly-graph-div.js-plotly-plot .main-svg"
PAPERS = """() => { const rgb = colour => { const probe = document.createElement('span');
    probe.style.color = colour; document.body.append(probe);
    const value = getComputedStyle(probe).color; probe.remove(); return value; };
  return [...document.querySelectorAll('.plotly-graph-div.js-plotly-plot')].map(div => ({
    id: div.id, shown: getComputedStyle(div.querySelector('.main-svg')).backgroundColor,
    layout: div._fullLayout.paper_bgcolor, plot: rgb(div._fullLayout.plot_bgcolor),
    buttons: [...div.querySelectorAll('.updatemenu-button')].map(b => [
      b.textContent, getComputedStyle(b.querySelector('.updatemenu-item-text')).fill,
      getComputedStyle(b.querySelector('.updatemenu-item-rect')).fill]),
    lines: div._fullData.filter(t => t.visible === true && (t.mode || '').includes('lines'))
      .map(t => [t.name, rgb(t.line.color)])})); }"""


NO_SITE = [pytest.param(None, marks=pytest.mark.skip(reason="no built site: run `make book`"))]


def _paper_problems(papers: list[dict[str, Any]], theme: str) -> list[str]:
    """Papers that are not an opaque card of ``theme``, and buttons whose labels are faint."""
    problems = []
    for paper in papers:
        alpha = re.findall(r"[\d.]+", paper["shown"])[3:]  # rgba(r, g, b, a); rgb(...) is opaque
        light = _luminance(paper["shown"])
        if (alpha and float(alpha[0]) < 1) or (light > 0.1 if theme == "dark" else light < 0.9):
            problems.append(
                f"{theme} theme: figure #{paper['id']}'s paper is {paper['shown']} (layout "
                f"{paper['layout']}), not an opaque {theme} card"
            )
        for name, colour in paper["lines"]:  # a line, not text: it must stand out, not read
            if contrast(colour, paper["plot"]) < 2:
                problems.append(
                    f"{theme} theme: figure #{paper['id']}'s line {name!r} is {colour} on "
                    f"{paper['plot']}"
                )
        for text, colour, face in paper["buttons"]:
            if contrast(colour, face) < 4.5:
                problems.append(
                    f"{theme} theme: figure #{paper['id']}'s button {text!r} is {colour} on {face}"
                )
    return problems


@pytest.mark.parametrize("path", PLOTLY_PAGES or NO_SITE)
def test_every_plotly_figure_is_drawn_on_a_dark_card_in_the_dark_theme(
    browser: Any,  # noqa: F811
    site_url: str,  # noqa: F811
    path: str,
) -> None:
    page, log = _open(browser, site_url, path, init_script=DARK)
    try:
        stored = page.locator(".plotly-graph-div").count()
        page.wait_for_function(f"() => document.querySelectorAll('{DRAWN}').length >= {stored}")
        theme = page.evaluate("document.documentElement.dataset.theme")
        dark = page.evaluate(PAPERS)
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        light = page.evaluate(PAPERS)
        problems = log.problems()
    finally:
        page.context.close()
    assert theme == "dark"
    assert dark, f"{path}: no Plotly figure drawn"
    problems += _paper_problems(dark, "dark") + _paper_problems(light, "light")
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
