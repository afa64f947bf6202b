"""The built book in a real browser: every page of _toc.yml opened in headless Chromium.

What a reader would notice is checked on each page: no JavaScript errors in the console, no failed
request, every formula typeset by MathJax (and none of them a TeX error), every image loaded, every
Plotly figure drawn, the ipywidgets rendered, the Colab link of a notebook page pointing at that
notebook on GitHub, and every Plotly figure with a slider redrawing when the slider moves. What the
reader sees of the layout is measured too (``tests/browser_layout.py``): no box of code, output or
commands scrolls sideways at a desktop's width (the quiz answers opened), the search box is on the
first screen, every figure's labels read at the column's width, and no Plotly figure's text is cut
at its edge, drawn over another text, or faint against its background, in the light theme and the
dark one. At a phone's width (390 px) nothing widens the page, no box of code or output scrolls
sideways, every figure keeps its desktop width (its labels as readable) and scrolls inside its box,
and a display formula scrolls inside its own. A screenshot of each page's first screen goes to
``_build/screenshots/`` (``NAME.top.png``; ``docs/`` holds three of them for the README); with
``BOOK_SCREENSHOTS=full`` (``make screenshots``) full-page ones too, in both themes (``NAME.jpg``,
``NAME.dark.jpg``), which take seconds per page.

The site must work without a network: it is served from ``_build/html`` by a local ``http.server``,
every request that leaves it is aborted and fails the test, and a few pages are opened from
``file://`` as well. The build copies the scripts the pages load (MathJax, RequireJS, the widget
manager, plotly.js) into the site from ``node_modules/`` (``_ext/local_scripts.py``; the versions
``package.json`` pins, installed by ``scripts/setup_browser.sh``).

Needs Debian's ``chromium`` (``make test`` installs it when run as root) and a built site
(``make book``). Without them the test is skipped, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser_layout import (
    cut_formulas,
    figure_labels,
    plotly_contrast,
    plotly_layout,
    search_off_screen,
    shrunk_figures,
    wide_boxes,
)

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
NODE_MODULES = ROOT / "node_modules"
SCREENSHOTS = ROOT / "_build" / "screenshots"
COLAB_PREFIX = (
    "https://colab.research.google.com/github/transformer-book/build-a-transformer/blob/main/"
)
FULL_PAGE_SCREENSHOTS = os.environ.get("BOOK_SCREENSHOTS") == "full"

# Headless flags for a container: no sandbox (Chromium refuses to run as root with it), no GPU,
# and no background traffic of Chromium's own (updates, sync, QUIC probes). Playwright adds
# --headless and a fresh temporary --user-data-dir itself.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The scripts the build copies into the site (_ext/local_scripts.py): without them it was built
# from a checkout without node_modules/, and its pages would load them from CDNs.
SITE_SCRIPTS = SITE / "_static" / "vendor" / "mathjax"


def _toc_pages() -> list[str]:
    """Every document of _toc.yml, in order, without suffix (``intro``,
    ``chapters/00_introduction``...)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return pages


