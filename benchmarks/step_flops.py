"""A training step of the cpu profile against the processor: its FLOPs, its time, the share of the
machine's own matrix-multiply rate it reaches, and where the rest of the time goes.

In one process, on the cpu profile's model (chapter 11) and its first real Multi30k batches
(3,000 padded tokens, shuffled as the run shuffles them), in float32 (what ``amp="auto"`` picks
where bfloat16 does not pay):

- **FLOPs**: ``torch.utils.flop_counter.FlopCounterMode`` over one forward and backward pass, in
  all and per module (the output layer's share among them). It counts matrix products only;
  everything else (softmax, normalisation, Adam) does a few operations per number.
- **the step's time**: the median of ``--repeats`` whole training steps (forward, backward, Adam).
- **the machine's rate**: ``F.linear`` timed alone at the step's own product shapes (its tokens
  times the model's widths), in float32 and in bfloat16; the rate the step could reach is the
  float32 rate at its mix of shapes (each shape weighted by its FLOPs).
- **where the time goes**: ``torch.profiler`` over ``--profile-steps`` steps, each operator's own
  CPU time put into one group (matrix products, attention's fused kernel, softmax and the loss,
  Adam, copies and casts, the rest), and the time to fetch a batch.

Not run by the tests.

    MULTI30K_DIR=... .venv/bin/python benchmarks/step_flops.py --threads 1 --results FILE
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from typing import Any

import _common
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.flop_counter import FlopCounterMode

from transformer_lib import Transformer, token_batches
from transformer_lib.training import batch_logits, sequence_loss
from transformer_tasks.multi30k import load_multi30k
from transformer_tasks.translation import encode_pairs, translation_profile
from transformer_tasks.translation.data import train_translation_tokenizer

# Operator names (lower case, "aten::" and leading underscores dropped) and the group their own
# time goes to, the first match winning: a key of five letters or more matches anywhere in the name
# (log_softmax_backward_data is softmax), a shorter one the whole name.
GROUPS = (
    ("attention kernel", ("scaled_dot_product",)),
    ("matrix products", ("mm", "addmm", "bmm", "matmul", "linear")),
    ("dropout's random masks", ("bernoulli", "dropout")),
    ("softmax and loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("normalisation", ("layer_norm", "rms_norm")),
    ("copies and casts", ("copy_", "to_copy", "to", "clone", "contiguous", "cat", "stack")),
    ("embedding", ("embedding", "index_select", "index_add")),
)
REGIONS = ("forward", "loss", "backward", "Adam")


def group_of(name: str) -> str:
    op = name.lower().removeprefix("aten::").lstrip("_")
    for group, keys in GROUPS:
        if any(op == key or (len(key) >= 5 and key in op) for key in keys):
            return group
    return "element-wise and the rest"


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Any) -> None:
    """One training step of the cpu recipe (label smoothing 0.1), each part under the profiler label
    of its name in ``REGIONS``.
    """
    optimizer.zero_grad(set_to_none=True)
    with record_function("forward"):
        logits = batch_logits(model, batch)
    with record_function("loss"):
        loss = sequence_loss(logits, batch.tgt_out, batch.pad_id, 0.1)
    with record_function("backward"):
        loss.backward()
    with record_function("Adam"):
        optimizer.step()


def epoch_batches() -> tuple[list[Any], int, float]:
    """The cpu profile's training batches of epoch 0, the vocabulary size, and the seconds that
    batching the epoch took per batch.
    """
    config = translation_profile("cpu")
    data = load_multi30k(os.environ.get("MULTI30K_DIR"))
    tokenizer = train_translation_tokenizer(data["train"], vocab_size=config.data.vocab_size)
    ids = encode_pairs(tokenizer, data["train"])
    ends = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    start = time.perf_counter()
    batches = token_batches(ids, config.data.max_tokens, **ends, shuffle=True, seed=0)
    per_batch = (time.perf_counter() - start) / len(batches)
    return batches, tokenizer.vocab_size, per_batch


def main() -> None:
    description = __doc__.split("\n\n")[0]
    parser = _common.timing_parser(description, 2, 8, "timed training steps")
    parser.add_argument("--profile-steps", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    device = _common.setup("cpu", args.threads, args.seed)
    machine = _common.machine_info(device)
    config = translation_profile("cpu")
    batches, vocab, batching_seconds = epoch_batches()
    model = Transformer(config.model_config(vocab)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step(batch: Any) -> None:
        train_step(model, optimizer, batch)

    # FLOPs of one forward and backward pass, per module
    counter = FlopCounterMode(display=False)
    with counter:
        step(batches[0])
    flops = counter.get_total_flops()
    # per module from a forward pass alone: the counter files a backward's products under the
    # wrong module (the tied output layer's under the embedding), and each product's backward is
    # two products of its own size, so the shares are the forward's
    with torch.no_grad(), FlopCounterMode(display=False) as forward_counter:
        batch_logits(model, batches[0])
    by_module = {k: sum(v.values()) for k, v in forward_counter.get_flop_counts().items()}
    output_layer = by_module.get("Transformer.generator", 0) / by_module["Global"]
    _common.info(f"{flops / 1e9:.1f} GFLOP per step; output layer {output_layer:.1%}")
    # the step's own time
    for batch in batches[: args.warmup]:
        step(batch)
    timed = batches[args.warmup : args.warmup + args.repeats]
    seconds, step_flops = [], []
    for batch in timed:
        start = time.perf_counter()
        step(batch)
        seconds.append(time.perf_counter() - start)
    for batch in timed:  # FLOPs of the same batches, counted apart from their timing
        with FlopCounterMode(display=False) as each:
            step(batch)
        step_flops.append(each.get_total_flops())
    rates = [f / s for f, s in zip(step_flops, seconds, strict=True)]
    # the machine's matrix-multiply rate at the step's shapes: (tokens, in) @ (in, out)
    tokens = int(statistics.median(b.src.numel() + b.tgt_in.numel() for b in timed) / 2)
    widths = config.model
    shapes = {
        "projections": (tokens, widths.d_model, widths.d_model),
        "feed-forward in": (tokens, widths.d_model, widths.d_ff),
        "feed-forward out": (tokens, widths.d_ff, widths.d_model),
        "output layer": (tokens, widths.d_model, vocab),
    }
    matmul = {name: matmul_rates(*shape, args.repeats) for name, shape in shapes.items()}
    # each shape weighted by its share of a step's FLOPs in a forward pass of the model
    weights = {
        "projections": 4 * (widths.num_encoder_layers + 2 * widths.num_decoder_layers),
        "feed-forward in": widths.num_encoder_layers + widths.num_decoder_layers,
        "feed-forward out": widths.num_encoder_layers + widths.num_decoder_layers,
        "output layer": 1,
    }
    flop_weight = {n: weights[n] * shapes[n][1] * shapes[n][2] for n in shapes}
    total_weight = sum(flop_weight.values())
    # the rate of the mix: total FLOPs over the sum of each part's time at its own rate
    mix_rate = {
        dtype: total_weight / sum(flop_weight[n] / matmul[n][dtype] for n in shapes)
        for dtype in ("float32", "bfloat16")
    }
    # where the time goes
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches[args.warmup + args.repeats : -1][: args.profile_steps]:
            step(batch)
    groups: dict[str, float] = defaultdict(float)
    regions: dict[str, float] = {}
    for event in prof.key_averages():
        if event.key in REGIONS:
            regions[event.key] = event.cpu_time_total / 1e6
        else:
            groups[group_of(event.key)] += event.self_cpu_time_total / 1e6
    profiled = sum(groups.values())
    in_regions = sum(regions.values())
    result = {
        "benchmark": "step_flops",
        "command": _common.command_line("step_flops.py", args),
        "model": "cpu profile",
        "parameters": model.num_parameters(),
        "batch_tokens_median": tokens,
        "gflop_per_step": round(statistics.median(step_flops) / 1e9, 2),
        "output_layer_share_of_flops": round(output_layer, 3),
        "forward_gflop_by_module": {
            k: round(v / 1e9, 3) for k, v in by_module.items() if k.count(".") <= 1
        },
        "step_seconds_median": round(statistics.median(seconds), 4),
        "step_seconds": [round(s, 4) for s in seconds],
        "step_gflops_per_s": round(statistics.median(rates) / 1e9, 2),
        "matmul_gflops_per_s": {
            n: {d: round(r / 1e9, 2) for d, r in v.items()} for n, v in matmul.items()
        },
        "matmul_mix_gflops_per_s": {d: round(r / 1e9, 2) for d, r in mix_rate.items()},
        "share_of_float32_matmul_rate": round(statistics.median(rates) / mix_rate["float32"], 3),
        "profile_steps": args.profile_steps,
        "time_by_part_share": {r: round(regions.get(r, 0.0) / in_regions, 3) for r in REGIONS},
        "time_by_group_share": {
            g: round(s / profiled, 3) for g, s in sorted(groups.items(), key=lambda x: -x[1])
        },
        "batching_seconds_per_batch": round(batching_seconds, 5),
        "batching_share_of_step": round(batching_seconds / statistics.median(seconds), 4),
        **machine,
    }
    _common.write_results(args.results, result)
    _common.finish(result, started)


def matmul_rates(tokens: int, d_in: int, d_out: int, repeats: int) -> dict[str, float]:
    """FLOP/s of ``F.linear`` for ``(tokens, d_in) @ (d_in, d_out)`` in float32 and bfloat16."""
    rates = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(tokens, d_in, dtype=dtype)
        w = torch.randn(d_out, d_in, dtype=dtype)
        for _ in range(2):
            F.linear(x, w)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            F.linear(x, w)
            times.append(time.perf_counter() - start)
        name = "float32" if dtype == torch.float32 else "bfloat16"
        rates[name] = 2 * tokens * d_in * d_out / statistics.median(times)
    return rates


if __name__ == "__main__":
    main()
