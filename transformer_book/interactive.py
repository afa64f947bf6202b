"""Interactive figures that work in Jupyter, on Colab and in the static book (a leaf module).

Plotly figures are emitted as self-contained HTML: a ``<div>`` plus the script that draws it,
loading plotly.js from its CDN. Sliders and buttons run in the browser, so they stay interactive
on the static site, where no Python kernel is available. (The book's browser test serves the
CDN address from the copy of plotly.js inside the ``plotly`` package, so it runs offline.)
"""

from __future__ import annotations

from typing import Any


def plotly_html(fig: Any, div_id: str) -> str:
    """Return the HTML fragment that draws ``fig`` (a ``plotly.graph_objects.Figure``).

    ``div_id`` names the figure's ``<div>``; give each figure of a page its own.
    """
    return fig.to_html(full_html=False, include_plotlyjs="cdn", div_id=div_id)


def show_plotly(fig: Any, div_id: str) -> None:
    """Display ``fig`` as HTML in a notebook (rendered unchanged by Jupyter Book)."""
    from IPython.display import HTML, display

    display(HTML(plotly_html(fig, div_id)))
