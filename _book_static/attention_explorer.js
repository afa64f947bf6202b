// The live attention box of chapters 3-5 ({attention-explorer}): the reader types a German sentence
// (and, if they like, an English one), and sees the trained model's attention, for each layer and
// head, in the page. The model is chapter 11's, run by ONNX Runtime Web (trained_model.js loads it,
// the same files as transformer_book.trained in Python, which computes the same maps).
// It fills every <div class="attention-explorer"> of the page; data-view (encoder, decoder or
// cross) is the map it opens on. The model loads when the first box comes near the screen.
(function () {
  "use strict";
  const T = window.TrainedModel, el = T.el;
  // The running example (transformer_book.example's GERMAN and ENGLISH): the box opens on it, with
  // the book's English for the decoder to read, as chapters 3-5 give it to the model.
  const RUNNING_EXAMPLE = "Zwei Hunde spielen im Gras.";
  const RUNNING_ENGLISH = "Two dogs play in the grass.";
  // Each map, and the running example's relation it shows: [query token, key token]. The box opens
  // on the layer and head where the query gives the key the most weight (in the encoder, spielen
  // reads Hunde, its subject; in the decoder, play reads dogs; in cross-attention the row of dogs,
  // which writes play, reads spielen), and says, for the head shown, how much that one gives.
  const VIEWS = {
    encoder: {
      name: "Encoder self-attention", term: "自注意力", relation: ["spielen", "Hunde"],
      rows: "each row is a German token as a query, each column the German token it looks at",
    },
    decoder: {
      name: "Decoder masked self-attention", term: "掩码自注意力", relation: ["play", "dogs"],
      rows: "each row is an English input token as a query (predicting the next one), each column an English " +
        "token it may look at; grey cells are the future, hidden by the causal mask",
    },
    cross: {
      name: "Cross-attention", term: "交叉注意力", relation: ["dogs", "spielen"],
      rows: "each row is an English input token as a query (predicting the next one), each column a German " +
        "token of the encoder's output",
    },
  };
  // Layers and heads are counted from 1, as chapters 3-5 print them ("layer 2, head 3").
  const named = (layer, head) => `layer ${layer + 1}, ${head < 0 ? "mean of the heads" : `head ${head + 1}`}`;

  function select(label, name, options) {
    const node = el("select", { name, "aria-label": label });
    options.forEach(([value, text]) => node.append(el("option", { value }, text)));
    const wrap = el("label", { class: "explorer-choice" }, `${label} `);
    wrap.append(node);
    return [wrap, node];
  }

  function build(box) {
    box.replaceChildren();
    const status = el("p", { class: "trained-status", role: "status" },
      "The trained model loads when this box comes into view (about 22 MB, once).");
    const bar = el("progress", { max: "1", value: "0", "aria-label": "loading the model" });
    const form = el("form", { class: "trained-form explorer-form" });
    const german = el("input", { type: "text", lang: "de", name: "german", "aria-label": "a German sentence",
                                 value: RUNNING_EXAMPLE });
    const english = el("input", { type: "text", lang: "en", name: "english", "aria-label": "its English translation",
                                  placeholder: "English: the model's own translation", value: RUNNING_ENGLISH });
    english.dataset.own = RUNNING_ENGLISH;  // not typed by the reader: a new German sentence clears it
    const button = el("button", { type: "submit", disabled: "" }, "Show attention");
    form.append(german, english, button);
    const notes = el("ul", { class: "trained-notes", "aria-live": "polite" });
    const controls = el("div", { class: "explorer-controls" });
    const [viewWrap, view] = select("map:", "view", Object.entries(VIEWS).map(([v, d]) => [v, d.name]));
    const [layerWrap, layer] = select("layer:", "layer", []);
    const [headWrap, head] = select("head:", "head", []);
    controls.append(viewWrap, layerWrap, headWrap);
    controls.hidden = true;
    const focus = el("p", { class: "explorer-focus", "aria-live": "polite" });
    const figure = el("figure", { class: "trained-figure" });
    box.append(status, bar, form, notes, controls, focus, figure);
    return { status, bar, form, german, english, button, notes, controls, view, layer, head, focus, figure };
  }

  // The tokens of a map's rows and columns.
  function axes(maps, kind) {
    const rows = kind === "encoder" ? maps.source : maps.target;
    return { rows, cols: kind === "cross" ? maps.source : rows };
  }

  // The running example's relation in a map, wherever the sentence pair has both its tokens (null
  // otherwise): its row and column, and the layer and head that give it the most weight.
  function relation(maps, kind) {
    const [query, key] = VIEWS[kind].relation;
    const { rows, cols } = axes(maps, kind);
    const i = rows.indexOf(query), j = cols.indexOf(key);
    if (i < 0 || j < 0) return null;
    const [layers, heads, n, m] = maps[kind].dims;
    let best = { layer: 0, head: 0, weight: -1 };
    for (let layer = 0; layer < layers; layer++) {
      for (let head = 0; head < heads; head++) {
        const weight = maps[kind].data[((layer * heads + head) * n + i) * m + j];
        if (weight > best.weight) best = { layer, head, weight };
      }
    }
    // a decoder row predicts the next token: say which it writes
    const reader = kind === "encoder" || i + 1 >= rows.length ? query : `the row of ${query}, which writes ${rows[i + 1]},`;
    return { reader, key, i, j, best };
  }

  // The sentence above the map: which layer and head it shows and, for the running example's
  // relation, its weight here and where it is largest.
  function focusText(kind, layer, head, weights, cols, found) {
    const shown = `${VIEWS[kind].name}, ${named(layer, head)}`;
    if (!found) return `${shown}.`;
    const { reader, key, i, j, best } = found;
    const here = weights[i * cols.length + j].toFixed(2);
    const top = best.layer === layer && best.head === head
      ? "no other head gives it more"
      : `${named(best.layer, best.head)} gives it the most, ${best.weight.toFixed(2)}`;
    return `${shown}: here ${reader} gives ${key} ${here} of its weight; ${top}.`;
  }

  // The map the controls choose, drawn from the maps computed for the sentence pair, in the theme
  // the page shows and as wide as the box allows.
  function draw(ui, maps) {
    const kind = ui.view.value, layer = Number(ui.layer.value), head = Number(ui.head.value);
    const { rows, cols } = axes(maps, kind);
    const weights = T.slice(maps[kind], layer, head);
    const view = VIEWS[kind], which = named(layer, head);
    const svg = T.drawMap({
      rows, cols, weights, scale: 1, masked: kind === "decoder" ? (i, j) => j > i : null,
      tip: (i, j, w) => `${rows[i]} → ${cols[j]}: ${w.toFixed(3)}`, label: `${view.name}, ${which}`,
      width: ui.figure.clientWidth,
    });
    const caption = `${view.name} (${view.term}), ${which}: ${view.rows}; ${T.shading(1)}. Each row's ` +
      "weights sum to 1; hover over a cell for its weight. A long sentence's map scrolls sideways.";
    ui.focus.textContent = focusText(kind, layer, head, weights, cols, relation(maps, kind));
    ui.figure.replaceChildren(svg, el("figcaption", {}, caption));
    Object.assign(ui.figure.dataset, { view: kind, layer: String(layer), head: String(head) });
  }

  // The layer and head lists for the model's size; the first time, the layer and head where the
  // running example's relation is largest in the map the box opens on.
  function fillChoices(ui, maps) {
    const [layers, heads] = maps.encoder.dims;
    if (ui.layer.options.length !== layers) {
      ui.layer.replaceChildren(...[...Array(layers).keys()].map((l) => el("option", { value: l }, `${l + 1}`)));
    }
    if (ui.head.options.length !== heads + 1) {
      ui.head.replaceChildren(el("option", { value: -1 }, "mean"),
        ...[...Array(heads).keys()].map((h) => el("option", { value: h }, `${h + 1}`)));
    }
    if (!ui.opened) {
      const found = relation(maps, ui.view.value);
      ui.layer.value = String(found ? found.best.layer : layers - 1);  // else the last layer, the heads' mean
      ui.head.value = String(found ? found.best.head : -1);
      ui.opened = true;
    }
    ui.controls.hidden = false;
  }

  // No sentence: no map, no controls.
  function clear(ui, box) {
    box.attentionMaps = null;
    ui.controls.hidden = true;
    ui.focus.textContent = "";
    ui.figure.replaceChildren();
  }

  async function show(m, ui, box) {
    const prepared = T.prepare(m, ui.german.value);
    ui.notes.replaceChildren(...T.hintMessages(m, prepared).map((message) => el("li", {}, message)));
    box.dataset.hints = JSON.stringify(prepared.hints);
    if (!prepared.text) {
      clear(ui, box);
      return;
    }
    const ids = T.sourceIds(m, prepared.ids);
    let target;
    const typed = ui.english.value.trim();
    if (typed) {  // the reader's English, as transformer_book.trained's attention(german, english)
      const english = m.tokenizer.encode(typed, { add_special_tokens: false }).ids;
      target = [m.config.bos_id, ...english].slice(0, m.config.max_len);
    } else {  // the model's own greedy translation: the decoder reads <bos> and its tokens
      const greedy = await T.greedy(m, ids);
      target = greedy.out.filter((i) => i !== m.config.eos_id);
      ui.english.value = T.detokenize(m, greedy.out);
      ui.english.dataset.own = ui.english.value;
    }
    const maps = await T.attention(m, ids, target);
    box.attentionMaps = maps;  // where the browser test reads them
    fillChoices(ui, maps);
    draw(ui, maps);
  }

  async function start(box) {
    const ui = build(box);
    if (VIEWS[box.dataset.view]) ui.view.value = box.dataset.view;
    const fail = (message) => {
      box.dataset.state = "error";
      ui.bar.remove();
      ui.form.hidden = true;
      ui.status.textContent = message;
      ui.status.classList.add("trained-error");
    };
    await new Promise((near) => {  // load when the box comes near the screen
      if (!("IntersectionObserver" in window)) { near(); return; }
      const observer = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) { observer.disconnect(); near(); }
      }, { rootMargin: "300px" });
      observer.observe(box);
    });
    box.dataset.state = "loading";
    let m;
    try {
      m = await T.load((received, total) => {
        if (box.dataset.state === "error") return;
        ui.bar.value = Math.min(1, received / total);
        const mb = (bytes) => (bytes / 1e6).toFixed(1);
        ui.status.textContent = `Loading the trained model and ONNX Runtime: ${mb(received)} of ${mb(total)} MB…`;
      });
    } catch (error) {
      fail(error.message);
      return;
    }
    ui.bar.remove();
    const ready = "Type a German sentence (and, if you like, an English translation for the decoder to read), " +
      "then choose a map, a layer and a head.";
    ui.german.addEventListener("input", () => {  // a new sentence: the model's own translation again
      if (ui.english.value === ui.english.dataset.own) ui.english.value = "";
    });
    const redraw = () => { if (box.attentionMaps) draw(ui, box.attentionMaps); };
    for (const control of [ui.view, ui.layer, ui.head]) control.addEventListener("change", redraw);
    T.onThemeChange(redraw);
    let width = ui.figure.clientWidth;  // a rotated phone or a resized window: the map fills its new room
    window.addEventListener("resize", () => {
      if (ui.figure.clientWidth !== width) { width = ui.figure.clientWidth; redraw(); }
    });
    ui.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (box.dataset.state === "busy") return;
      box.dataset.state = "busy";
      ui.button.disabled = true;
      ui.status.textContent = "Computing the attention…";
      await new Promise(requestAnimationFrame);
      try {
        await show(m, ui, box);
        ui.status.textContent = ready;
        box.dataset.state = "done";
      } catch (error) {
        ui.status.textContent = `The model stopped: ${error.message}`;
        box.dataset.state = "error";
      } finally {
        ui.button.disabled = false;
      }
    });
    ui.button.disabled = false;
    ui.form.requestSubmit();  // the running example, at once
  }

  function startAll() {
    document.querySelectorAll("div.attention-explorer").forEach((box) => start(box).catch((error) => {
      box.dataset.state = "error";
      box.textContent = `The attention box stopped: ${error.message}`;
    }));
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startAll);
  else startAll();
})();
