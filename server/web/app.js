// The page of `roformer serve`: reads GET /info, shows the panels whose
// route answers for the loaded model, and sends each panel's form to its
// route. Plain JavaScript, no libraries.
"use strict";

// api posts body as JSON to path and returns the decoded answer; an error
// answer throws an Error with the server's message (TEI's {"error": …},
// OpenAI's {"error": {"message": …}}, or the status text).
async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body),
  };
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new Error("cannot reach the server: " + e.message);
  }
  const text = await res.text();
  let data = null;
  try { data = JSON.parse(text); } catch (e) { /* not JSON */ }
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    const err = data && data.error;
    if (typeof err === "string") msg = err;
    else if (err && typeof err.message === "string") msg = err.message;
    else if (text) msg += ": " + text.slice(0, 300);
    const e = new Error(msg);
    e.status = res.status;
    throw e;
  }
  if (data === null) throw new Error("the answer is not JSON: " + text.slice(0, 300));
  return data;
}

// el makes an element with a class and text, or children.
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

// bar is a row of a result list: a label, a bar of width score (0..1) and
// the score's text.
function bar(label, score, text) {
  const w = Math.max(0, Math.min(1, Number(score) || 0));
  const fill = el("span", "fill");
  fill.style.width = (w * 100).toFixed(1) + "%";
  return el("li", "row", el("span", "label", label), el("span", "bar", fill), el("span", "score", text ?? Number(score).toFixed(4)));
}

function lines(s) {
  return s.split("\n").map((x) => x.trim()).filter((x) => x !== "");
}

// panels: per section id, what its form sends and how its answer is shown.
const panels = {
  "fill-mask": {
    path: "/v1/fill-mask",
    body: (f) => ({inputs: f.text.value, top_k: Number(f.top_k.value) || 5}),
    show: (out, data) => {
      const masks = (data.results && data.results[0]) || [];
      if (masks.length === 0) {
        out.append(el("p", "muted", "No [MASK] in the text."));
        return;
      }
      masks.forEach((preds, i) => {
        if (masks.length > 1) out.append(el("h3", "", "[MASK] " + (i + 1)));
        const ol = el("ol", "results");
        for (const p of preds) {
          const li = bar(p.token_str, p.score);
          li.title = p.sequence;
          li.append(el("span", "seq", p.sequence));
          ol.append(li);
        }
        out.append(ol);
      });
    },
  },
  "similarity": {
    path: "/similarity",
    body: (f) => ({inputs: {source_sentence: f.source.value, sentences: lines(f.sentences.value)}}),
    show: (out, data, f) => {
      const sents = lines(f.sentences.value);
      const ol = el("ol", "results");
      data.forEach((s, i) => ol.append(bar(sents[i] ?? "#" + i, s)));
      out.append(ol);
    },
  },
  "rerank": {
    path: "/rerank",
    body: (f) => ({query: f.query.value, texts: lines(f.texts.value), return_text: true}),
    show: (out, data) => {
      const ol = el("ol", "results");
      for (const r of data) ol.append(bar(r.text ?? "#" + r.index, r.score));
      out.append(ol);
    },
  },
  "predict": {
    path: "/predict",
    body: (f) => ({inputs: f.pair.value.trim() ? [f.text.value, f.pair.value] : f.text.value}),
    show: (out, data) => {
      const preds = Array.isArray(data[0]) ? data[0] : data;
      const ol = el("ol", "results");
      for (const p of preds) ol.append(bar(p.label, p.score));
      out.append(ol);
    },
  },
  "embed": {
    path: "/embed",
    body: (f) => ({inputs: lines(f.texts.value), normalize: f.normalize.checked}),
    show: (out, data, f) => {
      const texts = lines(f.texts.value);
      const ol = el("ol", "results vectors");
      data.forEach((v, i) => {
        const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
        const head = v.slice(0, 8).map((x) => x.toFixed(3)).join(", ") + (v.length > 8 ? ", …" : "");
        ol.append(el("li", "row", el("span", "label", texts[i] ?? "#" + i),
          el("code", "vec", "[" + head + "]"),
          el("span", "score", v.length + " dims, norm " + norm.toFixed(3))));
      });
      out.append(ol);
    },
  },
  "tokenize": {
    path: "/tokenize",
    body: (f) => ({inputs: f.text.value}),
    show: (out, data) => {
      const toks = data[0] || [];
      const p = el("p", "tokens");
      for (const t of toks) {
        const chip = el("span", t.special ? "tok special" : "tok", t.text);
        chip.title = "id " + t.id;
        p.append(chip);
      }
      out.append(p);
    },
  },
};

function wire(section, spec) {
  const form = section.querySelector("form");
  const err = section.querySelector(".error");
  const out = section.querySelector(".out");
  const button = form.querySelector("button");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    err.textContent = "";
    button.disabled = true;
    section.classList.add("busy");
    try {
      const t0 = performance.now();
      const data = await api(spec.path, spec.body(form));
      out.replaceChildren();
      spec.show(out, data, form);
      out.append(el("p", "muted timing", (performance.now() - t0).toFixed(0) + " ms"));
    } catch (e) {
      out.replaceChildren();
      err.textContent = e.message;
      err.hidden = false;
    } finally {
      button.disabled = false;
      section.classList.remove("busy");
    }
  });
}

async function start() {
  const model = document.getElementById("model");
  const status = document.getElementById("status");
  let info;
  for (;;) {
    try {
      info = await api("/info");
      break;
    } catch (e) {
      status.textContent = e.message + (e.status === 503 ? " (retrying)" : "");
      status.hidden = false;
      if (e.status !== 503) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  status.hidden = true;
  const kind = Object.keys(info.model_type || {})[0] || "";
  model.replaceChildren(el("strong", "", info.model_id || "model"),
    " · " + kind + " · " + info.model_dtype + " · pooling " + info.pooling + " · up to " + info.max_input_length + " tokens");
  const routes = new Set(info.routes || []);
  let shown = 0;
  for (const [id, spec] of Object.entries(panels)) {
    const section = document.getElementById(id);
    if (!section || !routes.has(section.dataset.route)) continue;
    wire(section, spec);
    section.hidden = false;
    shown++;
  }
  if (shown === 0) {
    status.textContent = "This model answers none of the routes this page knows.";
    status.hidden = false;
  }
  document.body.dataset.ready = "true";
}

start();
