"""The live attention box of chapters 3-5 (``{attention-explorer}``), in headless Chromium, offline.

A test page is a built page of the site (its theme, its scripts) with three boxes inserted, as the
directive writes them (``_ext/translator.py``), one per view, written into the built site while
the tests run. Each box opens on the running example (the book's German and English), on the layer
and head where the running example's relation is strongest in its map (spielen reads Hunde in the
encoder, as chapter 3 finds in Python), says which, counting from 1 as chapters 3-5 print them, and
draws that map 400 px wide or more on a desktop's page. For three sentences, at a desktop's width
and at a phone's, the page's maps (every layer and head, all three kinds) must equal
``transformer_book.trained``'s maps from the site's own copy of the files to 1e-4, and the map the
box draws must be the one its controls choose. The box must explain empty, cut, unknown (no letter
at all, digits or emoji, too) and English input as Python's ``prepare_input`` does, clear its map
on an empty one, read in both of the site's themes, say what is missing (WebAssembly, a file, a
server), and log no console error. Every built page that carries the directive loads its boxes
without an error too.

Shares the browser and the offline routing of ``tests/test_browser.py``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_browser import DESKTOP, PHONE, ROOT, SITE, _open, browser, site_url  # noqa: F401

from transformer_book.browser_model import prepare_input
from transformer_book.example import ENGLISH, GERMAN
from transformer_book.trained import TrainedModel

pytestmark = pytest.mark.book

TEMPLATE = "notation.html"  # a light page of the site: its theme and scripts, little else
PAGE = "attention-explorer-test.html"
BOX = "div.attention-explorer"
MODEL = SITE / "_static" / "translator"
# (German, English or None for the model's own translation): the running example, a test caption,
# and a sentence with an English translation that the model would not write.
PAIRS = [
    ("Zwei Hunde spielen im Gras.", "Two dogs play in the grass."),
    ("Ein Mann schneidet Äste von Bäumen.", None),
    (
        "Eine Frau mit einem roten Hut sitzt auf einer Bank im Park.",
        "A lady in a red hat is sitting on a bench.",
    ),
]
ATOL = 1e-4
SCROLL = "el => el.scrollIntoView({block: 'start'})"  # no wait for a box that is loading to settle
MAPS = """box => { const m = box.attentionMaps;
  const plain = (x) => ({dims: x.dims, data: Array.from(x.data)});
  return {source: m.source, target: m.target, encoder: plain(m.encoder), decoder: plain(m.decoder),
          cross: plain(m.cross)}; }"""
DRAWN = """box => ({
  weights: [...box.querySelectorAll('svg rect.map-cell')].map(r => Number(r.dataset.weight)),
  masked: box.querySelectorAll('svg rect.map-cell.masked').length,
  rows: [...box.querySelectorAll('svg text.map-row')].map(t => t.textContent),
  cols: [...box.querySelectorAll('svg text.map-col')].map(t => t.textContent)})"""


def _extension() -> Any:
    spec = importlib.util.spec_from_file_location(
        "translator_extension", ROOT / "_ext" / "translator.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _test_page() -> str:
    """The template page with one box per view at the start of its article."""
    html = (SITE / TEMPLATE).read_text(encoding="utf-8")
    boxes = "".join(
        _extension().explorer_html("_static/", view) for view in ("encoder", "decoder", "cross")
    )
    anchor = '<article class="bd-article">'
    assert anchor in html, f"{TEMPLATE} has no {anchor}"
    return html.replace(anchor, anchor + "\n" + boxes, 1)


@pytest.fixture(scope="module")
def test_url(site_url: str, unavailable: Any) -> Iterator[str]:  # noqa: F811 (the fixture)
    """The site's address, with the test page written into the built site while the module runs."""
    if not (SITE / TEMPLATE).is_file() or not (MODEL / "config.json").is_file():
        unavailable(f"no built site with the model's files at {SITE}: run `make book` first")
    (SITE / PAGE).write_text(_test_page(), encoding="utf-8")
    try:
        yield site_url
    finally:
        (SITE / PAGE).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def trained() -> TrainedModel:
    """Python's reader of the site's own copy of the files."""
    return TrainedModel(MODEL)


