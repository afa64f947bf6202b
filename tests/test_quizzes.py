"""The "Check yourself" answers stay hidden until the reader asks for them.

Every chapter ends with questions under a ``## Check yourself`` heading, followed by one code cell
that computes and checks the answers. That cell must be collapsed as a whole, input and output
(myst-nb's ``hide-cell`` tag), behind a toggle that says what it holds ("Show answers"). The
browser test opens one such toggle on the built site.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def answer_cells(path: Path) -> list[dict]:
    """The first code cell after each markdown cell that holds a "## Check yourself" heading."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = []
    for i, cell in enumerate(cells):
        lines = "".join(cell["source"]).splitlines()
        if cell["cell_type"] == "markdown" and "## Check yourself" in lines:
            found.append(next(c for c in cells[i + 1 :] if c["cell_type"] == "code"))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_quiz_answers_are_collapsed_with_their_code_behind_a_show_answers_toggle(path):
    cells = answer_cells(path)
    assert len(cells) == 1, (
        f"{path.name}: expected one '## Check yourself' section, found {len(cells)}"
    )
    metadata = cells[0]["metadata"]
    tags = metadata.get("tags", [])
    assert "hide-cell" in tags, (
        f"{path.name}: the answer cell's output is visible by default (tags {tags})"
    )
    assert not {"hide-input", "hide-output"} & set(tags), (
        f"{path.name}: hide-cell alone collapses input and output"
    )
    prompts = metadata.get("mystnb", {})
    assert prompts.get("code_prompt_show") == "Show answers", (
        f"{path.name}: the toggle must say 'Show answers'"
    )
    assert prompts.get("code_prompt_hide") == "Hide answers"
