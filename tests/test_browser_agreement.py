"""How often the page's translator writes Python's tokens: the whole test set, measured on request.

Chapter 11's page and Python run the same files (``transformer_book/translator/``) with ONNX Runtime
Web and ONNX Runtime, one sentence at a time, by the same rules (``trained_model.js`` follows
``transformer_book.browser_model``). This measurement decodes all 1,000 German sentences of
Multi30k's test_2016_flickr both ways, greedy and beam search, and compares the token ids exactly.
For each sentence that differs it keeps where the two first part and by how much: for greedy
search, both sides' logits of the two tokens at the first step where they part; for beam search,
both sides' scores of their best hypotheses. It also counts how often the box's input hints fire
on the German sentences and on their English references, in the page and in Python. Minutes, so
only on request; it writes the result file that chapter 11 and the README quote::

    BROWSER_AGREEMENT=results/browser-agreement.json \\
        .venv/bin/python -m pytest tests/test_browser_agreement.py -s

(needs a built site, Chromium and Multi30k, as the other browser tests do). The test fails if the
page and Python disagree on more than 5% of the sentences, or on any input hint.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from test_browser import NODE_MODULES, SITE, _open, browser, site_url  # noqa: F401 (fixtures)

from transformer_book.browser_model import onnx_beam_hypotheses, prepare_input
from transformer_book.machine import machine_name
from transformer_book.trained import TrainedModel
from transformer_lib.files import atomic_write
from transformer_tasks import load_split

PAGE = "chapters/11_translation.html"  # a page with the translator: it loads trained_model.js
OUT = os.environ.get("BROWSER_AGREEMENT")
pytestmark = [
    pytest.mark.book,
    pytest.mark.skipif(
        not OUT, reason="a measurement of minutes: set BROWSER_AGREEMENT=<result file>"
    ),
]
CHUNK = 25  # sentences per call into the page
DECODE = """async (sentences) => { const T = window.TrainedModel, m = await T.load();
  const out = [];
  for (const sentence of sentences) {
    const prepared = T.prepare(m, sentence), ids = T.sourceIds(m, prepared.ids);
    const t0 = performance.now();
    const greedy = await T.greedy(m, ids);
    const t1 = performance.now();
    const beam = await T.beam(m, greedy.memory, greedy.src, greedy.maxLen);
    out.push({ids, greedy: greedy.out, beam: beam.best, finished: beam.finished,
              hints: prepared.hints,
              greedy_ms: t1 - t0, beam_ms: performance.now() - t1});
  }
  return out; }"""
LOGITS = """async ([ids, prefix, tokens]) => { const T = window.TrainedModel, m = await T.load();
  const { src, memory } = await T.encode(m, ids);
  const row = await T.lastLogits(m, memory, src, prefix);
  return tokens.map((t) => row[t]); }"""
HINTS = """async (texts) => { const T = window.TrainedModel, m = await T.load();
  return texts.map((text) => T.prepare(m, text).hints); }"""


def _python(trained: TrainedModel, sentence: str) -> dict[str, Any]:
    """Python's greedy ids and every finished beam hypothesis of a sentence, decoded as the page."""
    c = trained.config
    ids = trained.source_ids(sentence)
    src = np.array([ids], dtype=np.int64)
    max_len = min(int(c["max_len_a"] * len(ids) + c["max_len_b"]), c["max_len"])
    ends = (c["bos_id"], c["eos_id"], c["length_penalty"], c["pad_id"])
    finished = onnx_beam_hypotheses(trained.sessions, src, c["beam_size"], max_len, *ends)
    best = max(finished, key=lambda hypothesis: hypothesis[0])[1]
    return {
        "ids": ids,
        "greedy": trained.translate_ids(sentence),
        "beam": best,
        "finished": finished,
    }


def _python_logits(
    trained: TrainedModel, ids: list[int], prefix: list[int], tokens: list[int]
) -> list[float]:
    src = np.array([ids], dtype=np.int64)
    memory = trained.sessions["encoder"].run(["memory"], {"src": src})[0]
    feed = {"tgt": np.array([prefix], dtype=np.int64), "memory": memory, "src": src}
    row = trained.sessions["decoder"].run(["logits"], feed)[0][0, -1]
    return [round(float(row[t]), 4) for t in tokens]


def _score_of(finished: list[Any], ids: list[int]) -> float | None:
    """The score a side gave a hypothesis, if it finished it."""
    return next((round(float(score), 4) for score, hyp in finished if list(hyp) == list(ids)), None)


