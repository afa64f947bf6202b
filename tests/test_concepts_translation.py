"""Chapter 11's opening picture shows the running example and the sizes of the profile the chapter
trains."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.concepts._style import MAX_WIDTH, SMALL  # noqa: E402
from transformer_book.concepts.translation import FIGURES, pipeline_figure  # noqa: E402
from transformer_book.example import ENGLISH, GERMAN  # noqa: E402
from transformer_tasks import translation_profile  # noqa: E402

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent


def test_the_pipeline_runs_from_the_german_caption_to_bleu_against_its_reference():
    fig = pipeline_figure()
    shown = [t.get_text() for t in fig.axes[0].texts]
    flat = [" ".join(t.split()) for t in shown]
    assert GERMAN in flat and ENGLISH in flat  # each on two lines, in a box of its own
    for stage in ("subwords", "token ids", "encoder", "decoder", "English", "sacreBLEU"):
        assert stage in shown, stage
    assert "greedy or\nbeam search" in shown
    plt.close(fig)


def test_the_sizes_it_prints_are_the_cpu_profiles():
    profile = translation_profile("cpu")
    fig = pipeline_figure()
    text = "\n".join(t.get_text() for t in fig.axes[0].texts)
    assert f"of {profile.data.vocab_size:,} tokens" in text
    assert (
        f"{profile.model.num_encoder_layers} layers" in text
        and f"(1, S, {profile.model.d_model})" in text
    )
    assert f"beam width {profile.decode.beam_size}" in text
    plt.close(fig)


def test_it_is_readable_on_the_page_and_registered_and_stored():
    fig = pipeline_figure()
    assert fig.get_figwidth() <= MAX_WIDTH
    # the arrows are annotations without text
    labels = [t for t in fig.axes[0].texts if t.get_text()]
    assert min(t.get_fontsize() for t in labels) >= SMALL
    plt.close(fig)
    assert all_figures()["translation_pipeline.svg"] is FIGURES["translation_pipeline.svg"]
    assert (ROOT / "figures" / "translation_pipeline.svg").is_file()
    notebook = (ROOT / "chapters" / "11_translation.ipynb").read_text(encoding="utf-8")
    assert "../figures/translation_pipeline.svg" in notebook
