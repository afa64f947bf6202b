"""One training step four ways: float32 eager, torch.compile, bf16 autocast, and both.

A training step is: zero the gradients, forward, ``sequence_loss`` (label smoothing 0.1), backward,
Adam step. Every variant starts from a copy of the same randomly initialised Transformer (default:
d_model 256, 4 heads, 2+2 layers, d_ff 1024, vocabulary 4,000, dropout 0 so that the variants'
losses can be compared) and trains on the same fixed batch (default 16 sentences x 32 tokens).

* ``eager_fp32``: the model as it is, given the target mask as a tensor (the padded-batch path).
* ``compiled_fp32``: ``torch.compile(model)`` (TorchInductor). Its first steps compile the forward
  and backward graphs; ``compile_seconds`` is the time of the warm-up steps minus what as many
  ordinary steps take. By default Inductor writes its cache, precompiled C++ headers included, to a
  fresh temporary folder, so the compile time is that of a cold start (``--keep-cache`` uses the
  usual cache, ``TORCHINDUCTOR_CACHE_DIR`` where it is set: later runs are faster).
* ``eager_bf16`` / ``compiled_bf16``: the same, under ``torch.autocast(device,
  dtype=torch.bfloat16)`` (mixed precision: matrix products and linear layers in bfloat16; the
  weights stay float32, and the operations on autocast's float32 list, the losses among them, are
  cast up; on a CPU the others, softmax included, run in their inputs' dtype, bfloat16 after a
  product).

If a variant fails (``torch.compile`` needs a C++ compiler on the CPU, a Triton-capable GPU on
CUDA), the error is recorded in the JSON instead of stopping the script. After the warm-up the
variants take turns, step by step, and the median step time of each is reported.

Usage::

    .venv/bin/python benchmarks/compile_amp.py [--device auto] [--threads 1] [--repeats 20]
    [--quick]

``--quick`` (for the tests): a tiny model, 5 steps, and no ``torch.compile`` (compiling takes tens
of seconds on a small CPU). The last line of stdout is a JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
from _common import finish, info, machine_info, setup, synchronize
from torch import Tensor

from transformer_lib import Transformer, TransformerConfig, target_mask
from transformer_lib.training import sequence_loss

VARIANTS = ("eager_fp32", "compiled_fp32", "eager_bf16", "compiled_bf16")


def _dynamo_counters(kind: str) -> dict[str, int]:
    """TorchDynamo's event counters of one kind (e.g. graph breaks and their reasons); {} if
    unavailable."""
    try:
        from torch._dynamo.utils import counters

        return counters[kind]
    except (ImportError, AttributeError, KeyError):  # a private API: it may move
        return {}


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def make_step(
    model: torch.nn.Module,
    params: list[Tensor],
    batch: tuple[Tensor, Tensor],
    bf16: bool,
    device: torch.device,
) -> Callable[[], Tensor]:
    """A function that runs one training step of ``model`` and returns its loss (detached)."""
    src, tgt = batch
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T), (B, T)
    tgt_mask = target_mask(tgt_in, 0)  # (B, 1, T, T)
    optimizer = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        autocast = (
            torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        )
        with autocast:
            logits = model(src, tgt_in, None, tgt_mask)  # (B, T, V)
        loss = sequence_loss(logits, tgt_out, 0, label_smoothing=0.1)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|mps")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (0: PyTorch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per variant")
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed first steps per variant (compiling)"
    )
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2, help="encoder layers = decoder layers")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {VARIANTS}"
    )
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="use Inductor's usual on-disk cache (TORCHINDUCTOR_CACHE_DIR if set)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="for the tests: tiny model, 5 steps, no compile"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    if args.quick:
        args.repeats, args.warmup, args.batch, args.length = min(args.repeats, 5), 1, 8, 16
        args.d_model, args.layers, args.vocab = 64, 1, 500
    device = setup(args.device, args.threads, args.seed)
    result = {"benchmark": "compile_amp", **machine_info(device)}
    info(f"training step on {device.type} ({result['device_name']}), {result['threads']} thread(s)")
    cache_dir = None
    # even where TORCHINDUCTOR_CACHE_DIR is set: a parent process that touched Inductor
    if not args.keep_cache:
        # (torch.profiler does) sets it to the default folder, which this child would otherwise
        # inherit
        cache_dir = tempfile.mkdtemp(prefix="inductor-cold-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    compile_threads = None
    if any(v.startswith("compiled") for v in variants) and not args.quick:
        import torch._inductor.config as inductor_config

        # a pool of compile workers would only compete for a small CPU
        if (os.cpu_count() or 1) <= 4:
            inductor_config.compile_threads = 1
        compile_threads = inductor_config.compile_threads
        # Inductor keeps precompiled C++ headers in its default folder (e.g.
        if cache_dir is not None:
            # /tmp/torchinductor_<user>) whatever TORCHINDUCTOR_CACHE_DIR says: an earlier run's
            # would make
            # this compile warm. A private name (torch 2.13), so set only where it exists.
            import torch._inductor.codecache as codecache

            if hasattr(codecache, "_HEADER_DIR") and hasattr(codecache, "_HEADER_LOCK_DIR"):
                codecache._HEADER_DIR = os.path.join(cache_dir, "precompiled_headers")
                codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")

    config = TransformerConfig(
        src_vocab_size=args.vocab,
        tgt_vocab_size=args.vocab,
        d_model=args.d_model,
        num_heads=4,
        num_encoder_layers=args.layers,
        num_decoder_layers=args.layers,
        d_ff=4 * args.d_model,
        dropout=0.0,
        max_len=max(64, args.length + 1),
    )
    base = Transformer(config).to(device)
    src = torch.randint(1, args.vocab, (args.batch, args.length), device=device)
    tgt = torch.randint(1, args.vocab, (args.batch, args.length + 1), device=device)

    report: dict[str, dict] = {}
    steps: dict[str, Callable[[], Tensor]] = {}
    for name in variants:
        if args.quick and name.startswith("compiled"):
            report[name] = {"skipped": "--quick: compiling takes tens of seconds on a small CPU"}
            continue
        model = copy.deepcopy(base).train()
        graph_breaks = _dynamo_counters("graph_break") if name.startswith("compiled") else {}
        graph_breaks.clear()
        try:
            runnable = torch.compile(model) if name.startswith("compiled") else model
            step = make_step(
                runnable, list(model.parameters()), (src, tgt), name.endswith("bf16"), device
            )
            synchronize(device)
            start = time.perf_counter()
            losses = [float(step()) for _ in range(args.warmup)]
            synchronize(device)
            warmup_seconds = time.perf_counter() - start
        # torch.compile can fail in many ways (no compiler, no Triton, ...)
        except Exception as error:
            report[name] = {"error": first_line(error)}
            info(f"  {name}: failed: {report[name]['error']}")
            continue
        report[name] = {
            "first_loss": round(losses[0], 5),
            "warmup_seconds": round(warmup_seconds, 3),
        }
        # where TorchDynamo had to split the model into several graphs
        if name.startswith("compiled"):
            report[name]["graph_breaks"] = sum(graph_breaks.values())
            report[name]["graph_break_reasons"] = sorted(
                {reason.splitlines()[0][:160] for reason in graph_breaks}
            )
        steps[name] = step
        info(
            f"  {name}: {args.warmup} warm-up steps took {warmup_seconds:.2f} s (first loss "
            f"{losses[0]:.4f})"
        )

    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:  # take turns
            synchronize(device)
            start = time.perf_counter()
            steps[name]()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    eager = statistics.median(times["eager_fp32"]) if times.get("eager_fp32") else None
    for name, t in times.items():
        median = statistics.median(t)
        q1, _, q3 = statistics.quantiles(t, n=4) if len(t) >= 2 else (median, median, median)
        entry = report[name]
        entry.update(
            {
                "median_ms": round(median * 1e3, 3),
                "iqr_ms": [round(q1 * 1e3, 3), round(q3 * 1e3, 3)],
                "speedup_vs_eager_fp32": round(eager / median, 3) if eager else None,
            }
        )
        if name.startswith("compiled"):
            entry["compile_seconds"] = round(
                max(0.0, entry["warmup_seconds"] - args.warmup * median), 3
            )
        info(f"  {name}: median {median * 1e3:.1f} ms/step")
    if cache_dir is not None:
        shutil.rmtree(cache_dir, ignore_errors=True)
    result.update(
        {
            "quick": args.quick,
            "seed": args.seed,
            "batch": args.batch,
            "length": args.length,
            "model": {
                "d_model": args.d_model,
                "heads": 4,
                "layers": args.layers,
                "d_ff": 4 * args.d_model,
                "vocab": args.vocab,
                "params": base.num_parameters(),
            },
            "repeats": args.repeats,
            "warmup": args.warmup,
            "cold_compile_cache": cache_dir is not None,
            "compile_threads": compile_threads,
            "compiler": shutil.which("c++") or shutil.which("g++") or shutil.which("clang++"),
            "variants": report,
        }
    )
    finish(result, started)


if __name__ == "__main__":
    main()
