// The book's Plotly figures in the site's dark theme (loaded on every page: _config.yml's
// html_js_files). The stored figures (transformer_book.interactive) carry Plotly's default
// template: a white paper, a pale blue plotting area, dark texts. On a dark page that is a white
// card. So when the theme's switch sets html[data-theme="dark"], each figure is drawn again with a
// dark paper and plotting area, light texts and grid, buttons that read on them, and its black
// lines light; back in the light theme it gets its own colours back. The colour scales stay as they
// are (the book's, viridis and turbo, run from dark to light and read on both papers).
// tests/test_browser.py measures the texts' contrast in both themes; tests/test_browser_dark.py
// that each paper is dark in the dark theme.
(function () {
  "use strict";
  // The dark theme's colours (pydata-sphinx-theme's --pst-color-on-background, surface, text-base
  // and border): the paper is the page's raised surface, as a code cell's box is.
  const DARK = {
    paper: "#222832", plot: "#29313d", text: "#ced6dd", grid: "#3a4556", line: "#6b7a90",
    button: "#aab4c0", buttonText: "#14181e", rail: "#48566b",
  };

  // The layout attributes the dark theme sets, as Plotly.relayout takes them.
  function darkUpdate(div) {
    const update = { paper_bgcolor: DARK.paper, plot_bgcolor: DARK.plot, "font.color": DARK.text };
    for (const axis of Object.keys(div._fullLayout).filter((key) => /^[xy]axis\d*$/.test(key))) {
      update[`${axis}.gridcolor`] = DARK.grid;
      update[`${axis}.zerolinecolor`] = DARK.line;
      update[`${axis}.linecolor`] = DARK.line;
    }
    // a button's face stays light (Plotly paints the chosen one near-white whatever the layout
    // says), so its text turns dark
    (div.layout.updatemenus || []).forEach((_, i) => {
      update[`updatemenus[${i}].bgcolor`] = DARK.button;
      update[`updatemenus[${i}].bordercolor`] = DARK.line;
      update[`updatemenus[${i}].font.color`] = DARK.buttonText;
    });
    (div.layout.sliders || []).forEach((_, i) => {
      update[`sliders[${i}].bgcolor`] = DARK.rail;
      update[`sliders[${i}].bordercolor`] = DARK.line;
      update[`sliders[${i}].tickcolor`] = DARK.text;
    });
    return update;
  }

  // layout["updatemenus[0].font.color"] and the like; null where the figure sets none (relayout
  // then drops the attribute, and the template's value applies again).
  function own(layout, path) {
    let node = layout;
    for (const part of path.replace(/\[(\d+)\]/g, ".$1").split(".")) {
      if (node === undefined || node === null) return null;
      node = node[part];
    }
    return node === undefined ? null : node;
  }

  // Lines drawn black (a reference line, a target curve) would vanish on the dark paper: they take
  // the light text colour there, and their own colour back in the light theme.
  const BLACK = /^\s*(black|#000|#000000|rgb\(\s*0\s*,\s*0\s*,\s*0\s*\))\s*$/i;
  const blackLines = (div) => div.data.map((trace, i) => [trace, i])
    .filter(([trace]) => trace.line && typeof trace.line.color === "string" && BLACK.test(trace.line.color))
    .map(([, i]) => i);

  function paint(div, dark) {
    if (!window.Plotly || !div._fullLayout || div.dataset.bookTheme === (dark ? "dark" : "light")) return;
    div.dataset.bookTheme = dark ? "dark" : "light";  // first: the relayout below draws it again
    if (dark) {
      const update = darkUpdate(div);
      div.bookLight = Object.fromEntries(Object.keys(update).map((key) => [key, own(div.layout, key)]));
      div.bookBlack = blackLines(div);
      window.Plotly.relayout(div, update);
      if (div.bookBlack.length) window.Plotly.restyle(div, { "line.color": DARK.text }, div.bookBlack);
    } else if (div.bookLight) {
      window.Plotly.relayout(div, div.bookLight);
      if (div.bookBlack.length) window.Plotly.restyle(div, { "line.color": "black" }, div.bookBlack);
    }
  }

  const isDark = () => document.documentElement.dataset.theme === "dark";
  const paintAll = () => {
    document.querySelectorAll(".plotly-graph-div.js-plotly-plot").forEach((div) => paint(div, isDark()));
  };

  // The theme's switch (and the theme's own script, which sets the reader's saved mode at load).
  new MutationObserver(paintAll).observe(document.documentElement, {
    attributes: true, attributeFilter: ["data-theme"],
  });
  // The figures are drawn by the page's inline scripts; a figure drawn later (after the page
  // loaded) is painted when it is first drawn.
  function watch() {
    paintAll();
    document.querySelectorAll(".plotly-graph-div.js-plotly-plot").forEach((div) => {
      if (div.on && !div.bookWatched) {
        div.bookWatched = true;
        div.on("plotly_afterplot", () => paint(div, isDark()));
      }
    });
  }
  if (document.readyState === "complete") watch();
  else window.addEventListener("load", watch);
})();
