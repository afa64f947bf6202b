"""Chapter 15's opening picture labels every variant switch of the config, with the values the
library accepts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.concepts.variants import switch_values, variants_figure  # noqa: E402
from transformer_lib import TransformerConfig  # noqa: E402

pytestmark = pytest.mark.book

# The variant fields of TransformerConfig that the figure labels, in its order.
SWITCHES = ("positional", "norm", "norm_first", "activation", "num_kv_heads")


def shown() -> list[str]:
    fig = variants_figure()
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    return texts


def test_every_switch_is_a_config_field_labelled_once() -> None:
    names = {f.name for f in fields(TransformerConfig)}
    fig = variants_figure()
    headings = [t.get_text() for t in fig.axes[0].texts if t.get_fontweight() == "bold"]
    plt.close(fig)
    assert sorted(headings) == sorted([*SWITCHES, "N ×"])
    assert set(SWITCHES) <= names


@pytest.mark.parametrize(
    ("switch", "paper", "others"),
    [
        ("positional", "sinusoidal", ["learned", "rope"]),
        ("norm", "layernorm", ["rmsnorm"]),
        ("norm_first", "False", ["True"]),
        ("activation", "relu", ["gelu", "swiglu"]),
        ("num_kv_heads", "None", ["fewer than num_heads"]),
    ],
)
def test_each_switch_lists_the_papers_default_first_then_every_other_value(
    switch: str, paper: str, others: list[str], tiny_config: Callable[..., TransformerConfig]
) -> None:
    default = next(f.default for f in fields(TransformerConfig) if f.name == switch)
    assert str(default) == paper
    assert switch_values(switch) == [paper, *others]
    assert f"{paper} (paper) | " + " | ".join(others) in shown()
    if switch in ("positional", "norm", "activation"):  # the strings the config accepts
        for value in others:
            assert getattr(tiny_config(**{switch: value}), switch) == value


def test_the_layer_is_pre_ln_with_two_sublayers_and_a_final_norm() -> None:
    texts = shown()
    assert texts.count("norm") == 2 + 1  # one per sub-layer, and the switch's label
    assert texts.count("final norm") == 1 and texts.count("+") == 2
    assert "self-attention" in texts and "feed-forward" in texts and "embeddings" in texts


def test_the_figure_is_registered_under_its_file_name() -> None:
    assert all_figures()["variants.svg"] is variants_figure
