// Chapter 11's "Translate in your browser" box: a model trained with the chapter's recipe, exported
// to ONNX, runs in the reader's browser with ONNX Runtime Web (WebAssembly); no server, no kernel.
//
// A classic script (not a module), so that it runs even where modules cannot load (a page opened
// from file://) and can say so in the box. It fills every <div class="translator"> of the page.
// Files: translator/ holds the model (encoder.onnx, decoder.onnx, the weights both share in
// weights.bin, tokenizer.json, config.json); vendor/ holds the pinned npm packages
// onnxruntime-web and @huggingface/tokenizers, copied there by the book's build.
// Each sentence is decoded twice, by greedy search and by beam search, following
// transformer_book.browser_model.onnx_greedy and onnx_beam step for step, so that the browser test
// can ask for exactly the tokens Python gets from the same files.
(function () {
  "use strict";
  const here = new URL(".", document.currentScript.src);
  const MODEL = new URL("translator/", here);
  const VENDOR = new URL("vendor/", here);

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // fetch() that reports its size (Content-Length) and every chunk received, for the progress bar.
  async function download(url, onSize, onBytes) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url.pathname}: HTTP ${response.status}`);
    const size = Number(response.headers.get("Content-Length"));
    if (size > 0) onSize(size);
    const reader = response.body.getReader();
    const parts = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      onBytes(value.length);
    }
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let offset = 0;
    for (const p of parts) { out.set(p, offset); offset += p.length; }
    return out;
  }

  async function load(setProgress) {
    const files = {  // [folder, file, size in bytes until the server says]
      runtime: [VENDOR, "ort-wasm-simd-threaded.wasm", 14e6], encoder: [MODEL, "encoder.onnx", 1e5],
      decoder: [MODEL, "decoder.onnx", 2e5], weights: [MODEL, "weights.bin", 8e6],
      tokenizer: [MODEL, "tokenizer.json", 5e5], config: [MODEL, "config.json", 1e3],
    };
    const sizes = Object.fromEntries(Object.entries(files).map(([name, f]) => [name, f[2]]));
    let received = 0;
    // (a compressed response counts more bytes than its Content-Length: the total never falls below them)
    const report = () => setProgress(received, Math.max(received, Object.values(sizes).reduce((a, b) => a + b, 0)));
    const bytes = {};
    await Promise.all(Object.entries(files).map(async ([name, [folder, file]]) => {
      const onSize = (size) => { sizes[name] = size; report(); };
      bytes[name] = await download(new URL(file, folder), onSize, (n) => { received += n; report(); });
    }));
    const [ort, { Tokenizer }] = await Promise.all([
      import(new URL("ort.wasm.min.mjs", VENDOR).href), import(new URL("tokenizers.min.mjs", VENDOR).href),
    ]);
    ort.env.wasm.wasmPaths = VENDOR.href;
    ort.env.wasm.wasmBinary = bytes.runtime;
    ort.env.wasm.numThreads = 1;  // threads need a cross-origin-isolated page, which a static site is not
    const text = (b) => JSON.parse(new TextDecoder().decode(b));
    const options = { externalData: [{ path: "weights.bin", data: bytes.weights }] };
    const encoder = await ort.InferenceSession.create(bytes.encoder, options);
    const decoder = await ort.InferenceSession.create(bytes.decoder, options);
    const config = text(bytes.config);
    return { ort, encoder, decoder, config, tokenizer: new Tokenizer(text(bytes.tokenizer), {}) };
  }

  // Greedy decoding, the decoder run over the whole prefix at each step (no key/value cache).
  async function greedyDecode(m, sentence) {
    const c = m.config;
    let ids = m.tokenizer.encode(sentence, { add_special_tokens: false }).ids.slice(0, c.max_len - 1);
    if (ids.length === 0) ids = [c.unk_id];
    const longs = (xs) => BigInt64Array.from(xs, (x) => BigInt(x));
    const src = new m.ort.Tensor("int64", longs(ids), [1, ids.length]);
    const { memory } = await m.encoder.run({ src });
    const maxLen = Math.min(Math.floor(c.max_len_a * ids.length + c.max_len_b), c.max_len);
    const out = [c.bos_id];
    let attention = null;
    while (out.length < maxLen) {
      const tgt = new m.ort.Tensor("int64", longs(out), [1, out.length]);
      const result = await m.decoder.run({ tgt, memory, src });
      const vocab = result.logits.dims[2];
      const row = result.logits.data.subarray((out.length - 1) * vocab, out.length * vocab);
      let best = -1;  // the first largest logit, <pad> never chosen (numpy's argmax with <pad> at -inf)
      for (let v = 0; v < vocab; v++) if (v !== c.pad_id && (best < 0 || row[v] > row[best])) best = v;
      attention = result.attention;  // (1, out.length, S): the rows of the tokens chosen so far
      out.push(best);
      if (best === c.eos_id) break;
    }
    return { ids, out, attention, memory, src, maxLen, text: detokenize(m, out) };
  }

  // As BPETokenizer.decode: <bos>, <eos>, <pad> and <unk> dropped.
  function detokenize(m, out) {
    const c = m.config;
    const special = [c.pad_id, c.bos_id, c.eos_id, c.unk_id];
    return m.tokenizer.decode(out.filter((i) => !special.includes(i)));
  }

  // Beam search, following transformer_book.browser_model.onnx_beam (and so transformer_lib's beam_search):
  // every live beam is extended by every token; of the 2k best extensions, an <eos> among the first k
  // finishes a hypothesis (score: log P / ((5 + len) / 6) ** length_penalty), the first k others live on.
  async function beamSearch(m, ids, memory, src, maxLen) {
    const c = m.config, k = c.beam_size, [, S, d] = memory.dims;
    const penalty = (length) => ((5 + length) / 6) ** c.length_penalty;
    let beams = [[c.bos_id]], scores = [0];
    const finished = [];
    for (let step = 1; step < maxLen; step++) {
      const n = beams.length, t = beams[0].length;
      const repeat = (data, size) => {  // the one sentence's tensor, once per beam
        const out = new data.constructor(n * size);
        for (let b = 0; b < n; b++) out.set(data, b * size);
        return out;
      };
      const result = await m.decoder.run({
        tgt: new m.ort.Tensor("int64", BigInt64Array.from(beams.flat(), (x) => BigInt(x)), [n, t]),
        memory: new m.ort.Tensor("float32", repeat(memory.data, S * d), [n, S, d]),
        src: new m.ort.Tensor("int64", repeat(src.data, S), [n, S]),
      });
      const vocab = result.logits.dims[2], candidates = [];
      for (let b = 0; b < n; b++) {
        const row = result.logits.data.subarray(((b + 1) * t - 1) * vocab, (b + 1) * t * vocab);
        let top = -Infinity, sum = 0;  // log-softmax without <pad>, summed in order as onnx_beam does
        for (let v = 0; v < vocab; v++) if (v !== c.pad_id && row[v] > top) top = row[v];
        for (let v = 0; v < vocab; v++) if (v !== c.pad_id) sum += Math.exp(row[v] - top);
        const logSum = Math.log(sum);
        for (let v = 0; v < vocab; v++) {
          if (v !== c.pad_id) candidates.push([scores[b] + (row[v] - top - logSum), b * vocab + v]);
        }
      }
      candidates.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
      const live = [];
      candidates.slice(0, 2 * k).forEach(([score, index], rank) => {
        const beam = Math.floor(index / vocab), token = index % vocab;
        if (token === c.eos_id && rank < k && finished.length < k) {
          finished.push([score / penalty(step), [...beams[beam], token]]);
        } else if (token !== c.eos_id && live.length < k) {
          live.push([[...beams[beam], token], score]);
        }
      });
      if (finished.length >= k) return best(finished);
      beams = live.map(([b]) => b);
      scores = live.map(([, s]) => s);
    }
    beams.forEach((b, i) => finished.push([scores[i] / penalty(b.length - 1), b]));  // cut at maxLen
    return best(finished);
  }

  function best(hypotheses) {  // the first of the highest scores, as Python's max()
    return hypotheses.reduce((a, h) => (h[0] > a[0] ? h : a))[1];
  }

  // The cross-attention map: a row per generated token, a column per source token.
  function drawAttention(figure, m, result) {
    const src = result.ids.map((i) => m.tokenizer.id_to_token(i));
    const tgt = result.out.slice(1).map((i) => m.tokenizer.id_to_token(i));
    const [rows, cols] = [result.attention.dims[1], result.attention.dims[2]];
    const longest = (tokens) => Math.max(...tokens.map((t) => t.length));
    const cell = 22, left = 8 + 7 * longest(tgt), top = 8 + 7 * longest(src);  // room for the labels
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${left + cols * cell + 4} ${top + rows * cell + 4}`);
    svg.setAttribute("width", left + cols * cell + 4);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "cross-attention of the last decoder layer, mean of the heads");
    const add = (tag, attrs, text) => {
      const node = svg.appendChild(document.createElementNS(ns, tag));
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      return node;
    };
    src.forEach((t, j) => {
      const x = left + j * cell + cell / 2;
      add("text", { x, y: top - 4, transform: `rotate(-60 ${x} ${top - 4})`, class: "label" }, t);
    });
    tgt.slice(0, rows).forEach((t, i) => {
      add("text", { x: left - 4, y: top + (i + 0.7) * cell, "text-anchor": "end", class: "label" }, t);
    });
    const w = result.attention.data;
    const top1 = Math.max(...w);  // the darkest cell: the map's largest weight
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const weight = w[i * cols + j];
        const rect = add("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
                                   class: "cell", fill: `rgba(31, 119, 180, ${(weight / top1).toFixed(3)})` });
        const tip = rect.appendChild(document.createElementNS(ns, "title"));  // shown on hover
        tip.textContent = `${tgt[i]} → ${src[j]}: ${weight.toFixed(2)}`;
      }
    }
    const caption = "Cross-attention (交叉注意力) of the last decoder layer, mean of the heads: each row is an " +
      "English token, each column a German one; the darker the cell, the more weight (the darkest is the " +
      "map's largest). A long sentence's map scrolls sideways.";
    figure.replaceChildren(svg, el("figcaption", {}, caption));
  }

  function build(box) {
    box.replaceChildren();
    const status = el("p", { class: "translator-status", role: "status" }, "Loading the model…");
    const bar = el("progress", { max: "1", value: "0", "aria-label": "loading the model" });
    const form = el("form", { class: "translator-form" });
    const input = el("input", {
      type: "text", lang: "de", "aria-label": "a German sentence", placeholder: "Ein Mann fährt Fahrrad.",
      maxlength: "200",  // captions are short; each step re-reads the whole prefix: time grows with length squared
    });
    const button = el("button", { type: "submit", disabled: "" }, "Translate");
    form.append(input, button);
    const examples = el("div", { class: "translator-examples" });
    const output = el("p", { class: "translator-output", "aria-live": "polite" });
    const text = el("span", { class: "translator-text", lang: "en" });
    output.append(el("span", { class: "translator-label" }, "greedy search: "), text);
    const beam = el("p", { class: "translator-beam", lang: "en", "aria-live": "polite" });
    const timing = el("p", { class: "translator-timing" });
    const figure = el("figure", { class: "translator-attention" });
    box.append(status, bar, form, examples, output, beam, timing, figure);
    return { status, bar, form, input, button, examples, text, beam, timing, figure };
  }

  // Greedy search (its text, time and cross-attention map), then beam search; the ids go into the
  // box's data attributes, where the browser test reads them.
  async function translateBothWays(m, ui, box, sentence) {
    const t0 = performance.now();
    const result = await greedyDecode(m, sentence);
    const ms = performance.now() - t0;
    ui.text.textContent = result.text;
    ui.beam.textContent = `beam search (${m.config.beam_size} beams): …`;
    drawAttention(ui.figure, m, result);
    const t1 = performance.now();
    const beam = await beamSearch(m, result.ids, result.memory, result.src, result.maxLen);
    const beamMs = performance.now() - t1;
    ui.beam.textContent = `beam search (${m.config.beam_size} beams): ${detokenize(m, beam)}`;
    ui.timing.textContent = `greedy: ${result.out.length - 1} tokens in ${ms.toFixed(0)} ms; ` +
      `beam search: ${beamMs.toFixed(0)} ms (in this browser, one thread)`;
    Object.assign(box.dataset, { tokens: JSON.stringify(result.out), ms: ms.toFixed(1),
                                 beamTokens: JSON.stringify(beam), beamMs: beamMs.toFixed(1) });
  }

  async function start(box) {
    const ui = build(box);
    const fail = (message) => {
      box.dataset.state = "error";
      ui.bar.remove();
      ui.form.hidden = true;  // nothing to translate with
      ui.status.textContent = message;
      ui.status.classList.add("translator-error");
    };
    if (typeof WebAssembly !== "object") {
      fail("This browser cannot run the translator: it needs WebAssembly, which is switched off or missing here. " +
           "The chapter's code cells translate the same way in Python.");
      return;
    }
    let m;
    try {
      m = await load((received, total) => {
        if (box.dataset.state === "error") return;  // another file failed; the rest still arrive
        ui.bar.value = Math.min(1, received / total);
        const mb = (bytes) => (bytes / 1e6).toFixed(1);
        ui.status.textContent = `Loading the model and ONNX Runtime: ${mb(received)} of ${mb(total)} MB…`;
      });
    } catch (error) {
      const served = location.protocol !== "file:" ? "" : " A page opened from file:// cannot load them: " +
        "serve the site, e.g. python -m http.server -d _build/html, and open http://localhost:8000.";
      fail(`The translator's files could not be loaded (${error.message}).${served}`);
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
      const sentence = ui.input.value.trim();
      if (!sentence || box.dataset.state === "busy") return;
      const buttons = box.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      box.dataset.state = "busy";
      ui.status.textContent = "Translating…";
      await new Promise(requestAnimationFrame);  // show it: the model then holds the page until it is done
      try {
        await translateBothWays(m, ui, box, sentence);
        ui.status.textContent = "Type a German sentence, or click an example.";
        box.dataset.state = "done";
      } catch (error) {
        ui.status.textContent = `The translation stopped: ${error.message}`;
        box.dataset.state = "error";
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
      }
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
