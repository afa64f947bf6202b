"""Time two ways of projecting queries, keys and values in MultiHeadAttention, like for like.

The library calls its three ``nn.Linear`` layers, ``q_proj``, ``k_proj`` and ``v_proj``. It once
fused them in self-attention instead: it concatenated the three weight matrices on every call and
ran ``F.linear`` once. This script times both ways, in one process, on the same weights, inputs
and dropout:

- ``block``: one self-attention block alone, forward and backward (where the difference lives);
- ``step``: a whole training step of the ``cpu`` translation profile's model (forward,
  label-smoothed cross-entropy, backward, Adam), on a batch of about 3,000 target tokens.

The two ways alternate step by step after a warm-up, and the result is the median of the ratios
of adjacent timings (fused / three Linear calls) with its quartiles: other programs may share the
machine, and adjacent timings share its load. The fused way did not win outside those quartiles
(``benchmarks/results/qkv_projection.json``), so the library keeps the three calls. Not run by the
tests.

    .venv/bin/python benchmarks/qkv_projection.py --threads 1 --results FILE
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import _common
import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lib import Transformer
from transformer_lib.nn.multihead import MultiHeadAttention


def fused_projection(
    self: MultiHeadAttention, x: Tensor, projections: tuple[torch.nn.Linear, ...]
) -> tuple[Tensor, ...]:
    """The fused way: one ``F.linear`` of ``x`` with the ``projections``' weight matrices
    concatenated on every call, split into heads.
    """
    weight = torch.cat([p.weight for p in projections])  # (sum of out_features, d_model)
    bias = None if projections[0].bias is None else torch.cat([p.bias for p in projections])
    out = F.linear(x, weight, bias)  # (B, T, sum of out_features)
    parts = out.split([p.out_features for p in projections], dim=-1)
    return tuple(self.split_heads(part) for part in parts)


def fused(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` (same weights) whose attention layers project as the library once did:
    queries, keys and values in one product in self-attention, keys and values in one product in
    cross-attention.
    """
    twin = copy.deepcopy(module)
    for layer in twin.modules():
        if isinstance(layer, MultiHeadAttention):

            def project(query, key, value, layer=layer):
                if query is key and key is value:
                    return fused_projection(
                        layer, query, (layer.q_proj, layer.k_proj, layer.v_proj)
                    )
                q = layer.split_heads(layer.q_proj(query))  # (B, H, T_q, d_k)
                if key is value:
                    return (q, *fused_projection(layer, key, (layer.k_proj, layer.v_proj)))
                return (
                    q,
                    layer.split_heads(layer.k_proj(key)),
                    layer.split_heads(layer.v_proj(value)),
                )

            layer.project = project
    return twin


def compare(
    make_step: Callable[[torch.nn.Module], Callable[[], object]],
    models: dict[str, torch.nn.Module],
    warmup: int,
    repeats: int,
) -> dict[str, Any]:
    """Alternate the two models' steps, who goes first alternating too; return the medians and the
    paired ratios.
    """
    steps = {name: make_step(model) for name, model in models.items()}
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(repeats):
        order = list(steps) if repeat % 2 == 0 else list(reversed(steps))
        for name in order:
            times[name].append(1000.0 * _common.time_call(steps[name], torch.device("cpu")))
    ratios = [f / s for f, s in zip(times["fused"], times["three_linear"], strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {
        "median_ms": {name: round(statistics.median(t), 3) for name, t in times.items()},
        "paired_ratio_fused_over_three": round(median, 4),
        "paired_ratio_iqr": [round(q1, 4), round(q3, 4)],
        "fused_wins_outside_iqr": q3 < 1.0,
    }


def block_step(batch: int, length: int, d_model: int) -> Callable[[torch.nn.Module], Callable]:
    """Forward and backward of one self-attention block on a fixed input."""
    x = torch.randn(batch, length, d_model, requires_grad=True)

    def make(block: torch.nn.Module) -> Callable[[], object]:
        def step() -> None:
            out, _ = block(x, x, x)  # (B, T, d_model)
            out.sum().backward()

        return step

    return make


def train_step(src: Tensor, tgt: Tensor, pad_id: int) -> Callable[[torch.nn.Module], Callable]:
    """One training step of a Transformer; each model gets its own Adam."""

    def make(model: torch.nn.Module) -> Callable[[], object]:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            logits = model(src, tgt[:, :-1])  # (B, T - 1, V)
            loss = F.cross_entropy(
                logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=pad_id, label_smoothing=0.1
            )
            loss.backward()
            optimizer.step()

        return step

    return make


def main() -> None:
    description = __doc__.split("\n\n")[0]
    parser = _common.timing_parser(description, 5, 60, "timed steps per way, per part")
    parser.add_argument("--batch", type=int, default=96)
    parser.add_argument("--length", type=int, default=32, help="96 x 32: about 3,000 tokens")
    args = parser.parse_args()
    started = time.perf_counter()
    device = _common.setup("cpu", args.threads, args.seed)
    machine = _common.machine_info(device)  # the load before timing, too
    config = _common.decoding_model_config()  # the cpu profile's model, 8,000 ids
    twin = Transformer(config).train()  # dropout on, the same in both: like for like
    model = fused(twin)
    with torch.no_grad():  # the same function: equal outputs in evaluation mode
        src = torch.randint(4, config.src_vocab_size, (args.batch, args.length))
        tgt = torch.randint(4, config.tgt_vocab_size, (args.batch, args.length + 1))
        difference = (model.eval()(src, tgt[:, :-1]) - twin.eval()(src, tgt[:, :-1])).abs().max()
    model.train(), twin.train()
    block = MultiHeadAttention(config.d_model, config.num_heads, dropout=config.dropout)
    fused_block = fused(block)
    _common.info(f"max |logit difference|, fused vs three Linear calls: {difference.item():.1e}")
    parts = {
        "block": compare(
            block_step(args.batch, args.length, config.d_model),
            {"fused": fused_block, "three_linear": block},
            args.warmup,
            args.repeats,
        ),
        "step": compare(
            train_step(src, tgt, config.pad_id),
            {"fused": model, "three_linear": twin},
            args.warmup,
            args.repeats,
        ),
    }
    result = {
        "benchmark": "qkv_projection",
        "command": _common.command_line("qkv_projection.py", args),
        "model": f"cpu profile: d_model {config.d_model}, {config.num_heads} heads, dropout "
        f"{config.dropout}",
        "batch": [args.batch, args.length],
        "max_logit_difference": float(difference),
        **parts,
        **machine,
    }
    _common.write_results(args.results, result)
    _common.finish(result, started)


if __name__ == "__main__":
    main()
