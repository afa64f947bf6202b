// Loaded on pages with ipywidgets, between RequireJS and the widget manager (nb_ipywidgets_js in
// _config.yml); it fixes two things the browser test (tests/test_browser.py) caught.
//
// 1. The widget manager (@jupyter-widgets/html-manager) looks for its icon fonts next to its own
//    address as RequireJS reports it. Without a path for it, that address is relative to the page,
//    and every font request fails with a 404. Point it at the folder of the manager's script, which
//    this script's data-html-manager attribute names: the site's own copy (_static/vendor/...,
//    relative to this file) or, where the build had none, the CDN (_ext/local_scripts.py).
{
  const script = document.currentScript;
  const folder = new URL(script.dataset.htmlManager, script.src).href.replace(/\/$/, "");
  require.config({paths: {"@jupyter-widgets/html-manager/dist": folder}});
}

// 2. The widget manager typesets widget labels with MathJax 2's API (MathJax.Hub.Queue), but the
//    book loads MathJax 3, so every labelled widget threw "Cannot read properties of undefined
//    (reading 'Queue')". Give MathJax 3 that one call. This listener runs after the deferred
//    MathJax script has loaded and before the manager renders the widgets (it registered later).
document.addEventListener("DOMContentLoaded", () => {
  const mathjax = window.MathJax;
  if (!mathjax || mathjax.Hub) {
    return;
  }
  mathjax.Hub = {
    Queue: (...commands) => {
      for (const command of commands) {
        const element = Array.isArray(command) ? command[2] : null;
        if (element && mathjax.startup && mathjax.typesetPromise) {
          mathjax.startup.promise
            .then(() => mathjax.typesetPromise([element]))
            .catch((error) => console.warn("MathJax could not typeset a widget label:", error));
        }
      }
    },
  };
});
