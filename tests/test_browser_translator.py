"""Chapter 11's "Translate in your browser" box, in headless Chromium (issue 28).

The built page loads the committed model files (``transformer_book/translator/``, copied into the
site) and the pinned npm packages (``onnxruntime-web``, ``@huggingface/tokenizers``) from the site
itself, offline. The box must translate German test captions into exactly the token ids that
Python's greedy decoding of the same files gives (:mod:`transformer_book.browser_model`'s
``onnx_greedy``, ONNX Runtime), and the ids of its beam search (``onnx_beam``); draw Python's
cross-attention map (:mod:`transformer_book.trained`, to 1e-4) with labels free of the word-start
marker, 400 px wide or more for the running example on a desktop's page; explain empty, cut,
unknown (digits and emoji too: no letter at all) and English input as Python's ``prepare_input``
does; clear the last translation, its timing and its map when the reader submits an empty box; read
in both of the site's themes, the map drawn again when the reader switches; and log no console
error. Where WebAssembly is missing, it must say so.

The time per sentence is measured in the page and reported (printed, and written as JSON to
``$TRANSLATOR_TIMING`` when set): a benchmark line, never an assertion. Chapter 11 shows the run in
``results/browser-translation.json``, made with::

    TRANSLATOR_TIMING=results/browser-translation.json \\
        .venv/bin/python -m pytest tests/test_browser_translator.py -s

Shares the site server, the browser and the offline routing of ``tests/test_browser.py``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from test_browser import PHONE, SCREENSHOTS, SITE, _open, browser, site_url  # noqa: F401 (fixtures)
from test_browser_explorer import CONTRAST, DARK, TYPED, check_hints, check_theme

from transformer_book.browser_model import onnx_beam
from transformer_book.machine import machine_name
from transformer_book.trained import TrainedModel
from transformer_lib.files import atomic_write

pytestmark = pytest.mark.book

PAGE = "chapters/11_translation.html"
MODEL = SITE / "_static" / "translator"
# Captions of Multi30k's test_2016_flickr, short and long, which the model never trained on.
SENTENCES = [
    "Ein Mann schneidet Äste von Bäumen.",
    "Drei Leute sitzen in einer Höhle.",
    "Ein Junge beim Wakeboarden auf dem See.",
    "Zwei braune Hunde rennen durch den Schnee.",
    "Der Mann in der gelben Hose hebt seine Arme.",
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
]
STATE = "() => document.querySelector('div.translator').dataset.state"


def _wait_until_loaded(page: Any) -> str:
    page.wait_for_function(f"() => ['ready', 'error'].includes(({STATE})())", timeout=120_000)
    return page.evaluate(STATE)


def _translate(page: Any, sentence: str) -> dict[str, Any]:
    page.evaluate("() => { document.querySelector('div.translator').dataset.state = 'asked'; }")
    page.fill("div.translator input", sentence)
    page.click("div.translator button[type=submit]")
    page.wait_for_function(f"() => ({STATE})() === 'done'", timeout=60_000)
    return page.evaluate("""() => { const box = document.querySelector('div.translator');
        return {tokens: JSON.parse(box.dataset.tokens), ms: Number(box.dataset.ms),
                beam: JSON.parse(box.dataset.beamTokens), beam_ms: Number(box.dataset.beamMs),
                text: box.querySelector('.translator-text').textContent,
                weights: [...box.querySelectorAll('.trained-figure rect.map-cell')]
                  .map(r => Number(r.dataset.weight)),
                rows: [...box.querySelectorAll('.trained-figure text.map-row')]
                  .map(t => t.textContent),
                cols: [...box.querySelectorAll('.trained-figure text.map-col')]
                  .map(t => t.textContent)};
    }""")


@pytest.fixture(scope="module")
def trained() -> TrainedModel:
    """Python's reader of the site's own copy of the files."""
    return TrainedModel(MODEL)


@pytest.fixture(scope="module")
def python_tokens(trained: TrainedModel) -> dict[str, dict[str, list[int]]]:
    """Python's greedy and beam-search ids of :data:`SENTENCES` from the site's files."""
    c, tokens = trained.config, {}
    for sentence in SENTENCES:
        greedy = trained.translate_ids(sentence)  # browser_model.onnx_greedy, one sentence alone
        src = np.array([trained.source_ids(sentence)], dtype=np.int64)
        max_len = min(int(c["max_len_a"] * src.shape[1] + c["max_len_b"]), c["max_len"])
        ends = (c["bos_id"], c["eos_id"], c["length_penalty"], c["pad_id"])
        beam = onnx_beam(trained.sessions, src, c["beam_size"], max_len, *ends)
        tokens[sentence] = {"greedy": greedy, "beam": beam}
    return tokens


def test_the_box_translates_with_the_tokens_of_python_decoding_the_same_files(
    browser: Any,  # noqa: F811 (the fixture)
    site_url: str,  # noqa: F811
    python_tokens: dict[str, dict[str, list[int]]],
    trained: TrainedModel,
) -> None:
    page, log = _open(browser, site_url, PAGE)
    try:
        page.locator("div.translator").scroll_into_view_if_needed()
        assert _wait_until_loaded(page) == "ready", page.inner_text("div.translator")
        results = {sentence: _translate(page, sentence) for sentence in SENTENCES}
        page.evaluate("() => { document.querySelector('div.translator').dataset.state = 'asked'; }")
        page.locator(
            "div.translator .translator-examples button"
        ).first.click()  # the running example
        page.wait_for_function(f"() => ({STATE})() === 'done'")
        clicked = page.inner_text("div.translator .translator-text")
        box = page.locator("div.translator")
        box.evaluate(
            "el => el.scrollIntoView({block: 'center'})"
        )  # clear of the page's sticky header
        box.screenshot(
            path=str(SCREENSHOTS / "translator.png")
        )  # docs/translator.png, for the README
        problems = log.problems()
    finally:
        page.context.close()
    for sentence, got in results.items():
        assert got["tokens"] == python_tokens[sentence]["greedy"], (
            f"{sentence!r}: browser {got['tokens']}"
        )
        assert got["beam"] == python_tokens[sentence]["beam"], (
            f"{sentence!r}: browser's beam {got['beam']}"
        )
        assert got["text"].strip(), f"{sentence!r}: no text shown"
        # the map: the last layer's cross-attention, mean of the heads, of the decoder's last run
        maps = trained.maps(trained.source_ids(sentence), got["tokens"][:-1])
        expected = maps.cross[-1].mean(dim=0)  # (T, S)
        np.testing.assert_allclose(got["weights"], expected.flatten().numpy(), rtol=0, atol=1e-4)
        assert got["cols"] == maps.source and got["rows"] == trained.labels(got["tokens"][1:])
        assert "▁" not in "".join(got["rows"] + got["cols"]), "no raw word-start marker"
    assert clicked.strip(), "clicking an example sentence translated nothing"
    assert not problems, problems
    _report(
        [got["ms"] for got in results.values()],
        [got["beam_ms"] for got in results.values()],
        browser.version,
    )


def _report(ms: list[float], beam_ms: list[float], version: str) -> None:
    """The benchmark line: milliseconds per sentence in this browser, the first (warm-up) apart."""
    warm = ms[1:]
    summary = {
        "sentences": len(ms),
        "first_ms": round(ms[0], 1),
        "median_ms": round(statistics.median(warm), 1),
        "min_ms": round(min(warm), 1),
        "max_ms": round(max(warm), 1),
        "ms": [round(x, 1) for x in ms],
        "beam_median_ms": round(statistics.median(beam_ms[1:]), 1),
        "beam_ms": [round(x, 1) for x in beam_ms],
    }
    print(f"\ntranslator box, headless Chromium (greedy; beam search): {summary}")
    if path := os.environ.get("TRANSLATOR_TIMING"):
        machine = {"name": machine_name(), "platform": platform.platform(), "chromium": version}
        date = datetime.now(UTC).isoformat(timespec="seconds")
        text = json.dumps({"results": summary, "machine": machine, "date": date}, indent=1) + "\n"
        atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def test_without_webassembly_the_box_says_what_is_missing(browser: Any, site_url: str) -> None:  # noqa: F811
    page, log = _open(browser, site_url, PAGE, init_script="delete globalThis.WebAssembly;")
    try:
        assert _wait_until_loaded(page) == "error"
        message = page.inner_text("div.translator .trained-status")
        assert "WebAssembly" in message, message
        assert not log.problems(), log.problems()
    finally:
        page.context.close()


def test_at_a_phone_width_the_box_and_its_map_fit_the_screen(browser: Any, site_url: str) -> None:  # noqa: F811
    """The form wraps, a long sentence's map scrolls inside its own box: the page never does."""
    page, log = _open(browser, site_url, PAGE, viewport=PHONE)
    try:
        assert _wait_until_loaded(page) == "ready"
        _translate(page, SENTENCES[-1])  # the longest: its map is wider than the screen
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        box = page.locator("div.translator")
        box.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(SCREENSHOTS / "translator.phone.png"))
        assert overflow <= 1, f"the page is {overflow} px wider than the phone's screen"
        assert box.evaluate("el => el.getBoundingClientRect().right") <= PHONE["width"]
        assert not log.problems(), log.problems()
    finally:
        page.context.close()


