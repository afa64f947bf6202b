"""Training on several processes: DistributedDataParallel under torchrun, on the CPU with gloo.

The expensive tests launch real ``torchrun`` jobs (``python -m torch.distributed.run --standalone
--nproc_per_node 2``) of ``tests/_distributed_worker.py`` or of the command line, and compare what
the two processes did with one-process runs trained here on the same global batches.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch.nn.parallel import DistributedDataParallel

from transformer_lib import load_checkpoint, read_checkpoint_header
from transformer_lib.training import (
    TrainConfig,
    evaluate_loss,
    sequence_loss,
    train,
    train_state_path,
)
from transformer_lib.training.distributed import (
    all_gather_object,
    barrier,
    broadcast_object,
    cleanup,
    init_distributed,
    is_distributed,
    is_main_process,
    launch_info,
    local_rank,
    main_process_first,
    rank,
    shard_batches,
    world_size,
)
from transformer_tasks.cli import main
from transformer_tasks.copy import CopyTaskSettings, run_copy_task

ROOT = Path(__file__).resolve().parents[1]
WORKER_PATH = Path(__file__).with_name("_distributed_worker.py")
_spec = importlib.util.spec_from_file_location("_distributed_worker", WORKER_PATH)
assert _spec is not None and _spec.loader is not None
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

TORCHRUN_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(autouse=True)
def _no_torchrun_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is never a torchrun worker, whatever launched pytest."""
    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)


def torchrun(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``python -m torch.distributed.run --standalone --nproc_per_node 2 ARGS`` (a free port,
    one thread each)."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV and k != "TQDM_DISABLE"}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        *args,
    ]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def worker_results(out: Path, mode: str) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
    """What each rank of a worker run saved: (tensors, report), in rank order."""
    return [
        (
            load_file(str(out / f"{mode}.rank{r}.safetensors")),
            json.loads((out / f"{mode}.rank{r}.json").read_text()),
        )
        for r in range(2)
    ]


def one_process(spec, grad_accum: int, **extra: Any):
    """The one-process reference of a worker run: the same model and batches, ``grad_accum`` batches
    per step."""
    _, dropout, per_epoch, fields = spec
    config = TrainConfig(**{**worker.BASE, **fields, "grad_accum": grad_accum})
    model = worker.small_model(dropout)
    result = train(model, worker.make_data(per_epoch), config, "cpu", **extra)
    return model, result


@pytest.fixture(scope="module")
def equal_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One torchrun job of the worker's runs A-D (2 processes)."""
    out, ckpt = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("ckpt")
    done = torchrun(str(WORKER_PATH), "equal", str(out), str(ckpt))
    assert done.returncode == 0, done.stderr[-3000:]
    return {"out": out, "ckpt": ckpt, "ranks": worker_results(out, "equal")}


def assert_same_tensors(
    ranks, prefix: str, reference: torch.nn.Module, kind: str, **tolerance: float
) -> None:
    for tensors, _ in ranks:
        for name, p in reference.named_parameters():
            expected = p.detach() if kind == "param" else p.grad
            torch.testing.assert_close(
                tensors[f"{prefix}/{kind}/{name}"],
                expected,
                msg=f"{prefix} {kind} {name}",
                **tolerance,
            )


# ----------------------------------------------------------------------------------------------
# equal to one process


def test_two_processes_train_exactly_like_one_process_with_gradient_accumulation(equal_run):
    """Run A: 2 ranks x 1 batch per step == 1 process x 2 batches per step (grad_accum=2), 5
    steps."""
    evaluate = lambda m: {"val_loss": evaluate_loss(m, worker.VALIDATION)["loss"]}  # noqa: E731
    reference, expected = one_process(worker.RUN_A, grad_accum=2, evaluate=evaluate)
    ranks = equal_run["ranks"]
    # The two replicas end identical, equal to the one-process weights, and so are the last step's
    # gradients.
    assert_same_tensors(ranks, "a", reference, "param", rtol=0, atol=1e-6)
    assert_same_tensors(ranks, "a", reference, "grad", rtol=0, atol=1e-7)
    for _, report in ranks:
        run = report["a"]
        assert run["steps"] == 5 and run["world_size"] == 2
        # The reported loss is the mean over both ranks' tokens: the one-process loss of the same 2
        # batches.
        assert [h["loss"] for h in run["history"]] == pytest.approx(
            [h["loss"] for h in expected.history], rel=1e-6
        )
        assert [h["lr"] for h in run["history"]] == [h["lr"] for h in expected.history]
        assert [e["val_loss"] for e in run["eval_history"]] == pytest.approx(
            [e["val_loss"] for e in expected.eval_history], rel=1e-6
        )
        assert [e["step"] for e in run["eval_history"]] == [2, 4, 5]


