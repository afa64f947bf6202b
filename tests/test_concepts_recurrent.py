"""Chapter 3's opening reason: a recurrent network's fixed-size state against attention."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.concepts._style import MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.concepts.recurrent import (  # noqa: E402
    HIGHLIGHT,
    german_words,
    recurrent_bottleneck_figure,
)
from transformer_book.diagrams import save_svg  # noqa: E402

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
NAME = "recurrent_bottleneck.svg"


def _is_arc(annotation: Annotation) -> bool:
    return "arc3,rad" in str(annotation.arrowprops.get("connectionstyle"))


def _labels(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts if t.get_text()]


def test_the_words_are_the_running_examples_with_their_english_under_them() -> None:
    assert german_words() == ["Zwei", "Hunde", "spielen", "im", "Gras", "."]
    fig = recurrent_bottleneck_figure()
    shown = _labels(fig)
    for word in german_words():
        assert shown.count(word) == 2 + 2 * (word == "."), word  # both panels; "." glosses itself
    for gloss in ("two", "dogs", "play", "in the", "grass"):
        assert shown.count(gloss) == 2, gloss
    plt.close(fig)


def test_the_recurrent_panel_has_one_state_per_word_and_the_decoder_reads_the_last() -> None:
    fig = recurrent_bottleneck_figure()
    shown = _labels(fig)
    states = [t for t in shown if t.startswith("h") and len(t) == 2]
    assert states == ["h₁", "h₂", "h₃", "h₄", "h₅", "h₆"]
    assert "decoder" in shown
    note = next(t for t in shown if t.startswith("spielen gets Hunde"))
    assert "only inside h₂, mixed with Zwei" in note
    assert "without attention, the decoder gets h₆ alone: 6 words" in note
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    state_widths = {round(p.get_width(), 6) for p in boxes if p.get_height() == 0.5}
    assert len(state_widths) == 1  # every state has the same, fixed size
    plt.close(fig)


def test_the_attention_panel_draws_one_arrow_per_other_word_and_the_strong_one_to_hunde() -> None:
    fig = recurrent_bottleneck_figure()
    ax = fig.axes[0]
    arcs = [a for a in ax.texts if isinstance(a, Annotation) and _is_arc(a)]
    spielen_x = next(t.get_position()[0] for t in ax.texts if t.get_text() == "spielen")
    assert len(arcs) == 5 and all(a.xyann[0] == spielen_x for a in arcs)  # from spielen, to 5
    strong = [a for a in arcs if to_hex(a.arrowprops["color"]) == HIGHLIGHT]
    assert len(strong) == 1
    hunde_x = next(t.get_position()[0] for t in ax.texts if t.get_text() == "Hunde")
    assert strong[0].xy[0] == hunde_x
    plt.close(fig)


def test_it_fits_the_page_and_refuses_a_sentence_it_cannot_draw() -> None:
    fig = recurrent_bottleneck_figure()
    assert fig.get_figwidth() <= MAX_WIDTH
    assert min(t.get_fontsize() for t in fig.axes[0].texts if t.get_text()) >= SMALL
    assert to_hex(fig.get_facecolor()) == "#ffffff"  # a white card in the dark theme too
    plt.close(fig)


def test_the_stored_file_is_what_the_code_draws_and_chapter_3_shows_it(tmp_path) -> None:
    assert all_figures()[NAME] is recurrent_bottleneck_figure
    fig = recurrent_bottleneck_figure()
    save_svg(fig, tmp_path / NAME)
    plt.close(fig)
    stored = ROOT / "figures" / NAME
    assert stored.read_bytes() == (tmp_path / NAME).read_bytes(), f"{stored} is stale: make figures"
    chapter = (ROOT / "chapters" / "03_attention_and_masks.ipynb").read_text(encoding="utf-8")
    assert f"../figures/{NAME}" in chapter
