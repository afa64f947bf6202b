"""Draw the book's static figures into ``figures/`` (``make figures``).

The landing page shows the model the book builds: the paper's base model, drawn from its
``TransformerConfig`` by :func:`transformer_book.diagrams.architecture_figure`. Every chapter
opens with a concept picture, drawn by :mod:`transformer_book.concepts`. ``tests/test_diagrams.py``
checks that each stored file is what this script draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from transformer_book.concepts import all_figures  # noqa: E402
from transformer_book.diagrams import architecture_figure, save_svg  # noqa: E402
from transformer_lib import TransformerConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The paper's table 3: 6 + 6 layers, d_model 512, 8 heads, d_ff 2048, one 37,000-token BPE
# vocabulary
# whose embedding matrix is shared by both embeddings and the output projection (section 3.4).
PAPER_BASE = TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True)
FIGURES = {
    "architecture.svg": lambda: architecture_figure(
        PAPER_BASE, title="The paper's base model (Post-LN)"
    ),
    **all_figures(),
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