def _state(box: Any) -> str:
    return box.evaluate("el => el.dataset.state")


STATE_IN = """([i, states]) => states.includes(
  document.querySelectorAll('div.attention-explorer')[i].dataset.state)"""


def _wait(page: Any, index: int, states: tuple[str, ...] = ("done", "error")) -> str:
    """Wait until box ``index`` is in one of ``states`` (the model loads in up to two minutes)."""
    page.wait_for_function(STATE_IN, arg=[index, list(states)], timeout=120_000)
    return _state(page.locator(BOX).nth(index))


def _show(page: Any, index: int, german: str, english: str | None) -> None:
    box = page.locator(BOX).nth(index)
    box.evaluate("el => { el.dataset.state = 'asked'; }")
    box.locator("input[name=german]").fill(german)
    box.locator("input[name=english]").fill(english or "")
    box.locator("button[type=submit]").click()
    assert _wait(page, index) == "done", box.inner_text()


def _open_boxes(
    browser: Any,  # noqa: F811 (the fixture's name)
    url: str,
    viewport: dict[str, int] = DESKTOP,
    init_script: str | None = None,
) -> Any:
    page, log = _open(browser, url, PAGE, viewport=viewport, init_script=init_script)
    page.locator(BOX).first.evaluate(SCROLL)
    return page, log


def _compare(page_maps: dict[str, Any], expected: Any) -> None:
    assert page_maps["source"] == expected.source and page_maps["target"] == expected.target
    for kind in ("encoder", "decoder", "cross"):
        want = getattr(expected, kind).numpy()
        got = np.array(page_maps[kind]["data"]).reshape(page_maps[kind]["dims"])
        assert got.shape == want.shape, kind
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL, err_msg=kind)


def _choose(page: Any, index: int, view: str, layer: int, head: int) -> dict[str, Any]:
    box = page.locator(BOX).nth(index)
    box.locator("select[name=view]").select_option(view)
    # by position: Playwright matches a value or a label, and the labels count from 1 ("2" would be
    # layer index 1); the head list starts with "mean" (-1)
    box.locator("select[name=layer]").select_option(index=layer)
    box.locator("select[name=head]").select_option(index=head + 1)
    return box.evaluate(DRAWN)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_box_shows_pythons_maps_of_every_layer_and_head(
    browser: Any,  # noqa: F811 (the fixture)
    test_url: str,
    trained: TrainedModel,
    viewport: dict[str, int],
) -> None:
    page, log = _open_boxes(browser, test_url, viewport)
    try:
        assert _wait(page, 0) == "done", page.locator(
            BOX
        ).first.inner_text()  # the running example, at once
        results = {}
        for german, english in PAIRS:
            _show(page, 0, german, english)
            box = page.locator(BOX).first
            shown_english = box.locator("input[name=english]").input_value()
            results[german] = (box.evaluate(MAPS), shown_english)
            last = trained.attention(german, english)
            layers, heads = last.encoder.shape[:2]
            mean = _choose(page, 0, "cross", layers - 1, -1)
            one = _choose(page, 0, "decoder", 0, heads - 1)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        right = page.locator(BOX).first.evaluate("el => el.getBoundingClientRect().right")
        problems = log.problems()
    finally:
        page.context.close()
    for german, english in PAIRS:
        maps, shown = results[german]
        _compare(maps, trained.attention(german, english))
        assert shown == (english or trained.translate(german)), (
            "the English field shows what the decoder read"
        )
    np.testing.assert_allclose(
        mean["weights"], last.cross[-1].mean(0).flatten().numpy(), rtol=0, atol=ATOL
    )
    assert mean["rows"] == last.target and mean["cols"] == last.source
    np.testing.assert_allclose(
        one["weights"], last.decoder[0, -1].flatten().numpy(), rtol=0, atol=ATOL
    )
    t = len(last.target)
    assert one["masked"] == t * (t - 1) // 2 and one["cols"] == last.target
    assert "▁" not in "".join(mean["rows"] + mean["cols"])
    assert overflow <= 1 and right <= viewport["width"], "the page never scrolls sideways"
    assert not problems, problems


