// The trained model of chapters 3-5 and 11 in the reader's browser: the one loader, decoder and map
// drawer that both boxes use (translator.js, chapter 11's "Translate in your browser"; and
// attention_explorer.js, the live attention maps of chapters 3-5).
//
// A classic script (not a module), so that it runs even where modules cannot load (a page opened
// from file://) and the boxes can say so. It defines window.TrainedModel once, however many boxes a
// page has; the files are downloaded once per page (and then come from the browser's cache).
// Files: translator/ holds the model (encoder.onnx, decoder.onnx, the weights both share in
// weights.bin, tokenizer.json, config.json; made by scripts/build_browser_model.py); vendor/ holds
// the pinned npm packages onnxruntime-web and @huggingface/tokenizers, copied there by the build.
// Every rule here follows transformer_book.browser_model and transformer_book.trained step for
// step, so that the browser tests can ask for exactly Python's tokens and maps from the same files.
(function () {
  "use strict";
  if (window.TrainedModel) return;  // a second box on the page loaded this script again
  const here = new URL(".", document.currentScript.src);
  const MODEL = new URL("translator/", here);
  const VENDOR = new URL("vendor/", here);
  const MARKER = "\u2581";  // "▁", the tokenizer's word-start marker

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

  const listeners = [];  // every box's progress callback
  let loading = null;  // the one download of the page

  async function fetchAll() {
    const files = {  // [folder, file, size in bytes until the server says]
      runtime: [VENDOR, "ort-wasm-simd-threaded.wasm", 14e6], encoder: [MODEL, "encoder.onnx", 1e5],
      decoder: [MODEL, "decoder.onnx", 2e5], weights: [MODEL, "weights.bin", 8e6],
      tokenizer: [MODEL, "tokenizer.json", 5e5], config: [MODEL, "config.json", 1e3],
    };
    const sizes = Object.fromEntries(Object.entries(files).map(([name, f]) => [name, f[2]]));
    let received = 0;
    // (a compressed response counts more bytes than its Content-Length: the total never falls below them)
    const report = () => {
      const total = Math.max(received, Object.values(sizes).reduce((a, b) => a + b, 0));
      listeners.forEach((listener) => listener(received, total));
    };
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
    const options = {
      externalData: [{ path: "weights.bin", data: bytes.weights }],
      // the int8 weights dequantised once, at load time, as constants: float32 arithmetic from then
      // on, as transformer_book.browser_model.load_sessions asks of ONNX Runtime in Python
      extra: { session: { disable_quant_qdq: "1" } },
    };
    const encoder = await ort.InferenceSession.create(bytes.encoder, options);
    const decoder = await ort.InferenceSession.create(bytes.decoder, options);
    let queue = Promise.resolve();  // one run at a time: two boxes of a page share the sessions
    const run = (session, feeds, fetches) => {
      const result = queue.then(() => session.run(feeds, fetches));
      queue = result.catch(() => null);
      return result;
    };
    return { ort, encoder, decoder, run, config: text(bytes.config), tokenizer: new Tokenizer(text(bytes.tokenizer), {}) };
  }

  // The model, loaded once per page; onProgress(received, total) hears of every chunk.
  function load(onProgress) {
    if (onProgress) listeners.push(onProgress);
    if (typeof WebAssembly !== "object") {
      return Promise.reject(new Error("This browser cannot run the model: it needs WebAssembly, which is " +
        "switched off or missing here. The chapter's code cells compute the same in Python."));
    }
    const served = "serve the site, e.g. python -m http.server -d _build/html, and open http://localhost:8000.";
    if (location.protocol === "file:") {  // no fetch at all: the browser would log each refused one as an error
      return Promise.reject(new Error(`A page opened from file:// cannot load the model's files: ${served}`));
    }
    if (!loading) {
      loading = fetchAll().catch((error) => {
        throw new Error(`The model's files could not be loaded (${error.message}).`);
      });
    }
    return loading;
  }

  const longs = (xs) => BigInt64Array.from(xs, (x) => BigInt(x));

  // What the boxes do with the typed text, as transformer_book.browser_model.prepare_input: trimmed,
  // cut to max_chars characters (code points), and notes on it by name.
  function prepare(m, typed) {
    const c = m.config;
    const chars = Array.from(typed.trim());
    const text = chars.slice(0, c.max_chars).join("");
    if (!text) return { text, ids: [], hints: ["empty"] };
    const hints = chars.length > c.max_chars ? ["cut"] : [];
    const ids = m.tokenizer.encode(text, { add_special_tokens: false }).ids;
    const counted = ids.filter((i) => m.tokenizer.id_to_token(i) !== MARKER);
    const unknown = counted.length && 2 * counted.filter((i) => i === c.unk_id).length >= counted.length;
    if (!/\p{L}/u.test(text) || unknown) hints.push("unknown");  // no letter at all ("12345", "😀😀"), or mostly <unk>
    const words = text.toLowerCase().match(/\p{L}+/gu) || [];
    const known = { de: new Set(c.hint_words.de), en: new Set(c.hint_words.en) };
    const votes = (lang) => words.filter((w) => known[lang].has(w)).length;
    if (votes("en") > votes("de")) hints.push("english");
    return { text, ids, hints, chars: chars.length };
  }

  // The notes a box shows for prepare()'s hints.
  function hintMessages(m, prepared) {
    const max = m.config.max_chars;
    const messages = {
      empty: "Type a sentence first: the box is empty.",
      cut: `Only the first ${max} characters are used (${prepared.chars} were typed): each new English token ` +
        "makes the model re-read everything before it, so long inputs are cut.",
      unknown: "This text holds no German word: it has no letter at all (only digits, signs or emoji), or mostly " +
        "characters the tokenizer never met in the German and English image captions it learned from. The model " +
        "translates German sentences, so its output for this text means little.",
      english: "This looks like English, not German: the model translates German into English, so its output " +
        "for other text means little. (A rule of thumb: it counts frequent caption words of each language.)",
    };
    return prepared.hints.map((hint) => messages[hint]);
  }

  // The encoder's ids, as browser_model.source_ids: at most max_len - 1 tokens, [<unk>] for none.
  function sourceIds(m, ids) {
    const cut = ids.slice(0, m.config.max_len - 1);
    return cut.length ? cut : [m.config.unk_id];
  }

  async function encode(m, ids) {
    const src = new m.ort.Tensor("int64", longs(ids), [1, ids.length]);
    const { memory } = await m.run(m.encoder, { src }, ["memory"]);
    return { src, memory };
  }

  // The last row of the logits for a prefix (the decoder run over it, no key/value cache).
  async function lastLogits(m, memory, src, prefix) {
    const tgt = new m.ort.Tensor("int64", longs(prefix), [1, prefix.length]);
    const { logits } = await m.run(m.decoder, { tgt, memory, src }, ["logits"]);
    const vocab = logits.dims[2];
    return logits.data.subarray((prefix.length - 1) * vocab, prefix.length * vocab);
  }

  // Greedy decoding, as browser_model.onnx_greedy: <pad> never chosen, the first largest logit.
  async function greedy(m, ids) {
    const c = m.config;
    const { src, memory } = await encode(m, ids);
    const maxLen = Math.min(Math.floor(c.max_len_a * ids.length + c.max_len_b), c.max_len);
    const out = [c.bos_id];
    while (out.length < maxLen) {
      const row = await lastLogits(m, memory, src, out);
      let best = -1;
      for (let v = 0; v < row.length; v++) if (v !== c.pad_id && (best < 0 || row[v] > row[best])) best = v;
      out.push(best);
      if (best === c.eos_id) break;
    }
    return { out, memory, src, maxLen };
  }

  // Beam search, as browser_model.onnx_beam_hypotheses (and so transformer_lib's beam_search): every
  // live beam is extended by every token; of the 2k best extensions, an <eos> among the first k
  // finishes a hypothesis (score: log P / ((5 + len) / 6) ** length_penalty), the first k others live on.
  async function beam(m, memory, src, maxLen) {
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
      const { logits } = await m.run(m.decoder, {
        tgt: new m.ort.Tensor("int64", longs(beams.flat()), [n, t]),
        memory: new m.ort.Tensor("float32", repeat(memory.data, S * d), [n, S, d]),
        src: new m.ort.Tensor("int64", repeat(src.data, S), [n, S]),
      }, ["logits"]);
      const vocab = logits.dims[2], candidates = [];
      for (let b = 0; b < n; b++) {
        const row = logits.data.subarray(((b + 1) * t - 1) * vocab, (b + 1) * t * vocab);
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
        const from = Math.floor(index / vocab), token = index % vocab;
        if (token === c.eos_id && rank < k && finished.length < k) {
          finished.push([score / penalty(step), [...beams[from], token]]);
        } else if (token !== c.eos_id && live.length < k) {
          live.push([[...beams[from], token], score]);
        }
      });
      if (finished.length >= k) return { best: best(finished), finished };
      beams = live.map(([b]) => b);
      scores = live.map(([, s]) => s);
    }
    beams.forEach((b, i) => finished.push([scores[i] / penalty(b.length - 1), b]));  // cut at maxLen
    return { best: best(finished), finished };
  }

  function best(hypotheses) {  // the first of the highest scores, as Python's max()
    return hypotheses.reduce((a, h) => (h[0] > a[0] ? h : a))[1];
  }

  // As BPETokenizer.decode: stops at <eos>; <bos>, <eos>, <pad> and <unk> dropped.
  function detokenize(m, out) {
    const c = m.config;
    const end = out.indexOf(c.eos_id);
    const special = [c.pad_id, c.bos_id, c.eos_id, c.unk_id];
    return m.tokenizer.decode((end < 0 ? out : out.slice(0, end)).filter((i) => !special.includes(i)));
  }

  // A map's label of a token, as browser_model.token_label: no word-start marker; a lone one is "␣".
  function label(m, id) {
    const token = m.tokenizer.id_to_token(id);
    return (token.startsWith(MARKER) ? token.slice(1) : token) || "\u2423";
  }

  // Every layer's and head's attention of a pair, as transformer_book.trained's attention():
  // the encoder over the source ids, the decoder once over <bos> and the English ids.
  async function attention(m, sourceIds, targetIds) {
    const src = new m.ort.Tensor("int64", longs(sourceIds), [1, sourceIds.length]);
    const tgt = new m.ort.Tensor("int64", longs(targetIds), [1, targetIds.length]);
    const enc = await m.run(m.encoder, { src }, ["memory", "self_attention"]);
    const dec = await m.run(m.decoder, { tgt, memory: enc.memory, src }, ["self_attention", "cross_attention"]);
    const map = (t) => ({ dims: t.dims.slice(1), data: t.data });  // (L, H, rows, cols): the batch of one
    return {
      source: sourceIds.map((i) => label(m, i)), target: targetIds.map((i) => label(m, i)),
      encoder: map(enc.self_attention), decoder: map(dec.self_attention), cross: map(dec.cross_attention),
    };
  }

  // One map's weights (rows x cols) from (L, H, rows, cols): a head, or the mean of the heads (head < 0).
  function slice(map, layer, head) {
    const [, H, rows, cols] = map.dims, size = rows * cols;
    const out = new Float64Array(size);
    const heads = head < 0 ? [...Array(H).keys()] : [head];
    for (const h of heads) {
      const from = (layer * H + h) * size;
      for (let i = 0; i < size; i++) out[i] += map.data[from + i] / heads.length;
    }
    return out;
  }

  // The site's theme (html[data-theme], set by the theme's switch) and a way to hear of its changes:
  // a box redraws its map in the other palette.
  const dark = () => document.documentElement.dataset.theme === "dark";
  function onThemeChange(callback) {
    let last = dark();
    new MutationObserver(() => {
      if (dark() !== last) { last = dark(); callback(); }
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  // The palettes of a map (ColorBrewer's Blues): in the light theme white to dark blue on a white
  // card, "the darker, the more weight"; in the dark theme the same blues the other way round on a
  // dark card, "the brighter, the more weight". Each cell's luminance moves one way with its weight.
  const PALETTES = {
    light: {
      card: "#ffffff", label: "#222222", masked: "#d9d9d9", more: "darker", zero: "white", one: "darkest blue",
      stops: [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]],
    },
    dark: {
      card: "#222832", label: "#e6e9ee", masked: "#555d6b", more: "brighter", zero: "near black", one: "palest blue",
      stops: [[16, 28, 46], [16, 62, 120], [33, 113, 181], [107, 174, 214], [222, 235, 247]],
    },
  };
  const palette = () => PALETTES[dark() ? "dark" : "light"];
  function colour(x, stops) {
    const t = Math.min(1, Math.max(0, x)) * (stops.length - 1), i = Math.min(Math.floor(t), stops.length - 2);
    const mix = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * (t - i)));
    return `rgb(${mix.join(", ")})`;
  }

  // How a map's colours read, for its caption: "the darker the cell, the more weight (white 0,
  // darkest blue 1)" in the light theme, the brighter one in the dark theme.
  function shading(scale) {
    const p = palette(), top = scale === 1 ? "1" : `${scale.toFixed(2)}, the map's largest`;
    return `the ${p.more} the cell, the more weight (${p.zero} 0, ${p.one} ${top})`;
  }

  // An SVG heat map on a card of its own: a row per query token, a column per key token. scale:
  // the weight drawn at the end of the palette (1 for the explorer, the map's largest for the
  // translator); masked(i, j) marks cells a mask hides (grey); tip(i, j, w) is a cell's hover text;
  // width: the room the page gives it (px): the cells grow to fill it, from 22 to 56 px, so that a
  // short sentence's map reads at a desktop's width and still fits a phone's (a long one scrolls).
  function drawMap({ rows, cols, weights, scale, masked, tip, label: aria, width: room }) {
    const p = palette();
    const longest = (tokens) => Math.max(1, ...tokens.map((t) => t.length));
    const fits = (cell) => {  // the labels' size and the room they take for a cell size
      const font = Math.min(15, Math.max(11, Math.round(cell * 0.4)));
      return { font, left: 12 + 0.62 * font * longest(rows), top: 12 + 0.56 * font * longest(cols) };
    };
    let cell = 56;
    for (; cell > 22; cell--) {  // the largest cell size whose map fits the room
      const { left } = fits(cell);
      if (!room || left + cols.length * cell + 8 <= room) break;
    }
    const { font, left, top } = fits(cell);
    const width = Math.ceil(left + cols.length * cell + 8), height = Math.ceil(top + rows.length * cell + 8);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", aria);
    svg.classList.add("trained-map");
    svg.dataset.theme = dark() ? "dark" : "light";
    const add = (tag, attrs, text) => {
      const node = svg.appendChild(document.createElementNS(ns, tag));
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      return node;
    };
    add("rect", { x: 0, y: 0, width, height, fill: p.card, class: "map-card" });
    const text = { fill: p.label, "font-size": font };
    cols.forEach((t, j) => {
      const x = left + j * cell + cell / 2;
      add("text", { ...text, x, y: top - 4, transform: `rotate(-60 ${x} ${top - 4})`, class: "map-label map-col" }, t);
    });
    rows.forEach((t, i) => {
      add("text", {
        ...text, x: left - 5, y: top + (i + 0.5) * cell + 0.35 * font, "text-anchor": "end", class: "map-label map-row",
      }, t);
    });
    for (let i = 0; i < rows.length; i++) {
      for (let j = 0; j < cols.length; j++) {
        const w = weights[i * cols.length + j], hidden = masked && masked(i, j);
        const rect = add("rect", {
          x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
          fill: hidden ? p.masked : colour(w / scale, p.stops), class: hidden ? "map-cell masked" : "map-cell",
          "data-weight": w,
        });
        rect.appendChild(document.createElementNS(ns, "title")).textContent = tip(i, j, w);
      }
    }
    return svg;
  }

  window.TrainedModel = {
    el, load, prepare, hintMessages, sourceIds, encode, greedy, beam, lastLogits, detokenize, label,
    attention, slice, drawMap, shading, dark, onThemeChange,
  };
})();
