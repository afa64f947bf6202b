"""Every command shown to a reader runs, and a command that names a result gives that result's
configuration.

The commands are collected from everything a reader is shown: the README and the book's pages
(fenced blocks and code spans), the markdown of every chapter, the docstrings of ``benchmarks/`` and
``scripts/``, and the ``command`` of every result file (``results/``, ``benchmarks/results/``). Each
is resolved without running it:

- ``python -m transformer_tasks copy|train-translation ...`` (also behind ``torchrun``) runs with
  ``--dry-run``, which prints the resolved configuration and trains nothing; the other sub-commands
  are parsed;
- ``benchmarks/variants.py`` and ``benchmarks/translation_sweep.py`` run with ``--dry-run`` too; the
  other scripts' options are parsed by their own parser, and the script stops there;
- ``make TARGET VAR=...`` needs the target in the Makefile and the files it names;
- any other program of ``.venv/bin/`` must be installed in the environment the tests run in (the
  one ``make book`` builds).

A command stored in a result file, or one that names a result file with ``--results``, must resolve
to the configuration stored there: every field of its ``config`` (apart from where the run writes
and its progress bar), its seed, its threads, and the settings the file records. A result made with
an earlier recipe records the ``--set`` flags that give that recipe today. So a change of a
profile's default, of a flag or of a module's name fails here, not in a reader's terminal. The
chapters' code cells run their commands under nbval, so they are not collected here.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import re
import runpy
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from transformer_tasks import cli

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", "intro.md", "architecture.md", "api.md", "glossary.md", "notation.md"]
# A command starts with optional VAR=value assignments, then one of these.
PROGRAM = re.compile(
    r"^(?:[A-Z][A-Z0-9_]*=\S*\s+)*(?:\.venv/bin/\S+|python3?|torchrun|make|benchmarks/\S+\.py"
    r"|scripts/\S+\.py)(?:\s|$)"
)
# A shown command matters here when it runs the project's code.
PROJECT = re.compile(
    r"-m transformer_(?:tasks|lib)\b|benchmarks/|scripts/|^(?:\S+=\S*\s+)*make\s|\.venv/bin/"
)
# The earlier, flat configuration's keys (results made before the four sections) -> today's names.
FLAT = {
    "name": "name",
    **{k: f"data.{k}" for k in ("train_limit", "test_limit", "vocab_size", "max_tokens")},
    **{
        k: f"model.{k}"
        for k in (
            "d_model",
            "num_heads",
            "num_encoder_layers",
            "num_decoder_layers",
            "d_ff",
            "dropout",
            "norm_first",
        )
    },
    **{
        k: f"train.{k}"
        for k in (
            "label_smoothing",
            "lr",
            "warmup_steps",
            "max_steps",
            "max_epochs",
            "time_budget_s",
            "eval_every",
            "amp",
            "schedule",
        )
    },
    **{k: f"decode.{k}" for k in ("beam_size", "length_penalty", "max_len_a", "max_len_b")},
    "decode_batch_size": "decode.batch_size",
    "average_last": "average_last",
}
# Where a run writes, how it shows its progress and its threads (checked against the threads the
# result records instead): they do not shape the result.
NOT_COMPARED = {
    "train.checkpoint_path",
    "train.checkpoint_every",
    "train.progress",
    "num_threads",
}
# Options the library has dropped, as earlier runs stored them: at these values they did what the
# code now always does (label smoothing gives <pad> its share; no patience, no best-model file).
DROPPED = {
    "train.label_smoothing_pad": True,
    "train.patience": None,
    "train.best_checkpoint_path": None,
}


# ----------------------------------------------------------------------------- collecting


def _joined(lines: list[str]) -> Iterator[str]:
    """Lines with a trailing backslash joined to the next."""
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        yield line


def _commands_in_text(text: str, docstring: bool = False) -> Iterator[tuple[str, bool]]:
    """The commands in markdown (fenced blocks, code spans) or in a docstring (its indented
    blocks), each with whether it is whole: a code span may name a command without its arguments
    (`python -m transformer_tasks export-onnx`)."""
    if docstring:
        block = [line for line in text.splitlines() if line.startswith((" ", "\t"))]
    else:
        fences = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
        block = [line for fence in fences for line in fence.splitlines()]
        text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text):
            if PROGRAM.match(span.strip()):
                yield span.strip(), False
    yield from ((line, True) for line in _joined(block) if PROGRAM.match(line))


def _docstring(path: Path) -> str:
    import ast

    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""


def _commands_in_json(
    value: Any, owner: dict[str, Any] | None = None
) -> Iterator[tuple[str, dict]]:
    """Every ``command`` (and every value of ``commands``) in a result file, with the record that
    holds it."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "command" and isinstance(item, str):
                yield item, value
            elif key == "commands" and isinstance(item, dict):
                yield from ((c, value) for c in item.values() if isinstance(c, str))
            else:
                yield from _commands_in_json(item, value)
    elif isinstance(value, list):
        for item in value:
            yield from _commands_in_json(item, owner)