PAGES = _toc_pages()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="module")
def site_url(unavailable: Callable[[str], None]) -> Iterator[str]:
    """The built site served on 127.0.0.1 at a free port, from a thread of this process."""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site at {SITE}: run `make book` first")
    if not SITE_SCRIPTS.is_dir():
        unavailable(
            f"the site at {SITE} lacks its scripts: run scripts/setup_browser.sh (npm), then "
            "make book"
        )
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(unavailable: Callable[[str], None]) -> Iterator[Any]:
    """Debian's Chromium driven by Playwright (never a browser downloaded by `playwright
    install`)."""
    executable = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if executable is None:
        unavailable(
            "chromium is not installed: on Debian/Ubuntu run `sudo apt-get install -y chromium` "
            "(`make test` does it when run as root), or set CHROMIUM=/path/to/chromium"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


class PageLog:
    """What went wrong while a page loaded: console errors, script errors, failed and blocked
    requests."""

    def __init__(self, site_url: str) -> None:
        self.site_url = site_url
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.failed: list[str] = []
        self.blocked: list[str] = []

    def problems(self) -> list[str]:
        return (
            [f"console error: {m}" for m in self.console_errors]
            + [f"script error: {m}" for m in self.page_errors]
            + [f"failed request: {m}" for m in self.failed]
            + [
                f"request to another host (blocked: the site must serve what it needs): {m}"
                for m in self.blocked
            ]
        )


DESKTOP = {"width": 1280, "height": 900}
LOAD_TIMEOUT_MS = (
    90_000  # a page with Plotly, the widgets and MathJax loads 8 MB: slow on a busy CPU
)
PHONE = {"width": 390, "height": 844}  # a common phone's CSS pixels


def _open(
    browser: Any,
    site_url: str,
    path: str,
    viewport: dict[str, int] = DESKTOP,
    init_script: str | None = None,
) -> tuple[Any, PageLog]:
    """A new page with the offline routing and the logging in place, loaded at ``site_url + path``.

    ``init_script``: JavaScript run before the page's own (e.g. to take a browser feature away).
    """
    context = browser.new_context(viewport=viewport, service_workers="block")
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    page.set_default_timeout(30_000)
    log = PageLog(site_url)

    def block(route: Any) -> None:
        log.blocked.append(route.request.url)
        route.abort()

    # Every request that leaves the site (for file://, every http: and https: request) is aborted.
    context.route(re.compile("^(?!" + re.escape(site_url) + ")"), block)
    page.on(
        "console", lambda msg: log.console_errors.append(msg.text) if msg.type == "error" else None
    )
    page.on("pageerror", lambda exc: log.page_errors.append(str(exc)))

    def request_failed(request: Any) -> None:
        if request.url.startswith(site_url):
            log.failed.append(f"{request.url} ({request.failure})")

    def response(resp: Any) -> None:
        if (
            resp.url.startswith(site_url)
            and resp.status >= 400
            and not resp.url.endswith("/favicon.ico")
        ):
            log.failed.append(f"{resp.url} (HTTP {resp.status})")

    page.on("requestfailed", request_failed)
    page.on("response", response)
    page.goto(site_url + path, wait_until="load", timeout=LOAD_TIMEOUT_MS)
    return page, log


# Every element Sphinx/MyST marks as math, those of them MathJax has not turned into output, and the
# TeX source of formulas that MathJax typeset as an error (mjx-merror) or with an undefined macro
# (the noundefined extension shows it in red).
UNTYPESET_MATH = """() => {
  const math = [...document.querySelectorAll('.math')];
  const items = Array.from(MathJax.startup.document.math);
  return {total: math.length,
          missing: math.filter(el => !el.querySelector('mjx-container')
                                     && el.tagName !== 'MJX-CONTAINER')
                       .map(el => el.textContent.slice(0, 80)),
          containers: document.querySelectorAll('mjx-container').length,
          errors: items.filter(item => item.typesetRoot &&
                                       item.typesetRoot.querySelector(
                                         'mjx-merror, mjx-mtext[style*="color: red"]'))
                       .map(item => item.math.slice(0, 120))};
}"""

WAIT_FOR_IMAGES = """async () => {
  const imgs = [...document.images];
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done); img.addEventListener('error', done); })));
  return imgs.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src);
}"""

PLOTLY_FIGURES = """() => [...document.querySelectorAll('.plotly-graph-div')].map(el => ({
  id: el.id,
  drawn: el.classList.contains('js-plotly-plot') && !!el.querySelector('.main-svg'),
  sliders: (el.layout && el.layout.sliders || [])
    .map(s => ({active: s.active || 0, steps: s.steps.length})),
}))"""

PLOT_DATA = "id => JSON.stringify(document.getElementById(id).data)"


def _check_math(page: Any) -> list[str]:
    if page.locator(".math").count() == 0:
        return []
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    report = page.evaluate(UNTYPESET_MATH)
    problems = []
    if report["containers"] == 0 or report["missing"]:
        problems.append(
            f"{len(report['missing'])} of {report['total']} formulas not typeset: "
            f"{report['missing'][:3]}"
        )
    problems += [f"TeX error or undefined macro in a formula: {e}" for e in report["errors"]]
    return problems


def _check_widgets(page: Any) -> list[str]:
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
    if views == 0:
        return []
    try:
        page.wait_for_function(
            f"() => document.querySelectorAll('.jupyter-widgets').length >= {views}"
        )
    except Exception:  # Playwright's TimeoutError; reported below with the counts
        pass
    rendered = page.locator(".jupyter-widgets").count()
    return [] if rendered >= views else [f"{views} widget views stored, {rendered} rendered"]


def _move_slider(page: Any, figure: dict[str, Any]) -> str | None:
    """Click the far end of the figure's first slider; a message unless the plotted data then
    changes."""
    fid = figure["id"]
    slider = figure["sliders"][0]
    rail = page.locator(f"#{fid} .slider-rail-touch-rect").first
    rail.scroll_into_view_if_needed()
    box = rail.bounding_box()
    if box is None:
        return f"figure #{fid}: its slider is not visible"
    before = page.evaluate(PLOT_DATA, fid)
    # Go to the last step, or to the first when the last one is already shown.
    fraction = 0.02 if slider["active"] == slider["steps"] - 1 else 0.98
    page.mouse.click(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)
    try:
        page.wait_for_function(
            "([id, before]) => JSON.stringify(document.getElementById(id).data) !== before",
            arg=[fid, before],
        )
    except Exception:  # Playwright's TimeoutError
        return f"figure #{fid}: moving the slider did not change the plotted data"
    return None


def _check_plotly(page: Any, path: str) -> tuple[list[str], list[str]]:
    """Problems with the page's Plotly figures, and the figures whose slider responded."""
    figures = page.evaluate(PLOTLY_FIGURES)
    problems = [f"Plotly figure #{f['id']} was not drawn" for f in figures if not f["drawn"]]
    drawn = [f["id"] for f in figures if f["drawn"]]
    problems += plotly_layout(page, drawn)  # before the sliders move (they change the titles)
    problems += _in_both_themes(page, lambda theme: plotly_contrast(page, drawn, theme))
    responded = []
    for figure in figures:
        if figure["drawn"] and figure["sliders"]:
            message = _move_slider(page, figure)
            if message:
                problems.append(message)
            else:
                responded.append(f"{path}#{figure['id']}")
    return problems, responded


def _set_theme(page: Any, theme: str) -> None:
    """Show the page in the theme's ``light`` or ``dark`` mode, as its theme button does."""
    page.evaluate("theme => { document.documentElement.dataset.theme = theme; }", theme)
    page.wait_for_timeout(100)  # a style recalculation; nothing loads


def _in_both_themes(page: Any, check: Callable[[str], list[str]]) -> list[str]:
    """``check(theme)`` in the light theme, then in the dark one; the page is left light."""
    problems = check("light")
    _set_theme(page, "dark")
    problems += check("dark")
    _set_theme(page, "light")
    return problems


@pytest.fixture(scope="module")
def sliders() -> dict[str, Any]:
    """Shared by the tests of this module: the pages visited and the slider figures that
    responded."""
    return {"visited": set(), "responded": []}


@pytest.fixture(scope="module")
def figures_measured() -> dict[str, list[str]]:
    """Shared by the tests of this module: ``{page: problems with its figures' labels}``."""
    return {}


def _measure_figures(page: Any, path: str, site_url: str) -> list[str]:
    return figure_labels(page, path, site_url, SITE)


@pytest.mark.parametrize("path", PAGES)
def test_page(
    browser: Any,
    site_url: str,
    path: str,
    sliders: dict[str, Any],
    figures_measured: dict[str, list[str]],
) -> None:
    page, log = _open(browser, site_url, path + ".html")
    try:
        problems = search_off_screen(page)  # before anything scrolls the page
        problems += _check_math(page)
        problems += _check_widgets(page)
        problems += [f"image did not load: {src}" for src in page.evaluate(WAIT_FOR_IMAGES)]
        figures_measured[path] = _measure_figures(page, path, site_url)
        plotly_problems, responded = _check_plotly(page, path)
        problems += plotly_problems
        sliders["responded"] += responded
        sliders["visited"].add(path)

        if path.startswith("chapters/") and (ROOT / f"{path}.ipynb").is_file():
            links = sorted(
                set(
                    page.eval_on_selector_all(
                        'a[href^="https://colab.research.google.com"]',
                        "els => els.map(a => a.href)",
                    )
                )
            )
            expected = COLAB_PREFIX + path + ".ipynb"
            if links != [expected]:
                problems.append(f"Colab links {links}, expected exactly [{expected!r}]")

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = path.replace("/", "__")
        if (
            FULL_PAGE_SCREENSHOTS
        ):  # the whole page (seconds per page, so only on request: make screenshots)
            page.screenshot(
                path=str(SCREENSHOTS / f"{name}.jpg"), full_page=True, type="jpeg", quality=80
            )
            _set_theme(page, "dark")
            page.screenshot(
                path=str(SCREENSHOTS / f"{name}.dark.jpg"), full_page=True, type="jpeg", quality=80
            )
            _set_theme(page, "light")
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(
            path=str(SCREENSHOTS / f"{name}.top.png")
        )  # what a reader sees first (README)
        problems += wide_boxes(page, path)  # opens the collapsed cells (the quiz answers)
        problems += log.problems()
    finally:
        page.context.close()
    assert not problems, f"{path}.html:\n  " + "\n  ".join(problems)


# Chapters whose stored figures predate transformer_book.plotting.use_book_figures() (SVG, labels
# readable at the column's width) and wait for a re-execution: {page: why}. Strict: a chapter that
# passes must leave this list.
FIGURES_PENDING: dict[str, str] = {}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=FIGURES_PENDING[path]))
        if path in FIGURES_PENDING
        else path
        for path in PAGES
    ],
)
def test_every_figures_labels_read_at_the_columns_width(
    browser: Any, site_url: str, path: str, figures_measured: dict[str, list[str]]
) -> None:
    """Each figure's smallest label shows at 12.5 px or more on a desktop's page
    (browser_layout.py).

    Uses what test_page measured; opens the page when test_page did not (run alone, or with -k).
    """
    if path not in figures_measured:
        page, _ = _open(browser, site_url, path + ".html")
        try:
            page.evaluate(WAIT_FOR_IMAGES)
            figures_measured[path] = _measure_figures(page, path, site_url)
        finally:
            page.context.close()
    problems = figures_measured[path]
    assert not problems, f"{path}.html:\n  " + "\n  ".join(problems)


