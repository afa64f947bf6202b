"""The peak resident memory a results file records (transformer_tasks.records.peak_rss_mb)."""

from __future__ import annotations

import sys

import pytest

from transformer_tasks.records import peak_rss_mb


def _rss_mb() -> float:
    """This process's resident memory now, in MiB (Linux)."""
    with open("/proc/self/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_peak_rss_is_in_mib_and_at_least_the_memory_in_use_now() -> None:
    now = _rss_mb()
    peak = peak_rss_mb()
    assert peak is not None and now <= peak + 1.0
    assert 20 < peak < 1_000_000, "MiB, not KiB or bytes"