def test_each_box_opens_on_its_view_and_a_long_map_scrolls_in_its_box(
    browser: Any,  # noqa: F811
    test_url: str,
) -> None:
    page, log = _open_boxes(browser, test_url, PHONE)
    try:
        for index in range(3):
            page.locator(BOX).nth(index).evaluate(SCROLL)
            assert _wait(page, index) == "done"
        views = page.eval_on_selector_all(
            BOX, "els => els.map(el => el.querySelector('select[name=view]').value)"
        )
        _show(page, 2, PAIRS[2][0], PAIRS[2][1])
        figure = page.locator(BOX).nth(2).locator("figure")
        widths = figure.evaluate("el => [el.scrollWidth, el.clientWidth]")
        page.locator(BOX).nth(2).screenshot(
            path=str(ROOT / "_build" / "screenshots" / "explorer.phone.png")
        )
        problems = log.problems()
    finally:
        page.context.close()
    assert views == ["encoder", "decoder", "cross"]
    assert widths[0] > widths[1], (
        "the long sentence's map is wider than the phone: it scrolls inside its box"
    )
    assert not problems, problems


# {name: (what the reader types, the hint the box must give)}: digits and emoji hold no letter,
# so no German word, and get the "unknown" hint as text the tokenizer cannot read does.
TYPED = {
    "empty": ("   ", "empty"),
    "cut": ("Ein Hund rennt über die Wiese. " * 8, "cut"),
    "unknown": ("😀🐶", "unknown"),
    "digits": ("12345", "unknown"),
    "emoji": ("😀😀", "unknown"),
    "english": ("Two dogs are playing in the grass.", "english"),
}


def check_hints(seen: dict[str, tuple[list[str], str]], trained: TrainedModel) -> None:
    """Each of :data:`TYPED` gave Python's hints, and the box said something about each."""
    for name, (typed, hint) in TYPED.items():
        hints, text = seen[name]
        assert hints == prepare_input(trained.tokenizer, typed, trained.config)[2], name
        assert hint in hints and text.strip(), f"{name}: the box says nothing"
    assert "200 characters" in seen["cut"][1] and "English" in seen["english"][1]
    for name in ("digits", "emoji"):  # the hint states its rule
        assert "no letter at all" in seen[name][1], seen[name][1]


def test_the_box_explains_empty_cut_unknown_and_english_input_as_python_does(
    browser: Any,  # noqa: F811
    test_url: str,
    trained: TrainedModel,
) -> None:
    page, log = _open_boxes(browser, test_url)
    try:
        assert _wait(page, 0) == "done"
        box = page.locator(BOX).first
        seen, drawn = {}, {}
        for name, (typed, _) in TYPED.items():
            box.evaluate("el => { el.dataset.state = 'asked'; }")
            box.locator("input[name=german]").fill(typed)
            box.locator("input[name=english]").fill("")
            box.locator("button[type=submit]").click()
            _wait(page, 0)
            seen[name] = (
                box.evaluate("el => JSON.parse(el.dataset.hints)"),
                box.locator("ul").inner_text(),
            )
            drawn[name] = box.evaluate(SHOWN)
        problems = log.problems()
    finally:
        page.context.close()
    check_hints(seen, trained)
    assert drawn["empty"] == {"maps": False, "svg": 0, "controls": False, "focus": ""}, (
        "an empty sentence leaves no map"
    )
    assert drawn["digits"]["svg"] == 1, "a hint, and still the map of what was typed"
    assert not problems, problems


SHOWN = """box => ({maps: !!box.attentionMaps, svg: box.querySelectorAll('figure svg').length,
  controls: !box.querySelector('.explorer-controls').hidden,
  focus: box.querySelector('.explorer-focus').textContent})"""
# What a box opened on: the map, layer and head chosen, the options' labels, the sentence above
# the map, and the map's size and labels' size as the page shows them.
OPENED = """box => { const figure = box.querySelector('figure'), svg = figure.querySelector('svg');
  const options = name => [...box.querySelectorAll(`select[name=${name}] option`)]
    .map(o => o.textContent);
  return {view: figure.dataset.view, layer: Number(figure.dataset.layer),
          head: Number(figure.dataset.head), layers: options('layer'), heads: options('head'),
          german: box.querySelector('input[name=german]').value,
          english: box.querySelector('input[name=english]').value,
          focus: box.querySelector('.explorer-focus').textContent,
          caption: box.querySelector('figcaption').textContent,
          width: svg.getBoundingClientRect().width, height: svg.getBoundingClientRect().height,
          label: Math.min(...[...svg.querySelectorAll('text.map-label')]
            .map(t => parseFloat(getComputedStyle(t).fontSize)))}; }"""