# Pages opened from file://, as a reader who built the book opens it without a server: formulas,
# Plotly figures and the widgets must work there too (chapter 11's translator box says it needs a
# server: tests/test_browser_translator.py).
FILE_PAGES = ["intro", "chapters/05_multi_head_attention", "chapters/11_translation", "glossary"]


@pytest.mark.parametrize("path", FILE_PAGES)
def test_a_page_opened_from_a_file_reads_offline(
    browser: Any, path: str, unavailable: Callable[[str], None]
) -> None:
    if not SITE_SCRIPTS.is_dir():
        unavailable(
            f"the site at {SITE} lacks its scripts: run scripts/setup_browser.sh (npm), then "
            "make book"
        )
    page, log = _open(browser, SITE.as_uri() + "/", path + ".html")
    try:
        problems = _check_math(page)
        problems += _check_widgets(page)
        problems += [f"image did not load: {src}" for src in page.evaluate(WAIT_FOR_IMAGES)]
        figures = page.evaluate(PLOTLY_FIGURES)
        problems += [f"Plotly figure #{f['id']} was not drawn" for f in figures if not f["drawn"]]
        problems += log.problems()
    finally:
        page.context.close()
    assert not problems, f"file://.../{path}.html:\n  " + "\n  ".join(problems)


def test_some_plotly_slider_responds(browser: Any, site_url: str, sliders: dict[str, Any]) -> None:
    """At least one Plotly figure of the book redraws when its slider moves (the static site's
    interactivity).

    Uses what test_page found; opens the pages it did not visit (when run alone, or with -k).
    """
    for path in PAGES:
        if sliders["responded"]:
            break
        if path not in sliders["visited"]:
            page, _ = _open(browser, site_url, path + ".html")
            try:
                sliders["responded"] += _check_plotly(page, path)[1]
            finally:
                page.context.close()
    assert sliders["responded"], (
        "no page of the book has an interactive Plotly figure whose slider changes the plot"
    )