def _difference(
    page: Any,
    trained: TrainedModel,
    sentence: str,
    sides: dict[str, dict[str, Any]],
    kind: str,
) -> dict[str, Any]:
    """Where and by how much the page and Python part on one sentence (``sides``: both results)."""
    ours, theirs = sides["python"], sides["page"]
    detail = {"sentence": sentence, "kind": kind}
    detail |= {side: trained.tokenizer.decode(result[kind]) for side, result in sides.items()}
    if kind == "greedy":
        pairs = enumerate(zip(ours["greedy"], theirs["greedy"], strict=False))
        step = next(i for i, (a, b) in pairs if a != b)
        prefix, tokens = ours["greedy"][:step], [ours["greedy"][step], theirs["greedy"][step]]
        detail["step"] = step
        detail["tokens"] = trained.labels(tokens)  # Python's choice, the page's choice
        detail["python_logits"] = _python_logits(trained, ours["ids"], prefix, tokens)
        page_logits = page.evaluate(LOGITS, [ours["ids"], prefix, tokens])
        detail["page_logits"] = [round(x, 4) for x in page_logits]
    else:
        best = [ours["beam"], theirs["beam"]]  # Python's best hypothesis, the page's best
        for side, result in sides.items():
            detail[f"{side}_scores"] = [_score_of(result["finished"], ids) for ids in best]
        detail["scores_of"] = ["python's best", "page's best"]
    return detail


def test_the_page_and_python_agree_on_the_test_set(
    browser: Any,  # noqa: F811 (the fixture)
    site_url: str,  # noqa: F811
    multi30k_dir: Any,
) -> None:
    trained = TrainedModel(SITE / "_static" / "translator")
    test = load_split("test_2016_flickr", multi30k_dir)
    sentences, references = [de for de, _ in test], [en for _, en in test]
    start = time.perf_counter()
    python = [_python(trained, sentence) for sentence in sentences]
    python_seconds = time.perf_counter() - start
    page, log = _open(browser, site_url, PAGE)
    try:
        page.set_default_timeout(600_000)
        theirs = []
        for first in range(0, len(sentences), CHUNK):
            theirs += page.evaluate(DECODE, sentences[first : first + CHUNK])
        for result in theirs:
            result["finished"] = [(score, hyp) for score, hyp in result["finished"]]
        differences = []
        for sentence, ours, got in zip(sentences, python, theirs, strict=True):
            assert got["ids"] == ours["ids"], f"{sentence!r}: the tokenizers differ"
            for kind in ("greedy", "beam"):
                if got[kind] != ours[kind]:
                    sides = {"python": ours, "page": got}
                    differences.append(_difference(page, trained, sentence, sides, kind))
        page_hints = {
            "german": [r["hints"] for r in theirs],
            "english": page.evaluate(HINTS, references),
        }
        problems = log.problems()
    finally:
        page.context.close()
    python_hints = {
        "german": [prepare_input(trained.tokenizer, s, trained.config)[2] for s in sentences],
        "english": [prepare_input(trained.tokenizer, s, trained.config)[2] for s in references],
    }
    record = _record(trained, theirs, differences, page_hints, python_seconds, browser.version)
    print(json.dumps(record["results"], indent=1, ensure_ascii=False))
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    atomic_write(OUT, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    assert page_hints == python_hints, "the page's input hints are Python's"
    assert len(differences) <= 0.05 * 2 * len(sentences), differences
    assert not problems, problems


def _record(
    trained: TrainedModel,
    theirs: list[dict[str, Any]],
    differences: list[dict[str, Any]],
    hints: dict[str, list[list[str]]],
    python_seconds: float,
    chromium: str,
) -> dict[str, Any]:
    import onnxruntime

    n = len(theirs)
    differ = {kind: sum(d["kind"] == kind for d in differences) for kind in ("greedy", "beam")}
    web = json.loads(
        (NODE_MODULES / "onnxruntime-web" / "package.json").read_text(encoding="utf-8")
    )["version"]
    fired = {
        side: {hint: sum(hint in h for h in rows) for hint in ("unknown", "english")}
        for side, rows in hints.items()
    }
    ms = {kind: [r[f"{kind}_ms"] for r in theirs] for kind in ("greedy", "beam")}
    results = {
        "task": "browser-agreement",
        "split": "test_2016_flickr",
        "sentences": n,
        "greedy_identical": n - differ["greedy"],
        "beam_identical": n - differ["beam"],
        "differences": differences,
        "hints_fired": {
            "german_test_sentences": fired["german"],
            "english_references": fired["english"],
        },
        "page_ms_per_sentence": {
            f"{k}_median": round(float(np.median(v)), 1) for k, v in ms.items()
        },
        "python_seconds": round(python_seconds, 1),
        "model": {k: trained.info.get(k) for k in ("checkpoint", "profile", "seed", "steps")},
    }
    machine = {"name": machine_name(), "platform": platform.platform(), "chromium": chromium}
    versions = {"onnxruntime": onnxruntime.__version__, "onnxruntime-web": web}
    date = datetime.now(UTC).isoformat(timespec="seconds")
    return {"results": results, "machine": machine, "versions": versions, "date": date}