# The running example's relation in each map: (query token, key token), as attention_explorer.js's
# VIEWS names it: spielen reads Hunde (chapter 3), play reads dogs, and the row of dogs, which
# writes play, reads spielen.
RELATIONS = {
    "encoder": ("spielen", "Hunde"),
    "decoder": ("play", "dogs"),
    "cross": ("dogs", "spielen"),
}


def _strongest(trained: TrainedModel, view: str) -> tuple[int, int, float]:
    """Python's layer, head and weight where the relation of ``view`` is largest (from 0)."""
    maps = trained.attention(GERMAN, ENGLISH)
    query, key = RELATIONS[view]
    rows = maps.source if view == "encoder" else maps.target
    cols = maps.source if view == "cross" else rows
    weights = getattr(maps, view)[:, :, rows.index(query), cols.index(key)]  # (layers, heads)
    layer, head = divmod(int(weights.argmax()), weights.size(1))
    return layer, head, float(weights[layer, head])


def test_each_box_opens_where_the_running_examples_relation_shows_and_says_so(
    browser: Any,  # noqa: F811
    test_url: str,
    trained: TrainedModel,
) -> None:
    """The issue's case: the encoder's box opens on layer 2, head 3 (counted from 1), where
    spielen gives Hunde 0.93, not on the last layer's mean of the heads (0.05 there); each map is
    drawn 400 px wide or more in the desktop's 688 px column."""
    page, log = _open_boxes(browser, test_url)
    try:
        opened = []
        for index in range(3):
            page.locator(BOX).nth(index).evaluate(SCROLL)
            assert _wait(page, index) == "done"
            opened.append(page.locator(BOX).nth(index).evaluate(OPENED))
        page.locator(BOX).first.screenshot(
            path=str(ROOT / "_build" / "screenshots" / "explorer.opened.png")
        )
        problems = log.problems()
    finally:
        page.context.close()
    layers, heads = trained.attention(GERMAN, ENGLISH).encoder.shape[:2]
    for view, seen in zip(("encoder", "decoder", "cross"), opened, strict=True):
        layer, head, weight = _strongest(trained, view)
        assert (seen["view"], seen["layer"], seen["head"]) == (view, layer, head), seen
        assert (seen["german"], seen["english"]) == (GERMAN, ENGLISH), "the running example"
        where = f"layer {layer + 1}, head {head + 1}"  # counted from 1, as chapters 3-5 print
        query, key = RELATIONS[view]
        assert where in seen["focus"] and where in seen["caption"], seen["focus"]
        assert query in seen["focus"] and f"gives {key} {weight:.2f}" in seen["focus"]
        assert "no other head gives it more" in seen["focus"], seen["focus"]
        assert seen["layers"] == [str(n) for n in range(1, layers + 1)]
        assert seen["heads"] == ["mean", *[str(n) for n in range(1, heads + 1)]]
        assert seen["width"] >= 400 and seen["height"] >= 400, f"{view}: a small map: {seen}"
        assert seen["label"] >= 12, f"{view}: labels of {seen['label']} px"
    assert "layer 2, head 3" in opened[0]["focus"], "chapter 3's head, as the book names it"
    assert not problems, problems


# A colour as rgb(...) -> relative luminance (WCAG 2), and the contrast of two colours.
LUMINANCE = """(rgb) => {
  const [r, g, b] = rgb.match(/[\\d.]+/g).slice(0, 3).map(Number).map(v => v / 255)
    .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b; }"""
