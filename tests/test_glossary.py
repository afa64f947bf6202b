"""The glossary (glossary.md) and the notation page (notation.md) agree with the chapters.

Every glossary term gives its Chinese term and links the chapter that teaches it; every `{term}`
link of the book names a glossary term; every glossary term is linked from some chapter; and the
notation page lists the book's main symbols.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "glossary.md"
NOTATION = ROOT / "notation.md"
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))

CJK = re.compile(r"[\u3400-\u9fff]")
# {term}`text` links to the term "text"; {term}`text <Term>` shows "text" and links to "Term".
TERM_ROLE = re.compile(r"\{term\}`([^`]*)`")
DOC_ROLE = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")
GLOSSARY_BLOCK = re.compile(r"^```\{glossary\}\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def glossary_entries() -> dict[str, str]:
    """The terms of glossary.md, each with its definition (the indented lines under it)."""
    block = GLOSSARY_BLOCK.search(GLOSSARY.read_text(encoding="utf-8"))
    assert block, "glossary.md has no ```{glossary} block"
    entries: dict[str, str] = {}
    term = None
    for line in block.group(1).splitlines():
        if not line.strip() or line.startswith(":"):  # blank lines and options such as :sorted:
            continue
        if line[0].isspace():
            assert term is not None, f"a definition line comes before any term: {line!r}"
            entries[term] += " " + line.strip()
        else:
            term = line.strip()
            assert term not in entries, f"{term!r} is defined twice"
            entries[term] = ""
    return entries


def term_target(role_text: str) -> str:
    """The term a `{term}` role links to: the name inside `<...>`, or else the text itself."""
    match = re.search(r"<([^<>]+)>\s*$", role_text)
    return (match.group(1) if match else role_text).strip()


def normalized(term: str) -> str:
    """Sphinx matches terms case-insensitively and treats runs of spaces as one."""
    return " ".join(term.split()).lower()


def chapter_markdown() -> dict[str, str]:
    """The markdown cells of every chapter, joined, by notebook name."""
    chapters = {}
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        chapters[path.name] = "\n\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    return chapters


ENTRIES = glossary_entries()


def test_the_glossary_has_terms() -> None:
    assert len(ENTRIES) >= 50


@pytest.mark.parametrize("term", sorted(ENTRIES))
def test_every_term_gives_its_chinese_term_and_its_chapter(term: str) -> None:
    definition = ENTRIES[term]
    assert CJK.search(definition), f"{term!r}: no Chinese term in its definition"
    chapters = [
        target
        for target in DOC_ROLE.findall(definition)
        if target.startswith(("chapters/", "/chapters/"))
    ]
    assert chapters, f"{term!r}: no {{doc}} link to the chapter that teaches it"
    for target in chapters:
        assert (ROOT / f"{target.lstrip('/')}.ipynb").is_file(), (
            f"{term!r} links {target}, which does not exist"
        )


def test_every_term_link_names_a_glossary_term() -> None:
    known = {normalized(term) for term in ENTRIES}
    pages = {**chapter_markdown(), "intro.md": (ROOT / "intro.md").read_text(encoding="utf-8")}
    unknown = [
        f"{page}: {{term}}`{text}`"
        for page, markdown in pages.items()
        for text in TERM_ROLE.findall(markdown)
        if normalized(term_target(text)) not in known
    ]
    assert not unknown, "links to terms glossary.md does not define:\n" + "\n".join(unknown)


def test_every_glossary_term_is_linked_from_a_chapter() -> None:
    linked = {
        normalized(term_target(text))
        for md in chapter_markdown().values()
        for text in TERM_ROLE.findall(md)
    }
    unlinked = [term for term in ENTRIES if normalized(term) not in linked]
    assert not unlinked, (
        f"{len(unlinked)} glossary terms no chapter links with {{term}}: {unlinked}"
    )


def notation_symbols() -> set[str]:
    """The symbols in the first column of notation.md's tables, in plain form: $d_{\\text{model}}$
    -> d_model."""
    symbols = set()
    for line in NOTATION.read_text(encoding="utf-8").splitlines():
        if line.startswith("|"):
            first_cell = line.split("|")[1]
            for maths in re.findall(r"\$([^$]+)\$", first_cell):
                symbols.add(re.sub(r"\\(?:text|mathrm)|[{}\\\s]", "", maths))
    return symbols


@pytest.mark.parametrize("symbol", ["B", "S", "T", "d_model", "h", "d_k", "d_ff"])
def test_notation_lists_the_main_symbols(symbol: str) -> None:
    assert symbol in notation_symbols()


def notation_row(symbol_or_name: str) -> str:
    """The row of notation.md whose first cell is ``symbol_or_name``."""
    for line in NOTATION.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and line.split("|")[1].strip() == symbol_or_name:
            return line
    raise AssertionError(f"notation.md has no row {symbol_or_name!r}")


def test_notation_gives_each_profiles_length_penalty() -> None:
    from transformer_tasks.translation.profiles import TRANSLATION_PROFILES

    row = notation_row(r"$\alpha$")
    stated = {
        name: float(value)
        for value, name in re.findall(r"(\d+(?:\.\d+)?) in the `(\w+)` profile", row)
    }
    assert set(stated) == {"cpu", "gpu"}, f"notation.md's alpha row names {sorted(stated)}"
    for name, value in stated.items():
        assert TRANSLATION_PROFILES[name].decode.length_penalty == value, (
            f"notation.md says alpha is {value} in the {name!r} profile, the profile says "
            f"{TRANSLATION_PROFILES[name].decode.length_penalty}"
        )


def test_notation_says_which_function_returns_the_scores() -> None:
    import inspect

    import torch

    from transformer_lib import decoding

    row = notation_row("decoded output, its scores")
    assert "`sequence_log_prob` scores them" in row
    # The decoders return the ids alone; the scores come from sequence_log_prob.
    for decoder in (decoding.greedy_decode, decoding.beam_search):
        assert inspect.signature(decoder).return_annotation in (torch.Tensor, "Tensor")


def test_the_attention_map_entry_says_what_a_fully_masked_row_holds() -> None:
    import torch

    from transformer_lib import scaled_dot_product_attention

    assert "all masked, which the library makes all zero" in ENTRIES["Attention map"]
    q = torch.randn(1, 1, 2, 4)
    _, weights = scaled_dot_product_attention(
        q, q, q, torch.tensor([[True, False], [False, False]])
    )
    assert weights[0, 0, 0].sum() == 1 and not weights[0, 0, 1].any()


def test_the_fused_kernel_entry_names_the_backend_chapter_0_selects() -> None:
    entry = ENTRIES["Fused kernel"]
    assert "its math backend, which chapter 0 selects" in entry and "builds it" in entry
    assert "sdpa_kernel([SDPBackend.MATH])" in chapter_markdown_and_code("00_introduction.ipynb")


def chapter_markdown_and_code(name: str) -> str:
    cells = json.loads((ROOT / "chapters" / name).read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells)
