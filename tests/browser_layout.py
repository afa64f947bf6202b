"""What a reader sees of a page's layout, measured in the browser (used by
``tests/test_browser.py``).

Each function takes a Playwright page that is loaded and returns a list of problems, one sentence
each (empty: none):

- :func:`wide_boxes`: boxes of code, output or commands that scroll sideways (the reader would
  have to scroll to read a line's end);
- :func:`search_off_screen`: the search box missing from the page's first screen, or covered there;
- :func:`plotly_layout`: a Plotly figure's text cut at the figure's edge, or two texts drawn on
  top of each other (a title on a tick, an axis title on the slider), for every title the
  figure's slider can show;
- :func:`plotly_contrast`: a Plotly figure's text that does not stand out from its background
  (in the theme the page shows: the test calls it in both);
- :func:`figure_labels`: a figure whose smallest label is smaller than :data:`SMALLEST_LABEL_PX`
  on the page, measured from the SVG file's own font sizes and the size at which the page shows it;
- :func:`shrunk_figures`: a figure shown narrower than on a desktop's page (on a phone it keeps
  that width and scrolls inside its box), or wider than the screen with no box of its own to scroll;
- :func:`cut_formulas`: a display formula that reaches past the column, or overflows a box that
  does not scroll, cuts its height, or gives no sign that it goes on.
"""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
# The body text is 16 px; a label should read at about that size (tests/test_diagrams.py holds the
# concept figures to the same size).
SMALLEST_LABEL_PX = 12.5
MIN_CONTRAST = 4.5  # WCAG's ratio for normal text

# --- boxes that scroll sideways ------------------------------------------------------------------

# Every box of preformatted text of the article that the reader can see, with what it is: "code"
# (a code cell), "output" (a cell's stored output), "diagram" (a ```text block of the prose, whose
# columns a wrap would mix) or "command" (another code block of the prose), the
# index of its code cell among the page's cells (-1 outside cells), how many pixels it overflows,
# and its longest line.
WIDE_BOXES = """() => {
  const cells = [...document.querySelectorAll('.bd-article div.cell')];
  return [...document.querySelectorAll('.bd-article pre')]
    .filter(pre => pre.getClientRects().length > 0 && pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => ({
      kind: pre.closest('.cell_output') ? 'output'
        : pre.closest('.cell_input') ? 'code'
        : pre.closest('div.highlight-text') ? 'diagram' : 'command',
      cell: cells.indexOf(pre.closest('div.cell')),
      overflow: pre.scrollWidth - pre.clientWidth,
      line: pre.textContent.split('\\n')
        .reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 100),
    }));
}"""
OPEN_ALL = "() => document.querySelectorAll('.bd-article details').forEach(d => { d.open = true; })"


def notebook_cells(path: str) -> list[int]:
    """The notebook index of each code cell of page ``path`` (``chapters/NAME``), in page order; []
    for others.
    """
    notebook = ROOT / f"{path}.ipynb"
    if not notebook.is_file():
        return []
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"]


def _where(cell: int, cells: list[int]) -> str:
    return f"cell {cells[cell]}" if 0 <= cell < len(cells) else "the prose"


def wide_boxes(page: Any, path: str, may_scroll: tuple[str, ...] = ()) -> list[str]:
    """Boxes that scroll sideways at the page's width, collapsed ones (the quiz answers) opened.

    ``may_scroll``: kinds of box left out (a phone may scroll a ``"diagram"``: wrapped, it would
    not read at all).
    """
    page.evaluate(OPEN_ALL)
    cells = notebook_cells(path)
    return [
        f"a {box['kind']} box of {_where(box['cell'], cells)} scrolls sideways "
        f"({box['overflow']} px too wide); its longest line: {box['line']!r}"
        for box in page.evaluate(WIDE_BOXES)
        if box["kind"] not in may_scroll
    ]


# --- the search box -----------------------------------------------------------------------------

