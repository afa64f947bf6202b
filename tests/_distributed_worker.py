"""Worker of tests/test_distributed.py, launched with ``python -m torch.distributed.run
--nproc_per_node 2``.

Usage: ``_distributed_worker.py MODE OUT CKPT`` where MODE is

* ``equal``: run A (grad_accum=1, dropout 0, evaluation, periodic checkpoints, progress bar),
  run B (grad_accum=2, no_sync), run C (dropout 0.1, the uninterrupted reference for resuming) and
  run D (ranks given different numbers of batches: training must end, not hang) and run E (a time
  budget and the linear schedule, rank 1's steps slower: the ranks must share one clock);
* ``crash``: run C again with checkpoints every 3 steps; rank 1 kills itself (SIGKILL) when it asks
  for the batches of step 7, right after the checkpoint of step 6;
* ``resume``: run C resumed from the checkpoint the crash left.

Each rank writes, into OUT only, ``MODE.rank{r}.safetensors`` (final weights ``param/NAME`` and last
gradients ``grad/NAME`` of every run) and ``MODE.rank{r}.json`` (histories, and every file write the
rank made under CKPT, recorded with an audit hook); its stderr goes to ``MODE.rank{r}.stderr``.
The test imports :func:`small_model` and :func:`make_data` to train the one-process references.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.data.batching import Batch, make_batch
from transformer_lib.training import TrainConfig, TrainResult, evaluate_loss, train
from transformer_lib.training.loss import batch_logits

PAD, BOS, EOS, VOCAB = 0, 1, 2, 13
BASE = dict(lr=1e-2, warmup_steps=2, label_smoothing=0.1, progress=False, seed=3)


def small_model(dropout: float = 0.0) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        dropout=dropout,
        max_len=32,
        norm_first=True,
    )
    return Transformer(config)


def random_batch(seed: int) -> Batch:
    """A batch of 1-6 pairs of lengths 1-9, padded: its number of target tokens varies from batch to
    batch."""
    generator = torch.Generator().manual_seed(seed)
    rows = int(torch.randint(1, 7, (1,), generator=generator))
    src, tgt = [], []
    for _ in range(rows):
        length = int(torch.randint(1, 10, (1,), generator=generator))
        seq = torch.randint(3, VOCAB, (length,), generator=generator).tolist()
        src.append(seq)
        tgt.append(seq[::-1])
    return make_batch(src, tgt, PAD, BOS, EOS)


def make_data(batches_per_epoch: int):
    """Batches that depend on the epoch only, the same on every rank (what sharding and resuming
    need)."""
    return lambda epoch: [random_batch(1000 * epoch + i) for i in range(batches_per_epoch)]


VALIDATION = [random_batch(10_000 + i) for i in range(3)]

# The runs: (name, model dropout, batches per epoch, TrainConfig fields).
RUN_A = (
    "a",
    0.0,
    10,
    dict(max_steps=5, grad_accum=1, eval_every=2, monitor="val_loss", mode="min"),
)
RUN_B = ("b", 0.0, 8, dict(max_steps=3, grad_accum=2))
RUN_C = ("c", 0.1, 8, dict(max_steps=7, grad_accum=1))


def _audit(ckpt: str, events: list[list[str]]) -> None:
    """Record every write, rename, removal and temporary file under ``ckpt`` made by this
    process."""
    root = os.path.realpath(ckpt)

    def under(path: Any) -> bool:
        return isinstance(path, (str, bytes, os.PathLike)) and os.path.realpath(
            os.fsdecode(path)
        ).startswith(root)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and under(args[0]):
            mode, flags = args[1], args[2] or 0
            writes = isinstance(mode, str) and any(c in mode for c in "wax+")
            writes = writes or (mode is None and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            if writes:
                events.append([event, os.fsdecode(args[0])])
        elif event in ("os.rename", "os.remove", "os.mkdir", "tempfile.mkstemp", "shutil.copyfile"):
            paths = [a for a in args if under(a)]
            if paths:
                events.append([event, *map(os.fsdecode, paths)])

    sys.addaudithook(hook)


def _run(spec, ckpt: Path, **extra: Any) -> tuple[Transformer, TrainResult]:
    name, dropout, per_epoch, fields = spec
    data = extra.pop("data", make_data(per_epoch))
    config = TrainConfig(**{**BASE, **fields, **extra.pop("config", {})})
    model = small_model(dropout)
    result = train(model, data, config, "cpu", **extra)
    return model, result


def main() -> None:
    mode, out, ckpt = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(1)
    from transformer_lib.training.distributed import cleanup, init_distributed, rank

    device = init_distributed("cpu")
    assert device.type == "cpu"
    r = rank()
    sys.stderr = open(out / f"{mode}.rank{r}.stderr", "w")  # open until the process ends
    events: list[list[str]] = []
    _audit(str(ckpt), events)
    tensors: dict[str, torch.Tensor] = {}
    report: dict[str, Any] = {"rank": r}

    def keep(name: str, model: Transformer, result: TrainResult) -> None:
        for pname, p in model.named_parameters():
            tensors[f"{name}/param/{pname}"] = p.detach().clone()
            tensors[f"{name}/grad/{pname}"] = p.grad.detach().clone()
        report[name] = {
            "history": result.history,
            "eval_history": result.eval_history,
            "steps": result.steps,
            "stop_reason": result.stop_reason,
            "world_size": result.world_size,
            "train_seconds": result.train_seconds,
        }

    if mode == "equal":
        model, result = _run(
            RUN_A,
            ckpt,
            config=dict(
                progress=True,
                checkpoint_path=str(ckpt / "a.safetensors"),
                checkpoint_every=2,
            ),
            evaluate=lambda m: {"val_loss": evaluate_loss(m, VALIDATION)["loss"]},
        )
        keep("a", model, result)
        keep("b", *_run(RUN_B, ckpt))
        keep("c", *_run(RUN_C, ckpt))
        # Run D breaks the rule on purpose: rank 0 gets 3 batches, rank 1 gets 4 (7 and 9 before
        # sharding).
        uneven = [random_batch(i) for i in range(7 + 2 * r)]
        keep("d", *_run(("d", 0.0, 0, dict(max_epochs=1)), ckpt, data=uneven))

        # Run E: a time budget, and a linear rate that follows its clock; rank 1's steps are slower.
        def slower_on_rank_1(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
            if r == 1:
                time.sleep(0.02)
            return batch_logits(model, batch)

        budget = dict(time_budget_s=0.3, schedule="linear")
        keep("e", *_run(("e", 0.0, 8, budget), ckpt, forward=slower_on_rank_1))
    elif mode == "crash":
        make_c = make_data(RUN_C[2])

        def dying(epoch: int):
            for i, batch in enumerate(make_c(epoch)):
                # the batches of step 7 (4 steps per epoch, 2 batches each)
                if r == 1 and epoch == 1 and i == 4:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield batch

        _run(
            RUN_C,
            ckpt,
            data=dying,
            config=dict(checkpoint_path=str(ckpt / "c.safetensors"), checkpoint_every=3),
        )
        raise AssertionError("unreachable: rank 1 was killed during step 7")
    elif mode == "resume":
        keep("c", *_run(RUN_C, ckpt, resume_from=str(ckpt / "c.safetensors")))
    else:
        raise ValueError(f"unknown mode {mode!r}")
    report["events"] = events
    from safetensors.torch import save_file

    save_file(tensors, str(out / f"{mode}.rank{r}.safetensors"))
    (out / f"{mode}.rank{r}.json").write_text(json.dumps(report))
    cleanup()


if __name__ == "__main__":
    main()