def shown_commands() -> list[tuple[str, str, bool, dict | None, dict | None]]:
    """``(where, command, whole, record, result file)``: whether the command is shown whole, the
    record holding a stored command, and the whole file it is in."""
    found: list[tuple[str, str, bool, dict | None, dict | None]] = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        found += [(page, c, whole, None, None) for c, whole in _commands_in_text(text)]
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                where = f"{notebook.name} cell {number}"
                text = "".join(cell["source"])
                found += [(where, c, whole, None, None) for c, whole in _commands_in_text(text)]
    for script in sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")]):
        where = f"{script.relative_to(ROOT)} docstring"
        commands = _commands_in_text(_docstring(script), docstring=True)
        found += [(where, c, whole, None, None) for c, whole in commands]
    for path in sorted([*ROOT.glob("results/*.json"), *ROOT.glob("benchmarks/results/*.json")]):
        data = json.loads(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(ROOT))
        found += [(where, c, True, record, data) for c, record in _commands_in_json(data)]
    # Shell glue of a docstring's loop (the results file's merge, a here-document) and a pattern
    # of file names (benchmarks/*.py) are not commands of the project.
    return [
        row
        for row in found
        if PROJECT.search(row[1]) and not re.search(r"python3? -(?:\s|$)|\*", row[1])
    ]


SHOWN = shown_commands()


def test_the_readers_commands_are_found() -> None:
    """The collection itself: it must see the commands the README and the results show."""
    text = "\n".join(c for _, c, _, _, _ in SHOWN)
    for expected in ("train-translation --profile cpu", "make execute", "benchmarks/variants.py"):
        assert expected in text
    assert sum(record is not None for _, _, _, record, _ in SHOWN) >= 20


# ----------------------------------------------------------------------------- resolving


def _split(command: str) -> tuple[dict[str, str], list[str]]:
    """The environment assignments and the words of a command (a trailing ``(...)`` note and the
    placeholders of a loop dropped)."""
    command = re.sub(r"\s+\([^()]*\)$", "", command.strip())
    command = command.replace("$v", "baseline").replace("$seed", "0")
    words = shlex.split(command, comments=True)
    env = {}
    while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    # A usage line's optional flags, [--threads 1], are shown with brackets.
    return env, [w.removeprefix("[").removesuffix("]") for w in words if w not in ("[", "]")]


class _Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


REQUIRED = "the following arguments are required"  # argparse's message for a missing one