# Pages a reader opens first, checked at a phone's width too; their screenshots are committed to
# docs/.
SHOWCASE = {
    "intro": "landing",
    "chapters/05_multi_head_attention": "chapter05",
    "chapters/11_translation": "chapter11",
}
DOCS = ROOT / "docs"


@pytest.mark.parametrize("path", list(SHOWCASE))
def test_page_at_phone_width(browser: Any, site_url: str, path: str) -> None:
    """No console error, script error or failed request at a phone's width; a screenshot for
    docs/."""
    page, log = _open(browser, site_url, path + ".html", viewport=PHONE)
    try:
        problems = [f"image did not load: {src}" for src in page.evaluate(WAIT_FOR_IMAGES)]
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 1:
            problems.append(f"the page is {overflow} px wider than the phone's screen")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{SHOWCASE[path]}.phone.png"))
        problems += log.problems()
    finally:
        page.context.close()
    assert not problems, f"{path}.html at {PHONE['width']} px:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", PAGES)
def test_no_box_scrolls_sideways_at_phone_width(browser: Any, site_url: str, path: str) -> None:
    """At a phone's width no box of code, output or commands hides a line's end behind a sideways
    scroll (the quiz answers opened; code wraps there: _book_static/code_width.css), and nothing
    widens the page past the screen. A text diagram may scroll: wrapped, its columns would mix."""
    page, _ = _open(browser, site_url, path + ".html", viewport=PHONE)
    try:
        problems = wide_boxes(page, path, may_scroll=("diagram",))
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 1:
            problems.append(f"the page is {overflow} px wider than the phone's screen")
    finally:
        page.context.close()
    assert not problems, f"{path}.html at {PHONE['width']} px:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", PAGES)
