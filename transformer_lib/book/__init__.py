"""The book's teaching harness: what the chapters use to show and check things, apart from the library.

* :mod:`~.checks`: reader-facing behaviour checks (does a piece depend on its input, is it causal,
  ...), each raising :class:`~.CheckFailed` with what went wrong;
* :mod:`~.errata`: the source documents' wrong versions, reproduced small and labelled, for
  chapter 14 to run through the checks;
* :mod:`~.attention_maps`: recording the attention weights of a model during a forward pass;
* :mod:`~.plotting` and :mod:`~.interactive`: the figures (matplotlib, plotly).

Layer: a leaf. It may import anything of the package; nothing in the package imports it (the
tests and the chapters do).
"""