def _run_script(
    path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch, parse_only: bool, whole: bool
) -> tuple[dict[str, Any], str]:
    """Run a script of benchmarks/ or scripts/ in this process: to its parser (``parse_only``) or to
    its end; return its parsed options and what it printed. A command named but not shown
    ``whole`` may lack its required arguments."""
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    monkeypatch.syspath_prepend(str(path.parent))  # the benchmarks import _common
    if parse_only:
        original = argparse.ArgumentParser.parse_args

        def parse_and_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
            raise _Parsed(original(self, *args, **kwargs))

        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(str(path), run_name="__main__")
    except _Parsed as parsed:
        return vars(parsed.namespace), out.getvalue()
    except SystemExit as exit_:
        named = not whole and REQUIRED in err.getvalue()
        assert not exit_.code or named, (
            f"{path.name} {shlex.join(argv)} exits with {exit_.code}: {err.getvalue()}"
        )
        return {}, ""
    assert not parse_only, f"{path.name} parses no options"
    return {}, out.getvalue()


def _tasks(
    argv: list[str], capsys: pytest.CaptureFixture[str], whole: bool
) -> dict[str, Any] | None:
    """Resolve ``python -m transformer_tasks ARGV``: the dry run's JSON for a training command."""
    if argv and argv[0] in ("copy", cli.TRAIN_TRANSLATION) and "--help" not in argv:
        code = cli.main([*argv, "--dry-run"])
        out, err = capsys.readouterr()
        assert code == 0, f"exit status {code}: {err}"
        return json.loads(out.strip().splitlines()[-1])
    if whole:
        assert cli._moved_command(argv) is None, cli._moved_command(argv)
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as exit_:
        err = capsys.readouterr().err
        assert not exit_.code or (not whole and REQUIRED in err), err
    return None


def _make(argv: list[str]) -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.MULTILINE))
    for word in argv:
        name, sep, value = word.partition("=")
        if sep:  # a file, or a pattern where the text names one by a placeholder (NAME)
            pattern = re.sub(r"\b(?:NAME|NN_name)\b", "*", value)
            assert list(ROOT.glob(pattern)), f"{name}={value}: no such file"
        else:
            assert name in targets, f"make {name}: the Makefile has no such target"


def resolve(
    command: str,
    whole: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, str]]:
    """``(dry run's JSON or None, parsed options of a script, environment)`` of a shown command."""
    env, words = _split(command)
    monkeypatch.delenv("TRANSFORMER_PROFILE", raising=False)  # make test's smoke profile
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    program = words.pop(0)
    if program == "torchrun":
        words = ["-m", "torch.distributed.run", *words]
        program = "python"
    if program == "make":
        _make(words)
        return None, {}, env
    if program.startswith(".venv/bin/") and not program.endswith(("/python", "/python3")):
        name = Path(program).name
        name = f"{name}-{words[0]}" if name == "jupyter" and words else name
        assert (Path(sys.prefix) / "bin" / name).exists(), (
            f"{name} is not installed in the environment the tests run in (make book builds it)"
        )
        return None, {}, env
    if program.endswith(".py"):
        words = [program, *words]
    if words[:2] == ["-m", "torch.distributed.run"]:
        words = words[words.index("-m", 2) :]  # the module torchrun starts, and its options
    if words[0] == "-m":
        module = words[1]
        assert module != "transformer_lib", "the command line is python -m transformer_tasks"
        if module == "transformer_tasks":
            return _tasks(words[2:], capsys, whole), {}, env
        assert importlib.util.find_spec(module) is not None, f"no module {module}"
        return None, {}, env
    script = ROOT / words[0]
    assert script.is_file(), f"{words[0]} does not exist"
    dry = script.name in ("variants.py", "translation_sweep.py")
    argv = [*words[1:], *(["--dry-run"] if dry else [])]
    options, out = _run_script(script, argv, monkeypatch, not dry, whole)
    return (json.loads(out.strip().splitlines()[-1]) if dry and out else None), options, env


# ----------------------------------------------------------------------------- comparing