CONTRAST = f"""el => {{ const lum = {LUMINANCE};
  const background = (node) => {{ for (; node; node = node.parentElement) {{
      const c = getComputedStyle(node).backgroundColor;
      if (!c.startsWith('rgba') || !c.endsWith(', 0)')) return c; }}
    return 'rgb(255, 255, 255)'; }};
  const ratio = (a, b) => {{ const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05); }};
  const caption = el.querySelector('figcaption'), card = el.querySelector('svg rect.map-card');
  const label = el.querySelector('svg text.map-label');
  const status = el.querySelector('.trained-status');
  return {{theme: document.documentElement.dataset.theme,
    caption: ratio(getComputedStyle(caption).color, background(caption)),
    status: ratio(getComputedStyle(status).color, background(status)),
    label: ratio(getComputedStyle(label).fill, getComputedStyle(card).fill),
    card: card.getAttribute('fill')}}; }}"""
DARK = "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_box_reads_in_both_themes(browser: Any, test_url: str, theme: str) -> None:  # noqa: F811
    """The map on a card in the theme's colours (white with dark labels, darker = more; dark with
    light labels, brighter = more); the text in the theme's colours."""
    page, log = _open_boxes(browser, test_url, init_script=DARK if theme == "dark" else None)
    try:
        assert _wait(page, 0) == "done"
        seen = page.locator(BOX).first.evaluate(CONTRAST)
        page.locator(BOX).first.screenshot(
            path=str(ROOT / "_build" / "screenshots" / f"explorer.{theme}.png")
        )
        problems = log.problems()
    finally:
        page.context.close()
    check_theme(seen, theme)
    assert not problems, problems


CARDS = {"light": "#ffffff", "dark": "#222832"}  # a map's card (trained_model.js's PALETTES)


def check_theme(seen: dict[str, Any], theme: str) -> None:
    """A box's map and text, as :data:`CONTRAST` measured them, read in ``theme``."""
    assert seen["theme"] == theme
    assert seen["card"] == CARDS[theme] and seen["label"] >= 7, seen
    assert seen["caption"] >= 4.5 and seen["status"] >= 4.5, seen


NO_WASM = "delete globalThis.WebAssembly;"
MISSING_WEIGHTS = """(() => { const fetch = window.fetch;
  window.fetch = (url, ...rest) => String(url).endsWith("/weights.bin")
    ? Promise.resolve(new Response("", {status: 404})) : fetch(url, ...rest); })();"""


@pytest.mark.parametrize(
    ("script", "expected"), [(NO_WASM, "WebAssembly"), (MISSING_WEIGHTS, "weights.bin: HTTP 404")]
)
def test_without_webassembly_or_a_file_the_box_says_what_is_missing(
    browser: Any,  # noqa: F811
    test_url: str,
    script: str,
    expected: str,
) -> None:
    page, log = _open_boxes(browser, test_url, init_script=script)
    try:
        assert _wait(page, 0) == "error"
        message = page.locator(BOX).first.locator(".trained-status").inner_text()
        form_visible = page.locator(BOX).first.locator("form").is_visible()
        problems = log.problems()
    finally:
        page.context.close()
    assert expected in message, message
    assert not form_visible, "no form to type into"
    assert not problems, problems


def test_from_a_file_url_the_box_says_to_serve_the_site(browser: Any, test_url: str) -> None:  # noqa: F811
    page, _ = _open_boxes(browser, SITE.as_uri() + "/")
    try:
        assert _wait(page, 0) == "error"
        message = page.locator(BOX).first.locator(".trained-status").inner_text()
    finally:
        page.context.close()
    assert "file://" in message and "http.server" in message, message


def test_every_built_page_with_the_directive_loads_its_boxes(browser: Any, test_url: str) -> None:  # noqa: F811
    marked = 'class="attention-explorer"'
    pages = sorted(
        p.relative_to(SITE).as_posix()
        for p in SITE.rglob("*.html")
        if marked in p.read_text(encoding="utf-8", errors="ignore")
    )
    if not pages:
        pytest.skip("no page of the built site carries {attention-explorer} yet")
    for path in pages:
        page, log = _open(browser, test_url, path)
        try:
            boxes = page.locator(BOX)
            for index in range(boxes.count()):
                boxes.nth(index).evaluate(SCROLL)
                assert _wait(page, index) == "done", f"{path}: {boxes.nth(index).inner_text()}"
            problems = log.problems()
        finally:
            page.context.close()
        assert not problems, f"{path}: {problems}"
