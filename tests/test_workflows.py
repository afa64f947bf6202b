"""The GitHub Actions workflows in .github/workflows: valid YAML, and the same commands as the
README.

They cannot run here, so these tests check what can go wrong without running them: the YAML
parses into a workflow (triggers, jobs, steps that each use an action or run a command), the
test workflow runs the README's test command (``bash .ci/run``, which runs ``make test``) on
Python 3.11 and 3.12 with a pip cache and Multi30k in the user cache, and the emulated Colab test
(``make test-colab``); the book workflow builds with ``make book`` and publishes ``_build/html``
to GitHub Pages on pushes to ``main``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.book

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
        assert job.get("runs-on") == "ubuntu-latest", (
            f"{name}: job {job_name} runs on {job.get('runs-on')!r}"
        )
        assert job.get("steps"), f"{name}: job {job_name} has no steps"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (
                f"{name}: a step must use an action or run a command: {step}"
            )
            if "uses" in step:
                assert ACTION.match(step["uses"]), (
                    f"{name}: action not pinned to a major version: {step['uses']}"
                )


def _job(workflow: dict[str, Any], name: str) -> dict[str, Any]:
    return workflow["jobs"][name]


def _job_commands(job: dict[str, Any]) -> list[str]:
    return [step["run"].strip() for step in job["steps"] if "run" in step]


def test_tests_workflow_runs_the_readme_test_command_on_both_pythons() -> None:
    workflow = _load("tests.yml")
    assert set(workflow["on"]) == {"push", "pull_request"}
    assert set(workflow["jobs"]) == {"test", "colab"}
    job = _job(workflow, "test")
    assert job["strategy"]["matrix"]["python-version"] == ["3.11", "3.12"]
    assert workflow["env"]["CI"] == "true"
    assert "download.pytorch.org/whl/cpu" in workflow["env"]["PIP_EXTRA_INDEX_URL"]
    setup = next(
        step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@")
    )
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["python-version"] == "${{ matrix.python-version }}"
    commands = _job_commands(job)
    assert commands[-1] == "bash .ci/run", "the last step must be the README's test command"
    # .ci/run is the same command: `make test`.
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[
        -1
    ] == "make test"
    assert "make test" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_tests_workflow_keeps_multi30k_where_the_package_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workflow caches the user cache (no folder beside the repository), and fills it with the
    package."""
    from transformer_tasks.multi30k import default_data_dir

    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    job = _job(_load("tests.yml"), "test")
    (cache,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/cache@")]
    assert Path(cache["with"]["path"]).expanduser() == default_data_dir()
    assert "ensure_files()" in " ".join(_job_commands(job))
    assert "working-directory" not in job.get("defaults", {}).get("run", {}), (
        "the repository is the working folder"
    )


def test_colab_job_runs_the_emulated_colab_test() -> None:
    job = _job(_load("tests.yml"), "colab")
    assert _job_commands(job) == ["make venv", "make test-colab"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test-colab:", makefile, flags=re.MULTILINE)
    assert "tests/test_colab.py" in makefile


def test_book_workflow_publishes_the_built_site_from_main() -> None:
    workflow = _load("book.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert _commands(workflow) == ["make book"]
    assert "make book" in (ROOT / "README.md").read_text(encoding="utf-8")
    uploads = [
        step
        for step in _steps(workflow)
        if step.get("uses", "").startswith("actions/upload-pages-artifact@")
    ]
    (upload,) = uploads
    assert upload["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["environment"]["name"] == "github-pages"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]


_PYTHON_C = re.compile(r"python -c (\"([^\"]*)\"|'([^']*)')")
_PYTHON_M = re.compile(r"python -m ([\w.]+)")
_PYTHON_SCRIPT = re.compile(r"python ([\w./-]+\.py)\b")


def _python_steps() -> list[tuple[str, str, str]]:
    """Every Python that a workflow step runs: ``(workflow, kind, what)``, kind ``-c``, ``-m`` or
    ``script``.
    """
    found = []
    for name in ("book.yml", "tests.yml"):
        for command in _commands(_load(name)):
            for match in _PYTHON_C.finditer(command):
                found.append((name, "-c", match.group(2) or match.group(3)))
            found += [(name, "-m", module) for module in _PYTHON_M.findall(command)]
            found += [(name, "script", path) for path in _PYTHON_SCRIPT.findall(command)]
    return found


def _check_snippet(code: str) -> None:
    """Import every module ``code`` imports, and check that each imported name is there."""
    import ast
    import importlib

    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"


def test_the_workflows_python_steps_name_what_exists() -> None:
    """What the steps' Python imports, runs as a module or as a script exists, so that moving a
    module fails here rather than at the workflow's own step (a string check would not notice).
    """
    import importlib.util

    steps = _python_steps()
    assert any(kind == "-c" for _, kind, _ in steps), "the test workflow's download step"
    for workflow, kind, what in steps:
        if kind == "-m":
            assert importlib.util.find_spec(what) is not None, f"{workflow}: python -m {what}"
        elif kind == "script":
            assert (ROOT / what).is_file(), f"{workflow}: python {what}"
        else:
            _check_snippet(what)


def test_the_python_step_check_fails_for_a_moved_module_or_name() -> None:
    """The check fails for the download step as it was before Multi30k's module moved (issue 34),
    and for a name its module does not have.
    """
    old = "from transformer_lib.multi30k import ensure_files; ensure_files()"
    match = _PYTHON_C.search(f'.venv/bin/python -c "{old}"')
    assert match is not None and match.group(2) == old
    with pytest.raises(ModuleNotFoundError):
        _check_snippet(old)
    with pytest.raises(AssertionError, match="has no ensure_all"):
        _check_snippet("from transformer_tasks.multi30k import ensure_all")
    _check_snippet("from transformer_tasks.multi30k import ensure_files")