def _dotted(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _as_dotted(config: dict[str, Any]) -> dict[str, Any]:
    """A stored configuration by today's dotted names, nested or of the earlier flat kind."""
    if "model" in config and isinstance(config["model"], dict):
        return _dotted(config)
    return {FLAT[k]: v for k, v in config.items() if k in FLAT}


def expected_settings(record: dict[str, Any], whole: dict[str, Any]) -> dict[str, Any]:
    """What a result file says its run was: dotted name -> value."""
    results = record.get("results", record)
    expected: dict[str, Any] = {}
    if isinstance(results.get("config"), dict):
        expected.update(_as_dotted(results["config"]))
    else:  # a row of a sweep or of the recipe runs: its own fields
        expected.update({FLAT[k]: v for k, v in results.items() if k in FLAT and k != "name"})
        expected.update({FLAT[k]: v for k, v in results.get("overrides", {}).items() if k in FLAT})
        if "steps" in results and "stop_reason" not in results:
            expected["train.max_steps"] = results["steps"]
        if "translation_steps" in results:
            expected["train.max_steps"] = results["translation_steps"]
            expected["name"] = results["translation_profile"]
        expected.update(whole.get("recipe", {}).get("settings", {}))
    if "seed" in results and "translation_seeds" not in results:
        expected["train.seed"] = results["seed"]
    return {k: v for k, v in expected.items() if k not in NOT_COMPARED}


def differences(
    resolved: dict[str, Any], expected: dict[str, Any], resolved_amp: str | None
) -> list[str]:
    wrong = []
    for name, value in expected.items():
        got = resolved.get(name, "<missing>")
        if name in DROPPED and name not in resolved:
            ok = value == DROPPED[name]
        elif name == "train.amp" and value == "auto":  # auto was stored; the run resolved it
            ok = got in ("auto", resolved_amp)
        else:
            ok = json.loads(json.dumps(got)) == value
        if not ok:
            wrong.append(f"{name}: the command gives {got!r}, the result file has {value!r}")
    return wrong


def _named_result(words: list[str]) -> Path | None:
    for flag in ("--results",):
        if flag in words:
            path = ROOT / words[words.index(flag) + 1]
            if path.is_file() and path.parent.name == "results":
                return path
    return None


@pytest.mark.parametrize(
    ("where", "command", "whole", "record", "result_file"),
    SHOWN,
    ids=[f"{where}: {command[:60]}" for where, command, *_ in SHOWN],
)
def test_a_shown_command_runs_and_gives_the_result_it_names(
    where: str,
    command: str,
    whole: bool,
    record: dict | None,
    result_file: dict | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dry, options, env = resolve(command, whole, monkeypatch, capsys)
    stored = record is not None  # a command a result file stores, not one a page shows
    named = _named_result(_split(command)[1])
    if record is None and named is not None:  # a page's command that names a result file
        result_file = json.loads(named.read_text(encoding="utf-8"))
        record = result_file
    if record is None or (dry is None and not (stored and options)):
        return
    results = record.get("results", record)
    expected = expected_settings(record, result_file or {})
    if dry is not None and "translation" in dry:  # benchmarks/variants.py: one config per variant
        assert results.get("translation"), f"{where}: a variants command with no translation runs"
        for row in results["translation"]:
            config = _dotted(dry["translation"][row["variant"]])
            overrides = {f"model.{k}": v for k, v in row["overrides"].items()}
            wrong = differences(config, {**expected, **overrides}, None)
            assert not wrong, f"{where}, variant {row['variant']}: " + "; ".join(wrong)
        threads = dry["threads"]
    elif dry is not None:
        config = _dotted(dry["config"])
        wrong = differences(config, expected, results.get("amp"))
        assert not wrong, f"{where}: " + "; ".join(wrong)
        threads = config.get("num_threads") or env.get("OMP_NUM_THREADS")
    else:  # a script's stored command: the numbers it records must be the ones it was given
        numbers = {k: v for k, v in options.items() if type(v) in (int, float)}
        same = [k for k in numbers if type(results.get(k)) in (int, float)]
        wrong = [f"--{k} {options[k]} but {results[k]!r}" for k in same if options[k] != results[k]]
        assert not wrong, f"{where}: " + "; ".join(wrong)
        return
    if threads is not None and "threads" in results:
        assert int(threads) == results["threads"], (
            f"{where}: threads {threads}, recorded {results['threads']}"
        )
