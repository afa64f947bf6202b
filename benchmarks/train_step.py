"""Time one training step of transformer_lib's Transformer against the same model built on
torch.nn.Transformer.

A training step is: forward, cross-entropy (label smoothing 0.1), backward, Adam step. Both models
have the same shape and parameter count (sqrt(d_model)-scaled embeddings, sinusoidal positional
encoding, Post-LN layers, output projection tied to the target embedding); before timing, the script
copies our weights into the PyTorch model and checks that both give the same logits in evaluation
mode.

The two models are timed alternately, step by step, in one process after a warm-up, and the medians
are
reported (wall time, process CPU time, and the median of the ratios of adjacent steps): other
programs may be running on the machine, so single timings are noisy. Not run by the tests.

    .venv/bin/python benchmarks/train_step.py --repeats 40

Note: ``nn.Transformer`` applies its ``dropout`` to the attention weights too; the paper (and
``transformer_lib`` by default, ``attention_dropout=0``) does not. ``--torch-attention-dropout 0``
makes the two compute exactly the same thing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book.reference import TorchTransformer, torch_state_dict
from transformer_lib import Transformer, TransformerConfig


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, src: Tensor, tgt: Tensor, pad_id: int
) -> tuple[float, float]:
    """One step; returns its wall time and the process's CPU time, in milliseconds."""
    start, cpu_start = time.perf_counter(), time.process_time()
    optimizer.zero_grad(set_to_none=True)
    logits = model(src, tgt[:, :-1])  # (B, T - 1, vocab)
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        tgt[:, 1:].reshape(-1),
        ignore_index=pad_id,
        label_smoothing=0.1,
    )
    loss.backward()
    optimizer.step()
    return (time.perf_counter() - start) * 1000.0, (time.process_time() - cpu_start) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=40, help="timed steps per model (after warm-up)"
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument(
        "--norm-first", action="store_true", help="Pre-LN instead of the paper's Post-LN"
    )
    parser.add_argument(
        "--fused-adam", action="store_true", help="Adam(fused=True) for both models"
    )
    parser.add_argument("--attention-dropout", type=float, default=0.0, help="ours (the paper: 0)")
    parser.add_argument(
        "--torch-attention-dropout",
        type=float,
        default=None,
        help="nn.Transformer's (default: its own, = dropout)",
    )
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config = TransformerConfig(
        src_vocab_size=4000,
        tgt_vocab_size=4000,
        d_model=256,
        num_heads=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        d_ff=1024,
        dropout=0.1,
        max_len=512,
        norm_first=args.norm_first,
        attention_dropout=args.attention_dropout,
    )
    torch_attention_dropout = (
        config.dropout if args.torch_attention_dropout is None else args.torch_attention_dropout
    )
    ours = Transformer(config)
    theirs = TorchTransformer(config, torch_attention_dropout)
    theirs.load_state_dict(torch_state_dict(ours))
    n_ours, n_theirs = ours.num_parameters(), sum(p.numel() for p in theirs.parameters())
    if n_ours != n_theirs:
        raise SystemExit(f"parameter counts differ: ours {n_ours:,}, nn.Transformer {n_theirs:,}")

    src = torch.randint(1, config.src_vocab_size, (args.batch, args.length))
    # shifted into input/label
    tgt = torch.randint(1, config.tgt_vocab_size, (args.batch, args.length + 1))
    for row in range(0, args.batch, 4):  # some padding, as in a real batch
        src[row, args.length - 1 - row % 7 :] = config.pad_id
        tgt[row, args.length - row % 5 :] = config.pad_id
    ours.eval(), theirs.eval()
    with torch.no_grad():
        difference = (
            (ours(src[:4], tgt[:4, :-1]) - theirs(src[:4], tgt[:4, :-1])).abs().max().item()
        )
    if difference > 1e-3:
        raise SystemExit(
            "the two models disagree after copying weights: max |logit difference| "
            f"{difference:.2e}"
        )
    ours.train(), theirs.train()

    models = {"ours": ours, "torch": theirs}
    optimizers = {
        name: torch.optim.Adam(
            model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=args.fused_adam
        )
        for name, model in models.items()
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    for _ in range(args.warmup):
        for name, model in models.items():
            train_step(model, optimizers[name], src, tgt, config.pad_id)
    for repeat in range(args.repeats):
        # alternate who goes first
        order = ("ours", "torch") if repeat % 2 == 0 else ("torch", "ours")
        for name in order:
            times[name].append(train_step(models[name], optimizers[name], src, tgt, config.pad_id))

    wall = {name: [w for w, _ in t] for name, t in times.items()}
    medians = {name: statistics.median(t) for name, t in wall.items()}
    quartiles = {name: statistics.quantiles(t, n=4) for name, t in wall.items()}
    cpu_medians = {name: statistics.median(c for _, c in t) for name, t in times.items()}
    ratio = medians["ours"] / medians["torch"]
    # adjacent steps share the machine's load at that moment: the median of their ratios resists
    # drifting load
    paired = statistics.median(
        o / t for (o, _), (t, _) in zip(times["ours"], times["torch"], strict=True)
    )
    cpu_ratio = cpu_medians["ours"] / cpu_medians["torch"]
    machine = platform.processor() or platform.machine()
    print(
        f"machine: {machine}, {os.cpu_count()} CPUs, torch {torch.__version__}, threads "
        f"{args.threads}"
    )
    print(
        f"seed {args.seed}, batch {args.batch} x length {args.length}, {n_ours:,} parameters each"
    )
    print(
        f"attention dropout: ours {config.attention_dropout}, nn.Transformer "
        f"{torch_attention_dropout}"
    )
    print(
        f"optimizer: Adam{' (fused)' if args.fused_adam else ''}; {args.warmup} warm-up steps each"
    )
    print(f"max |logit difference| with copied weights (eval): {difference:.1e}")
    for name in models:
        q1, _, q3 = quartiles[name]
        print(
            f"{name:>6}: median {medians[name]:7.1f} ms/step (IQR {q1:.1f}-{q3:.1f}) over "
            f"{args.repeats} steps; CPU time {cpu_medians[name]:.1f} ms/step"
        )
    print(
        f"ratio ours / PyTorch: {ratio:.3f} (wall), {cpu_ratio:.3f} (CPU time), {paired:.3f} "
        "(paired steps)"
    )
    result = {
        "ours_ms": round(medians["ours"], 2),
        "torch_ms": round(medians["torch"], 2),
        "ratio": round(ratio, 4),
        "paired_ratio": round(paired, 4),
        "ours_cpu_ms": round(cpu_medians["ours"], 2),
        "torch_cpu_ms": round(cpu_medians["torch"], 2),
        "cpu_ratio": round(cpu_ratio, 4),
        "fused_adam": args.fused_adam,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "threads": args.threads,
        "seed": args.seed,
        "batch": args.batch,
        "length": args.length,
        "norm_first": args.norm_first,
        "attention_dropout": config.attention_dropout,
        "torch_attention_dropout": torch_attention_dropout,
        "params": n_ours,
        "machine": machine,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
