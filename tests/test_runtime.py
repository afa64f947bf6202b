"""Where a run happens: the profile switch (``TRANSFORMER_PROFILE``), never the ``CI`` variable; the
mixed precision that ``amp="auto"`` picks: on a GPU from its compute capability, on a CPU by timing
the step both ways (fake timers here), once per machine."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
import torch

from transformer_lib.runtime import amp_for_device, cpu_info, resolve_amp
from transformer_lib.training.precision import (
    BF16_MIN_SPEEDUP,
    amp_cache_path,
    cached_cpu_amp,
    choose_cpu_amp,
)
from transformer_tasks import TRANSLATION_PROFILES, default_profile

PACKAGES = [
    Path(__file__).resolve().parents[1] / name for name in ("transformer_lib", "transformer_tasks")
]


def test_the_profile_follows_the_device_when_not_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRANSFORMER_PROFILE", raising=False)
    assert default_profile(torch.device("cpu")) == "cpu"
    assert default_profile(torch.device("cuda")) == "gpu"
    assert default_profile(torch.device("mps")) == "cpu"


@pytest.mark.parametrize("ci", ["true", "1", ""])
def test_ci_does_not_choose_the_profile(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.delenv("TRANSFORMER_PROFILE", raising=False)
    monkeypatch.setenv("CI", ci)
    assert default_profile(torch.device("cpu")) == "cpu"


@pytest.mark.parametrize("name", list(TRANSLATION_PROFILES))
def test_transformer_profile_overrides_the_device(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("TRANSFORMER_PROFILE", name)
    assert default_profile(torch.device("cpu")) == name
    assert default_profile(torch.device("cuda")) == name


def test_an_unknown_profile_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSFORMER_PROFILE", "huge")
    with pytest.raises(
        ValueError, match=r"TRANSFORMER_PROFILE='huge' is not one of \['smoke', 'cpu', 'gpu'\]"
    ):
        default_profile(torch.device("cpu"))


def test_the_package_never_reads_the_ci_variable() -> None:
    """No ``os.environ[...]``/``os.environ.get(...)``/``os.getenv(...)`` of ``"CI"`` in either
    package."""
    readers = []
    for path in sorted(p for package in PACKAGES for p in package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "CI":
                readers.append(f"{path.relative_to(PACKAGES[0].parent)}:{node.lineno}")
    assert readers == []


# ----------------------------------------------------------------------------------------------
# amp="auto"


@pytest.mark.parametrize(
    ("capability", "expected"),
    [((7, 0), "fp16"), ((7, 5), "fp16"), ((8, 0), "bf16"), ((8, 9), "bf16"), ((9, 0), "bf16")],
    ids=["V100", "T4", "A100", "L4", "H100"],
)
def test_auto_amp_on_a_gpu_follows_its_compute_capability(
    capability: tuple[int, int], expected: str
) -> None:
    assert amp_for_device("cuda", cuda_capability=capability) == expected


def test_auto_amp_elsewhere_and_bad_input() -> None:
    assert amp_for_device("mps") == "none"
    with pytest.raises(ValueError, match="cuda_capability"):
        amp_for_device("cuda")
    with pytest.raises(ValueError, match="amp='fp8' is not one of"):
        resolve_amp("fp8", torch.device("cpu"))
    with pytest.raises(ValueError, match="on a CPU is measured"):
        resolve_amp("auto", torch.device("cpu"))
    cpu = torch.device("cpu")
    assert [resolve_amp(a, cpu) for a in ("none", "bf16", "fp16")] == ["none", "bf16", "fp16"]


def fake_steps(none: float, bf16: float, warm_up: float = 100.0):
    """``amp -> seconds`` of a made-up machine: a slow first step of each precision, then these."""
    calls: list[str] = []

    def step_seconds(amp: str) -> float:
        calls.append(amp)
        first = calls.count(amp) == 1
        return warm_up if first else {"none": none, "bf16": bf16}[amp]

    return step_seconds, calls


@pytest.mark.parametrize(
    ("none", "bf16", "expected"),
    [
        (1.6, 1.2, "bf16"),  # 1.33x faster: pays (an AMD EPYC with AVX-512 bfloat16)
        (1.0, 1.4, "none"),  # slower (an Intel Xeon without AMX)
        (1.05, 1.0, "none"),  # 5 % faster: inside what two timings differ by, not worth a bit
        (1.1, 1.0, "bf16"),  # exactly BF16_MIN_SPEEDUP
    ],
)
def test_auto_amp_on_a_cpu_is_the_faster_step_by_a_clear_margin(
    none: float, bf16: float, expected: str
) -> None:
    step_seconds, calls = fake_steps(none, bf16)
    answer = choose_cpu_amp(step_seconds, repeats=3)
    assert answer == {"amp": expected, "none": none, "bf16": bf16}  # warm-ups not counted
    assert calls == ["none", "bf16"] + ["none", "bf16"] * 3  # interleaved
    assert none / bf16 < BF16_MIN_SPEEDUP or expected == "bf16"


def test_a_clear_answer_stops_the_timing_after_one_step_each_way() -> None:
    step_seconds, calls = fake_steps(1.9, 40.0)  # bfloat16 emulated: 21 times slower
    assert choose_cpu_amp(step_seconds, repeats=3) == {"amp": "none", "none": 1.9, "bf16": 40.0}
    assert calls == ["none", "bf16", "none", "bf16"]
    step_seconds, calls = fake_steps(3.0, 1.0)
    assert choose_cpu_amp(step_seconds, repeats=3)["amp"] == "bf16" and len(calls) == 4


def test_the_median_step_decides_not_one_slow_step() -> None:
    times = iter([9.0, 9.0, 1.0, 0.8, 1.1, 3.0, 1.0, 0.8])  # warm-ups, then none/bf16 in turn
    answer = choose_cpu_amp(lambda amp: next(times), repeats=3)
    assert answer == {"amp": "bf16", "none": 1.0, "bf16": 0.8}
    with pytest.raises(ValueError, match="repeats"):
        choose_cpu_amp(lambda amp: 1.0, repeats=0)


def test_the_probe_runs_once_per_machine_and_the_cache_survives_bad_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LIB_CACHE", str(tmp_path))
    probes: list[str] = []

    def probe(amp: str):
        return lambda: probes.append(amp) or {"amp": amp, "none": 1.0, "bf16": 0.5}

    assert cached_cpu_amp("machine A", probe("bf16"))["cached"] is False
    again = cached_cpu_amp("machine A", probe("none"))
    assert again == {"amp": "bf16", "none": 1.0, "bf16": 0.5, "cached": True}
    assert cached_cpu_amp("machine B", probe("none"))["amp"] == "none"
    assert probes == ["bf16", "none"]
    assert set(json.loads(amp_cache_path().read_text())) == {"machine A", "machine B"}
    amp_cache_path().write_text("{not json")
    assert cached_cpu_amp("machine A", probe("none")) == {
        "amp": "none",
        "none": 1.0,
        "bf16": 0.5,
        "cached": False,
    }


def test_cpu_info_reads_the_first_processor_and_nothing_where_there_is_no_file(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "cpuinfo"
    fake.write_text(
        "processor\t: 0\nmodel name\t: First CPU\nflags\t\t: fpu avx2 amx_bf16\n\n"
        "processor\t: 1\nmodel name\t: Second CPU\nflags\t\t: fpu\n",
        encoding="utf-8",
    )
    assert cpu_info(fake) == {
        "processor": "0",
        "model name": "First CPU",
        "flags": "fpu avx2 amx_bf16",
    }
    assert cpu_info(tmp_path / "absent") == {}


def test_the_package_reads_proc_cpuinfo_in_one_place() -> None:
    modules = [m for package in PACKAGES for m in package.rglob("*.py")]
    readers = [
        m.relative_to(PACKAGES[0].parent).as_posix()
        for m in modules
        if '/proc/cpuinfo"' in m.read_text("utf-8")
    ]
    assert readers == ["transformer_lib/runtime.py"]


def test_bfloat16_training_on_a_cpu_caps_onednns_kernel_caches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before its first bfloat16 step on a CPU, train() caps the two caches that keep a kernel per
    batch shape (else a run's memory grows with every new shape); a value already set is kept, and
    a float32 run leaves them alone."""
    from transformer_lib import TrainConfig, Transformer, TransformerConfig, make_batch, train
    from transformer_lib.runtime import CPU_KERNEL_CACHE_CAPACITY

    names = ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    batch = make_batch([[5, 6, 7]], [[8, 9]], pad_id=0, bos_id=1, eos_id=2)
    config = TransformerConfig(12, 12, d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1)
    for amp, preset, expected in (
        ("none", None, None),
        ("bf16", None, str(CPU_KERNEL_CACHE_CAPACITY)),
        ("bf16", "7", "7"),
    ):
        for name in names:
            monkeypatch.delenv(name, raising=False)
            if preset is not None:
                monkeypatch.setenv(name, preset)
        model = Transformer(config)
        train(model, [batch], TrainConfig(max_steps=1, warmup_steps=1, amp=amp, progress=False))
        assert [os.environ.get(name) for name in names] == [expected, expected], amp
