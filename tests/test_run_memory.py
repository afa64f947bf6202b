"""transformer_lib.memory: a run's peak resident memory, and a training run whose memory does not
grow with its steps.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lib.memory import peak_rss_mb, release_freed_memory

REPO = Path(__file__).resolve().parents[1]
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


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


def test_release_freed_memory_sets_the_threshold_on_glibc_only() -> None:
    assert release_freed_memory() is GLIBC


# A smoke run trains 3 * STEPS steps, evaluating every STEPS; its resident memory after the last
# evaluation may exceed that after the first by MARGIN_MB at most. Without the fixed mmap threshold
# (transformer_lib.memory) glibc's heap grew by 19-27 MB over those 40 steps (one snapshot more
# holds under 1 MB); with it, by 2-3 MB.
STEPS, MARGIN_MB = 20, 10.0
_MEASURE = """
import json, sys
import transformer_tasks.translation.train as training
from transformer_tasks.translation import apply_overrides, translation_profile

def rss_mb():
    with open("/proc/self/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

after_evaluation = []
evaluate_loss = training.evaluate_loss
def measured(*args, **kwargs):
    metrics = evaluate_loss(*args, **kwargs)
    after_evaluation.append(rss_mb())
    return metrics
training.evaluate_loss = measured
steps = int(sys.argv[2])
settings = [f"train.max_steps={3 * steps}", "train.time_budget_s=None", f"train.eval_every={steps}",
            "train.progress=false"]
training.train_translation(sys.argv[1], apply_overrides(translation_profile("smoke"), settings))
print(json.dumps(after_evaluation[:3]))  # the three evaluations; then come the averages'
"""


@pytest.mark.skipif(not GLIBC, reason="reads /proc/self/status; the threshold is glibc's")
def test_memory_of_a_smoke_run_does_not_grow_with_its_steps(multi30k_dir: Path) -> None:
    """SLOW-ISH (a 60-step smoke run in a fresh process: 10-30 s). A fresh process, so that no
    other test's memory counts.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(multi30k_dir), str(STEPS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, _, last = json.loads(done.stdout.splitlines()[-1])
    assert last - first <= MARGIN_MB, (
        f"resident memory grew from {first:.1f} MiB after {STEPS} steps to {last:.1f} MiB after "
        f"{3 * STEPS}"
    )
