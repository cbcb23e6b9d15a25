// The calculator page: reads the form (contract field names), keeps the whole configuration in the URL
// query, asks the Web Worker (Pyodide + sizing) for the estimate and renders it. Everything typed or
// computed reaches the page through textContent / setAttribute only, never as HTML.
const COMPONENTS = ["weights", "quantization_state", "adapters", "gradients", "optimizer_states", "master_weights",
  "activations", "logits_and_loss", "workspace"];
const COLORS = { weights: "#3f51b5", quantization_state: "#7986cb", adapters: "#009688", gradients: "#4caf50",
  optimizer_states: "#ff9800", master_weights: "#795548", activations: "#e91e63", logits_and_loss: "#9c27b0",
  workspace: "#607d8b" };
const TRIAL = "python trial.py CONFIG.json --data DATA.jsonl --out DIR --max-steps 20";
const GiB = 2 ** 30;

const root = document.getElementById("calc");
if (root && !root.dataset.bound) {
  root.dataset.bound = "1";
  main();
}

function main() {
  const data = JSON.parse(document.getElementById("calc-data").textContent);
  const L = data.text;
  const lang = data.lang;
  const form = document.getElementById("calc-form");
  const status = document.getElementById("calc-status");
  const general = document.getElementById("calc-error-general");
  const doc = document.documentElement;
  const t = (key) => (key in L ? L[key] : key);

  // The worker was started by the page's inline script (window.calcBoot, with the messages it sent so far);
  // without it, start it here, before anything else is wired.
  const early = window.calcBoot || {};
  let worker = early.worker || null;
  let workerError = early.error || null;
  if (!worker && !workerError) {
    try {
      worker = new Worker(new URL("worker.js", import.meta.url), { type: "module" });
    } catch (err) {
      workerError = err;
    }
  }

  // --- numbers as the build formats them (sizing_labels.fmt_num) --------------------------------------
  function fmtNum(value, decimals) {
    const text = Math.abs(value).toFixed(decimals);
    let [whole, frac] = text.split(".");
    const [sep, point] = lang === "en" ? [",", "."] : ["\u00a0", ","];
    whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
    return (value < 0 ? "−" : "") + whole + (frac ? point + frac : "");
  }
  const fmtGib = (bytes) => fmtNum(bytes / GiB, 2);
  const hours = (v) => (v === null || v === undefined ? "—" : fmtNum(Number(v), 1));

  // --- DOM helpers (no innerHTML anywhere) ------------------------------------------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  function svg(tag, attrs) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  // --- form <-> configuration <-> URL -----------------------------------------------------------------
  const fields = () => Array.from(form.querySelectorAll("[name][data-kind]"));

  function readForm() {
    const config = {};
    const local = [];
    for (const el of fields()) {
      const kind = el.dataset.kind;
      const raw = kind === "bool" ? "" : el.value.trim();
      if (kind === "bool") config[el.name] = el.checked;
      else if (kind === "select") config[el.name] = el.value;
      else if (kind === "list") config[el.name] = raw === "" ? null : raw === "all-linear" ? raw
        : raw.split(",").map((s) => s.trim()).filter(Boolean);
      else if (kind === "int" || kind === "float") {
        const n = Number(raw);
        // A number the browser refuses (badInput) or a non-finite one goes to sizing as text: it names the field.
        if (el.validity && el.validity.badInput) config[el.name] = "not a number";
        else config[el.name] = raw === "" ? null : Number.isFinite(n) ? n : raw;
      } else if (kind === "json" && raw !== "") {
        try {
          config.model_config = JSON.parse(raw);
          config.model = null;
        } catch (err) {
          local.push({ code: "bad_json", field: el.name, message: String(err.message || err), params: {} });
        }
      }
    }
    return { config, local };
  }

  function toQuery() {
    const q = new URLSearchParams();
    for (const el of fields()) {
      if (el.dataset.kind === "bool") q.set(el.name, el.checked ? "true" : "false");
      else if (el.value.trim() !== "" || el.dataset.kind !== "json") q.set(el.name, el.value.trim());
    }
    return q.toString();
  }

  function applyQuery(params) {
    for (const el of fields()) {
      if (!params.has(el.name)) continue;
      const v = params.get(el.name);
      if (el.dataset.kind === "bool") el.checked = v === "true" || v === "1";
      else if (el.tagName === "SELECT") {
        if (!Array.from(el.options).some((o) => o.value === v)) el.append(h("option", { value: v }, v));
        el.value = v;
      } else el.value = v;
    }
  }

  // --- errors -------------------------------------------------------------------------------------------
  function clearErrors() {
    for (const el of root.querySelectorAll("[data-error-for]")) el.textContent = "";
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    general.textContent = "";
  }
  function showError(err) {
    const params = err.params || {};
    const field = err.field || "";
    let text = t("e_" + err.code);
    if (text === "e_" + err.code) text = t("e_other");
    text = text.replace(/\{(\w+)\}/g, (m, k) => (k === "field" ? field : k in params ? String(params[k]) : m));
    if (err.message) text += " — " + String(err.message);
    const slot = field ? root.querySelector(`[data-error-for="${CSS.escape(field)}"]`) : null;
    (slot || general).textContent = text;
    const input = field ? form.querySelector(`[name="${CSS.escape(field)}"]`) : null;
    if (input) input.setAttribute("aria-invalid", "true");
    const results = document.getElementById("calc-results");
    if (results) results.classList.add("calc-stale");
  }

  // --- results ------------------------------------------------------------------------------------------
  function render(result) {
    const est = result.estimate;
    const peak = est.peak;
    const comps = est.components;
    const time = est.time || {};
    const gib = t("gib");
    const box = h("div", { id: "calc-results", class: "calc-results", "data-testid": "results", "aria-live": "polite" });
    const peaks = h("div", { class: "calc-peaks" });
    for (const key of ["allocated", "reserved", "device"]) {
      const value = peak[key + "_bytes"];
      peaks.append(h("div", { class: "calc-peak" }, h("span", {}, t(key)), " ",
        h("strong", { "data-testid": "peak-" + key, "data-bytes": value }, `${fmtGib(value)} ${gib}`)));
    }
    peaks.append(h("div", { class: "calc-peak" }, h("span", {}, t("phase")), " ",
      h("strong", { "data-testid": "peak-phase", "data-phase": peak.phase }, t(peak.phase))));
    box.append(peaks);

    const total = COMPONENTS.reduce((s, n) => s + (comps[n] || 0), 0) || 1;
    const bar = svg("svg", { class: "calc-bar", "data-testid": "bar", viewBox: "0 0 1000 40",
      preserveAspectRatio: "none", role: "img", "aria-label": t("components") });
    let x = 0;
    for (const name of COMPONENTS) {
      const width = (1000 * (comps[name] || 0)) / total;
      if (width <= 0) continue;
      const rect = svg("rect", { x: x.toFixed(2), y: 0, width: width.toFixed(2), height: 40, fill: COLORS[name] });
      const title = svg("title");
      title.textContent = `${t(name)}: ${fmtGib(comps[name])} ${gib}`;
      rect.append(title);
      bar.append(rect);
      x += width;
    }
    box.append(bar);

    const body = h("tbody");
    for (const name of COMPONENTS) {
      const value = comps[name] || 0;
      body.append(h("tr", { "data-testid": "component-" + name, "data-bytes": value },
        h("td", {}, h("span", { class: "calc-swatch", "data-color": name }), t(name)), h("td", {}, fmtGib(value))));
    }
    box.append(h("table", { class: "calc-components", "data-testid": "components" },
      h("thead", {}, h("tr", {}, h("th", {}, t("component")), h("th", {}, gib))), body));

    box.append(h("p", { class: "calc-time", "data-testid": "time" }, t("time_line"), " ",
      h("span", { "data-testid": "total-hours" }, hours(time.total_hours)), ` ${t("hours")}; ${t("step")} `,
      h("span", { "data-testid": "step-seconds" }, hours(time.step_seconds)), ` s; ${t("tps")} `,
      h("span", { "data-testid": "tokens-per-second" }, fmtNum(Math.round(time.tokens_per_second || 0), 0)),
      `; ${t("cost")} `,
      h("span", { "data-testid": "cost" }, time.cost === null || time.cost === undefined ? "—" : fmtNum(time.cost, 2))));

    const warnings = h("ul", { class: "calc-warnings", "data-testid": "warnings" });
    for (const w of est.warnings || []) warnings.append(h("li", { "data-code": w.code }, String(w.message)));
    box.append(warnings);

    const heads = ["th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours", "th_cost"];
    const oldFit = document.querySelector("#calc-results .calc-fit-wrap");
    if (!result.fit_table && oldFit) { // the table follows in the "full" answer
      oldFit.classList.add("calc-stale");
      box.append(oldFit);
      document.getElementById("calc-results").replaceWith(box);
      return;
    }
    const fit = h("tbody");
    for (const row of result.fit_table || []) {
      const rt = row.time || {};
      fit.append(h("tr", { "data-testid": "fit-" + row.gpu, "data-fits": String(Boolean(row.fits)),
        "data-headroom": row.headroom_bytes },
      h("td", {}, row.name), h("td", {}, row.fits ? "✓" : "✗"), h("td", {}, fmtGib(row.headroom_bytes)),
      h("td", {}, String(row.max_micro_batch)), h("td", {}, fmtNum(row.max_seq_length, 0)),
      h("td", {}, row.fewest_gpus ? String(row.fewest_gpus) : "—"), h("td", {}, hours(rt.total_hours)),
      h("td", {}, rt.cost === null || rt.cost === undefined ? "—" : fmtNum(rt.cost, 2))));
    }
    box.append(h("div", { class: "calc-fit-wrap" }, h("table", { class: "calc-fit", "data-testid": "fit-table" },
      h("thead", {}, h("tr", {}, ...heads.map((k) => h("th", {}, t(k))))), fit)));
    document.getElementById("calc-results").replaceWith(box);
  }

  // --- the worker -----------------------------------------------------------------------------------
  let latest = 0;
  let timer = null;
  let current = null; // the configuration of the latest answer
  let snippet = "";
  let failed = false;

  function fail(reason, detail) {
    failed = true;
    doc.dataset.runtime = "failed";
    status.dataset.state = "failed";
    status.textContent = t("status_failed") + (reason in L ? t(reason) : reason) + (detail ? ` (${detail})` : "");
  }

  if (!worker) {
    fail("no_worker", String(workerError));
    return;
  }
  worker.onerror = (event) => fail("error", event.message || "worker error");
  worker.onmessage = (event) => {
    const msg = event.data;
    if (msg.type === "failed") fail(msg.reason, msg.detail);
    else if (msg.type === "ready") {
      doc.dataset.bootMs = String(Math.round(msg.ms));
      doc.dataset.bootStages = JSON.stringify({ worker_created: Math.round(early.at || -1), ...(msg.stages || {}) });
    }
    else if (msg.type === "result" && msg.id === latest) {
      const result = JSON.parse(msg.json);
      clearErrors();
      if (result.ok) {
        render(result);
        snippet = result.snippet;
      } else showError(result.error);
      doc.dataset[msg.phase === "full" ? "computeMs" : "estimateMs"] = String(Math.round(msg.ms));
      doc.dataset.shown = String(msg.id); // the peak on the page is this configuration's
      if (msg.phase !== "full") return; // "ready" once the fit table is there too
      doc.dataset.runtime = "ready";
      // navigation -> the runtime's first complete answer (the benchmark's figure)
      if (!doc.dataset.readyAt) doc.dataset.readyAt = String(Math.round(performance.now()));
      status.dataset.state = "ready";
      status.textContent = t("status_ready");
    }
  };

  function compute() {
    timer = null;
    const { config, local } = readForm();
    current = config;
    latest += 1;
    if (local.length) {
      clearErrors();
      local.forEach(showError);
      doc.dataset.runtime = failed ? "failed" : "ready";
      return;
    }
    worker.postMessage({ type: "compute", id: latest, config: JSON.stringify(config) });
  }

  function schedule() {
    if (failed) return;
    doc.dataset.runtime = "busy";
    status.textContent = t("status_busy");
    history.replaceState(null, "", "?" + toQuery() + location.hash);
    linkRequest();
    if (timer) clearTimeout(timer);
    timer = setTimeout(compute, 60); // typing: one compute per pause; the worker drops stale ones too
  }

  function linkRequest() {
    const link = document.getElementById("calc-request");
    if (link) link.setAttribute("href", "request/?" + toQuery());
  }

  // --- buttons --------------------------------------------------------------------------------------
  const copied = document.getElementById("calc-copied");
  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const area = h("textarea", { readonly: "", class: "calc-offscreen" });
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    copied.textContent = t("copied");
    setTimeout(() => { copied.textContent = ""; }, 2000);
  }
  document.getElementById("calc-copy-snippet").addEventListener("click", () => copy(snippet));
  document.getElementById("calc-copy-trial").addEventListener("click", () => copy(TRIAL));
  document.getElementById("calc-download").addEventListener("click", () => {
    const config = current || readForm().config;
    const blob = new Blob([JSON.stringify(config, null, 2) + "\n"], { type: "application/json" });
    const a = h("a", { href: URL.createObjectURL(blob), download: "config.json" });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  });

  // --- start: the query wins over the defaults; compute at once (the worker queues until ready) ------
  doc.dataset.runtime = "loading";
  applyQuery(new URLSearchParams(location.search));
  linkRequest();
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("submit", (event) => event.preventDefault());
  compute();
  // What the early-started worker said before this script took it over (a failure, "ready").
  for (const event of (early.queue || []).splice(0)) {
    if (event.type === "message") worker.onmessage(event);
    else worker.onerror(event);
  }
}
