"""Interactive figures that work in Jupyter, on Colab and in the static book (a leaf module).

Plotly figures are emitted as self-contained HTML: a ``<div>`` plus the script that draws it,
loading plotly.js from its CDN. Sliders and buttons run in the browser, so they stay interactive
on the static site, where no Python kernel is available. (The book's build points that address at
the site's own copy of the same plotly.js, ``_ext/local_scripts.py``, so the site reads offline.)
"""

from __future__ import annotations

import copy
import textwrap
from typing import Any

# Plotly writes a title in 17 px type, about 0.52 of that per character on average (measured in
# Chromium: 7.7 px); the title starts 5% of the figure's width from its left edge.
TITLE_CHAR_PX = 0.52 * 17
DEFAULT_WIDTH = 700  # Plotly's width of a figure that sets none


def _wrapped(text: Any, chars: int) -> Any:
    if not isinstance(text, str) or "<br>" in text or len(text) <= chars:
        return text
    return "<br>".join(textwrap.wrap(text, chars))


def fit_titles(fig: Any) -> Any:
    """A copy of ``fig`` whose title, and each title its slider shows, breaks into lines that fit
    it.

    Plotly never wraps a title: one longer than the figure is cut at the figure's right edge.
    """
    fig = copy.deepcopy(fig)
    width = 0.9 * (fig.layout.width or DEFAULT_WIDTH)
    chars = max(20, int(width / TITLE_CHAR_PX))
    fig.layout.title.text = _wrapped(fig.layout.title.text, chars)
    for slider in fig.layout.sliders:
        for step in slider.steps:
            args = list(step.args or [])
            if len(args) > 1 and "title.text" in (args[1] or {}):
                args[1] = {**args[1], "title.text": _wrapped(args[1]["title.text"], chars)}
                step.args = args
    return fig


def plotly_html(fig: Any, div_id: str) -> str:
    """Return the HTML fragment that draws ``fig`` (a ``plotly.graph_objects.Figure``).

    ``div_id`` names the figure's ``<div>``; give each figure of a page its own. Titles too long
    for the figure are broken into lines (:func:`fit_titles`).
    """
    return fit_titles(fig).to_html(full_html=False, include_plotlyjs="cdn", div_id=div_id)


def show_plotly(fig: Any, div_id: str) -> None:
    """Display ``fig`` as HTML in a notebook (rendered unchanged by Jupyter Book)."""
    from IPython.display import HTML, display

    display(HTML(plotly_html(fig, div_id)))
