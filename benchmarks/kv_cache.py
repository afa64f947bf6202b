"""Greedy decoding speed with and without the key/value cache.

A randomly initialised model the size of the book's translation model (d_model 256, 3+3 layers,
4 heads, d_ff 1024, vocabulary 8,000) greedily decodes a batch of source sentences to an output
length of 64 tokens, once incrementally with the cache (``use_cache=True``: each step feeds one
token; keys and values of earlier positions are reused) and once re-running the decoder over the
whole prefix at every step (``use_cache=False``). Decoding would stop when every row produced
``eos``; the benchmark checks that no run stopped early (``eos_id`` is an ordinary id of a random
model, and all rows would have to produce it), so both runs do the same number of steps. Both
runs must also produce identical tokens.

Usage::

    .venv/bin/python benchmarks/kv_cache.py [--threads 2] [--batch 32] [--length 64] [--repeats 3]

The last line of stdout is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
from _common import decoding_model_config

from transformer_lib import Transformer
from transformer_lib.decoding import greedy_decode

BOS, EOS = 1, 2


def timed(
    model: Transformer, src: torch.Tensor, length: int, use_cache: bool
) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = greedy_decode(model, src, length, BOS, EOS, use_cache=use_cache)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--length", type=int, default=64, help="output length, bos included")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config = decoding_model_config()
    model = Transformer(config).eval()
    src = torch.randint(3, config.src_vocab_size, (args.batch, args.src_len))
    timed(model, src[:2], 8, True)  # warm-up
    timed(model, src[:2], 8, False)
    cached_times, uncached_times = [], []
    for _ in range(args.repeats):  # alternate, so that a change of machine load hits both
        t_cached, out_cached = timed(model, src, args.length, True)
        t_uncached, out_uncached = timed(model, src, args.length, False)
        cached_times.append(t_cached)
        uncached_times.append(t_uncached)
        if out_cached.size(1) != args.length:
            raise SystemExit(
                f"decoding stopped early at length {out_cached.size(1)}; try another --seed"
            )
        if not torch.equal(out_cached, out_uncached):
            raise SystemExit("cached and uncached decoding produced different tokens")
    new_tokens = args.batch * (args.length - 1)
    cached_tps = new_tokens / statistics.median(cached_times)
    uncached_tps = new_tokens / statistics.median(uncached_times)
    speedup = cached_tps / uncached_tps
    print(f"with cache:    {cached_tps:8.0f} tokens/s (median of {args.repeats})")
    print(f"without cache: {uncached_tps:8.0f} tokens/s")
    print(f"speed-up {speedup:.1f}x")
    print(
        json.dumps(
            {
                "benchmark": "kv_cache",
                "cached_tokens_per_s": cached_tps,
                "uncached_tokens_per_s": uncached_tps,
                "speedup": speedup,
                "target_speedup": 3.0,
                "cached_seconds": cached_times,
                "uncached_seconds": uncached_times,
                "batch": args.batch,
                "src_len": args.src_len,
                "output_length": args.length,
                "params": model.num_parameters(),
                "threads": args.threads,
                "torch": torch.__version__,
                "machine": platform.processor() or platform.machine(),
            }
        )
    )


if __name__ == "__main__":
    main()