def test_figures_and_formulas_read_at_phone_width(browser: Any, site_url: str, path: str) -> None:
    """At 390 px a figure keeps the width it has on a desktop's page, so its labels read as there
    (12.5 px or more: browser_layout.figure_labels), and scrolls sideways inside its box; a display
    formula wider than the phone scrolls inside its own box, which shows where it goes on, and
    never reaches past the column (_book_static/code_width.css). Before, a figure shrank to the
    phone's width, its labels to about 5 px, and a formula ran into the column's edge, cut."""
    page, _ = _open(browser, site_url, path + ".html", viewport=PHONE)
    try:
        page.evaluate(WAIT_FOR_IMAGES)
        problems = _measure_figures(page, path, site_url) + shrunk_figures(page, path)
        if page.locator(".math").count():
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
            )
            page.evaluate("() => MathJax.startup.promise")
            problems += cut_formulas(page)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 1:
            problems.append(f"the page is {overflow} px wider than the phone's screen")
        if path in PHONE_FIGURES:  # what a reader sees of a figure and a formula there
            for selector, name in PHONE_FIGURES[path]:
                page.locator(selector).first.evaluate("el => el.scrollIntoView({block: 'center'})")
                page.screenshot(path=str(SCREENSHOTS / f"{name}.phone.png"))
    finally:
        page.context.close()
    assert not problems, f"{path}.html at {PHONE['width']} px:\n  " + "\n  ".join(problems)


# {page: [(an element of it, the name of its screenshot at a phone's width)]}
PHONE_FIGURES = {
    "chapters/03_attention_and_masks": [(".cell_output img", "chapter03.figure")],
    "chapters/08_encoder_decoder_model": [
        ("figure img", "chapter08.figure"),
        ('mjx-container[display="true"]', "chapter08.formula"),
    ],
}


