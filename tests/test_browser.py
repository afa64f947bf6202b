"""The built book in a real browser: every page of _toc.yml opened in headless Chromium.

What a reader would notice is checked on each page: no JavaScript errors in the console, no failed
request, every formula typeset by MathJax (and none of them a TeX error), every image loaded, every
Plotly figure drawn, the ipywidgets rendered, the Colab link of a notebook page pointing at that
notebook on GitHub, and every Plotly figure with a slider redrawing when the slider moves. A
screenshot of each page's first screen goes to ``_build/screenshots/`` (``NAME.top.png``;
``docs/`` holds three of them for the README); with ``BOOK_SCREENSHOTS=full`` (``make
screenshots``) a full-page one too (``NAME.jpg``), which takes seconds per page.

The test runs offline: the site is served from ``_build/html`` by a local ``http.server``; the
scripts the pages load from CDNs (MathJax, RequireJS and the widget manager from jsDelivr, plotly.js
from cdn.plot.ly) are answered from local copies of the same versions (``node_modules/``, installed
by ``scripts/setup_browser.sh`` from ``package.json``, and the ``plotly`` Python package); any other
request that leaves 127.0.0.1 is aborted and fails the test.

Needs Debian's ``chromium`` (``make test`` installs it when run as root) and a built site
(``make book``). Without them the test is skipped, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

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
# https://cdn.jsdelivr.net/npm/<package>@<version>/<file>, the package possibly scoped
# (@scope/name).
JSDELIVR = re.compile(r"^https://cdn\.jsdelivr\.net/npm/((?:@[^/@]+/)?[^/@]+)@([^/]+)/(.+)$")
PLOTLY_CDN = re.compile(r"^https://cdn\.plot\.ly/plotly-([0-9][^/]*)\.min\.js$")
CONTENT_TYPES = {
    ".js": "application/javascript",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".css": "text/css",
}


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


def _local_file(url: str) -> Path | None:
    """The local copy of a CDN asset, or None when the test has none of that exact version."""
    if m := JSDELIVR.match(url):
        name, version, rest = m.groups()
        package = NODE_MODULES / name
        manifest = package / "package.json"
        if not manifest.is_file():
            return None
        installed = json.loads(manifest.read_text(encoding="utf-8"))["version"]
        # "mathjax@3" asks for the newest 3.x; a pinned "3.2.2" must match exactly.
        if installed != version and not installed.startswith(version + "."):
            return None
        path = (package / rest.split("?")[0]).resolve()
        return path if path.is_file() and package.resolve() in path.parents else None
    if m := PLOTLY_CDN.match(url):
        from plotly.offline import get_plotlyjs_version

        if m.group(1) != get_plotlyjs_version():
            return None
        import plotly

        return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="module")
def site_url(unavailable: Callable[[str], None]) -> Iterator[str]:
    """The built site served on 127.0.0.1 at a free port, from a thread of this process."""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site at {SITE}: run `make book` first")
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
    if not (NODE_MODULES / "mathjax" / "package.json").is_file():
        unavailable(
            "node_modules/ lacks the pinned CDN scripts: run `scripts/setup_browser.sh` (needs npm)"
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
                f"request to the outside that the test cannot serve offline (blocked): {m}"
                for m in self.blocked
            ]
        )


DESKTOP = {"width": 1280, "height": 900}
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

    def route(route: Any) -> None:
        url = route.request.url
        local = _local_file(url)
        if local is None:
            log.blocked.append(url)
            route.abort()
            return
        content_type = CONTENT_TYPES.get(local.suffix, "application/octet-stream")
        # The CDNs send CORS headers; `crossorigin="anonymous"` scripts and fonts need them.
        route.fulfill(
            path=str(local), content_type=content_type, headers={"Access-Control-Allow-Origin": "*"}
        )

    # Only requests that leave the site go through Python (each routed request costs a round trip).
    context.route(re.compile("^(?!" + re.escape(site_url) + ")"), route)
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
    page.goto(site_url + path, wait_until="load")
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


# Code cells whose text is wider than their box, so that the reader has to scroll sideways.
# (Collapsed cells, such as the quiz answers, are not laid out: their width is checked once opened.)
WIDE_CODE = """() => [...document.querySelectorAll('.cell_input pre')]
  .filter(pre => pre.getClientRects().length > 0 && pre.scrollWidth > pre.clientWidth + 1)
  .map(pre => pre.textContent.split('\\n')
    .reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 100))"""


def _check_code_width(page: Any) -> list[str]:
    wide = page.evaluate(WIDE_CODE)
    return [
        f"a code cell scrolls sideways at this width; its longest line: {line!r}" for line in wide
    ]


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
    responded = []
    for figure in figures:
        if figure["drawn"] and figure["sliders"]:
            message = _move_slider(page, figure)
            if message:
                problems.append(message)
            else:
                responded.append(f"{path}#{figure['id']}")
    return problems, responded


@pytest.fixture(scope="module")
def sliders() -> dict[str, Any]:
    """Shared by the tests of this module: the pages visited and the slider figures that
    responded."""
    return {"visited": set(), "responded": []}


@pytest.mark.parametrize("path", PAGES)
def test_page(browser: Any, site_url: str, path: str, sliders: dict[str, Any]) -> None:
    page, log = _open(browser, site_url, path + ".html")
    try:
        problems = _check_math(page)
        problems += _check_widgets(page)
        problems += [f"image did not load: {src}" for src in page.evaluate(WAIT_FOR_IMAGES)]
        plotly_problems, responded = _check_plotly(page, path)
        problems += plotly_problems
        problems += _check_code_width(page)
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
        # the whole page (seconds per page, so only on request: make screenshots)
        if FULL_PAGE_SCREENSHOTS:
            page.screenshot(
                path=str(SCREENSHOTS / f"{name}.jpg"), full_page=True, type="jpeg", quality=80
            )
        page.evaluate("window.scrollTo(0, 0)")
        # what a reader sees first (README)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.top.png"))
        problems += log.problems()
    finally:
        page.context.close()
    assert not problems, f"{path}.html:\n  " + "\n  ".join(problems)


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
        assert not _check_code_width(page), _check_code_width(page)
        page.wait_for_timeout(600)  # the toggle's fade-in
        page.screenshot(path=str(SCREENSHOTS / "chapter05.quiz-open.png"))
        assert not log.problems(), log.problems()
    finally:
        page.context.close()
