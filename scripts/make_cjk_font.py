r"""Make the font subset that shows the book's Chinese terms on any machine.

    python scripts/make_cjk_font.py

Every chapter gives a new term its Chinese name (词嵌入, 位置编码, ...). On a machine without a CJK
font those would show as empty boxes, so the site serves the glyphs it needs itself: this script
collects every CJK character of the built site's pages (``_build/html``: run ``make book`` first)
and of the boxes' scripts (``_book_static/*.js``), and keeps only those glyphs of WenQuanYi Micro
Hei (Debian's ``fonts-wqy-microhei``, which ``scripts/setup_browser.sh`` installs; Apache License
2.0, ``_book_static/fonts/LICENSE-wqy-microhei.txt``) with fontTools' subsetter, in
``_book_static/fonts/cjk-subset.woff``. ``_book_static/fonts.css`` serves it with ``@font-face``
for the CJK characters only (``unicode-range``), after the theme's own fonts.
``tests/test_browser_cjk_font.py`` checks that the subset holds every CJK character the site shows
(a page that gains one fails there until this script runs again) and that a browser with no CJK
font of its own draws the terms with it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")  # font 0: WenQuanYi Micro Hei
OUT = ROOT / "_book_static" / "fonts" / "cjk-subset.woff"
# The CJK blocks: symbols and punctuation, ideographs (extension A, the unified block, the
# compatibility block) and the full-width forms. fonts.css's unicode-range names the same.
CJK = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def site_files(root: Path = ROOT) -> list[Path]:
    """What a reader is shown: the built site's pages and the boxes' scripts."""
    pages = sorted((root / "_build" / "html").rglob("*.html"))
    return pages + sorted((root / "_book_static").glob("*.js"))


def cjk_characters(files: Iterable[Path]) -> str:
    """Every CJK character of ``files``, once each, in code-point order."""
    found: set[str] = set()
    for file in files:
        found.update(CJK.findall(file.read_text(encoding="utf-8", errors="ignore")))
    return "".join(sorted(found))


def make_subset(characters: str, source: Path = SOURCE, out: Path = OUT) -> int:
    """Write the glyphs of ``characters`` from ``source`` to ``out`` (WOFF); return its size."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(source, fontNumber=0, recalcTimestamp=False)  # the same bytes for the same input
    options = subset.Options()
    options.flavor = "woff"  # zlib, which fontTools has without extra packages (WOFF2 needs brotli)
    options.hinting = False  # screens of today smooth the outlines themselves
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]  # the copyright and licence entries stay
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=characters)
    subsetter.subset(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(out), options)
    return out.stat().st_size


def main() -> None:
    """Collect the characters, write the subset, and say what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="the font to take glyphs from")
    parser.add_argument("--out", type=Path, default=OUT, help="the WOFF file to write")
    args = parser.parse_args()
    files = site_files()
    if not any(f.suffix == ".html" for f in files):
        parser.error("no built site in _build/html: run `make book` first")
    characters = cjk_characters(files)
    size = make_subset(characters, args.source, args.out)
    print(f"{args.out.relative_to(ROOT)}: {len(characters)} characters, {size:,} bytes")
    print(characters)


if __name__ == "__main__":
    main()
