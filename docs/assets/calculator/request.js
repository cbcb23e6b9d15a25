// The rental request page: the configuration comes from the URL query (the calculator links here with
// its own query), the estimate from the same Web Worker (Pyodide + sizing); the request is plain text
// assembled with textContent. Anything that looks like a secret (tokens, keys, passwords) is refused.
import { makeFormat } from "./calc_format.js";
import { parseJSON } from "./calc_json.js";
import { pageWorker } from "./calc_worker.js";
import { isSecret } from "./secret_filter.js";

const root = document.getElementById("req");
if (root && !root.dataset.bound) {
  root.dataset.bound = "1";
  main();
}


function main() {
  const data = JSON.parse(document.getElementById("req-data").textContent);
  const L = data.text;
  const t = (key) => (key in L ? L[key] : key);
  const lang = data.lang;
  const form = document.getElementById("req-form");
  const out = document.getElementById("req-text");
  const status = document.getElementById("req-status");
  const doc = document.documentElement;
  const GiB = 2 ** 30;
  const fmt = makeFormat(lang).num; // the calculator's number format

  // The configuration: defaults, then the query (the calculator's names; lists comma-separated).
  const config = { ...data.defaults };
  const params = new URLSearchParams(location.search);
  for (const [key, value] of params) {
    if (!(key in data.kinds)) continue;
    const kind = data.kinds[key];
    if (kind === "bool") config[key] = value === "true" || value === "1";
    else if (kind === "tristate") config[key] = value === "" ? null : value === "true" || value === "1";
    else if (kind === "int" || kind === "float") config[key] = value === "" ? null : Number.isFinite(Number(value)) ? Number(value) : value;
    else if (kind === "list") config[key] = value === "all-linear" || value === "" ? value || null : value.split(",").map((s) => s.trim()).filter(Boolean);
    else if (kind === "json") {
      if (value.trim()) {
        // a config.json that is not JSON (or nests absurdly deep) stays text: sizing refuses it, nothing throws
        const parsed = parseJSON(value);
        config.model_config = parsed.error ? value : parsed.value;
        config.model = null;
      }
    }
    else config[key] = value;
  }
  const back = document.getElementById("req-back");
  back.setAttribute("href", back.getAttribute("href") + location.search);

  let estimate = null;
  let refused = [];

  // A field's name as the visitor reads it: its label on this page (without the "(…)" hint), or the
  // calculator's label for a field that came in the address.
  function fieldLabel(name) {
    const el = form.querySelector(`[name="${CSS.escape(name)}"]`);
    const label = el && (el.id ? form.querySelector(`label[for="${CSS.escape(el.id)}"]`) : null) || (el && el.closest("label"));
    const text = label ? label.textContent.replace(/\s*\([^)]*\)\s*$/, "").trim() : t("f_" + name);
    return text && text !== "f_" + name ? text : name;
  }

  function secretFields() {
    const found = [];
    for (const el of form.querySelectorAll("[name]")) {
      const value = el.type === "checkbox" ? "" : el.value;
      const slot = root.querySelector(`[data-error-for="${CSS.escape(el.name)}"]`);
      const bad = isSecret(value);
      if (slot) slot.textContent = bad ? t("secret") : "";
      if (bad) found.push(fieldLabel(el.name));
    }
    for (const [key, value] of params) if (isSecret(value)) found.push(fieldLabel(key));
    return [...new Set(found)];
  }

  // Figures of an imported trial report (the calculator adds them to its link as measured_*).
  function measured() {
    const value = (key) => {
      const v = Number(params.get(key));
      return params.has(key) && Number.isFinite(v) && v >= 0 ? v : null;
    };
    const out = [];
    for (const [key, label] of [["measured_reserved", "peak_reserved"], ["measured_device", "peak_device"]]) {
      if (value(key) !== null) out.push(line(t(label), `${fmt(value(key) / GiB, 1)} GiB`));
    }
    if (value("measured_step_seconds") !== null) out.push(line(t("step_time"), `${fmt(value("measured_step_seconds"), 2)} s`));
    if (value("measured_tokens_per_second") !== null) {
      out.push(line(t("throughput"), `${fmt(value("measured_tokens_per_second"), 0)} tokens/s`));
    }
    return out;
  }

  // A catalog model by name; a pasted config.json only when there is one (and it is JSON).
  function modelLine(c) {
    if (c.model_config === null || c.model_config === undefined || c.model_config === "") return c.model;
    return typeof c.model_config === "object" ? t("custom_model") : t("custom_model_bad");
  }

  function line(label, value) { return value === null || value === undefined || value === "" ? null : `- ${label}: ${value}`; }

  function assemble() {
    refused = secretFields();
    const copyButtons = root.querySelectorAll("[data-needs-request]");
    if (refused.length) {
      out.textContent = t("refused") + " " + refused.join("; ");
      out.dataset.refused = "true";
      copyButtons.forEach((b) => { b.disabled = true; });
      return;
    }
    delete out.dataset.refused;
    copyButtons.forEach((b) => { b.disabled = false; });
    const f = Object.fromEntries(Array.from(form.querySelectorAll("[name]")).map((el) =>
      [el.name, el.type === "checkbox" ? el.checked : el.value.trim()]));
    const c = config;
    const targets = Array.isArray(c.target_modules) ? c.target_modules.join(", ") : c.target_modules;
    const lines = [t("title"), "", `## ${t("s_model")}`,
      line(t("model"), modelLine(c)), line(t("revision"), f.model_revision),
      line(t("gated"), f.gated ? t("yes") : t("no")), "", `## ${t("s_method")}`,
      line("method", c.method), line("framework", c.framework), line("torch_dtype", c.torch_dtype),
      line("bf16 / fp16", `${c.bf16} / ${c.fp16}`),
      c.method === "qlora" ? line("bnb_4bit", `${c.bnb_4bit_quant_type}, double_quant=${c.bnb_4bit_use_double_quant}, compute=${c.bnb_4bit_compute_dtype}`) : null,
      c.method !== "full" ? line("LoRA", `r=${c.r}, lora_alpha=${c.lora_alpha}, lora_dropout=${c.lora_dropout}, target_modules=${targets}, use_dora=${c.use_dora}`) : null,
      line("max_seq_length", c.max_seq_length), line("packing", c.packing),
      line("per_device_train_batch_size", c.per_device_train_batch_size),
      line("gradient_accumulation_steps", c.gradient_accumulation_steps),
      line("gradient_checkpointing", c.gradient_checkpointing), line("attn_implementation", c.attn_implementation),
      line("optim", c.optim), "", `## ${t("s_data")}`,
      line(t("tokens"), c.dataset_tokens), line(t("examples"), f.examples), line(t("epochs"), c.num_train_epochs),
      line(t("term"), f.term), line(t("interruptible"), f.interruptible ? t("yes") : t("no")),
      line(t("storage"), f.storage_gb ? `${f.storage_gb} GB` : ""), "", `## ${t("s_gpu")}`,
      line(t("gpu"), c.gpu), line(t("count"), c.num_gpus), line("parallelism", c.parallelism),
      line(t("host_ram"), f.host_ram_gb ? `${f.host_ram_gb} GB` : ""), line(t("region"), f.region)];
    if (estimate && estimate.ok) {
      const est = estimate.estimate;
      const fit = (est.fits || [])[0] || {};
      lines.push("", `## ${t("s_estimate")}`,
        line(t("peak_device"), `${fmt(est.peak.device_bytes / GiB, 1)} GiB`),
        line(t("peak_reserved"), `${fmt(est.peak.reserved_bytes / GiB, 1)} GiB`),
        line(t("fits"), fit.gpu ? `${fit.fits ? t("yes") : t("no")} (${fit.gpu}, ${t("headroom")} ${fmt(fit.headroom_bytes / GiB, 1)} GiB)` : ""),
        est.time ? line(t("throughput"), `${fmt(est.time.tokens_per_second, 0)} tokens/s`) : null,
        est.time ? line(t("hours"), fmt(est.time.total_hours, 1)) : null);
    } else if (estimate && !estimate.ok) {
      const err = estimate.error;
      const params = { ...(err.params || {}), field: err.field || "" };
      const template = t("e_" + err.code);
      const why = template === "e_" + err.code ? err.code
        : template.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m));
      lines.push("", `## ${t("s_estimate")}`, `- ${t("no_estimate")}: ${why}${err.field ? ` (${err.field})` : ""}`);
    }
    // the config.json the model line says is attached, as it came in (the secret filter has read it)
    if (c.model_config && typeof c.model_config === "object") {
      lines.push("", `## ${t("s_config")}`, "```json", JSON.stringify(c.model_config, null, 2), "```");
    }
    const m = measured();
    if (m.length) lines.push("", `## ${t("s_measured")}`, ...m);
    if (f.notes) lines.push("", `## ${t("s_notes")}`, f.notes);
    lines.push("", t("footer"));
    out.textContent = lines.filter((l) => l !== null).join("\n") + "\n";
  }

  function fail(reason) {
    doc.dataset.runtime = "failed";
    status.textContent = t("runtime_failed") + (reason in L ? t(reason) : reason);
    assemble();
  }
  doc.dataset.runtime = "loading";
  const taken = pageWorker();
  let worker = taken.worker;
  if (!worker) {
    fail(String(taken.error)); // the request is still assembled, without the estimate
    worker = { postMessage() {} };
  }
  worker.onerror = (event) => fail(event.message || "worker error");
  worker.onmessage = (event) => {
    const msg = event.data;
    if (msg.type === "failed") fail(msg.reason);
    else if (msg.type === "result") {
      estimate = JSON.parse(msg.json);
      doc.dataset.runtime = "ready";
      status.textContent = "";
      assemble();
    }
  };
  worker.postMessage({ type: "compute", id: 1, config: JSON.stringify(config) });
  if (taken.worker) taken.replay();
  form.addEventListener("input", assemble);
  form.addEventListener("submit", (event) => event.preventDefault());
  const copied = document.getElementById("req-copied");
  document.getElementById("req-copy").addEventListener("click", async () => {
    if (refused.length) return;
    try { await navigator.clipboard.writeText(out.textContent); copied.textContent = t("copied"); }
    catch { copied.textContent = ""; }
    setTimeout(() => { copied.textContent = ""; }, 2000);
  });
  document.getElementById("req-download").addEventListener("click", () => {
    if (refused.length) return;
    const blob = new Blob([out.textContent], { type: "text/plain" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "gpu-rental-request.txt";
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  });
  assemble();
}
