// The calculator's results as DOM: the same structure the build renders for the first paint
// (scripts/sitebuild/calculator_results.py). Everything reaches the page through textContent and setAttribute,
// never as HTML.
export const COMPONENTS = ["weights", "quantization_state", "adapters", "gradients", "optimizer_states",
  "master_weights", "activations", "logits_and_loss", "workspace"];
const COLORS = { weights: "#3f51b5", quantization_state: "#7986cb", adapters: "#009688", gradients: "#4caf50",
  optimizer_states: "#ff9800", master_weights: "#795548", activations: "#e91e63", logits_and_loss: "#9c27b0",
  workspace: "#607d8b" };
const COMPARED = ["H100-SXM-80GB", "H200-SXM-141GB"];
const FIT_HEADS = ["th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours", "th_cost"];
const GiB = 2 ** 30;

export function h(tag, attrs, ...children) {
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

export function makeRenderer(t, lang) {
  // numbers as the build formats them (sizing_labels.fmt_num)
  function num(value, decimals) {
    const text = Math.abs(value).toFixed(decimals);
    let [whole, frac] = text.split(".");
    const [sep, point] = lang === "en" ? [",", "."] : ["\u00a0", ","];
    whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
    return (value < 0 ? "−" : "") + whole + (frac ? point + frac : "");
  }
  const gib = (bytes) => num(bytes / GiB, 2);
  const hours = (v) => (v === null || v === undefined ? "—" : num(Number(v), 1));
  const cost = (v) => (v === null || v === undefined ? "—" : num(Number(v), 2));
  const fill = (template, params) => template.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m));

  function warningText(w) {
    const key = "w_" + w.code;
    const template = t(key);
    if (template === key) return String(w.message || ""); // a code this page has no words for
    const params = { ...(w.params || {}) };
    if (typeof params.bytes === "number") params.gib = gib(params.bytes);
    return fill(template, params);
  }

  function uncertainty(est) {
    const u = est.uncertainty;
    return h("p", { class: "calc-uncertainty", "data-testid": "uncertainty", "data-confidence": u.confidence,
      "data-low": u.reserved_low_bytes, "data-high": u.reserved_high_bytes },
    `${t("range")}: ${gib(u.reserved_low_bytes)}–${gib(u.reserved_high_bytes)} ${t("gib")}; ${t("confidence")}: `
      + t("conf_" + u.confidence));
  }

  function bar(comps) {
    const total = COMPONENTS.reduce((s, n) => s + (comps[n] || 0), 0) || 1;
    const el = svg("svg", { class: "calc-bar", "data-testid": "bar", viewBox: "0 0 1000 40",
      preserveAspectRatio: "none", role: "img", "aria-label": t("components") });
    let x = 0;
    for (const name of COMPONENTS) {
      const width = (1000 * (comps[name] || 0)) / total;
      if (width <= 0) continue;
      const rect = svg("rect", { x: x.toFixed(2), y: 0, width: width.toFixed(2), height: 40, fill: COLORS[name] });
      const title = svg("title");
      title.textContent = `${t(name)}: ${gib(comps[name])} ${t("gib")}`;
      rect.append(title);
      el.append(rect);
      x += width;
    }
    return el;
  }

  function compare(table) {
    const rows = COMPARED.map((id) => table.find((r) => r.gpu === id)).filter(Boolean);
    const time = (r) => r.time || {};
    const lines = [
      ["capacity", rows.map((r) => `${gib(r.usable_bytes)} ${t("gib")}`)],
      ["th_fits", rows.map((r) => (r.fits ? "✓" : "✗"))],
      ["th_headroom", rows.map((r) => gib(r.headroom_bytes))],
      ["th_batch", rows.map((r) => String(r.max_micro_batch))],
      ["th_seq", rows.map((r) => num(r.max_seq_length, 0))],
      ["th_gpus", rows.map((r) => (r.fewest_gpus ? String(r.fewest_gpus) : "—"))],
      ["tokens_per_second", rows.map((r) => num(Math.round(time(r).tokens_per_second || 0), 0))],
      ["th_hours", rows.map((r) => hours(time(r).total_hours))],
      ["th_cost", rows.map((r) => cost(time(r).cost))],
    ];
    const body = h("tbody");
    for (const [key, values] of lines) {
      body.append(h("tr", { "data-row": key }, h("th", { scope: "row" }, t(key)), ...values.map((v) => h("td", {}, v))));
    }
    return h("div", { class: "calc-compare", "data-testid": "compare" }, h("h3", {}, t("compare_title")),
      h("table", {}, h("thead", {}, h("tr", {}, h("th"), ...rows.map((r) => h("th", {}, r.name)))), body),
      h("p", { class: "calc-note" }, t("compare_note")));
  }

  function fitTable(table) {
    const body = h("tbody");
    for (const row of table) {
      const rt = row.time || {};
      body.append(h("tr", { "data-testid": "fit-" + row.gpu, "data-fits": String(Boolean(row.fits)),
        "data-headroom": row.headroom_bytes },
      h("td", {}, row.name), h("td", {}, row.fits ? "✓" : "✗"), h("td", {}, gib(row.headroom_bytes)),
      h("td", {}, String(row.max_micro_batch)), h("td", {}, num(row.max_seq_length, 0)),
      h("td", {}, row.fewest_gpus ? String(row.fewest_gpus) : "—"), h("td", {}, hours(rt.total_hours)),
      h("td", {}, cost(rt.cost))));
    }
    return h("div", { class: "calc-fit-wrap" }, h("table", { class: "calc-fit", "data-testid": "fit-table" },
      h("thead", {}, h("tr", {}, ...FIT_HEADS.map((k) => h("th", {}, t(k))))), body));
  }

  // One answer of the worker. Without its fit table (the "estimate" phase) the previous table and
  // comparison stay, marked stale, until the "full" answer brings the new ones.
  function render(result) {
    const est = result.estimate;
    const peak = est.peak;
    const comps = est.components;
    const time = est.time || {};
    const box = h("div", { id: "calc-results", class: "calc-results", "data-testid": "results", "aria-live": "polite" });
    const peaks = h("div", { class: "calc-peaks" });
    for (const key of ["allocated", "reserved", "device"]) {
      const value = peak[key + "_bytes"];
      peaks.append(h("div", { class: "calc-peak" }, h("span", {}, t(key)), " ",
        h("strong", { "data-testid": "peak-" + key, "data-bytes": value }, `${gib(value)} ${t("gib")}`)));
    }
    peaks.append(h("div", { class: "calc-peak" }, h("span", {}, t("phase")), " ",
      h("strong", { "data-testid": "peak-phase", "data-phase": peak.phase }, t(peak.phase))));
    box.append(peaks, uncertainty(est), bar(comps));

    const body = h("tbody");
    for (const name of COMPONENTS) {
      const value = comps[name] || 0;
      body.append(h("tr", { "data-testid": "component-" + name, "data-bytes": value },
        h("td", {}, h("span", { class: "calc-swatch", "data-color": name }), t(name)), h("td", {}, gib(value))));
    }
    box.append(h("table", { class: "calc-components", "data-testid": "components" },
      h("thead", {}, h("tr", {}, h("th", {}, t("component")), h("th", {}, t("gib")))), body));
    box.append(h("p", { class: "calc-time", "data-testid": "time" }, t("time_line"), " ",
      h("span", { "data-testid": "total-hours" }, hours(time.total_hours)), ` ${t("hours")}; ${t("step")} `,
      h("span", { "data-testid": "step-seconds" }, hours(time.step_seconds)), ` s; ${t("tps")} `,
      h("span", { "data-testid": "tokens-per-second" }, num(Math.round(time.tokens_per_second || 0), 0)),
      `; ${t("cost")} `, h("span", { "data-testid": "cost" }, cost(time.cost))));
    const warnings = h("ul", { class: "calc-warnings", "data-testid": "warnings" });
    for (const w of est.warnings || []) warnings.append(h("li", { "data-code": w.code }, warningText(w)));
    box.append(warnings);

    const old = document.getElementById("calc-results");
    if (result.fit_table) box.append(compare(result.fit_table), fitTable(result.fit_table));
    else {
      for (const part of old.querySelectorAll(".calc-compare, .calc-fit-wrap")) {
        part.classList.add("calc-stale");
        box.append(part);
      }
    }
    old.replaceWith(box);
  }

  const percent = (v) => `${v > 0 ? "+" : ""}${num(v, 1)}${lang === "en" ? "%" : "\u00a0%"}`;
  return { render, num, gib, cost, fill, percent };
}
