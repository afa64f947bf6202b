"""Where a run happens: the profile switch (``TRANSFORMER_PROFILE``), never the ``CI`` variable."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from transformer_lib.runtime import PROFILES, default_profile

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lib"


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


@pytest.mark.parametrize("name", PROFILES)
def test_transformer_profile_overrides_the_device(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("TRANSFORMER_PROFILE", name)
    assert default_profile(torch.device("cpu")) == name
    assert default_profile(torch.device("cuda")) == name


def test_an_unknown_profile_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSFORMER_PROFILE", "huge")
    with pytest.raises(ValueError, match=r"TRANSFORMER_PROFILE='huge' is not one of \['smoke', 'cpu', 'gpu'\]"):
        default_profile(torch.device("cpu"))


def test_the_package_never_reads_the_ci_variable() -> None:
    """No ``os.environ[...]``/``os.environ.get(...)``/``os.getenv(...)`` of ``"CI"`` anywhere in the package."""
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "CI":
                readers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert readers == []
