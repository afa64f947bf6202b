"""Draw the figures of the book's pages that are not notebooks (``make figures``).

The landing page shows the model the book builds: the paper's base model, drawn from its
``TransformerConfig`` by :func:`transformer_lib.book.diagrams.architecture_figure`.
``tests/test_diagrams.py`` checks that the stored file is what this script draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from transformer_lib import TransformerConfig  # noqa: E402
from transformer_lib.book.diagrams import architecture_figure, save_svg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The paper's table 3: 6 + 6 layers, d_model 512, 8 heads, d_ff 2048, one 37,000-token BPE vocabulary
# whose embedding matrix is shared by both embeddings and the output projection (section 3.4).
PAPER_BASE = TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True)
FIGURES = {"architecture.svg": lambda: architecture_figure(PAPER_BASE, title="The paper's base model (Post-LN)")}


def main(folder: Path) -> None:
    """Write every figure of FIGURES into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        save_svg(draw(), folder / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "figures")
