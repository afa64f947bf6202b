// Chapter 11's "Translate in your browser" box: the trained model (trained_model.js loads it) runs in
// the reader's browser with ONNX Runtime Web (WebAssembly); no server, no kernel. It fills every
// <div class="translator"> of the page.
// Each sentence is decoded twice, by greedy search and by beam search, following
// transformer_book.browser_model.onnx_greedy and onnx_beam step for step, so that the browser test
// can ask for exactly the tokens Python gets from the same files.
(function () {
  "use strict";
  const T = window.TrainedModel, el = T.el;

  // The cross-attention map of the greedy translation: a row per generated token, a column per
  // source token; the last decoder layer, the mean of the heads.
  async function crossAttention(m, ids, out) {
    const maps = await T.attention(m, ids, out.slice(0, -1));  // the decoder's inputs: <bos> and all but the last
    const layers = maps.cross.dims[0];
    const weights = T.slice(maps.cross, layers - 1, -1);
    const rows = out.slice(1).map((i) => T.label(m, i));  // row t: the token written at step t
    return { rows, cols: maps.source, weights, scale: Math.max(...weights) };  // the darkest: the largest weight
  }

  // Draws the map in the theme the page shows, as wide as the box allows (again when the theme changes).
  function drawAttention(figure, { rows, cols, weights, scale }) {
    const svg = T.drawMap({
      rows, cols, weights, scale, tip: (i, j, w) => `${rows[i]} → ${cols[j]}: ${w.toFixed(2)}`,
      label: "cross-attention of the last decoder layer, mean of the heads", width: figure.clientWidth,
    });
    const caption = "Cross-attention (交叉注意力) of the last decoder layer, mean of the heads: each row is an " +
      `English token as it is written, each column a German one; ${T.shading(scale)}. ` +
      "A long sentence's map scrolls sideways.";
    figure.replaceChildren(svg, el("figcaption", {}, caption));
  }

  function build(box) {
    box.replaceChildren();
    const status = el("p", { class: "trained-status", role: "status" }, "Loading the model…");
    const bar = el("progress", { max: "1", value: "0", "aria-label": "loading the model" });
    const form = el("form", { class: "trained-form" });
    const input = el("input", {
      type: "text", lang: "de", "aria-label": "a German sentence", placeholder: "Ein Mann fährt Fahrrad.",
    });
    const button = el("button", { type: "submit", disabled: "" }, "Translate");
    form.append(input, button);
    const notes = el("ul", { class: "trained-notes", "aria-live": "polite" });
    const examples = el("div", { class: "translator-examples" });
    const output = el("p", { class: "translator-output", "aria-live": "polite" });
    const text = el("span", { class: "translator-text", lang: "en" });
    output.append(el("span", { class: "translator-label" }, "greedy search: "), text);
    const beam = el("p", { class: "translator-beam", lang: "en", "aria-live": "polite" });
    const timing = el("p", { class: "translator-timing" });
    const figure = el("figure", { class: "trained-figure" });
    box.append(status, bar, form, notes, examples, output, beam, timing, figure);
    return { status, bar, form, input, button, notes, examples, text, beam, timing, figure };
  }

  // An empty box: no translation, no timing, no map (and no ids for the browser test to read).
  function clear(ui, box) {
    ui.text.textContent = "";
    ui.beam.textContent = "";
    ui.timing.textContent = "";
    ui.figure.replaceChildren();
    ui.map = null;
    for (const key of ["tokens", "ms", "beamTokens", "beamMs"]) delete box.dataset[key];
  }

  function showNotes(ui, messages) {
    ui.notes.replaceChildren(...messages.map((message) => el("li", {}, message)));
  }

  // Greedy search (its text, time and cross-attention map), then beam search; the ids go into the
  // box's data attributes, where the browser test reads them.
  async function translateBothWays(m, ui, box, ids) {
    const t0 = performance.now();
    const greedy = await T.greedy(m, ids);
    const ms = performance.now() - t0;
    ui.text.textContent = T.detokenize(m, greedy.out);
    ui.beam.textContent = `beam search (${m.config.beam_size} beams): …`;
    ui.timing.textContent = "";
    ui.map = await crossAttention(m, ids, greedy.out);
    drawAttention(ui.figure, ui.map);
    const t1 = performance.now();
    const beam = (await T.beam(m, greedy.memory, greedy.src, greedy.maxLen)).best;
    const beamMs = performance.now() - t1;
    ui.beam.textContent = `beam search (${m.config.beam_size} beams): ${T.detokenize(m, beam)}`;
    ui.timing.textContent = `greedy: ${greedy.out.length - 1} tokens in ${ms.toFixed(0)} ms; ` +
      `beam search: ${beamMs.toFixed(0)} ms (in this browser, one thread)`;
    Object.assign(box.dataset, { tokens: JSON.stringify(greedy.out), ms: ms.toFixed(1),
                                 beamTokens: JSON.stringify(beam), beamMs: beamMs.toFixed(1) });
  }

  async function start(box) {
    const ui = build(box);
    const fail = (message) => {
      box.dataset.state = "error";
      ui.bar.remove();
      ui.form.hidden = true;  // nothing to translate with
      ui.status.textContent = message;
      ui.status.classList.add("trained-error");
    };
    let m;
    try {
      m = await T.load((received, total) => {
        if (box.dataset.state === "error") return;  // another file failed; the rest still arrive
        ui.bar.value = Math.min(1, received / total);
        const mb = (bytes) => (bytes / 1e6).toFixed(1);
        ui.status.textContent = `Loading the model and ONNX Runtime: ${mb(received)} of ${mb(total)} MB…`;
      });
    } catch (error) {
      fail(error.message);
      return;
    }
    ui.bar.remove();
    ui.status.textContent = "The model is loaded: type a German sentence, or click an example.";
    for (const sentence of m.config.examples || []) {
      const chip = el("button", { type: "button", lang: "de" }, sentence);
      chip.addEventListener("click", () => { ui.input.value = sentence; ui.form.requestSubmit(); });
      ui.examples.append(chip);
    }
    ui.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (box.dataset.state === "busy") return;
      const prepared = T.prepare(m, ui.input.value);
      showNotes(ui, T.hintMessages(m, prepared));
      box.dataset.hints = JSON.stringify(prepared.hints);
      if (!prepared.text) {  // nothing to translate: the last translation, its timing and its map go
        clear(ui, box);
        box.dataset.state = "done";
        return;
      }
      const buttons = box.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      box.dataset.state = "busy";
      ui.status.textContent = "Translating…";
      await new Promise(requestAnimationFrame);  // show it: the model then holds the page until it is done
      try {
        await translateBothWays(m, ui, box, T.sourceIds(m, prepared.ids));
        ui.status.textContent = "Type a German sentence, or click an example.";
        box.dataset.state = "done";
      } catch (error) {
        ui.status.textContent = `The translation stopped: ${error.message}`;
        box.dataset.state = "error";
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
      }
    });
    const redraw = () => { if (ui.map) drawAttention(ui.figure, ui.map); };
    T.onThemeChange(redraw);
    let width = ui.figure.clientWidth;  // a rotated phone or a resized window: the map fills its new room
    window.addEventListener("resize", () => {
      if (ui.figure.clientWidth !== width) { width = ui.figure.clientWidth; redraw(); }
    });
    ui.button.disabled = false;
    box.dataset.state = "ready";
  }

  function startAll() {
    document.querySelectorAll("div.translator").forEach((box) => start(box).catch((error) => {
      box.dataset.state = "error";
      box.textContent = `The translator stopped: ${error.message}`;
    }));
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startAll);
  else startAll();
})();
