"""Greedy decoding speed against output length, with and without the key/value cache, and the
cache's size.

The model is the one of ``benchmarks/kv_cache.py`` (randomly initialised, the size of the book's
translation model: d_model 256, 3+3 layers, 4 heads, d_ff 1024, vocabulary 8,000). For every output
length L it greedily decodes a batch of source sentences to L tokens (``bos`` included) with the
cache (``use_cache=True``: each step feeds one token and reuses the keys and values of earlier
positions) and without it (each step re-runs the decoder over the whole prefix), the two taking
turns; both must produce the same tokens, and no run may stop early at ``eos`` (so both do L - 1
steps). Speed is ``batch * (L - 1)`` new tokens over the time of the fastest call (the one least
disturbed by other programs running on the machine; the medians are in the JSON too). Long lengths
get fewer uncached repeats (each point stops after ``--point-seconds``); cached decoding, which is
cheap, always gets at least ``--min-cached-calls``.

The cache's size is counted from its tensors: the script runs the incremental decoder by hand over
the decoded tokens and adds up the bytes of every cached key and value
(``transformer_book.memory.kv_cache_nbytes``), then checks them against the formula
``2 * layers * batch * heads * length * d_k * bytes`` (``kv_cache_formula_bytes``): ``length`` is
L - 1 for the self-attention cache and the source length for the cross-attention cache.

Usage::

    .venv/bin/python benchmarks/kv_cache_scaling.py [--device auto] [--threads 1] [--quick]

Default lengths 16, 32, 64, 128, 256; ``--quick`` (for the tests): 8, 16, 32 with a smaller batch.
The last line of stdout is a JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import (
    decoding_model_config,
    finish,
    fit_loglog,
    info,
    machine_info,
    setup,
    synchronize,
)
from torch import Tensor

from transformer_book.memory import kv_cache_formula_bytes, kv_cache_nbytes
from transformer_lib import Transformer, padding_mask
from transformer_lib.decoding import greedy_decode

BOS, EOS = 1, 2


@torch.no_grad()
def filled_cache(model: Transformer, src: Tensor, tokens: Tensor) -> list:
    """Feed ``tokens[:, :-1]`` one position at a time, as cached decoding does; return the cache.

    Shape:
        src: ``(B, S)``; tokens: ``(B, L)``; the returned self-attention caches hold ``L - 1``
        positions.
    """
    src_mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)  # (B, S, d_model)
    cache = model.new_cache()
    for t in range(tokens.size(1) - 1):
        model.decode(tokens[:, t : t + 1], memory, src_mask, cache=cache)  # (B, 1, V)
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|mps")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (0: PyTorch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lengths", default="16,32,64,128,256", help="comma-separated output lengths"
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument(
        "--repeats", type=int, default=3, help="most timed decodes per length and mode"
    )
    parser.add_argument(
        "--point-seconds", type=float, default=10.0, help="stop repeating a point after this"
    )
    parser.add_argument(
        "--min-cached-calls", type=int, default=3, help="at least this many cached decodes"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small budget for the tests: lengths 8,16,32, batch 4"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    device = setup(args.device, args.threads, args.seed)
    lengths = [8, 16, 32] if args.quick else [int(x) for x in args.lengths.split(",")]
    if args.quick:
        args.batch, args.repeats, args.point_seconds = min(args.batch, 4), min(args.repeats, 2), 0.5
    result = {"benchmark": "kv_cache_scaling", **machine_info(device)}
    info(
        f"greedy decoding on {device.type} ({result['device_name']}), {result['threads']} thread(s)"
    )

    config = decoding_model_config()
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, config.src_vocab_size, (args.batch, args.src_len), device=device)
    d_k = config.d_model // config.num_heads

    def decode(length: int, use_cache: bool) -> Tensor:
        return greedy_decode(model, src, length, BOS, EOS, use_cache=use_cache)  # (B, <= length)

    def timed_decode(length: int, use_cache: bool) -> tuple[float, Tensor]:
        synchronize(device)
        start = time.perf_counter()
        out = decode(length, use_cache)
        synchronize(device)
        return time.perf_counter() - start, out

    decode(8, True)  # warm-up
    decode(8, False)
    rows: dict[str, list] = {
        key: []
        for key in (
            "cached_seconds",
            "uncached_seconds",
            "cached_tokens_per_s",
            "uncached_tokens_per_s",
            "speedup",
            "cached_median_seconds",
            "uncached_median_seconds",
            "cached_calls",
            "uncached_calls",
            "cache_bytes_self",
            "cache_bytes_cross",
            "formula_bytes_self",
            "formula_bytes_cross",
        )
    }
    tokens_equal = True
    for length in lengths:
        times: dict[bool, list[float]] = {True: [], False: []}
        spent = 0.0
        while len(times[False]) < args.repeats:
            outs: dict[bool, Tensor] = {}
            # take turns
            for use_cache in (True, False) if len(times[True]) % 2 == 0 else (False, True):
                seconds, outs[use_cache] = timed_decode(length, use_cache)
                times[use_cache].append(seconds)
                spent += seconds
            if outs[True].size(1) != length:
                raise SystemExit(
                    f"decoding stopped early at length {outs[True].size(1)} < {length}; try "
                    "another --seed"
                )
            tokens_equal &= torch.equal(outs[True], outs[False])
            if spent > args.point_seconds:
                break
        # cached decoding is cheap: a few more calls
        while len(times[True]) < args.min_cached_calls:
            times[True].append(timed_decode(length, True)[0])
        # The fastest call is the one least disturbed by other programs; the medians are kept too.
        cached, uncached = min(times[True]), min(times[False])
        new_tokens = args.batch * (length - 1)
        cache = kv_cache_nbytes(filled_cache(model, src, outs[True]))
        dtype = next(model.parameters()).dtype
        layers, heads = config.num_decoder_layers, config.num_heads
        formula_self = kv_cache_formula_bytes(layers, args.batch, heads, length - 1, d_k, dtype)
        formula_cross = kv_cache_formula_bytes(layers, args.batch, heads, args.src_len, d_k, dtype)
        for key, value in (
            ("cached_seconds", round(cached, 5)),
            ("uncached_seconds", round(uncached, 5)),
            ("cached_tokens_per_s", round(new_tokens / cached, 2)),
            ("uncached_tokens_per_s", round(new_tokens / uncached, 2)),
            ("speedup", round(uncached / cached, 3)),
            ("cached_median_seconds", round(statistics.median(times[True]), 5)),
            ("uncached_median_seconds", round(statistics.median(times[False]), 5)),
            ("cached_calls", len(times[True])),
            ("uncached_calls", len(times[False])),
            ("cache_bytes_self", cache["self"]),
            ("cache_bytes_cross", cache["cross"]),
            ("formula_bytes_self", formula_self),
            ("formula_bytes_cross", formula_cross),
        ):
            rows[key].append(value)
        info(
            f"  L={length:>4}: {new_tokens / cached:8.1f} tokens/s with cache, "
            f"{new_tokens / uncached:8.1f} without "
            f"({uncached / cached:.1f}x); cache {cache['self']:,} + {cache['cross']:,} bytes"
        )
    matches = rows["cache_bytes_self"] == rows["formula_bytes_self"]
    matches &= rows["cache_bytes_cross"] == rows["formula_bytes_cross"]
    fit_lengths = lengths[len(lengths) // 2 :] if len(lengths) >= 4 else lengths
    slopes = {}
    for mode in ("cached", "uncached"):
        pairs = [
            (n, t)
            for n, t in zip(lengths, rows[f"{mode}_seconds"], strict=True)
            if n in fit_lengths
        ]
        slopes[mode] = round(fit_loglog([n for n, _ in pairs], [t for _, t in pairs])["slope"], 3)
    result.update(
        {
            "quick": args.quick,
            "seed": args.seed,
            "batch": args.batch,
            "src_len": args.src_len,
            "lengths": lengths,
            **rows,
            "tokens_equal": tokens_equal,
            "cache_matches_formula": matches,
            "time_slopes": slopes,
            "fit_lengths": fit_lengths,
            "model": {
                "d_model": config.d_model,
                "heads": config.num_heads,
                "d_k": d_k,
                "decoder_layers": config.num_decoder_layers,
                "vocab": config.tgt_vocab_size,
                "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
                "params": model.num_parameters(),
            },
            "repeats": args.repeats,
            "point_seconds": args.point_seconds,
        }
    )
    info(
        f"time slopes over {fit_lengths}: {slopes}; tokens equal: {tokens_equal}; cache = "
        f"formula: {matches}"
    )
    if not tokens_equal:
        raise SystemExit("cached and uncached decoding produced different tokens")
    finish(result, started)


if __name__ == "__main__":
    main()