MISSING_WEIGHTS = """(() => { const fetch = window.fetch;
  window.fetch = (url, ...rest) => String(url).endsWith("/weights.bin")
    ? Promise.resolve(new Response("", {status: 404})) : fetch(url, ...rest); })();"""


def test_without_its_files_the_box_names_the_missing_one(browser: Any, site_url: str) -> None:  # noqa: F811
    page, log = _open(browser, site_url, PAGE, init_script=MISSING_WEIGHTS)
    try:
        assert _wait_until_loaded(page) == "error"
        message = page.inner_text("div.translator .trained-status")
        assert "could not be loaded" in message and "weights.bin: HTTP 404" in message, message
        assert not page.locator("div.translator form").is_visible(), "no form to type into"
        assert not log.problems(), log.problems()
    finally:
        page.context.close()


def test_the_box_explains_empty_cut_unknown_and_english_input_as_python_does(
    browser: Any,  # noqa: F811
    site_url: str,  # noqa: F811
    trained: TrainedModel,
) -> None:
    page, log = _open(browser, site_url, PAGE)
    try:
        assert _wait_until_loaded(page) == "ready"
        seen = {}
        for name, (typed, _) in TYPED.items():
            page.evaluate(
                "() => { document.querySelector('div.translator').dataset.state = 'asked'; }"
            )
            page.fill("div.translator input", typed)
            page.click("div.translator button[type=submit]")
            page.wait_for_function(f"() => ({STATE})() === 'done'", timeout=60_000)
            hints = page.evaluate(
                "() => JSON.parse(document.querySelector('div.translator').dataset.hints)"
            )
            seen[name] = (hints, page.inner_text("div.translator ul.trained-notes"))
        problems = log.problems()
    finally:
        page.context.close()
    check_hints(seen, trained)
    assert not problems, problems


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_box_reads_in_both_themes(browser: Any, site_url: str, theme: str) -> None:  # noqa: F811
    """The map on a card in the theme's colours, its labels and the text around it readable."""
    page, log = _open(browser, site_url, PAGE, init_script=DARK if theme == "dark" else None)
    try:
        assert _wait_until_loaded(page) == "ready"
        _translate(page, SENTENCES[0])
        seen = page.locator("div.translator").evaluate(CONTRAST)
        problems = log.problems()
    finally:
        page.context.close()
    check_theme(seen, theme)
    assert not problems, problems


