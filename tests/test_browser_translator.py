"""Chapter 11's "Translate in your browser" box, in headless Chromium (issue 28).

The built page loads the committed model files (``_book_static/translator/``) and the pinned npm
packages (``onnxruntime-web``, ``@huggingface/tokenizers``) from the site itself, offline. The box
must translate German test captions into exactly the token ids that Python's greedy decoding of the
same files gives (:func:`transformer_book.browser_model.onnx_translate`, ONNX Runtime), and the ids
of its beam search (:func:`~transformer_book.browser_model.onnx_beam`), draw the cross-attention
map, and log no console error. Where WebAssembly is missing, it must say so.

The time per sentence is measured in the page and reported (printed, and written as JSON to
``$TRANSLATOR_TIMING`` when set): a benchmark line, never an assertion. Chapter 11 shows the run in
``results/browser-translation.json``, made with::

    TRANSLATOR_TIMING=results/browser-translation.json .venv/bin/python -m pytest
    tests/test_browser_translator.py -s

Shares the site server, the browser and the offline routing of ``tests/test_browser.py``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest
from test_browser import PHONE, SCREENSHOTS, SITE, _open, browser, site_url  # noqa: F401 (fixtures)

from transformer_book.machine import machine_name
from transformer_lib.data.tokenizer import BPETokenizer
from transformer_lib.files import atomic_write

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
                cells: box.querySelectorAll('.translator-attention rect').length}; }""")


@pytest.fixture(scope="module")
def python_tokens() -> dict[str, dict[str, list[int]]]:
    """Python's greedy and beam-search token ids for :data:`SENTENCES`, from the site's own copy of
    the files."""
    import numpy as np

    from transformer_book.browser_model import load_sessions, onnx_beam, onnx_translate

    config = json.loads((MODEL / "config.json").read_text(encoding="utf-8"))
    tokenizer, sessions = (
        BPETokenizer.from_json_str((MODEL / "tokenizer.json").read_text()),
        load_sessions(MODEL),
    )
    greedy = onnx_translate(
        sessions, tokenizer, SENTENCES, config["max_len_a"], config["max_len_b"], config["max_len"]
    )
    tokens = {}
    for sentence, greedy_ids in zip(SENTENCES, greedy, strict=True):
        src = np.array([tokenizer.encode(sentence)], dtype=np.int64)
        max_len = min(
            int(config["max_len_a"] * src.shape[1] + config["max_len_b"]), config["max_len"]
        )
        ends = (tokenizer.bos_id, tokenizer.eos_id, config["length_penalty"])
        beam = onnx_beam(sessions, src, config["beam_size"], max_len, *ends[:2], ends[2])
        tokens[sentence] = {"greedy": greedy_ids, "beam": beam}
    return tokens


def test_the_box_translates_with_the_tokens_of_python_decoding_the_same_files(
    browser: Any,  # noqa: F811 (the fixture)
    site_url: str,  # noqa: F811
    python_tokens: dict[str, dict[str, list[int]]],
) -> None:
    page, log = _open(browser, site_url, PAGE)
    try:
        page.locator("div.translator").scroll_into_view_if_needed()
        assert _wait_until_loaded(page) == "ready", page.inner_text("div.translator")
        results = {sentence: _translate(page, sentence) for sentence in SENTENCES}
        page.evaluate("() => { document.querySelector('div.translator').dataset.state = 'asked'; }")
        # the running example
        page.locator("div.translator .translator-examples button").first.click()
        page.wait_for_function(f"() => ({STATE})() === 'done'")
        clicked = page.inner_text("div.translator .translator-text")
        box = page.locator("div.translator")
        # clear of the page's sticky header
        box.evaluate("el => el.scrollIntoView({block: 'center'})")
        # docs/translator.png, for the README
        box.screenshot(path=str(SCREENSHOTS / "translator.png"))
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
        source_tokens = len(
            BPETokenizer.from_json_str((MODEL / "tokenizer.json").read_text()).encode(sentence)
        )
        assert got["cells"] == (len(got["tokens"]) - 1) * source_tokens, (
            "one attention cell per (target, source) pair"
        )
    assert clicked.strip(), "clicking an example sentence translated nothing"
    assert not problems, problems
    _report(
        [got["ms"] for got in results.values()],
        [got["beam_ms"] for got in results.values()],
        browser.version,
    )


def _report(ms: list[float], beam_ms: list[float], version: str) -> None:
    """The benchmark line: milliseconds per sentence in this browser, the first one (warm-up)
    apart."""
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
        message = page.inner_text("div.translator .translator-status")
        assert "WebAssembly" in message, message
        assert not log.problems(), log.problems()
    finally:
        page.context.close()


def test_at_a_phone_width_the_box_and_its_map_fit_the_screen(browser: Any, site_url: str) -> None:  # noqa: F811
    """The form wraps and a long sentence's map scrolls inside its own box: the page never scrolls
    sideways."""
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
        message = page.inner_text("div.translator .translator-status")
        assert "could not be loaded" in message and "weights.bin: HTTP 404" in message, message
        assert not page.locator("div.translator form").is_visible(), "no form to type into"
        assert not log.problems(), log.problems()
    finally:
        page.context.close()
