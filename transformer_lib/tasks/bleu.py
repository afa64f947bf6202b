"""Corpus BLEU with sacreBLEU: the score every machine-translation paper reports, computed reproducibly.

BLEU (Papineni et al., 2002) is the geometric mean of the 1- to 4-gram precisions of the system's
output against the references, times a brevity penalty for output shorter than the references.
Scores computed by different scripts are not comparable (tokenisation changes them by points), so
the book uses sacreBLEU (Post, 2018) on **detokenized** output against the **raw** references, and
reports its signature, e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU


@dataclass(frozen=True)
class BleuScore:
    """A corpus BLEU score and what it is made of.

    Attributes:
        score: BLEU in ``[0, 100]``.
        signature: sacreBLEU's signature string (how the score was computed).
        precisions: the 1- to 4-gram precisions, in percent.
        brevity_penalty: ``exp(1 - ref_len / hyp_len)`` when the output is shorter, else 1.
        hyp_len, ref_len: total length (in 13a tokens) of the output and of the references.
    """

    score: float
    signature: str
    precisions: tuple[float, float, float, float]
    brevity_penalty: float
    hyp_len: int
    ref_len: int

    @property
    def length_ratio(self) -> float:
        """``hyp_len / ref_len`` (below 1: output too short, and the brevity penalty bites)."""
        return self.hyp_len / self.ref_len if self.ref_len else 0.0


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Corpus BLEU (sacreBLEU) of detokenized ``hypotheses`` against one raw reference each.

    Both are plain sentences (no sub-word markers, not lower-cased, not pre-tokenized): sacreBLEU
    applies its own ``13a`` tokenisation to both, which is what makes the number comparable.
    """
    hypotheses, references = list(hypotheses), list(references)
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{name}[{i}] must be a str (detokenized text), got {type(text).__name__}")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references must have the same length, got {len(hypotheses)} and {len(references)}"
        )
    if not references:
        raise ValueError("references is empty: BLEU needs at least one sentence")
    metric = BLEU()
    result = metric.corpus_score(hypotheses, [references])
    p1, p2, p3, p4 = (float(p) for p in result.precisions)
    return BleuScore(
        score=float(result.score),
        signature=str(metric.get_signature()),
        precisions=(p1, p2, p3, p4),
        brevity_penalty=float(result.bp),
        hyp_len=int(result.sys_len),
        ref_len=int(result.ref_len),
    )