# What the box shows below its form: the translations, the timing, the map, the ids it exposes.
SHOWN = """() => { const box = document.querySelector('div.translator');
  const svg = box.querySelector('.trained-figure svg');
  return {greedy: box.querySelector('.translator-text').textContent,
          beam: box.querySelector('.translator-beam').textContent,
          timing: box.querySelector('.translator-timing').textContent,
          maps: box.querySelectorAll('.trained-figure svg').length,
          width: svg ? svg.getBoundingClientRect().width : 0,
          label: svg ? Math.min(...[...svg.querySelectorAll('text.map-label')]
            .map(t => parseFloat(getComputedStyle(t).fontSize))) : 0,
          ids: 'tokens' in box.dataset || 'beamTokens' in box.dataset,
          notes: box.querySelector('ul.trained-notes').innerText}; }"""


def test_an_empty_submit_clears_the_last_translation_and_digits_get_the_hint(
    browser: Any,  # noqa: F811
    site_url: str,  # noqa: F811
) -> None:
    """The running example's map reads at a desktop's width (400 px or more, 12 px labels); an
    empty box then leaves nothing of it on screen, and "12345" is translated with the hint."""
    page, log = _open(browser, site_url, PAGE)
    try:
        assert _wait_until_loaded(page) == "ready"
        _translate(page, "Zwei Hunde spielen im Gras.")
        before = page.evaluate(SHOWN)
        _translate_empty(page)
        cleared = page.evaluate(SHOWN)
        _translate(page, "12345")
        digits = page.evaluate(SHOWN)
        problems = log.problems()
    finally:
        page.context.close()
    assert before["greedy"] and before["beam"] and before["timing"] and before["maps"] == 1
    assert before["width"] >= 400 and before["label"] >= 12, before
    assert cleared == {
        "greedy": "",
        "beam": "",
        "timing": "",
        "maps": 0,
        "width": 0,
        "label": 0,
        "ids": False,
        "notes": "Type a sentence first: the box is empty.",
    }, cleared
    assert "no letter at all" in digits["notes"] and digits["maps"] == 1, digits
    assert not problems, problems


def _translate_empty(page: Any) -> None:
    page.evaluate("() => { document.querySelector('div.translator').dataset.state = 'asked'; }")
    page.fill("div.translator input", "   ")
    page.click("div.translator button[type=submit]")
    page.wait_for_function(f"() => ({STATE})() === 'done'", timeout=60_000)
