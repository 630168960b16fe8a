// The page of `roformer serve`: reads GET /info, shows the panels whose
// route answers for the loaded model, and sends each panel's form to its
// route. Plain JavaScript, no libraries.
"use strict";

// The server's API key, when it asks for one (roformer serve --api-key):
// typed into the page's key form, kept for this tab (sessionStorage).
let apiKey = sessionStorage.getItem("roformer-api-key") || "";

// headers are a request's headers: its own, and the API key's.
function headers(h) {
  if (apiKey) h.Authorization = "Bearer " + apiKey;
  return h;
}

// api posts body as JSON to path and returns the decoded answer; an error
// answer throws an Error with the server's message (TEI's {"error": …},
// OpenAI's {"error": {"message": …}}, or the status text).
async function api(path, body) {
  const init = body === undefined ? {headers: headers({})} : {
    method: "POST",
    headers: headers({"Content-Type": "application/json"}),
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
  if (!res.ok) throw answerError(res, text, data);
  if (data === null) throw new Error("the answer is not JSON: " + text.slice(0, 300));
  return data;
}

// answerError is the Error of an error answer: the server's message, else
// the status and the start of the body.
function answerError(res, text, data) {
  let msg = res.status + " " + res.statusText;
  const err = data && data.error;
  if (typeof err === "string") msg = err;
  else if (err && typeof err.message === "string") msg = err.message;
  else if (text) msg += ": " + text.slice(0, 300);
  const e = new Error(msg);
  e.status = res.status;
  return e;
}

// generate posts a streaming POST /generate and shows each token as its
// server-sent event arrives: the prompt, then the new tokens one by one
// (out's paragraph has the class "streaming" until the last). An error
// answer (JSON) or an error event throws.
async function generate(f, out) {
  const body = {
    inputs: f.text.value,
    parameters: {max_new_tokens: Number(f.max_new_tokens.value) || 20, do_sample: f.do_sample.checked},
    stream: true,
  };
  out.replaceChildren();
  let res;
  try {
    res = await fetch("/generate", {
      method: "POST",
      headers: headers({"Content-Type": "application/json", "Accept": "text/event-stream"}),
      body: JSON.stringify(body),
    });
  } catch (e) {
    throw new Error("cannot reach the server: " + e.message);
  }
  if (!res.ok || !(res.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    const text = await res.text();
    let data = null;
    try { data = JSON.parse(text); } catch (e) { /* not JSON */ }
    throw answerError(res, text, data);
  }
  const p = el("p", "generated streaming", el("span", "prompt", body.inputs));
  out.append(p);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", n = 0, whole = null;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n/g, "\n");
    for (let i; (i = buf.indexOf("\n\n")) >= 0;) {
      const data = buf.slice(0, i).split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      buf = buf.slice(i + 2);
      if (!data) continue;
      const ev = JSON.parse(data);
      if (ev.error) {
        p.classList.remove("streaming");
        throw new Error(typeof ev.error === "string" ? ev.error : JSON.stringify(ev.error));
      }
      const t = ev.token || {};
      const span = el("span", t.special ? "gen-tok special" : "gen-tok", t.text ?? "");
      span.title = "id " + t.id;
      p.append(span);
      n++;
      if (typeof ev.generated_text === "string") whole = ev.generated_text;
    }
  }
  p.classList.remove("streaming");
  p.title = whole ?? "";
  out.append(el("p", "muted", n + (n === 1 ? " token" : " tokens")));
}

// entityLabel is an entity's label: entity_group when aggregated, else entity.
function entityLabel(e) {
  return e.entity_group ?? e.entity ?? "";
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
  "generate": {
    stream: generate,
  },
  "token-classification": {
    path: "/v1/token-classification",
    body: (f) => {
      const b = {inputs: f.text.value, aggregation_strategy: f.aggregation.value};
      if (!f.ignore_o.checked) b.ignore_labels = [];
      return b;
    },
    show: (out, data, f, body) => {
      // Offsets are in characters (code points), as Array.from splits.
      const chars = Array.from(body.inputs);
      const ents = data.slice().sort((a, b) => a.start - b.start);
      const p = el("p", "tagged");
      let at = 0;
      for (const e of ents) {
        if (e.start < at) continue;
        p.append(chars.slice(at, e.start).join(""));
        const label = entityLabel(e);
        const m = el("mark", "ent", chars.slice(e.start, e.end).join(""), el("span", "ent-label", label));
        m.title = label + " " + Number(e.score).toFixed(4);
        m.dataset.label = label;
        p.append(m);
        at = e.end;
      }
      p.append(chars.slice(at).join(""));
      out.append(p);
      if (ents.length === 0) {
        out.append(el("p", "muted", "No entities."));
        return;
      }
      const ol = el("ol", "results");
      for (const e of ents) ol.append(bar(entityLabel(e) + ": " + e.word, e.score));
      out.append(ol);
    },
  },
  "question-answering": {
    path: "/v1/question-answering",
    body: (f) => ({question: f.question.value, context: f.context.value, top_k: Number(f.top_k.value) || 1,
      handle_impossible_answer: f.impossible.checked}),
    show: (out, data, f, body) => {
      // One answer is an object, more a list, best first; start and end
      // are in characters (code points) of the context, as Array.from
      // splits it; the answer "" (start = end) is "no answer".
      const answers = Array.isArray(data) ? data : [data];
      const chars = Array.from(body.context);
      const best = answers[0];
      const p = el("p", "tagged");
      if (best && best.end > best.start) {
        const m = el("mark", "ent answer", chars.slice(best.start, best.end).join(""));
        m.title = Number(best.score).toFixed(4);
        p.append(chars.slice(0, best.start).join(""), m, chars.slice(best.end).join(""));
      } else {
        p.append(body.context);
      }
      out.append(p);
      const ol = el("ol", "results");
      for (const a of answers) {
        const li = bar(a.answer === "" ? "(no answer)" : a.answer, a.score);
        li.title = "characters " + a.start + "–" + a.end;
        ol.append(li);
      }
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
      if (spec.stream) {
        await spec.stream(form, out);
      } else {
        const body = spec.body(form);
        const data = await api(spec.path, body);
        out.replaceChildren();
        spec.show(out, data, form, body);
      }
      out.append(el("p", "muted timing", (performance.now() - t0).toFixed(0) + " ms"));
    } catch (e) {
      if (!spec.stream) out.replaceChildren();
      err.textContent = e.message;
      err.hidden = false;
    } finally {
      button.disabled = false;
      section.classList.remove("busy");
    }
  });
}

// askKey shows the key form and resolves once a key is typed in.
function askKey() {
  const form = document.getElementById("key");
  form.hidden = false;
  form.key.focus();
  return new Promise((resolve) => {
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      apiKey = form.key.value.trim();
      sessionStorage.setItem("roformer-api-key", apiKey);
      form.hidden = true;
      resolve();
    }, {once: true});
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
      if (e.status === 401) {
        await askKey();
        continue;
      }
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
