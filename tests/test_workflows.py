"""The GitHub Actions workflows in .github/workflows: valid YAML, and the same commands as the README.

They cannot run here, so these tests check what can go wrong without running them: the YAML
parses into a workflow (triggers, jobs, steps that each use an action or run a command), the
test workflow runs the README's test command (``bash .ci/run``, which runs ``make test``) on
Python 3.11 and 3.12 with a pip cache, and the book workflow builds with ``make book`` and
publishes ``_build/html`` to GitHub Pages on pushes to ``main``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTION = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@v\d+$")  # owner/repo[/path]@vN


def _load(name: str) -> dict[str, Any]:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _commands(workflow: dict[str, Any]) -> list[str]:
    return [step["run"].strip() for step in _steps(workflow) if "run" in step]


def test_there_are_exactly_the_two_workflows() -> None:
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["book.yml", "tests.yml"]


@pytest.mark.parametrize("name", ["book.yml", "tests.yml"])
def test_workflow_is_well_formed(name: str) -> None:
    workflow = _load(name)
    assert isinstance(workflow.get("name"), str)
    assert workflow["on"], f"{name}: no trigger"
    assert workflow["jobs"], f"{name}: no job"
    for job_name, job in workflow["jobs"].items():
        assert job.get("runs-on") == "ubuntu-latest", f"{name}: job {job_name} runs on {job.get('runs-on')!r}"
        assert job.get("steps"), f"{name}: job {job_name} has no steps"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{name}: a step must use an action or run a command: {step}"
            if "uses" in step:
                assert ACTION.match(step["uses"]), f"{name}: action not pinned to a major version: {step['uses']}"


def test_tests_workflow_runs_the_readme_test_command_on_both_pythons() -> None:
    workflow = _load("tests.yml")
    assert set(workflow["on"]) == {"push", "pull_request"}
    (job,) = workflow["jobs"].values()
    assert job["strategy"]["matrix"]["python-version"] == ["3.11", "3.12"]
    assert job["env"]["CI"] == "true"
    assert "download.pytorch.org/whl/cpu" in job["env"]["PIP_EXTRA_INDEX_URL"]
    setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["python-version"] == "${{ matrix.python-version }}"
    commands = _commands(workflow)
    assert commands[-1] == "bash .ci/run", "the last step must be the README's test command"
    # .ci/run is the same command: `make test`.
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1] == "make test"
    assert "make test" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_tests_workflow_puts_multi30k_where_the_tests_look() -> None:
    workflow = _load("tests.yml")
    (job,) = workflow["jobs"].values()
    checkout = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/checkout@"))
    repo_dir = checkout["with"]["path"]
    assert job["defaults"]["run"]["working-directory"] == repo_dir
    # The tests read ../shared/data/multi30k relative to the repository.
    assert any("ensure_files('../shared/data/multi30k')" in command for command in _commands(workflow))
    test_source = (ROOT / "tests" / "test_multi30k.py").read_text(encoding="utf-8")
    assert 'REPO_ROOT.parent / "shared" / "data" / "multi30k"' in test_source


def test_book_workflow_publishes_the_built_site_from_main() -> None:
    workflow = _load("book.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert _commands(workflow) == ["make book"]
    assert "make book" in (ROOT / "README.md").read_text(encoding="utf-8")
    uploads = [step for step in _steps(workflow) if step.get("uses", "").startswith("actions/upload-pages-artifact@")]
    (upload,) = uploads
    assert upload["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["environment"]["name"] == "github-pages"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
