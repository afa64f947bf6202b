"""What a result file records besides its results: the process's peak memory, and what
``amp="auto"`` measured on this machine (its own probes, not another machine's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transformer_lib.training.precision import amp_cache_path, probe_machine
from transformer_tasks.records import describe_machine, peak_rss_mb


def test_a_result_records_this_machines_precision_probes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LIB_CACHE", str(tmp_path))
    assert describe_machine()["amp_probes"] == {}  # no probe yet
    here = f"{probe_machine()} | torch x | 1 threads | 10 parameters | batch (2, 3) -> (2, 4)"
    answers = {
        here: {"amp": "none", "none": 1.9, "bf16": 40.0},
        "Another CPU | torch x | 1 threads | 10 parameters | batch (2, 3) -> (2, 4)": {
            "amp": "bf16",
            "none": 1.6,
            "bf16": 1.2,
        },
    }
    amp_cache_path().write_text(json.dumps(answers))
    assert describe_machine()["amp_probes"] == {here: answers[here]}
    amp_cache_path().write_text("not json")
    assert describe_machine()["amp_probes"] == {}


def test_peak_memory_is_at_least_what_the_process_holds_now() -> None:
    peak = peak_rss_mb()
    if peak is None:
        pytest.skip("this system reports no peak resident memory")
    held = bytearray(50_000_000)  # 50 MB, touched so that it is resident
    held[::4096] = b"\x01" * len(held[::4096])
    assert peak_rss_mb() >= 50 and peak_rss_mb() >= peak
