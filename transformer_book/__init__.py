"""The book's harness: what the chapters, the benchmarks and the tests use to show, check and
measure.

A package beside the library, shipped in the same wheel: ``transformer_lib`` is the model and what
trains and runs it; this package is everything only the book needs.

* :mod:`~.checks`: reader-facing behaviour checks (does a piece depend on its input, is it causal,
  ...), each raising :class:`~.CheckFailed` with what went wrong;
* :mod:`~.errata`: the source documents' wrong versions, reproduced small and labelled, for
  chapter 14 to run through the checks;
* :mod:`~.reference`: PyTorch's ``nn.Transformer`` with the library's weights, for the equivalence
tests;
* :mod:`~.memory`: peak memory and key/value cache bytes (chapter 12, the benchmarks);
* :mod:`~.machine`: the one-line name of the machine a timing ran on;
* :mod:`~.attention_maps`: recording the attention weights of a model during a forward pass;
* :mod:`~.browser_model`: the files of chapter 11's browser translator (ONNX, int8), and decoding
  them as the page does; :mod:`~.trained`: that translator loaded in Python (chapters 3-5, 11);
* :mod:`~.example`: the running example of chapters 1 to 5;
* :mod:`~.plotting`, :mod:`~.interactive`, :mod:`~.explorers`, :mod:`~.model_explorers`,
  :mod:`~.diagrams`, :mod:`~.attention_figures` (every attention map) and :mod:`~.concepts`: the
  figures (matplotlib, plotly).

It imports ``transformer_lib``; nothing in ``transformer_lib`` imports it
(``tests/test_architecture.py``).
"""
