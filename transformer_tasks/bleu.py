"""Corpus BLEU with sacreBLEU: the score every machine-translation paper reports, computed
reproducibly.

BLEU (Papineni et al., 2002) is the geometric mean of the 1- to 4-gram precisions of the output
against the references, times a brevity penalty for short output. Scores of different scripts are
not comparable (tokenisation changes them by points), so the book uses sacreBLEU (Post, 2018) on
**detokenized** output against the **raw** references, and reports its signature. A score is
sacreBLEU's ``BLEUScore`` (``score`` in ``[0, 100]``, ``precisions``, ``bp``, ``sys_len``,
``ref_len``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from sacrebleu.metrics import BLEU
from sacrebleu.metrics.bleu import BLEUScore


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BLEUScore:
    """Corpus BLEU (sacreBLEU) of detokenized ``hypotheses`` against one raw reference each.

    Both are plain sentences (no sub-word markers, not lower-cased, not pre-tokenized): sacreBLEU
    applies its own ``13a`` tokenisation to both, which is what makes the number comparable.
    """
    hypotheses, references = list(hypotheses), list(references)
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(
                    f"{name}[{i}] must be a str (detokenized text), got {type(text).__name__}"
                )
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references must have the same length, got {len(hypotheses)} and "
            f"{len(references)}"
        )
    if not references:
        raise ValueError("references is empty: BLEU needs at least one sentence")
    return BLEU().corpus_score(hypotheses, [references])


@cache
def bleu_signature() -> str:
    """The sacreBLEU signature of every :func:`corpus_bleu` score: how it was computed, not what it
    scored.
    """
    metric = BLEU()
    # sacreBLEU knows the number of references only after a score
    metric.corpus_score(["."], [["."]])
    return str(metric.get_signature())