def test_the_comparison_would_catch_a_wrong_loss_normalization():
    """Averaging each rank's own mean loss (a common mistake) weights the ranks' tokens unequally.

    The batches of a step hold different numbers of target tokens, so that mistake changes the
    gradient by far more than the tolerance of the test above.
    """
    b0, b1 = worker.make_data(10)(0)[:2]
    n0, n1 = b0.num_tokens, b1.num_tokens
    assert n0 != n1

    def gradient(weights: tuple[float, float]) -> torch.Tensor:
        model = worker.small_model()
        losses = [
            sequence_loss(model(b.src, b.tgt_in), b.tgt_out, b.pad_id, 0.1, "sum") for b in (b0, b1)
        ]
        (weights[0] * losses[0] + weights[1] * losses[1]).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    # the gradient of the mean over both ranks' tokens
    right = gradient((1 / (n0 + n1), 1 / (n0 + n1)))
    wrong = gradient((0.5 / n0, 0.5 / n1))  # the mean of each rank's mean
    assert (right - wrong).abs().max() > 1000 * 1e-7
    # dividing by the global count without multiplying by W (DDP averages)
    forgot_world_size = right / 2
    assert (right - forgot_world_size).abs().max() > 1000 * 1e-7


def test_gradient_accumulation_under_ddp_equals_one_process_with_twice_the_accumulation(equal_run):
    """Run B: 2 ranks x grad_accum=2 (no_sync for the first batch) == 1 process x grad_accum=4, 3
    steps."""
    reference, expected = one_process(worker.RUN_B, grad_accum=4)
    for tensors, report in equal_run["ranks"]:
        assert [h["loss"] for h in report["b"]["history"]] == pytest.approx(
            [h["loss"] for h in expected.history], rel=1e-6
        )
        for name, p in reference.named_parameters():
            torch.testing.assert_close(
                tensors[f"b/grad/{name}"], p.grad, rtol=1e-4, atol=1e-7, msg=name
            )
            if name.endswith("k_proj.bias"):
                # A key bias shifts every score of a query alike, which softmax ignores: its
                # gradient is
                # rounding noise, summed in another order here, and Adam turns noise into full-size
                # steps.
                continue
            torch.testing.assert_close(
                tensors[f"b/param/{name}"], p.detach(), rtol=1e-4, atol=1e-6, msg=name
            )


def test_uneven_data_ends_the_epoch_on_every_rank_instead_of_hanging(equal_run):
    """Run D: rank 0 has 3 batches, rank 1 has 4; both stop after 3 steps (the job finished at
    all)."""
    for _, report in equal_run["ranks"]:
        assert report["d"]["steps"] == 3 and report["d"]["stop_reason"] == "max_epochs"


def test_the_ranks_share_the_slowest_ranks_clock_for_a_time_budget(equal_run):
    """Run E: a time budget with the linear schedule, rank 1's steps slower. Each rank's own clock
    would differ; ``train()`` gives every rank the slowest one (``ReduceOp.MAX``), so both ranks
    count the same seconds, use the same rate at every step and stop at the same step (chapter 13
    says so)."""
    first, second = (report["e"] for _, report in equal_run["ranks"])
    assert first["stop_reason"] == second["stop_reason"] == "time_budget"
    assert first["steps"] == second["steps"] > 1
    assert first["train_seconds"] == second["train_seconds"]
    assert [h["lr"] for h in first["history"]] == [h["lr"] for h in second["history"]]


# ----------------------------------------------------------------------------------------------
# rank 0 only