def test_search_works_from_the_first_screen_of_the_last_chapter(
    browser: Any, site_url: str
) -> None:
    """The theme scrolls the sidebar to the current chapter, which took its search box (the only
    one at 1280 px) off the first screen of chapters 3-15 (sidebar.css keeps it there): on the last
    chapter's page, the box on the first screen opens the search dialog, and a word finds the pages
    that hold it."""
    last = [path for path in PAGES if path.startswith("chapters/")][-1]
    page, log = _open(browser, site_url, last + ".html")
    try:
        assert not search_off_screen(page), search_off_screen(page)
        page.locator(".search-button-field").locator("visible=true").first.click()
        typed = page.evaluate("() => document.activeElement.name")
        assert typed == "q", f"the click left the focus on {typed!r}, not the search field"
        page.keyboard.type("softmax")
        page.keyboard.press("Enter")
        page.wait_for_url("**/search.html?q=softmax*")
        page.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0")
        found = page.locator("#search-results li").all_inner_texts()
        problems = log.problems()
    finally:
        page.context.close()
    assert any("Glossary" in text for text in found), found
    assert not problems, problems


def test_the_landing_page_shows_the_architecture_figure(browser: Any, site_url: str) -> None:
    page, log = _open(browser, site_url, "intro.html")
    try:
        page.evaluate(WAIT_FOR_IMAGES)
        sizes = page.eval_on_selector_all(
            'img[src*="architecture"]',
            "imgs => imgs.map(i => [i.naturalWidth, i.getBoundingClientRect().width])",
        )
        assert sizes, "intro.html has no architecture figure"
        readable = all(natural > 0 and shown > 200 for natural, shown in sizes)
        assert readable, f"the figure is not drawn at a readable size: {sizes}"
        # one search box on a desktop screen (the theme's header bar once added a second one)
        boxes = page.locator(".search-button-field").evaluate_all(
            "els => els.filter(e => e.offsetParent).length"
        )
        assert boxes == 1, f"the landing page shows {boxes} search boxes at 1280 px"
        page.screenshot(path=str(SCREENSHOTS / "landing.desktop.png"))
        assert not log.problems(), log.problems()
    finally:
        page.context.close()


def test_the_glossary_renders_its_terms_and_chapters_link_to_them(
    browser: Any, site_url: str
) -> None:
    page, log = _open(browser, site_url, "glossary.html")
    try:
        terms = page.locator("dl.glossary dt").count()
        assert terms >= 50, f"the glossary page shows {terms} terms"
        assert page.locator("dl.glossary dd").first.inner_text().strip()
    finally:
        page.context.close()
    page, _ = _open(browser, site_url, "chapters/03_attention_and_masks.html")
    try:
        href = page.locator("a.reference .std-term").first.evaluate("el => el.closest('a').href")
        assert "glossary.html#term-" in href, href
    finally:
        page.context.close()


def test_a_quiz_answer_opens_on_click(browser: Any, site_url: str) -> None:
    """The answers are hidden behind "Show answers"; a click shows the answer cell's code and
    output."""
    page, log = _open(browser, site_url, "chapters/05_multi_head_attention.html")
    try:
        toggle = page.locator("details.hide summary", has_text="Show answers")
        assert toggle.count() == 1, "no 'Show answers' toggle on the page"
        details = toggle.locator("xpath=..")
        answer = details.locator(".cell_output, .cell_input").first
        assert not answer.is_visible(), "the answer is visible before the click"
        toggle.scroll_into_view_if_needed()
        toggle.click()
        assert details.evaluate("el => el.open"), "the toggle did not open"
        assert answer.is_visible(), "the answer is still hidden after the click"
        wide = wide_boxes(page, "chapters/05_multi_head_attention")
        assert not wide, wide
        page.wait_for_timeout(600)  # the toggle's fade-in
        page.screenshot(path=str(SCREENSHOTS / "chapter05.quiz-open.png"))
        assert not log.problems(), log.problems()
    finally:
        page.context.close()
