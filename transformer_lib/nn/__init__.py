"""The building blocks (chapters 1 to 8): one concept per module, each a PyTorch ``nn.Module`` or
function.

Layer: the lowest of the package, above only the argument checks
(:mod:`~transformer_lib.validation`); nothing here knows about the model, the data or training. The
public names are importable from ``transformer_lib`` itself.

* :mod:`~.embedding`: token embedding; :mod:`~.positional`: sinusoidal, learned and rotary
positions;
* :mod:`~.attention`: scaled dot-product attention written out, and the fused kernel the model runs;
:mod:`~.masks`: padding and causal masks;
* :mod:`~.multihead`: multi-head (and grouped-query) attention; :mod:`~.cache`: its key/value cache
for decoding;
* :mod:`~.norms`: LayerNorm and RMSNorm; :mod:`~.feedforward`: the position-wise network;
* :mod:`~.layers`: encoder and decoder layers and stacks, Post-LN or Pre-LN, all built from one
``LayerSpec``.
"""