def test_only_rank_zero_writes_checkpoints_and_shows_progress(equal_run):
    ckpt = equal_run["ckpt"]
    (_, report0), (_, report1) = equal_run["ranks"]
    assert report1["events"] == [], f"rank 1 wrote files: {report1['events'][:3]}"
    renamed = {Path(event[-1]).name for event in report0["events"] if event[0] == "os.rename"}
    assert {"a.safetensors", "a.train_state.pt"} <= renamed
    assert sorted(p.name for p in ckpt.iterdir()) == ["a.safetensors", "a.train_state.pt"]
    model, metadata = load_checkpoint(ckpt / "a.safetensors")
    assert metadata["training"]["step"] == 5
    tensors = equal_run["ranks"][0][0]
    for name, p in model.named_parameters():
        assert torch.equal(p, tensors[f"a/param/{name}"]), name
    err0 = (equal_run["out"] / "equal.rank0.stderr").read_text()
    err1 = (equal_run["out"] / "equal.rank1.stderr").read_text()
    assert "5/5" in err0 and "loss=" in err0
    assert "5/5" not in err1 and "loss=" not in err1


# ----------------------------------------------------------------------------------------------
# resume


def test_killed_run_resumes_from_its_last_checkpoint(equal_run, tmp_path):
    """Run C (dropout 0.1): rank 1 is killed during step 7; a new job resumes from step 6 and ends
    like run C."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    out.mkdir()
    ckpt.mkdir()
    crashed = torchrun(str(WORKER_PATH), "crash", str(out), str(ckpt))
    assert crashed.returncode != 0, "the crash run was supposed to die"
    # no temp files
    assert sorted(p.name for p in ckpt.iterdir()) == ["c.safetensors", "c.train_state.pt"]
    assert read_checkpoint_header(ckpt / "c.safetensors")[1]["training"]["step"] == 6

    resumed = torchrun(str(WORKER_PATH), "resume", str(out), str(ckpt))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for (after, report), (full, full_report) in zip(
        worker_results(out, "resume"), equal_run["ranks"], strict=True
    ):
        assert report["c"]["steps"] == 7
        assert [h["loss"] for h in report["c"]["history"]] == [
            h["loss"] for h in full_report["c"]["history"]
        ]
        for name in (k for k in full if k.startswith("c/")):
            assert torch.equal(after[name], full[name]), name  # bit-exact, dropout masks included
    # Each rank has its own dropout stream: restoring rank 0's on rank 1 would have changed rank 1's
    # masks.
    # and one process cannot resume a 2-process run
    with pytest.raises(ValueError, match="2 process"):
        train(
            worker.small_model(0.1),
            worker.make_data(8),
            TrainConfig(max_steps=8, progress=False),
            resume_from=ckpt / "c.safetensors",
        )
    assert train_state_path(ckpt / "c.safetensors").is_file()


# ----------------------------------------------------------------------------------------------
# command line


def test_cli_copy_under_torchrun_prints_one_json_line_and_matches_one_process(tmp_path):
    path = tmp_path / "ddp.safetensors"
    done = torchrun(
        "-m",
        "transformer_tasks",
        "copy",
        "--device",
        "cpu",
        "--max-steps",
        "8",
        "--save",
        str(path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, done.stdout  # rank 0 only
    result = json.loads(lines[0])
    assert result["world_size"] == 2 and result["global_batch_size"] == 128 and result["steps"] == 8
    assert result["checkpoint"] == str(path) and sorted(p.name for p in tmp_path.iterdir()) == [
        "ddp.safetensors"
    ]
    # One process with two batches of 64 per step trains the same model.
    single = run_copy_task(
        "cpu",
        max_steps=8,
        settings=CopyTaskSettings(grad_accum=2),
        progress=False,
        save_path=str(tmp_path / "one.safetensors"),
    )
    assert single["global_batch_size"] == 128 and single["world_size"] == 1
    ddp_model, _ = load_checkpoint(path)
    one_model, _ = load_checkpoint(tmp_path / "one.safetensors")
    for (name, a), b in zip(ddp_model.named_parameters(), one_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
    assert result["exact_match"] == single["exact_match"]


# ----------------------------------------------------------------------------------------------
# building blocks


def test_shard_batches_gives_every_rank_the_same_number_of_items():
    items = list(range(7))
    assert [list(shard_batches(items, r, 3)) for r in range(3)] == [[0, 3], [1, 4], [2, 5]]
    assert [list(shard_batches(items, r, 3, tail="pad")) for r in range(3)] == [
        [0, 3, 6],
        [1, 4, 0],
        [2, 5, 1],
    ]
    assert list(shard_batches(items, 0, 1)) == items  # one process keeps everything
    assert list(shard_batches(iter([5]), 1, 2)) == [] and list(
        shard_batches([5], 1, 2, tail="pad")
    ) == [5]
    # Lazy: reading rank 0's first item reads only the first group of the input.
    pulled = []

    def source():
        for i in range(100):
            pulled.append(i)
            yield i

    assert next(shard_batches(source(), 0, 4)) == 0 and pulled == [0, 1, 2, 3]
    # Every item goes to exactly one rank.
    shards = [list(shard_batches(range(20), r, 4)) for r in range(4)]
    assert sorted(sum(shards, [])) == list(range(20))
    with pytest.raises(ValueError, match="rank"):
        shard_batches(items, 3, 3)
    with pytest.raises(ValueError, match="world_size"):
        shard_batches(items, 0, 0)
    with pytest.raises(ValueError, match="tail"):
        shard_batches(items, 0, 2, tail="cycle")
    with pytest.raises(TypeError, match="rank"):
        shard_batches(items, 0.0, 2)
    with pytest.raises(TypeError, match="iterable"):
        shard_batches(5, 0, 2)


def test_without_torchrun_everything_describes_one_process():
    assert launch_info() is None and not is_distributed()
    assert (rank(), world_size(), local_rank(), is_main_process()) == (0, 1, 0, True)
    assert init_distributed("cpu") == torch.device("cpu") and not is_distributed()
    assert broadcast_object({"x": 1}) == {"x": 1} and all_gather_object(3) == [3]
    barrier()
    with main_process_first():
        pass
    cleanup()
    assert list(shard_batches(range(3))) == [0, 1, 2]


def test_launch_environment_is_read_and_checked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    info = launch_info()
    assert info is not None and (info.rank, info.world_size, info.local_rank) == (1, 4, 1)
    # before joining the group
    assert (rank(), world_size(), local_rank(), is_main_process()) == (1, 4, 1, False)
    assert list(shard_batches(range(8))) == [1, 5]
    with pytest.raises(ValueError, match="no backend for mps"):
        init_distributed("mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA device"):
            init_distributed("cuda")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        init_distributed("cpu")
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="inconsistent"):
        launch_info()
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match="RANK='one'"):
        launch_info()
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        launch_info()


def _one_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables torchrun sets for a group of one process, on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_cleanup_frees_the_ddp_wrapper_before_it_leaves_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's DistributedDataParallel wrapper can outlive ``train`` in a reference cycle. Freed
    only at exit, after the group was destroyed, it aborted 4 of 12 two-process ``copy`` runs
    ("terminate called without an active exception"). ``cleanup`` collects it first. (A one-process
    group, automatic collection off so that the cycle is certainly still there.)"""
    _one_process_group(monkeypatch)
    alive_at_destroy, destroy = [], torch.distributed.destroy_process_group

    def counting_destroy(*args: Any, **kwargs: Any) -> None:
        # no __class__ reads
        alive_at_destroy.append(sum(type(o) is DistributedDataParallel for o in gc.get_objects()))
        destroy(*args, **kwargs)

    monkeypatch.setattr(torch.distributed, "destroy_process_group", counting_destroy)
    gc.disable()
    try:
        assert main(["copy", "--device", "cpu", "--max-steps", "3"]) == 0
    finally:
        gc.enable()
    assert alive_at_destroy == [0] and not torch.distributed.is_initialized()


def test_the_command_line_waits_for_every_rank_before_it_leaves_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a command that succeeded, every rank meets at a barrier before any destroys the group,
    so that no rank closes its connections while rank 0 still writes its result; a command that
    failed leaves at once (its peers may be inside a collective that will never complete)."""
    _one_process_group(monkeypatch)
    calls: list[str] = []
    barrier, destroy = torch.distributed.barrier, torch.distributed.destroy_process_group

    def counting_barrier(*args: Any, **kwargs: Any) -> None:
        calls.append("barrier")
        barrier(*args, **kwargs)

    def counting_destroy(*args: Any, **kwargs: Any) -> None:
        calls.append("destroy")
        destroy(*args, **kwargs)

    monkeypatch.setattr(torch.distributed, "barrier", counting_barrier)
    monkeypatch.setattr(torch.distributed, "destroy_process_group", counting_destroy)
    assert main(["copy", "--device", "cpu", "--max-steps", "2"]) == 0
    assert calls[-2:] == ["barrier", "destroy"]
    calls.clear()
    _one_process_group(monkeypatch)
    # the translation command joins the group first, then refuses the flag combination
    assert main(["train-translation", "--device", "cpu", "--checkpoint-every", "5"]) == 2
    assert calls == ["destroy"]