# Each search box or button shown, its box, and whether its centre is the box itself (not covered
# by another element, which would take the click).
SEARCH = """() => [...document.querySelectorAll('.search-button-field, .search-button')]
  .filter(el => el.offsetParent !== null)
  .map(el => { const r = el.getBoundingClientRect();
               const hit = document.elementFromPoint((r.left + r.right) / 2,
                                                     (r.top + r.bottom) / 2);
               return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                       clickable: !!hit && el.contains(hit)}; })"""


def search_off_screen(page: Any) -> list[str]:
    """Unless a search box or button is visible, and not covered, within the first screen (the page
    not scrolled)."""
    page.evaluate("window.scrollTo(0, 0)")
    width, height = page.evaluate("[window.innerWidth, window.innerHeight]")
    boxes = page.evaluate(SEARCH)
    seen = [
        b
        for b in boxes
        if b["top"] >= 0 and b["bottom"] <= height and b["left"] >= 0 and b["right"] <= width
    ]
    if not seen:
        return [f"no search box on the first screen ({len(boxes)} shown, all out of view)"]
    if not any(b["clickable"] for b in seen):
        return ["the search box on the first screen is covered by another element"]
    return []


# --- Plotly figures -----------------------------------------------------------------------------

# The texts of a figure, each with its role and box (text outside these roles, such as the values
# written in a heatmap's cells, is not checked), and the figure's drawing area.
PLOTLY_TEXTS = """id => {
  const div = document.getElementById(id);
  const roles = [['.g-gtitle', 'title'], ['.g-xtitle', 'x-axis title'],
                 ['.g-ytitle', 'y-axis title'], ['.xtick', 'x-axis ticks'],
                 ['.ytick', 'y-axis ticks'], ['.cbtitle', 'colour-bar title'],
                 ['.colorbar', 'colour-bar ticks'], ['.slider-container', 'slider'],
                 ['.updatemenu-container', 'buttons'], ['.legend', 'legend'],
                 ['.annotation', 'annotation']];
  const roleOf = el => (roles.find(([selector]) => el.closest(selector)) || [null, null])[1];
  const box = el => {
    const r = el.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const texts = [...div.querySelectorAll('.main-svg text')]
    .filter(el => el.textContent.trim() && roleOf(el) && el.getBoundingClientRect().width > 0)
    .map(el => ({role: roleOf(el), text: el.textContent.trim(), box: box(el),
                 turned: /rotate\\((?!-?(0|90)[ ,)])/.test(el.getAttribute('transform') || '')}));
  // the slider's track (its rail, as tall as its grip) counts as part of the slider: an axis title
  // drawn on it is hidden by it
  const tracks = [...div.querySelectorAll('.slider-container')].map(slider => {
    const rail = slider.querySelector('.slider-rail-rect');
    const grip = slider.querySelector('.slider-grip-rect');
    if (!rail || !grip) return null;
    const [left, , right] = box(rail), [, top, , bottom] = box(grip);
    return {role: 'slider', text: '(its track)', box: [left, top, right, bottom], turned: false};
  }).filter(track => track);
  return {frame: box(div.querySelector('.main-svg')), texts: [...texts, ...tracks]};
}"""
SLIDER_TITLES = """id => {
  const steps = ((document.getElementById(id).layout.sliders || [])[0] || {}).steps || [];
  return [...new Set(steps.map(s => ((s.args || [])[1] || {})['title.text']).filter(t => t))];
}"""
SET_TITLE = "([id, text]) => Plotly.relayout(id, {'title.text': text})"
GET_TITLE = "id => (document.getElementById(id).layout.title || {}).text || ''"


