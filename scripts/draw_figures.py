"""Draw the book's static figures into ``figures/`` (``make figures``).

The landing page shows the model the book builds: the paper's base model, drawn from its
``TransformerConfig`` by :func:`transformer_book.diagrams.architecture_figure`. Every chapter
opens with a concept picture, drawn by :mod:`transformer_book.concepts`, and chapters 1-11 with a
map: the same architecture, compact, with the chapter's parts marked (``CHAPTER_MAPS``).
``tests/test_diagrams.py`` checks that each stored file is what this script draws.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.diagrams import PARTS, architecture_figure, save_svg  # noqa: E402
from transformer_lib import TransformerConfig  # noqa: E402
from transformer_tasks.copy import copy_model_config  # noqa: E402
from transformer_tasks.translation.profiles import translation_profile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The paper's table 3: 6 + 6 layers, d_model 512, 8 heads, d_ff 2048, one 37,000-token BPE
# vocabulary
# whose embedding matrix is shared by both embeddings and the output projection (section 3.4).
PAPER_BASE = TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True)
ATTENTION = ("self-attention", "masked self-attention", "cross-attention")
# Chapter -> (the parts it builds, the model it builds them for). Chapters 1-9 build the paper's
# model; chapter 10 trains the library's copy model (Pre-LN, one layer each) and chapter 11 the
# cpu profile's translator (Pre-LN), so their maps are drawn from those configs.
CHAPTER_MAPS: dict[int, tuple[tuple[str, ...], TransformerConfig]] = {
    1: (("embedding",), PAPER_BASE),
    2: (("positional",), PAPER_BASE),
    # the one attention function, called inside every attention box
    3: (ATTENTION, PAPER_BASE),
    # the three places it is called, and the memory that cross-attention reads
    4: ((*ATTENTION, "memory"), PAPER_BASE),
    5: (ATTENTION, PAPER_BASE),  # every attention box is multi-head
    6: (("norm", "residual"), PAPER_BASE),
    7: (("feed-forward",), PAPER_BASE),
    # what chapter 8 adds to the pieces: the stacks, the memory between them, the output layer
    8: (("stacks", "memory", "output"), PAPER_BASE),
    # the loss is computed on the output's probabilities, against a label-smoothed target
    9: (("output",), PAPER_BASE),
    10: (PARTS, copy_model_config()),
    11: (PARTS, translation_profile("cpu").model),
}


def chapter_map(chapter: int) -> Figure:
    """Chapter ``chapter``'s map: the compact architecture with its parts marked."""
    parts, config = CHAPTER_MAPS[chapter]
    return architecture_figure(config, highlight=parts, compact=True)


FIGURES = {
    "architecture.svg": lambda: architecture_figure(
        PAPER_BASE, title="The paper's base model (Post-LN)"
    ),
    **all_figures(),
    **{f"map_{n:02d}.svg": functools.partial(chapter_map, n) for n in CHAPTER_MAPS},
}


def main(folder: Path) -> None:
    """Write every figure of FIGURES into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        fig = draw()
        save_svg(fig, folder / name)
        plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "figures")
