"""Recording attention maps (注意力图): the per-head weights of every attention module during a
forward pass.

:class:`~.MultiHeadAttention` returns its weights only when asked (``need_weights=True``), and the
layers above it never ask. :func:`~.record_attention` asks for them, without changing any model
code::

    with record_attention(model) as maps:
        model(src, tgt)
    maps["decoder.layers.0.cross_attn"]        # (B, H, T, S): the last call's weights

While the context is open, a forward pre-hook on every ``MultiHeadAttention`` inside ``model``
switches it to its reference path (``need_weights=True``, the same numbers as the fused kernel to
float32 round-off) and a forward hook keeps the weights it returns. The hooks are removed on
exit, so the model runs its fused kernel again afterwards. Each module is named as in
``model.named_modules()`` (``""`` when ``model`` is itself a ``MultiHeadAttention``).

Run the model in eval mode: in training mode the weights recorded are those after attention
dropout (when ``attention_dropout > 0``). A leaf module: it imports only ``multihead``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import Tensor, nn

from transformer_lib.nn.multihead import MultiHeadAttention

__all__ = ["AttentionRecorder", "record_attention"]

_NEED_WEIGHTS_POSITION = 4  # forward(query, key, value, mask, need_weights, cache)


class AttentionRecorder:
    """The weights recorded by :func:`~.record_attention`, per attention module, one entry per call.

    Attributes:
        calls: ``{module name: [weights of call 1, call 2, ...]}``; each ``(B, H, T_q, T_k)``.
            A plain forward pass calls each module once; incremental decoding (the key/value
            cache) calls each decoder module once per generated token, with ``T_q = 1``.
    """

    def __init__(self, names: list[str]) -> None:
        self.calls: dict[str, list[Tensor]] = {name: [] for name in names}

    def names(self, kind: str | None = None) -> list[str]:
        """Names of the recorded modules, optionally only those ending in ``kind`` (e.g.
        ``"cross_attn"``).
        """
        return [name for name in self.calls if kind is None or name.endswith(kind)]

    def __getitem__(self, name: str) -> Tensor:
        """Weights of the **last** call of module ``name``, ``(B, H, T_q, T_k)``."""
        if name not in self.calls:
            raise KeyError(
                f"no attention module named {name!r}; recorded modules are {list(self.calls)}"
            )
        if not self.calls[name]:
            raise KeyError(f"attention module {name!r} was not called while recording")
        return self.calls[name][-1]


@contextmanager
def record_attention(model: nn.Module) -> Iterator[AttentionRecorder]:
    """Record the attention weights of every :class:`~.MultiHeadAttention` in ``model`` while open.

    Args:
        model: any module holding ``MultiHeadAttention`` modules (a ``Transformer``, a layer, or a
            ``MultiHeadAttention`` itself).

    Yields:
        an :class:`~.AttentionRecorder`, filled as the model runs.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    modules = [(name, m) for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    if not modules:
        raise ValueError(
            f"model ({type(model).__name__}) contains no MultiHeadAttention module to record"
        )
    recorder = AttentionRecorder([name for name, _ in modules])
    handles = []

    # id(module) -> whether the caller itself passed need_weights=True
    caller_asked: dict[int, bool] = {}

    def ask_for_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if len(args) > _NEED_WEIGHTS_POSITION:
            caller_asked[id(module)] = bool(args[_NEED_WEIGHTS_POSITION])
            args = args[:_NEED_WEIGHTS_POSITION] + (True,) + args[_NEED_WEIGHTS_POSITION + 1 :]
        else:
            caller_asked[id(module)] = bool(kwargs.get("need_weights", False))
            kwargs = {**kwargs, "need_weights": True}
        return args, kwargs

    def keeper(name: str) -> Any:
        def keep(
            module: nn.Module, _args: tuple[Any, ...], output: tuple[Tensor, Tensor | None]
        ) -> Any:
            out, weights = output
            if weights is not None:
                recorder.calls[name].append(weights.detach())
            # The caller gets exactly what it asked for: no weights unless it wanted them.
            return output if caller_asked.pop(id(module), False) else (out, None)

        return keep

    try:
        for name, module in modules:
            handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
            handles.append(module.register_forward_hook(keeper(name)))
        yield recorder
    finally:
        for handle in handles:
            handle.remove()