def _overlap(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1


def _layout_problems(figure: str, layout: dict[str, Any], title_only: bool = False) -> list[str]:
    frame, texts = layout["frame"], layout["texts"]
    problems = []
    for t in texts:
        x0, y0, x1, y1 = t["box"]
        if (not title_only or t["role"] == "title") and (
            x0 < frame[0] - 1 or y0 < frame[1] - 1 or x1 > frame[2] + 1 or y1 > frame[3] + 1
        ):
            problems.append(
                f"figure #{figure}: its {t['role']} {t['text']!r} is cut at the figure's edge"
            )
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            if title_only and "title" not in (a["role"], b["role"]):
                continue
            same = a["role"] == b["role"]
            if (same and (a["turned"] or b["turned"] or a["role"] == "slider")) or not _overlap(
                a["box"], b["box"]
            ):
                continue  # labels turned by an odd angle overlap as boxes but not as glyphs
            problems.append(
                f"figure #{figure}: its {a['role']} {a['text']!r} overlaps its {b['role']} "
                f"{b['text']!r}"
            )
    return problems


def plotly_layout(page: Any, figures: list[str]) -> list[str]:
    """Texts of the figures cut at an edge or overlapping, for each title the figure's slider
    shows.
    """
    problems = []
    for figure in figures:
        problems += _layout_problems(figure, page.evaluate(PLOTLY_TEXTS, figure))
        first = page.evaluate(GET_TITLE, figure)
        titles = [t for t in page.evaluate(SLIDER_TITLES, figure) if t != first]
        for title in titles:
            page.evaluate(SET_TITLE, [figure, title])
            problems += _layout_problems(
                figure, page.evaluate(PLOTLY_TEXTS, figure), title_only=True
            )
        if titles:
            page.evaluate(SET_TITLE, [figure, first])
    return list(dict.fromkeys(problems))


# Each text's colour and the colour it is drawn on: the figure's paper (plot_bgcolor where the text
# lies inside the plotting area does not matter: the checked texts lie outside it), or, where the
# paper is transparent, the page's background.
PLOTLY_COLOURS = """id => {
  const div = document.getElementById(id);
  const svg = div.querySelector('.main-svg');
  let paper = getComputedStyle(svg).backgroundColor;
  for (let el = div; /rgba\\(.*, 0\\)|transparent/.test(paper) && el; el = el.parentElement) {
    paper = getComputedStyle(el).backgroundColor;
  }
  if (/rgba\\(.*, 0\\)|transparent/.test(paper)) {
    paper = getComputedStyle(document.body).backgroundColor;
  }
  const selector = '.g-gtitle text, .g-xtitle text, .g-ytitle text, .xtick text, .ytick text, ' +
                   '.colorbar text, .slider-container text, .legend text';
  return {paper, texts: [...div.querySelectorAll(selector)].filter(t => t.textContent.trim())
    .map(t => ({text: t.textContent.trim(), fill: getComputedStyle(t).fill}))};
}"""


def _rgb(colour: str) -> tuple[float, ...]:
    values = [float(v) for v in re.findall(r"[\d.]+", colour)]
    return tuple(values[:3]) + ((values[3],) if len(values) > 3 else (1.0,))


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two opaque CSS colours ``rgb(r, g, b)``."""

    def luminance(colour: str) -> float:
        channels = [c / 255 for c in _rgb(colour)[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def plotly_contrast(page: Any, figures: list[str], theme: str) -> list[str]:
    """Texts of the figures whose colour does not stand out from the background behind them."""
    problems = []
    for figure in figures:
        colours = page.evaluate(PLOTLY_COLOURS, figure)
        faint = {
            t["text"]
            for t in colours["texts"]
            if contrast(t["fill"], colours["paper"]) < MIN_CONTRAST
        }
        if faint:
            problems.append(
                f"figure #{figure}, {theme} theme: {len(faint)} texts barely differ from the "
                f"background {colours['paper']} (contrast under {MIN_CONTRAST}), "
                f"e.g. {sorted(faint)[:3]}"
            )
    return problems


# --- figures' labels ----------------------------------------------------------------------------

IMAGES = """() => {
  const cells = [...document.querySelectorAll('.bd-article div.cell')];
  return [...document.querySelectorAll('.bd-article img')]
    .filter(img => img.getClientRects().length > 0)
    .map(img => ({src: img.currentSrc || img.src, width: img.getBoundingClientRect().width,
                  output: !!img.closest('.cell_output'),
                  cell: cells.indexOf(img.closest('div.cell'))}));
}"""
SVG = "{http://www.w3.org/2000/svg}"


@cache
def svg_labels(path: Path) -> tuple[float, list[tuple[str, float]]]:
    """An SVG file's width in its own units, and each label's text and font size in those units
    (:func:`svg_text_labels`).
    """
    return svg_text_labels(path.read_text(encoding="utf-8"))


def svg_text_labels(svg: str) -> tuple[float, list[tuple[str, float]]]:
    """An SVG document's width in its own units, and each label's text and font size in those units.

    A label is a ``<text>`` element; its size is the largest of its own and its ``<tspan>``'s
    (a label ``10³`` drawn by matplotlib's mathtext is a 10-unit ``10`` and a 7-unit ``3``).
    """
    root = ET.fromstring(svg)
    box = root.get("viewBox")
    width = (
        float(box.split()[2]) if box else float(re.match(r"[\d.]+", root.get("width", "0")).group())
    )
    labels = []
    for text in root.iter(f"{SVG}text"):
        sizes = [_font_size(element) for element in (text, *text.iter(f"{SVG}tspan"))]
        sizes = [s for s in sizes if s is not None]
        content = "".join(text.itertext()).strip()
        if content and sizes:
            labels.append((content, max(sizes)))
    return width, labels


def _data_svg(src: str) -> str | None:
    """The SVG document of a ``data:image/svg+xml`` address (how the ipywidgets manager shows an
    SVG drawn inside an Output widget, chapter 11's slider), else ``None``.
    """
    head, comma, body = src.partition(",")
    if not comma or not head.startswith("data:image/svg+xml"):
        return None
    if head.endswith(";base64"):
        return base64.b64decode(body).decode("utf-8")
    return unquote(body)


def _font_size(element: ET.Element) -> float | None:
    style = element.get("style", "")
    match = re.search(r"font-size:\s*([\d.]+)", style) or re.search(r"font:[^;]*?([\d.]+)px", style)
    if match:
        return float(match.group(1))
    return float(element.get("font-size")) if element.get("font-size") else None


def _site_file(src: str, site_url: str, site: Path) -> Path | None:
    if not src.startswith(site_url):
        return None
    return site / unquote(urlsplit(src[len(site_url) :]).path)


def figure_labels(page: Any, path: str, site_url: str, site: Path) -> list[str]:
    """Figures of the page whose smallest label shows under :data:`SMALLEST_LABEL_PX` on the page.

    Every figure stored in a cell's output must be an SVG whose labels are text (transformer_book's
    ``use_book_figures()``): a raster image's labels cannot be measured. A figure of the prose that
    draws its labels as outlines (the concept figures, checked by tests/test_diagrams.py and
    tests/test_concepts_*.py) is left alone.
    """
    cells = notebook_cells(path)
    problems = []
    for image in page.evaluate(IMAGES):
        file = _site_file(image["src"], site_url, site)
        inline = _data_svg(image["src"])
        where = (
            f"the figure of {_where(image['cell'], cells)}"
            if image["output"]
            else "a figure of the prose"
        )
        if inline is None and (file is None or file.suffix != ".svg"):
            if image["output"]:
                name = file.name if file else image["src"][:40]
                problems.append(
                    f"{where} ({name}) is a raster image: draw it as SVG with its text as text "
                    "(transformer_book.plotting.use_book_figures) so that its labels can be "
                    "measured"
                )
            continue
        width, labels = svg_labels(file) if inline is None else svg_text_labels(inline)
        name = "an SVG inside the page" if inline is not None else file.name
        if not labels:
            if image["output"]:
                problems.append(
                    f"{where} ({name}) has no text to measure: draw it with use_book_figures()"
                )
            continue
        scale = image["width"] / width  # CSS pixels per unit of the SVG
        text, size = min(labels, key=lambda label: label[1])
        if size * scale < SMALLEST_LABEL_PX:
            small = sum(1 for _, s in labels if s * scale < SMALLEST_LABEL_PX)
            problems.append(
                f"{where} ({name}, shown {image['width']:.0f} px wide): {small} of its "
                f"{len(labels)} labels read under {SMALLEST_LABEL_PX} px; the smallest, {text!r}, "
                f"at {size * scale:.1f} px"
            )
    return problems


# --- figures and formulas on a phone -------------------------------------------------------------

# The desktop page's column (1280 px wide, both sidebars shown), in CSS pixels: a figure shows at
# most this wide there (the labels :func:`figure_labels` measures), and as wide on a phone, where it
# scrolls sideways inside its box (_book_static/code_width.css).
COLUMN_PX = 688

# Each figure of the article the reader can see: its own width, the width it shows at, and whether
# a box around it, inside the article, scrolls sideways (the page itself must not).
SHOWN_FIGURES = """() => {
  const cells = [...document.querySelectorAll('.bd-article div.cell')];
  const article = document.querySelector('.bd-article');
  const scroller = img => { for (let el = img.parentElement; el && el !== article;
                                 el = el.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(el).overflowX)) return el; }
    return null; };
  return [...document.querySelectorAll('.bd-article img')]
    .filter(img => img.getClientRects().length > 0
                   && (img.closest('figure') || img.closest('.cell_output')))
    .map(img => { const box = scroller(img), r = img.getBoundingClientRect();
      return {src: (img.currentSrc || img.src).split('/').pop().slice(0, 40),
              natural: img.naturalWidth, width: r.width, right: r.right,
              box: box ? box.getBoundingClientRect().right : null,
              cell: cells.indexOf(img.closest('div.cell'))}; });
}"""


def shrunk_figures(page: Any, path: str) -> list[str]:
    """Figures shown narrower than on a desktop's page (their own width, at most :data:`COLUMN_PX`),
    and figures wider than the screen that no box of their own scrolls."""
    cells = notebook_cells(path)
    width = page.evaluate("window.innerWidth")
    problems = []
    for image in page.evaluate(SHOWN_FIGURES):
        where = f"the figure of {_where(image['cell'], cells)} ({image['src']})"
        desktop = min(image["natural"], COLUMN_PX)
        if image["width"] < desktop - 1:
            problems.append(
                f"{where} shows {image['width']:.0f} px wide, narrower than its {desktop} px on a "
                "desktop's page: its labels shrink with it"
            )
        if image["right"] > width + 1 and (image["box"] is None or image["box"] > width + 1):
            problems.append(f"{where} reaches past the screen with no box of its own to scroll")
    return problems


# Each display formula the reader can see: how far it overflows its box, whether that box
# scrolls and shows where the formula continues (the scroll shadows of code_width.css), whether it
# cuts the formula's height, and where it ends against the column's edge.
FORMULAS = """() => [...document.querySelectorAll('.bd-article mjx-container[display="true"]')]
  .filter(m => m.getClientRects().length > 0)
  .map(m => { const s = getComputedStyle(m), column = m.closest('section, .bd-article');
    return {text: (m.querySelector('mjx-assistive-mml') || m).textContent.trim().slice(0, 50),
            overflow: m.scrollWidth - m.clientWidth, cut: m.scrollHeight - m.clientHeight,
            scrolls: ['auto', 'scroll'].includes(s.overflowX),
            cue: s.backgroundImage.includes('radial-gradient'),
            right: m.getBoundingClientRect().right,
            column: column.getBoundingClientRect().right}; })"""


def cut_formulas(page: Any) -> list[str]:
    """Display formulas that reach past the column, or overflow a box that does not scroll, hides
    their height, or gives no sign that the formula goes on."""
    problems = []
    for formula in page.evaluate(FORMULAS):
        what = f"the formula {formula['text']!r}"
        if formula["right"] > formula["column"] + 1:
            problems.append(
                f"{what} reaches {formula['right'] - formula['column']:.0f} px past the column"
            )
        if formula["overflow"] > 1 and not (formula["scrolls"] and formula["cue"]):
            problems.append(
                f"{what} is {formula['overflow']} px wider than its box, which does not scroll or "
                "shows no sign that it goes on"
            )
        if formula["cut"] > 1:
            problems.append(f"{what} loses {formula['cut']} px of its height in its box")
    return problems
